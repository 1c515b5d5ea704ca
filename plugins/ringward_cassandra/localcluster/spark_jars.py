"""Development only: the Spark Cassandra Connector's jars resolved from Maven Central into `.cache/`.

The production path never comes here: the image ships the jars in `$RINGWARD_SPARK_JARS_DIR` and
`ringward_spark.jars` only reads a folder. A checkout points that variable at this cache
(`local_jars_environment`), as `ringward spark`, `ringward airflow`, the demo and the tests do.
"""

from __future__ import annotations

from pathlib import Path

from ringward_cassandra.localcluster.runtime import copy_maven_dependencies, project_home

__all__ = [
    "CONNECTOR_VERSION",
    "PROVIDED_BY_SPARK",
    "connector_lib_dir",
    "ensure_connector_jars",
    "local_jars_environment",
]

CONNECTOR_VERSION = "3.5.1"
# Bumped when the pom's jar set changes, so existing caches are resolved again.
JAR_SET_REVISION = 2

# Artifacts the connector depends on that Spark 3.5's own jars/ already ship: a second copy on the
# classpath would only risk a version clash (Scala itself above all).
PROVIDED_BY_SPARK = (
    "scala-library",
    "scala-reflect",
    "scala-collection-compat_2.12",
    "commons-lang3",
    "metrics-core",
    "paranamer",
    "slf4j-api",
)


def connector_lib_dir(home: Path | None = None) -> Path:
    return (home or project_home()) / ".cache" / "spark-connector" / f"{CONNECTOR_VERSION}-r{JAR_SET_REVISION}" / "lib"


def ensure_connector_jars(home: Path | None = None) -> Path:
    """Resolve the connector and its runtime dependencies (minus Spark's own) once; returns their folder."""
    home = home or project_home()
    return copy_maven_dependencies(
        home / "tools" / "maven" / "spark-connector.pom.xml", connector_lib_dir(home),
        what=f"Spark Cassandra Connector {CONNECTOR_VERSION}", expect="spark-cassandra-connector_*.jar",
        excluded=PROVIDED_BY_SPARK,
    )  # fmt: skip


def local_jars_environment(home: Path | None = None) -> dict[str, str]:
    """`RINGWARD_SPARK_JARS_DIR` for a checkout: the cached jars (resolved now if they are not yet)."""
    return {"RINGWARD_SPARK_JARS_DIR": str(ensure_connector_jars(home))}
