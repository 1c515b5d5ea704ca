"""ringward as an Airflow provider: what `airflow providers list` shows and the connection form Airflow's UI
draws for ringward's own connection type (the `apache_airflow_provider` entry point in pyproject.toml).

Airflow calls `get_provider_info` while it reads its configuration, in every process: this module imports
nothing of Airflow's and nothing of ringward's. Class names are strings; Airflow imports them when needed.

The Cassandra connection (`cassandra_default`) is the Cassandra provider's `cassandra` type, and the Spark one
(`spark_default`) the Spark provider's `spark` type: declared by those providers, not again here.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any

__all__ = ["NODETOOL_CONN_TYPE", "get_provider_info"]

NODETOOL_CONN_TYPE = "ringward_nodetool"

_TEXT = {"type": ["string", "null"]}


def get_provider_info() -> dict[str, Any]:
    return {
        "package-name": "ringward",
        "name": "ringward",
        "description": "Safe Cassandra replication changes and nightly subrange repair, as Airflow 3 DAGs.",
        "versions": [version("ringward")],
        "integrations": [
            {"integration-name": "ringward", "tags": ["service"]},
        ],
        "connection-types": [
            {
                "connection-type": NODETOOL_CONN_TYPE,
                "hook-class-name": "ringward_airflow.hooks.NodetoolHook",
                "hook-name": "ringward nodetool",
                "ui-field-behaviour": {
                    "hidden-fields": ["schema"],
                    "relabeling": {
                        "host": "JMX host",
                        "port": "JMX port",
                        "login": "JMX user",
                        "password": "JMX password",
                    },
                    "placeholders": {
                        "host": "{address} (each node's own address)",
                        "port": "7199",
                        "nodetool_path": "/opt/cassandra/bin/nodetool",
                    },
                },
                "conn-fields": {
                    "nodetool_path": {
                        "label": "nodetool path",
                        "description": "The nodetool of the cluster's Cassandra release (default: nodetool on PATH).",
                        "schema": _TEXT,
                    },
                    "password_file": {
                        "label": "JMX password file",
                        "description": "An existing nodetool password file on the worker, instead of the password.",
                        "schema": _TEXT,
                    },
                    "ssl": {
                        "label": "JMX over TLS",
                        "description": "nodetool --ssl (the worker's JVM trusts the nodes' JMX certificates).",
                        "schema": {"type": ["boolean", "null"], "default": False},
                    },
                    "java_classpath": {
                        "label": "Cassandra jars (resident JVM)",
                        "description": "e.g. /opt/cassandra/lib/*: nodetool commands then run in one JVM per task.",
                        "schema": _TEXT,
                    },
                    "java_binary": {
                        "label": "java (resident JVM)",
                        "description": "The java that runs the resident JVM (default: java on PATH; Java 17).",
                        "schema": _TEXT,
                    },
                },
            },
        ],
        "triggers": [
            {"integration-name": "ringward", "python-modules": ["ringward_airflow.triggers"]},
        ],
        "notifications": ["ringward_airflow.repair_operators.RepairFailureNotifier"],
        # No "plugins" entry: the UI plugin comes through the `airflow.plugins` entry point, which Airflow
        # loads by default. A provider-listed plugin is loaded as well when [core] lazy_discover_providers is
        # False, and the second copy of the same name would be skipped and reported as a plugin import error.
    }
