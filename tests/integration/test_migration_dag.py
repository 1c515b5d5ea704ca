"""keyspace_migration on the real local cluster through `airflow dags test`: rollback, and bad input refused at
precheck with the schema untouched (the seed migration itself: test_airflow_scheduler.py, through the scheduler)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from airflow.sdk.exceptions import AirflowFailException
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement
from dag_test_runs import run_dag_test
from ringward.errors import RingwardError
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.seed_scenario import count_at_one_from, create_seed_keyspace
from ringward_cli.airflow_env import airflow_environment, local_connections
from schema_agreement import settle_schema

ROOT = Path(__file__).resolve().parents[2]
NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def run_migration(conf: dict[str, Any], dag_id: str = "keyspace_migration") -> subprocess.CompletedProcess[str]:
    """`ringward airflow dags test keyspace_migration --conf …`, exactly as an operator would run it."""
    # Unattended (no approval): the deployment settings automation needs (docs/operators-guide.md "Governance").
    return run_dag_test(dag_id, json.dumps(conf), env=airflow_environment(ROOT, automation=True), timeout=900)


def failures(result: subprocess.CompletedProcess[str]) -> str:
    """The errors the failed tasks raised, for the assertion message (the full log is long)."""
    lines = (result.stdout + result.stderr).splitlines()
    errors = [line for line in lines if "Error:" in line or "Exception:" in line or "end task" in line]
    return "\n".join(errors[-40:])


def dag_run_state(result: subprocess.CompletedProcess[str]) -> str:
    for line in (result.stdout + result.stderr).splitlines():
        if "DagRun Finished" in line and "state=" in line:
            return line.split("state=", 1)[1].split(",", 1)[0]
    return "unknown"


def test_rollback_restores_the_previous_replication(seed_cluster: LocalCluster) -> None:
    with connect(NODES) as session:
        create_seed_keyspace(session, "undo")
    migrated = run_migration(
        {"keyspace": "undo", "replication": {"class": "NetworkTopologyStrategy", "dc1": 2},
         "require_approval": False, "cleanup": False}
    )  # fmt: skip
    assert dag_run_state(migrated) == "success", failures(migrated)
    with connect(NODES) as session:
        rows = session.execute("SELECT migration_id, keyspace_name FROM ringward_ops.migrations")
        (migration_id,) = [r.migration_id for r in rows if r.keyspace_name == "undo"]
        # Written after the ALTER, so only to 127.0.0.3 and .4: the rollback's repair must bring it to .2.
        session.execute(
            SimpleStatement(
                "INSERT INTO undo.users (app_id, id, name) VALUES (1, 2, 'written during the migration')",
                consistency_level=ConsistencyLevel.ALL,
            )
        )

    rolled_back = run_migration({"rollback_of": migration_id, "require_approval": False}, "keyspace_migration_rollback")
    assert dag_run_state(rolled_back) == "success", failures(rolled_back)
    endpoints = seed_cluster.nodetool("127.0.0.2", ["getendpoints", "undo", "users", "1"]).stdout.split()
    assert endpoints == ["127.0.0.3", "127.0.0.2"]  # the seed's placement again
    with connect(NODES) as session:
        replication = session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'undo'")
        assert replication.one().replication["class"].endswith("SimpleStrategy")
    assert count_at_one_from("127.0.0.2", "undo") == 2  # the returning replica serves CL ONE itself, both rows


# -- refusals -------------------------------------------------------------------------------------------


def schema_version() -> str:
    with connect(NODES) as session:
        return str(session.execute("SELECT schema_version FROM system.local").one().schema_version)


def precheck(keyspace: str, replication: Any, run_id: str = "refusal-test") -> dict[str, Any]:
    from ringward_airflow.migration_operators import MigrationPrecheckOperator

    operator = MigrationPrecheckOperator(task_id="precheck", keyspace=keyspace, replication=replication)
    return operator.execute({"run_id": run_id})  # type: ignore[arg-type]


NTS = "NetworkTopologyStrategy"
# Only what the operator or the real cluster decides. The refusals pure code decides are unit tests:
# wrong-case DC, RF above nodes, system keyspace, no-op (tests/unit/ringward/test_safety.py), malformed JSON and
# transient replication (tests/unit/ringward/test_replication.py). The seed migration itself runs through the real
# scheduler in test_airflow_scheduler.py.
REFUSALS = [
    ("unknown DC", "refuse_me", {"class": NTS, "dc9": 2}, "dc9"),
    ("missing keyspace", "no_such_keyspace", {"class": NTS, "dc1": 2}, "does not exist"),
    ("CQL injection", "refuse_me; DROP KEYSPACE x", {"class": NTS, "dc1": 2}, "not a valid"),
    ("injection in DC", "refuse_me", {"class": NTS, "dc1'}; DROP KEYSPACE x; --": 2}, "not in the ring"),
]


@pytest.mark.parametrize(("case", "keyspace", "replication", "message"), REFUSALS, ids=[r[0] for r in REFUSALS])
def test_bad_input_is_refused_and_changes_nothing(
    task_env: None, case: str, keyspace: str, replication: Any, message: str
) -> None:
    with connect(NODES) as session:
        create_seed_keyspace(session, "refuse_me")
    before = schema_version()
    with pytest.raises(AirflowFailException) as refusal:  # failed at once, never retried
        precheck(keyspace, replication)
    assert isinstance(refusal.value.__cause__, RingwardError)
    assert message.lower() in str(refusal.value).lower()
    assert "Fix:" in str(refusal.value), "every refusal names the fix"
    assert schema_version() == before


def test_dropping_a_dc_by_omission_is_refused(two_dc_cluster: LocalCluster) -> None:
    saved = dict(os.environ)
    os.environ.update(local_connections(ROOT, "two-dc"))
    try:
        with connect(["127.0.0.2"]) as session:
            session.execute("DROP KEYSPACE IF EXISTS two_dcs")
            session.execute("CREATE KEYSPACE two_dcs WITH replication = {'class': 'NetworkTopologyStrategy', "
                            "'dc1': 2, 'dc2': 1}")  # fmt: skip
            # A just-started five-node cluster can take a while to spread a schema change; the precheck
            # rightly refuses while nodes disagree, which is not what this test is about.
            settle_schema(session)
        with pytest.raises(AirflowFailException, match="dc2"):
            precheck("two_dcs", {"class": NTS, "dc1": 3})
    finally:
        os.environ.clear()
        os.environ.update(saved)


def test_second_concurrent_migration_is_refused(task_env: None) -> None:
    with connect(NODES) as session:
        create_seed_keyspace(session, "leased")
        OpsStore(session).ensure_schema([("dc1", 3)])
        OpsStore(session).acquire_lease("keyspace:leased", "leased@another-run", "keyspace_migration")
    try:
        with pytest.raises(AirflowFailException, match="held by leased@another-run"):
            precheck("leased", {"class": NTS, "dc1": 2}, run_id="second-run")
    finally:
        with connect(NODES) as session:
            OpsStore(session).release_lease("keyspace:leased", "leased@another-run")


# -- many rows ------------------------------------------------------------------------------------------


def write_rows(session: Any, keyspace: str, partitions: int, rows_per_partition: int) -> int:
    from cassandra import ConsistencyLevel
    from cassandra.concurrent import execute_concurrent_with_args

    session.execute(f"CREATE TABLE {keyspace}.events (pk int, ck int, body text, PRIMARY KEY (pk, ck))")
    settle_schema(session)  # the writes go to every replica (ALL): each must know the table
    insert = session.prepare(f"INSERT INTO {keyspace}.events (pk, ck, body) VALUES (?, ?, ?)")
    insert.consistency_level = ConsistencyLevel.ALL
    rows = [(p, c, f"row {p}/{c}") for p in range(partitions) for c in range(rows_per_partition)]
    for ok, result in execute_concurrent_with_args(session, insert, rows, concurrency=64):
        assert ok, result
    return len(rows)


def count_on(replica: str, keyspace: str) -> int:
    """Rows read at CL ONE with `replica` as the only coordinator. A replica of every range serves the
    whole scan from its own data (the local cluster ranks replicas by proximity only, itself first)."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    with connect([replica], coordinator=replica) as session:
        statement = SimpleStatement(f"SELECT count(*) FROM {keyspace}.events", consistency_level=ConsistencyLevel.ONE)
        return int(session.execute(statement, timeout=120).one()[0])


