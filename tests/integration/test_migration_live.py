"""keyspace_migration under live conditions: a writer running through the whole migration, and a staged
plan (moving a keyspace from dc1 to dc2, which no single ALTER can do safely)."""

from __future__ import annotations

import threading
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from test_migration_dag import NODES, count_on, dag_run_state, failures, run_migration, write_rows


class Writer(threading.Thread):
    """Inserts rows at QUORUM until stopped; remembers which writes were acknowledged."""

    def __init__(self, keyspace: str) -> None:
        super().__init__(daemon=True)
        self.keyspace = keyspace
        self.acknowledged: list[int] = []
        self.failed = 0
        self.stop = threading.Event()

    def run(self) -> None:
        with connect(NODES) as session:
            insert = session.prepare(f"INSERT INTO {self.keyspace}.events (pk, ck, body) VALUES (?, ?, 'live')")
            insert.consistency_level = ConsistencyLevel.QUORUM
            key = 100_000
            while not self.stop.is_set():
                try:
                    session.execute(insert, (key, 0), timeout=10)
                    self.acknowledged.append(key)
                except Exception:  # an unacknowledged write may or may not have landed: not counted
                    self.failed += 1
                key += 1
                self.stop.wait(0.02)


def test_no_acknowledged_write_lost_and_no_false_alarm(seed_cluster: LocalCluster) -> None:
    with connect(NODES) as session:
        session.execute("DROP KEYSPACE IF EXISTS live")
        session.execute("CREATE KEYSPACE live WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        initial = write_rows(session, "live", partitions=200, rows_per_partition=5)
    writer = Writer("live")
    writer.start()
    try:
        result = run_migration(
            {"keyspace": "live", "replication": {"class": "NetworkTopologyStrategy", "dc1": 2},
             "require_approval": False, "client_read_consistency": "QUORUM"}
        )  # fmt: skip
    finally:
        writer.stop.set()
        writer.join(30)
    assert dag_run_state(result) == "success", failures(result)
    assert len(writer.acknowledged) > 100, "the writer ran through the migration"
    # 127.0.0.4 (the only rack2 node) now replicates every range: it must hold every acknowledged row.
    with connect(["127.0.0.4"], coordinator="127.0.0.4") as session:
        statement = SimpleStatement(
            "SELECT pk FROM live.events WHERE pk >= 100000 ALLOW FILTERING", consistency_level=ConsistencyLevel.ONE
        )
        present = {row.pk for row in session.execute(statement, timeout=120)}
    assert set(writer.acknowledged) <= present
    assert count_on("127.0.0.4", "live") >= initial + len(writer.acknowledged)


def test_staged_plan_moves_a_keyspace_between_datacenters(two_dc_cluster: LocalCluster) -> None:
    with connect(["127.0.0.2"]) as session:
        session.execute("DROP KEYSPACE IF EXISTS moving")
        session.execute("CREATE KEYSPACE moving WITH replication = {'class': 'NetworkTopologyStrategy', 'dc1': 1}")
        total = write_rows(session, "moving", partitions=150, rows_per_partition=4)
    target: dict[str, Any] = {"class": "NetworkTopologyStrategy", "dc1": 0, "dc2": 1}
    result = run_migration({"keyspace": "moving", "replication": target, "require_approval": False})
    log = result.stdout + result.stderr
    assert dag_run_state(result) == "success", failures(result)
    assert "task_id=step_2.alter" in log, "the change ran as two ALTER steps"
    with connect(["127.0.0.5"]) as session:
        replication = (
            session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'moving'")
            .one()
            .replication
        )
        assert replication.get("dc2") == "1" and "dc1" not in replication
        statement = SimpleStatement("SELECT count(*) FROM moving.events", consistency_level=ConsistencyLevel.ONE)
        assert session.execute(statement, timeout=120).one()[0] == total
