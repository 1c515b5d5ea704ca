"""The project-local Airflow configuration: AIRFLOW_HOME under .airflow/, SQLite, examples off, and the
connections of the embedded local cluster (set through AIRFLOW_CONN_* variables, never by hand)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.localcluster.runtime import project_home
from ringward_cassandra.localcluster.spark_jars import connector_lib_dir, ensure_connector_jars

__all__ = ["airflow_environment", "ensure_airflow_db", "local_connections"]


def local_connections(home: Path, topology: str = "seed") -> dict[str, str]:
    """AIRFLOW_CONN_* values for the local cluster: Cassandra, Spark local[2] with the connector jars resolved into
    .cache/ (`ringward spark jars`), nodetool over JMX."""
    loaded = load_topology(topology)
    nodes = loaded.nodes
    cassandra = {"conn_type": "cassandra", "host": ",".join(n.address for n in nodes), "port": 9042,
                 "extra": {"protocol_version": 5}}  # fmt: skip
    spark = {"conn_type": "spark", "host": "local[2]",
             "extra": {"spark-binary": "spark-submit", "ringward-jars-dir": str(connector_lib_dir(home))}}  # fmt: skip
    nodetool = {"conn_type": "generic", "host": "127.0.0.1",
                "extra": LocalCluster(home).nodetool_connection_extra(loaded)}  # fmt: skip
    return {
        "AIRFLOW_CONN_CASSANDRA_DEFAULT": json.dumps(cassandra),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark),
        "AIRFLOW_CONN_RINGWARD_NODETOOL": json.dumps(nodetool),
    }


def airflow_environment(home: Path | None = None, topology: str | None = None) -> dict[str, str]:
    home = home or project_home()
    airflow_home = home / ".airflow"
    airflow_home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
            "AIRFLOW__CORE__DAGS_FOLDER": str(home / "dags"),
            "AIRFLOW__CORE__PLUGINS_FOLDER": str(home / "plugins"),
            "AIRFLOW__CORE__UNIT_TEST_MODE": "False",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": env.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO"),
            "RINGWARD_HOME": str(home),
            # spark-submit and ringward's own tools come from this virtualenv.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    if topology is None:
        topology = _current_topology(home)
    ensure_connector_jars(home)  # once (Maven), for the local spark_default's ringward-jars-dir
    for key, value in local_connections(home, topology).items():
        env.setdefault(key, value)
    return env


def _current_topology(home: Path) -> str:
    state = home / ".local" / "cluster" / "cluster.json"
    if state.exists():
        return str(json.loads(state.read_text())["topology_file"])
    return "seed"


def ensure_airflow_db(env: dict[str, str]) -> None:
    """Run `airflow db migrate` once per AIRFLOW_HOME (a marker file records it)."""
    marker = Path(env["AIRFLOW_HOME"]) / ".db-migrated"
    if marker.exists():
        return
    subprocess.run([_airflow_binary(), "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
    marker.touch()


def _airflow_binary() -> str:
    return str(Path(sys.executable).parent / "airflow")
