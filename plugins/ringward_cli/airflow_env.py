"""The project-local Airflow configuration: AIRFLOW_HOME under .airflow/, SQLite, examples off, and the
connections of the embedded local cluster: AIRFLOW_CONN_* variables (what tasks read first), copied into
Airflow's metadata database so Admin -> Connections lists them (re-copied whenever they change)."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ringward.private_files import private_folder, write_private
from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.localcluster.runtime import project_home
from ringward_cassandra.localcluster.security import JMX_USER, RINGWARD_ROLE, SPARK_ROLE, ClusterSecrets, ensure_secrets
from ringward_cassandra.localcluster.spark_jars import connector_lib_dir

__all__ = ["AUTOMATION_SETTINGS", "LOCAL_SPARK_SETTINGS", "airflow_environment", "connections_to_import",
           "ensure_airflow_connections", "ensure_airflow_db", "fail_stale_test_runs", "hold_dags_test_lock",
           "local_connections", "migrate_airflow_db"]  # fmt: skip

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
    nodetool: dict[str, Any] = {"conn_type": "ringward_nodetool", "host": "127.0.0.1",
                                "extra": LocalCluster(home).nodetool_connection_extra(loaded)}  # fmt: skip
    reader = dict(cassandra)  # the Spark verification's connection: the same nodes, without logins here
    if loaded.secured:
        found = ensure_secrets(LocalCluster(home).root / "secrets", loaded.addresses)
        _secure(cassandra, spark, nodetool, found)
        # Its own read-only role on a secured cluster (its password travels to Spark executors).
        reader = {**cassandra, "login": SPARK_ROLE, "password": found.spark_password}
    return {
        "AIRFLOW_CONN_CASSANDRA_DEFAULT": json.dumps(cassandra),
        "AIRFLOW_CONN_CASSANDRA_SPARK": json.dumps(reader),
        "AIRFLOW_CONN_SPARK_DEFAULT": json.dumps(spark),
        "AIRFLOW_CONN_RINGWARD_NODETOOL": json.dumps(nodetool),
    }


def _secure(cassandra: dict[str, Any], spark: dict[str, Any], nodetool: dict[str, Any], found: ClusterSecrets) -> None:
    """A secured cluster's connections: ringward's least-privilege role over TLS, JMX with its password (over TLS:
    `nodetool_connection_extra` gives a secured topology `ssl` and the JMX trust store)."""
    cassandra.update(login=RINGWARD_ROLE, password=found.ringward_password)
    cassandra["extra"]["ssl_options"] = found.ssl_options()
    nodetool.update(login=JMX_USER, password=found.jmx_password)
    spark["extra"]["ringward-conf"] = {
        "spark.cassandra.connection.ssl.trustStore.path": found.truststore,
        "spark.cassandra.connection.ssl.trustStore.password": found.store_password,
        "spark.cassandra.connection.ssl.trustStore.type": "PKCS12",
    }


# The deployment settings (`[ringward]` of Airflow's configuration, docs/operators-guide.md "Governance") that let
# unattended automation run a migration: without an approval, approved by whoever triggered it, without the
# pre-repair, cleanup without a snapshot. Only the demo and the tests set them (`automation=True`); `ringward
# airflow` and the compose deployment leave every safety step on.
AUTOMATION_SETTINGS = {
    "AIRFLOW__RINGWARD__ALLOW_UNAPPROVED_MIGRATIONS": "True",
    "AIRFLOW__RINGWARD__ALLOW_SELF_APPROVAL": "True",
    "AIRFLOW__RINGWARD__ALLOW_SKIPPING_PRE_REPAIR": "True",
    "AIRFLOW__RINGWARD__ALLOW_CLEANUP_WITHOUT_SNAPSHOT": "True",
}


# The local Spark jobs (local[2], a few thousand rows) end before the JVM's optimizing compiler pays off: a driver
# that compiles with C1 only starts and finishes them about 2 s sooner, on a third less CPU (measured: a count
# job's spark-submit 8.3 s -> 5.9 s wall, 7.0 -> 4.0 s CPU). Local only: spark-submit reads SPARK_SUBMIT_OPTS
# into the driver's JVM; a Spark cluster's executors keep their JIT. One set in the environment wins.
LOCAL_SPARK_SETTINGS = {"SPARK_SUBMIT_OPTS": "-XX:TieredStopAtLevel=1"}

# What Airflow hands sqlite3 and aiosqlite when it connects to the local SQLite database: a deployment's own setting
# wins (`[database] sql_alchemy_connect_args`, `..._async`; see ringward_airflow.sqlite_settings).
SQLITE_CONNECT_ARGS = {
    "SQL_ALCHEMY_CONNECT_ARGS": "ringward_airflow.sqlite_settings.SYNC_CONNECT_ARGS",
    "SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "ringward_airflow.sqlite_settings.ASYNC_CONNECT_ARGS",
}


def airflow_environment(home: Path | None = None, topology: str | None = None, *,
                        automation: bool = False) -> dict[str, str]:  # fmt: skip
    """Airflow's environment for the project-local home; with `automation`, also AUTOMATION_SETTINGS."""
    home = home or project_home()
    # RINGWARD_AIRFLOW_HOME: another home for another Airflow (`make test-airflow-3.4`): a newer Airflow migrates
    # the database past what the locked one can read.
    airflow_home = _private_home(Path(os.environ.get("RINGWARD_AIRFLOW_HOME") or home / ".airflow"))
    env = dict(os.environ)
    env.update(
        {
            "AIRFLOW_HOME": str(airflow_home),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{airflow_home}/airflow.db",
            # a write waits up to a minute for SQLite's one writer, not sqlite3's 5 s (ringward_airflow.sqlite_settings)
            **{
                f"AIRFLOW__DATABASE__{key}": env.get(f"AIRFLOW__DATABASE__{key}", value)
                for key, value in SQLITE_CONNECT_ARGS.items()
            },
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
    for key, value in {**local_connections(home, topology), **LOCAL_SPARK_SETTINGS}.items():
        env.setdefault(key, value)
    if automation:
        env.update(AUTOMATION_SETTINGS)
    return env


def _private_home(airflow_home: Path) -> Path:
    """The local Airflow home, 0700: it holds airflow.db and ringward-connections.json, both with the local
    cluster's passwords. Created 0700; one made before (0755) is narrowed to 0700."""
    folder = airflow_home.absolute()
    with contextlib.suppress(FileNotFoundError):
        info = os.lstat(folder)
        if stat.S_ISDIR(info.st_mode) and info.st_uid == os.geteuid():  # ours, not a link: narrow it first
            os.chmod(folder, 0o700)
    return private_folder(folder)


def private_database(airflow_home: Path) -> Path:
    """airflow.db of `airflow_home`, created empty at 0600 before Airflow creates it (SQLite keeps the mode, and
    its journal files take the database's), or narrowed to 0600 when it exists already."""
    return _private_database_file(airflow_home / "airflow.db")


def _private_database_file(database: Path) -> Path:
    if os.path.lexists(database):
        # chmod, never open: closing a descriptor of the file would drop the POSIX locks an SQLite connection of
        # this process holds on it (SQLite's "how to corrupt a database"). The home is 0700: no link planted.
        if not os.path.islink(database):
            os.chmod(database, 0o600)
        return database
    os.close(os.open(database, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW, 0o600))
    return database


def _current_topology(home: Path) -> str:
    state = LocalCluster(home).root / "cluster.json"
    if state.exists():
        return str(json.loads(state.read_text())["topology_file"])
    return "seed"


def ensure_airflow_db(env: dict[str, str]) -> None:
    """Run `airflow db migrate` and create the repair pool once per AIRFLOW_HOME (marker files record it)."""
    marker = Path(env["AIRFLOW_HOME"]) / ".db-migrated"
    private_database(Path(env["AIRFLOW_HOME"]))
    if not marker.exists():
        migrate_airflow_db(env)
        marker.touch()
    pool_marker = Path(env["AIRFLOW_HOME"]) / ".repair-pool"  # also for homes migrated before the pool existed
    if not pool_marker.exists():
        ensure_repair_pool(env)
        pool_marker.touch()


# What decides what `airflow db migrate` writes into a new database, besides the installed distributions: the auth
# manager (FAB's has tables of its own), the external database managers, and the rows it adds (the default pool's
# slots, the log templates, the default connections). Read from the environment only: the homes ringward makes have
# no airflow.cfg of their own before their first migration (Airflow writes its defaults there).
_SCHEMA_SETTINGS = (
    "AIRFLOW__CORE__AUTH_MANAGER",
    "AIRFLOW__DATABASE__EXTERNAL_DB_MANAGERS",
    "AIRFLOW__CORE__DEFAULT_POOL_TASK_SLOT_COUNT",
    "AIRFLOW__LOGGING__LOG_FILENAME_TEMPLATE",
    "AIRFLOW__ELASTICSEARCH__LOG_ID_TEMPLATE",
    "AIRFLOW__DATABASE__LOAD_DEFAULT_CONNECTIONS",
)


def migrate_airflow_db(env: Mapping[str, str], airflow: str | None = None) -> None:
    """`airflow db migrate` for `env`'s database; a new, empty SQLite database is instead filled with a copy of
    the first one this installation migrated with the same schema settings (kept in .cache/airflow-db/).

    A migration of a new database takes about 5.5 s of CPU (2026-11-29), and a suite run migrated 17 of them on
    two cores. The copy is what the command wrote: the same installation (every `apache_airflow*` distribution
    and its version is in the key) and the same settings, into a file nothing has written yet. Any other
    database (a non-empty file, a server database) is migrated by the command itself."""
    airflow = airflow or _airflow_binary()
    database, template = _sqlite_database(env), _migrated_template(env, airflow)
    command = [airflow, "db", "migrate"]
    if database is not None and template is not None and database.parent.is_dir():
        _private_database_file(database)  # a new database: an empty file before the copy or the command
    new = database is not None and not database.is_symlink() and database.is_file() and not database.stat().st_size
    if database is None or not new:  # a written database: only the command knows what it lacks
        template = None
    elif template is not None and template.is_file():
        # Into the file, as the command writes it (its 0600 mode kept). The descriptor this closes would drop
        # POSIX locks an SQLite connection of this process held on the file; on an empty file none holds one.
        shutil.copyfile(template, database)
        return
    subprocess.run(command, env=dict(env), check=True, stdout=subprocess.DEVNULL)
    if database is None or template is None:  # nothing to keep a copy of, or nowhere to keep it
        return
    with contextlib.suppress(OSError):  # no template (a read-only checkout): the next new database migrates too
        template.parent.mkdir(parents=True, exist_ok=True)
        partial = template.with_name(f"{template.name}.{os.getpid()}.partial")
        shutil.copyfile(database, partial)
        os.replace(partial, template)


def _migrated_template(env: Mapping[str, str], airflow: str) -> Path | None:
    """Where the copy of a database migrated by `airflow` with `env`'s schema settings is kept; None when the
    installation's distributions cannot be listed."""
    venv = Path(airflow).absolute().parent.parent
    distributions = sorted(path.name for path in venv.glob("lib/python*/site-packages/apache_airflow*.dist-info"))
    if not distributions:
        return None
    key = json.dumps([str(venv), distributions, [env.get(name, "") for name in _SCHEMA_SETTINGS]])
    return project_home() / ".cache" / "airflow-db" / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.db"


REPAIR_POOL_COMMAND = (
    "pools",
    "set",
    "ringward_repair",
    "1",
    "ringward repairs: one repair task per cluster at a time",
)


def ensure_repair_pool(env: Mapping[str, str], airflow: str | None = None) -> None:
    """The `ringward_repair` pool the nightly repair task runs in (a task in a missing pool never starts);
    `airflow`: the installation's binary (default: this interpreter's)."""
    command = [airflow or _airflow_binary(), *REPAIR_POOL_COMMAND]
    subprocess.run(command, env=dict(env), check=True, stdout=subprocess.DEVNULL)


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
    # 0600 through a fresh file and a rename (write_private): it holds the local cluster's passwords.
    source = write_private(private_folder(home.absolute()), "ringward-connections.json",
                           json.dumps(wanted, indent=2, sort_keys=True))  # fmt: skip
    run([_airflow_binary(), "connections", "import", "--overwrite", str(source)], env=env, check=True,
        stdout=subprocess.DEVNULL)  # fmt: skip
    marker.write_text(digest)
    return True


# -- `airflow dags test` runs that were killed ----------------------------------------------------------------
# A killed `airflow dags test` leaves its run `running` (or `queued`) in the home's database, where the
# scheduler of `ringward airflow standalone` later counts it against max_active_runs and schedules its tasks.
# Every `dags test` ringward starts holds a shared lock on this file for as long as it runs (the descriptor is
# inherited across exec); a test run left unfinished while nobody holds it belongs to a process that is gone.
DAGS_TEST_LOCK = ".dags-test.lock"
_UNFINISHED_RUN = ("queued", "running")
_UNFINISHED_TASK = ("scheduled", "queued", "running", "restarting", "up_for_retry", "up_for_reschedule",
                    "deferred", "awaiting_input")  # fmt: skip


def hold_dags_test_lock(env: Mapping[str, str]) -> int:
    """Take the shared lock that marks a `dags test` as live in this home; returns the descriptor (inheritable,
    so an exec'd airflow keeps holding it until it exits; closing it releases the lock)."""
    descriptor = os.open(Path(env["AIRFLOW_HOME"]) / DAGS_TEST_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(descriptor, fcntl.LOCK_SH)
    os.set_inheritable(descriptor, True)
    return descriptor


def fail_stale_test_runs(env: Mapping[str, str]) -> list[tuple[str, str]]:
    """Mark failed the `dags test` runs (triggered_by TEST) still queued or running while no `dags test`
    holds the home's lock, with their unfinished task instances; returns their (dag_id, run_id).

    Only the project's SQLite database is looked at; while any `dags test` runs, nothing is touched."""
    database = _sqlite_database(env)
    if database is None or not database.exists():
        return []
    descriptor = os.open(Path(env["AIRFLOW_HOME"]) / DAGS_TEST_LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return []  # a `dags test` is running: its run is not stale
        return _fail_test_runs(database)
    finally:
        os.close(descriptor)


def _sqlite_database(env: Mapping[str, str]) -> Path | None:
    url = env.get("AIRFLOW__DATABASE__SQL_ALCHEMY_CONN", "")
    prefix = "sqlite:///"
    return Path(url[len(prefix) :].split("?", 1)[0]) if url.startswith(prefix) else None


def _fail_test_runs(database: Path) -> list[tuple[str, str]]:
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")  # how Airflow's UtcDateTime is stored in SQLite
    with contextlib.closing(sqlite3.connect(database, timeout=30)) as connection, connection:
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if not {"dag_run", "task_instance"} <= tables:
            return []  # not migrated yet
        runs = connection.execute(
            # triggered_by is a SQLAlchemy Enum column: it stores the member's name, TEST (for dag.test()).
            f"SELECT dag_id, run_id FROM dag_run WHERE triggered_by IN ('TEST', 'test') "
            f"AND state IN ({','.join('?' * len(_UNFINISHED_RUN))})",
            _UNFINISHED_RUN,
        ).fetchall()
        for dag_id, run_id in runs:
            connection.execute(
                "UPDATE dag_run SET state = 'failed', end_date = ? WHERE dag_id = ? AND run_id = ?",
                (now, dag_id, run_id),
            )
            connection.execute(
                f"UPDATE task_instance SET state = 'failed', end_date = ? WHERE dag_id = ? AND run_id = ? "
                f"AND state IN ({','.join('?' * len(_UNFINISHED_TASK))})",
                (now, dag_id, run_id, *_UNFINISHED_TASK),
            )
    return [(str(dag_id), str(run_id)) for dag_id, run_id in runs]