def test_rf1_to_rf3_every_row_on_every_replica(seed_cluster: LocalCluster) -> None:
    with connect(NODES) as session:
        session.execute("DROP KEYSPACE IF EXISTS grow")
        session.execute("CREATE KEYSPACE grow WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}")
        total = write_rows(session, "grow", partitions=300, rows_per_partition=10)
    result = run_migration(
        {"keyspace": "grow", "replication": {"class": "SimpleStrategy", "replication_factor": 3},
         "require_approval": False, "client_read_consistency": "QUORUM"}
    )  # fmt: skip
    assert dag_run_state(result) == "success", failures(result)
    assert [count_on(node, "grow") for node in NODES] == [total] * 3


def test_adding_a_datacenter(two_dc_cluster: LocalCluster) -> None:
    with connect(["127.0.0.2"]) as session:
        session.execute("DROP KEYSPACE IF EXISTS add_dc")
        session.execute("CREATE KEYSPACE add_dc WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 2}")
        total = write_rows(session, "add_dc", partitions=200, rows_per_partition=10)
    result = run_migration(
        {"keyspace": "add_dc", "replication": {"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2},
         "require_approval": False, "client_read_consistency": "LOCAL_QUORUM"}
    )  # fmt: skip
    assert dag_run_state(result) == "success", failures(result)
    assert count_on("127.0.0.5", "add_dc") == total
    assert count_on("127.0.0.6", "add_dc") == total
