"""Faults during a migration, on the real cluster, driving the DAG's operators one by one as the scheduler
would: rows removed from a new replica make verification fail (and the DAG keeps cleanup behind
verification). The Spark stages run on a real Spark standalone cluster (spark_default → spark://127.0.0.1:PORT).
Nodes dying mid-repair: test_migration_recovery.py."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from ringward.errors import VerificationError
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from task_driver import FakeTaskInstance

ROOT = Path(__file__).resolve().parents[2]
NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
KEYSPACE = "faults"


def _fill(rows: int) -> None:
    from cassandra import ConsistencyLevel
    from cassandra.concurrent import execute_concurrent_with_args

    with connect(NODES) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {KEYSPACE}")
        session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = {{'class': 'SimpleStrategy', "
                        "'replication_factor': 2}")  # fmt: skip
        session.execute(f"CREATE TABLE {KEYSPACE}.items (id int PRIMARY KEY, body text)")
        insert = session.prepare(f"INSERT INTO {KEYSPACE}.items (id, body) VALUES (?, ?)")
        insert.consistency_level = ConsistencyLevel.ALL
        for ok, result in execute_concurrent_with_args(session, insert, [(i, f"item {i}") for i in range(rows)]):
            assert ok, result


def _remove_table_data(cluster: LocalCluster, address: str) -> None:
    """Drain, stop the node, delete its SSTables of the table (and the replayable commit log), start it:
    the rows are gone from that node alone."""
    assert cluster.nodetool(address, ["drain"]).returncode == 0
    cluster.stop(address)
    node_data = ROOT / ".local" / "cluster" / f"node{address.rsplit('.', 1)[1]}" / "data"
    for segment in (node_data / "commitlog").iterdir():
        segment.unlink()
    data = node_data / "data" / KEYSPACE
    removed = 0
    for table_dir in data.glob("items-*"):
        for sstable in table_dir.iterdir():
            if sstable.is_file():
                sstable.unlink()
                removed += 1
            elif sstable.name not in {"backups", "snapshots"}:
                shutil.rmtree(sstable)
    assert removed, f"no SSTable of {KEYSPACE}.items found on {address}"
    cluster.start(address)


def test_rows_missing_on_a_new_replica_fail_verification(
    seed_cluster: LocalCluster, task_env: None, standalone_spark_default: str
) -> None:
    """The Spark stages (baseline, verify) run on the Spark standalone cluster through spark_default."""
    from ringward_airflow.migration_operators import (
        KeyspaceAlterOperator,
        MigrationPrecheckOperator,
        MigrationRepairOperator,
        PreviewVerifyOperator,
    )
    from ringward_airflow.spark_operators import SparkBaselineOperator, SparkVerifyOperator

    _fill(600)
    ti = FakeTaskInstance()
    context: Any = {"run_id": "faults-run", "ti": ti}
    ti.xcoms["precheck"] = MigrationPrecheckOperator(
        task_id="precheck", keyspace=KEYSPACE, replication={"class": "NetworkTopologyStrategy", "dc1": 2}
    ).execute(context)
    ti.xcoms["step_1.baseline"] = SparkBaselineOperator(task_id="baseline").execute(context)
    KeyspaceAlterOperator(task_id="alter").execute(context)

    repaired = MigrationRepairOperator(task_id="repair", phase="post", deferrable=False).execute(context)
    assert repaired["repaired"] == repaired["ranges"] > 0

    _remove_table_data(seed_cluster, "127.0.0.4")
    # In the DAG's order: the preview repair (streams nothing), then the counts (whose CL ALL reference
    # read-repairs what it finds missing, so nothing can be checked after it).
    with pytest.raises(VerificationError, match="out of sync"):
        PreviewVerifyOperator(task_id="verify_preview").execute(context)
    with pytest.raises(VerificationError) as missing:
        SparkVerifyOperator(task_id="verify_counts", baseline_task_id="step_1.baseline").execute(context)
    assert "127.0.0.4" in str(missing.value) and "missing" in str(missing.value)
