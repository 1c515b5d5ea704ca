"""The Spark Cassandra Connector's jars for `spark-submit --jars`: read from a configured folder, never resolved.

The folder is `spark_default`'s extra `ringward-jars-dir` when set, else `$RINGWARD_SPARK_JARS_DIR` (the image
sets it to /opt/ringward/spark-jars, filled at build time from tools/maven/spark-connector.pom.xml). A checkout
resolves the jars from Maven Central once (`ringward spark jars`, ringward_cassandra.localcluster.spark_jars)
and points the variable at that cache; nothing here needs Maven or the network.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ringward.errors import ConfigurationError

__all__ = ["CONNECTION_EXTRA", "CONNECTOR_JAR", "JARS_DIR_VARIABLE", "connector_jars", "jars_dir"]

JARS_DIR_VARIABLE = "RINGWARD_SPARK_JARS_DIR"
CONNECTION_EXTRA = "ringward-jars-dir"
CONNECTOR_JAR = "spark-cassandra-connector_*.jar"


def jars_dir(extra: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> Path:
    """The configured folder: the connection's extra first, then the variable."""
    environ = os.environ if environ is None else environ
    configured = (extra or {}).get(CONNECTION_EXTRA) or environ.get(JARS_DIR_VARIABLE)
    if not configured:
        raise ConfigurationError(
            "No folder of Spark Cassandra Connector jars is configured.",
            f"Set {JARS_DIR_VARIABLE} (the image sets /opt/ringward/spark-jars) or spark_default's extra "
            f"{CONNECTION_EXTRA!r}; in a checkout, `ringward spark jars` resolves them into .cache/ and prints the "
            f"export line.",
        )
    return Path(configured)


def connector_jars(extra: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None) -> list[str]:
    """Absolute paths of every jar in the configured folder, in a stable order; the connector must be there."""
    folder = jars_dir(extra, environ)
    jars = sorted(str(jar.absolute()) for jar in folder.glob("*.jar")) if folder.is_dir() else []
    if not any(Path(jar).match(CONNECTOR_JAR) for jar in jars):
        raise ConfigurationError(
            f"The Spark jars folder {folder} holds no {CONNECTOR_JAR}"
            + ("." if folder.is_dir() else " (it does not exist)."),
            f"Point {JARS_DIR_VARIABLE} or spark_default's extra {CONNECTION_EXTRA!r} at the folder of the "
            "connector's jars (`mvn dependency:copy-dependencies` of tools/maven/spark-connector.pom.xml).",
        )
    return jars
