"""The project-local Airflow configuration: AIRFLOW_HOME under .airflow/, SQLite, examples off, and the
connections of the embedded local cluster: AIRFLOW_CONN_* variables (what tasks read first), copied into
Airflow's metadata database so Admin -> Connections lists them (re-copied whenever they change)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.localcluster.runtime import project_home
from ringward_cassandra.localcluster.security import JMX_USER, RINGWARD_ROLE, ClusterSecrets, ensure_secrets
from ringward_cassandra.localcluster.spark_jars import connector_lib_dir

__all__ = ["airflow_environment", "connections_to_import", "ensure_airflow_connections", "ensure_airflow_db",
           "local_connections"]  # fmt: skip

_CONN_PREFIX = "AIRFLOW_CONN_"
# The connections ringward sets for the local cluster (only these are copied into the metadata database).
LOCAL_CONNECTION_VARIABLES = ("AIRFLOW_CONN_CASSANDRA_DEFAULT", "AIRFLOW_CONN_RINGWARD_NODETOOL",
                              "AIRFLOW_CONN_SPARK_DEFAULT")  # fmt: skip


def local_connections(home: Path, topology: str = "seed") -> dict[str, str]:
    """AIRFLOW_CONN_* values for the local cluster: Cassandra, Spark local[2] with the connector jars resolved into
    .cache/ (`ringward spark jars`), nodetool over JMX."""
    loaded = load_topology(topology)
    nodes = loaded.nodes
    # No protocol_version: negotiated, v4 when a node runs Cassandra below 5.0 (cql.RingwardCluster).
    cassandra: dict[str, Any] = {"conn_type": "cassandra", "host": ",".join(n.address for n in nodes), "port": 9042,
                                 "extra": {}}  # fmt: skip
    spark: dict[str, Any] = {"conn_type": "spark", "host": "local[2]",
             "extra": {"spark-binary": "spark-submit", "ringward-jars-dir": str(connector_lib_dir(home))}}  # fmt: skip
    nodetool: dict[str, Any] = {"conn_type": "generic", "host": "127.0.0.1",
                                "extra": LocalCluster(home).nodetool_connection_extra(loaded)}  # fmt: skip
    if loaded.secured:
        _secure(cassandra, spark, nodetool, ensure_secrets(LocalCluster(home).root / "secrets", loaded.addresses))
    return {
        "AIRFLOW_CONN_CASSANDRA_DEFAULT": json.dumps(cassandra),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark),
        "AIRFLOW_CONN_RINGWARD_NODETOOL": json.dumps(nodetool),
    }


def _secure(cassandra: dict[str, Any], spark: dict[str, Any], nodetool: dict[str, Any], found: ClusterSecrets) -> None:
    """A secured cluster's connections: ringward's least-privilege role over TLS, JMX with its password."""
    cassandra.update(login=RINGWARD_ROLE, password=found.ringward_password)
    cassandra["extra"]["ssl_options"] = found.ssl_options()
    nodetool.update(login=JMX_USER, password=found.jmx_password)
    spark["extra"]["ringward-conf"] = {
        "spark.cassandra.connection.ssl.trustStore.path": found.truststore,
        "spark.cassandra.connection.ssl.trustStore.password": found.store_password,
        "spark.cassandra.connection.ssl.trustStore.type": "PKCS12",
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
            # Airflow's LocalExecutor without its race on resumed deferred/approval tasks (see the module).
            "AIRFLOW__CORE__EXECUTOR": env.get("AIRFLOW__CORE__EXECUTOR", "ringward_airflow.executor.LocalExecutor"),
            "AIRFLOW__LOGGING__LOGGING_LEVEL": env.get("AIRFLOW__LOGGING__LOGGING_LEVEL", "INFO"),
            "RINGWARD_HOME": str(home),
            # spark-submit and ringward's own tools come from this virtualenv.
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
        }
    )
    if topology is None:
        topology = _current_topology(home)
    env.setdefault("RINGWARD_TOPOLOGY", Path(topology).stem if topology.endswith((".yaml", ".json")) else topology)
    for key, value in local_connections(home, topology).items():
        env.setdefault(key, value)
    return env


def _current_topology(home: Path) -> str:
    state = home / ".local" / "cluster" / "cluster.json"
    if state.exists():
        return str(json.loads(state.read_text())["topology_file"])
    return "seed"


def ensure_airflow_db(env: dict[str, str]) -> None:
    """Run `airflow db migrate` and create the repair pool once per AIRFLOW_HOME (marker files record it)."""
    marker = Path(env["AIRFLOW_HOME"]) / ".db-migrated"
    if not marker.exists():
        subprocess.run([_airflow_binary(), "db", "migrate"], env=env, check=True, stdout=subprocess.DEVNULL)
        marker.touch()
    pool_marker = Path(env["AIRFLOW_HOME"]) / ".repair-pool"  # also for homes migrated before the pool existed
    if not pool_marker.exists():
        ensure_repair_pool(env)
        pool_marker.touch()


REPAIR_POOL_COMMAND = (
    "pools",
    "set",
    "ringward_repair",
    "1",
    "ringward repairs: one repair task per cluster at a time",
)


def ensure_repair_pool(env: Mapping[str, str]) -> None:
    """The `ringward_repair` pool the nightly repair task runs in (a task in a missing pool never starts)."""
    subprocess.run([_airflow_binary(), *REPAIR_POOL_COMMAND], env=dict(env), check=True, stdout=subprocess.DEVNULL)


def _airflow_binary() -> str:
    return str(Path(sys.executable).parent / "airflow")


def connections_to_import(env: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The local cluster's AIRFLOW_CONN_* JSON connections of `env` in `airflow connections import` form
    (conn id in lower case, `extra` as JSON text), each described as set by ringward."""
    topology = env.get("RINGWARD_TOPOLOGY", "")
    found: dict[str, dict[str, Any]] = {}
    for key in LOCAL_CONNECTION_VARIABLES:
        value = env.get(key, "")
        if not value.lstrip().startswith("{"):
            continue  # absent, or a URI the user set: theirs to manage
        connection = dict(json.loads(value))
        if isinstance(connection.get("extra"), dict):
            connection["extra"] = json.dumps(connection["extra"], sort_keys=True)
        connection["description"] = (
            f"ringward: the local cluster{f' ({topology})' if topology else ''}; written by `ringward airflow` "
            f"from ${key}, which tasks read first"
        )
        found[key[len(_CONN_PREFIX) :].lower()] = connection
    return found


def ensure_airflow_connections(env: dict[str, str], run: Callable[..., Any] = subprocess.run) -> bool:
    """Copy the environment's connections into the metadata database (`airflow connections import
    --overwrite`) when they differ from the last copy; True when it imported. A marker file holds the
    digest of what was imported, so an unchanged setup costs nothing."""
    wanted = connections_to_import(env)
    if not wanted:
        return False
    home = Path(env["AIRFLOW_HOME"])
    digest = hashlib.sha256(json.dumps(wanted, sort_keys=True).encode()).hexdigest()
    marker = home / ".connections-imported"
    if marker.exists() and marker.read_text().strip() == digest:
        return False
    source = home / "ringward-connections.json"
    source.write_text(json.dumps(wanted, indent=2, sort_keys=True))
    run([_airflow_binary(), "connections", "import", "--overwrite", str(source)], env=env, check=True,
        stdout=subprocess.DEVNULL)  # fmt: skip
    marker.write_text(digest)
    return True
