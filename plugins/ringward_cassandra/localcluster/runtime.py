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
    "cassandra_classpath",
    "client_jvm_options",
    "copy_maven_dependencies",
    "ensure_jars",
    "java_binary",
    "project_home",
    "server_jvm_options",
]

CASSANDRA_VERSION = "5.0.9"

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


def java_binary() -> str:
    """The `java` to run, checked to be Java 17 or newer."""
    java_home = os.environ.get("JAVA_HOME")
    java = str(Path(java_home) / "bin" / "java") if java_home else shutil.which("java")
    if not java or not Path(java).exists():
        raise LocalClusterError("No Java runtime found.", "Install Java 17 (apt-get install openjdk-17-jdk-headless).")
    output = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr
    match = re.search(r'version "(\d+)', output)
    if not match or int(match.group(1)) < 17:
        raise LocalClusterError(f"Java 17 or newer is required, found: {output.splitlines()[:1]}.", "Install Java 17.")
    return java


def _lib_dir() -> Path:
    return project_home() / ".cache" / "cassandra" / CASSANDRA_VERSION / "lib"


def ensure_jars() -> Path:
    """Resolve cassandra-all and its runtime dependencies from Maven Central once into .cache/."""
    return copy_maven_dependencies(
        project_home() / "tools" / "maven" / "cassandra.pom.xml", _lib_dir(),
        what=f"cassandra-all {CASSANDRA_VERSION}", expect="cassandra-all-*.jar",
    )  # fmt: skip


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


def cassandra_classpath(conf_dir: Path) -> str:
    jars = sorted(str(jar) for jar in ensure_jars().glob("*.jar"))
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
        # Not `cassandra.schema_pull_interval_ms=5000`: with pulls every 5 s, every full suite run on two
        # cores left a node of the fresh two-DC cluster on a schema version of its own for minutes (same
        # schema rows, different digest); the runs before it and the runs of Cassandra's 60 s default did not.
        *_module_flags(),
    ]


def client_jvm_options() -> list[str]:
    return ["-Xmx128m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.net.preferIPv4Stack=true",
            *_module_flags()]  # fmt: skip
