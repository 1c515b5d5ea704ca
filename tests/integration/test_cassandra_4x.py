"""ringward's main path on Cassandra 4.1 (issue 26): the keyspace migration (precheck, ALTER RF 1 -> 3, full
repair of the gained ranges, verify, cleanup) and one nightly subrange repair, both as `ringward airflow dags
test`, on the seed preset's three nodes running 4.1 (the `cassandra41` topology, started once, last)."""

from __future__ import annotations

import pytest
from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement
from ringward.repair import SegmentState
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OpsStore
from test_migration_dag import count_on, dag_run_state, failures, run_migration, write_rows
from test_nightly_repair import conf, run_dag

pytestmark = pytest.mark.integration


def test_migration_and_nightly_repair_on_4_1(cassandra41_cluster: LocalCluster) -> None:
    nodes = cassandra41_cluster.topology().addresses
    assert cassandra41_cluster.version().startswith("4.1.")
    with connect(nodes) as session:
        release = session.execute("SELECT release_version FROM system.local").one().release_version
        assert release.startswith("4.1.") and session.cluster.protocol_version == 4  # negotiated, pinned below 5.0
        session.execute("DROP KEYSPACE IF EXISTS grow41")
        session.execute(
            "CREATE KEYSPACE grow41 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        total = write_rows(session, "grow41", partitions=200, rows_per_partition=5)

    result = run_migration(
        {"keyspace": "grow41", "replication": {"class": "SimpleStrategy", "replication_factor": 3},
         "require_approval": False, "client_read_consistency": "QUORUM"}
    )  # fmt: skip
    log = result.stdout + result.stderr
    assert dag_run_state(result) == "success", failures(result)
    assert "Cassandra 4.1" in log and "has no AutoRepair" in log, "AutoRepair skipped, saying why"
    # Every row was on one replica only: the repair of the gained ranges brought it to the two others.
    assert [count_on(node, "grow41") for node in nodes] == [total] * 3

    with connect(nodes) as session:  # a row after the migration (at ALL: every replica has it, as before)
        session.execute(
            SimpleStatement(
                "INSERT INTO grow41.events (pk, ck, body) VALUES (1, 99, 'nightly')",
                consistency_level=ConsistencyLevel.ALL,
            )
        )
    nightly = run_dag(conf("grow41"))
    nightly_log = nightly.stdout + nightly.stderr
    assert nightly.returncode == 0 and "DagRun Finished" in nightly_log and "state=success" in nightly_log, nightly_log[
        -3000:
    ]
    with connect(nodes) as session:
        history = OpsStore(session).repair_history("grow41")
    assert history and all(row.record.state is SegmentState.DONE for row in history), history
    assert [count_on(node, "grow41") for node in nodes] == [total + 1] * 3
