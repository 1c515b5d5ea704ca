"""Checks of connection extras that name code to run or where it runs: a connection is data an Airflow user may
edit, so a value that would run other code (a `-javaagent`, an `-XX:OnError` command, a relative nodetool found
on some PATH, a Spark property that loads jars) is refused, naming the extra and what is accepted."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

from ringward.errors import ConfigurationError

__all__ = ["JAVA_OPTION_PATTERNS", "SPARK_CONF_PATTERNS", "checked_nodetool_extra", "checked_spark_conf"]

_PATH = r"/[^\x00-\x1f\x7f]*"
_SIZE = r"\d+[kKmMgG]?"
# The JVM options the resident nodetool may get (docs/operators-guide.md 2.5): heap and GC sizing, the module
# flags of conf/jvm17-clients.options, logging, IPv4, and what `nodetool --ssl` reads (-Djavax.net.ssl.*).
JAVA_OPTION_PATTERNS: tuple[str, ...] = (
    rf"-Xm[sx]{_SIZE}",
    rf"-Xss{_SIZE}",
    r"-XX:\+Use(Serial|G1|Parallel)GC",
    r"-XX:TieredStopAtLevel=[0-4]",
    r"-XX:ActiveProcessorCount=\d+",
    r"-XX:(Max)?MetaspaceSize=" + _SIZE,
    r"--add-(exports|opens)=[\w.]+/[\w.]+=ALL-UNNAMED",
    r"-Djava\.net\.preferIPv4Stack=(true|false)",
    rf"-Dlogback\.configurationFile={_PATH}",
    rf"-Djavax\.net\.ssl\.(keyStore|trustStore)={_PATH}",
    r"-Djavax\.net\.ssl\.(keyStore|trustStore)Type=\w+",
    r"-Djavax\.net\.ssl\.(keyStore|trustStore)Password=[^\x00-\x1f\x7f]*",
)
_JAVA_OPTION = re.compile("|".join(f"(?:{p})" for p in JAVA_OPTION_PATTERNS))
_CLASSPATH_ENTRY = re.compile(r"/[^\x00-\x1f\x7f:]*")


def _refuse(conn_id: str, extra: str, value: object, why: str, fix: str) -> ConfigurationError:
    shown = repr(value) if len(repr(value)) <= 120 else repr(value)[:117] + "..."
    return ConfigurationError(f"Connection {conn_id!r}: extra {extra} = {shown} is refused: {why}.", fix)


def _executable(conn_id: str, extra: str, value: object) -> None:
    if not isinstance(value, str) or not os.path.isabs(value) or not os.path.isfile(value):
        program = extra.removesuffix("_path").removesuffix("_binary")
        raise _refuse(conn_id, extra, value, "not the absolute path of an existing file",
                      f"Give the absolute path of the {program} executable on the worker (e.g. "
                      "/opt/cassandra/bin/nodetool), or leave the extra out.")  # fmt: skip
    if not os.access(value, os.X_OK):
        raise _refuse(conn_id, extra, value, "not executable", f"chmod +x {value}, or give another file.")


def checked_nodetool_extra(extra: Mapping[str, Any], conn_id: str = "ringward_nodetool") -> Mapping[str, Any]:
    """`extra` of a nodetool connection when its `nodetool_path`, `java_binary`, `java_classpath` and
    `java_options` are plain: absolute paths of existing files, a classpath of absolute entries, JVM options of
    JAVA_OPTION_PATTERNS. Absent ones keep their defaults (`nodetool` and `java` from the worker's PATH)."""
    for name in ("nodetool_path", "java_binary"):
        if extra.get(name) is not None:
            _executable(conn_id, name, extra[name])
    classpath = extra.get("java_classpath")
    if classpath:
        entries = classpath.split(":") if isinstance(classpath, str) else [classpath]
        bad = [e for e in entries if not isinstance(e, str) or not _CLASSPATH_ENTRY.fullmatch(e)]
        if bad:
            raise _refuse(conn_id, "java_classpath", classpath, f"{bad[0]!r} is not an absolute path",
                          'Give absolute folders and jars separated by ":", e.g. "/opt/cassandra/conf:'
                          '/opt/cassandra/lib/*".')  # fmt: skip
    options = extra.get("java_options") or ()  # a form field left empty is null
    if not isinstance(options, list | tuple) or not all(isinstance(o, str) for o in options):
        raise _refuse(conn_id, "java_options", options, "not a list of strings", 'Give a JSON list, e.g. ["-Xmx128m"].')
    for option in options:
        if not _JAVA_OPTION.fullmatch(option):
            raise _refuse(conn_id, "java_options", option, "not an option the resident nodetool needs",
                          "Use only heap/GC sizing (-Xmx, -Xms, -Xss, -XX:+UseSerialGC, ...), --add-exports/"
                          "--add-opens ...=ALL-UNNAMED, -Djava.net.preferIPv4Stack, -Dlogback.configurationFile and "
                          "-Djavax.net.ssl.* (docs/operators-guide.md 2.5); agents, -XX:On... commands and other "
                          "properties are refused.")  # fmt: skip
    return extra


# The Spark properties a Spark connection's `ringward-conf` may set: sizing, the Cassandra connector's settings
# (spark.cassandra.*, e.g. its TLS trust store), Spark's own authentication/TLS, the driver's ports and Kubernetes'.
# Properties that load code (spark.jars, extraClassPath, extraJavaOptions, plugins, listeners, ...) are refused.
SPARK_CONF_PATTERNS: tuple[str, ...] = (
    r"spark\.cassandra\.[\w.-]+",
    r"spark\.(driver|executor)\.(memory|cores|memoryOverhead)",
    r"spark\.executor\.instances",
    r"spark\.cores\.max",
    r"spark\.ui\.enabled",
    r"spark\.sql\.shuffle\.partitions",
    r"spark\.default\.parallelism",
    r"spark\.python\.worker\.reuse",
    r"spark\.network\.timeout",
    r"spark\.task\.maxFailures",
    r"spark\.authenticate(\.secret)?",
    r"spark\.network\.crypto\.(enabled|saslFallback|keyLength)",  # the cluster's RPC encryption (guide 3.2)
    r"spark\.io\.encryption\.enabled",
    # The executors' Python (PYSPARK_PYTHON's property): 3.11 with cassandra-driver on the cluster's own hosts
    # (operator's guide 3); a program there, not on the Airflow worker, so an absolute path is all it may be.
    r"spark\.pyspark\.(driver\.)?python",
    r"spark\.ssl\.[\w.-]+",
    r"spark\.driver\.(host|port|bindAddress)",  # executors reaching the client-mode driver through a firewall
    r"spark\.blockManager\.port",
    r"spark\.port\.maxRetries",
    r"spark\.kubernetes\.[\w.-]+",  # the executor image and namespace (operator's guide 3.1)
)
_SPARK_CONF = re.compile("|".join(f"(?:{p})" for p in SPARK_CONF_PATTERNS))


def checked_spark_conf(conf: Mapping[str, Any], conn_id: str = "spark_default") -> Mapping[str, Any]:
    """A Spark connection's `ringward-conf` when every key is one of SPARK_CONF_PATTERNS and no value holds a
    control character."""
    if not isinstance(conf, Mapping):
        raise _refuse(conn_id, "ringward-conf", conf, "not a JSON object", 'Give e.g. {"spark.executor.memory": "1g"}.')
    for key, value in conf.items():
        if not _SPARK_CONF.fullmatch(str(key)):
            raise _refuse(conn_id, "ringward-conf", key, "not a Spark property ringward passes on",
                          "Use sizing properties (spark.executor.memory, ...), spark.cassandra.* and "
                          "spark.ssl.*/spark.authenticate; properties that load code (spark.jars, "
                          "extraClassPath, extraJavaOptions, spark.plugins, ...) belong in the Spark cluster's "
                          "own configuration.")  # fmt: skip
        if any(ord(c) < 32 or ord(c) == 127 for c in str(value)):
            raise _refuse(conn_id, "ringward-conf", key, "its value holds a control character", "Remove it.")
    return conf
