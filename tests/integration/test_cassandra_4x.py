"""ringward's smoke group on Cassandra 4.1 and 4.0 (issue 26), each on the seed preset's three nodes running that
line (topologies `cassandra41` and `cassandra40`, each started once, after the 5.0 suite): the seed's hazard
reproduced, the keyspace migration (precheck, ALTER RF 1 -> 2, full repair of the gained ranges, verify,
cleanup) and one nightly subrange repair as `ringward airflow dags test`, then the migration rolled back.

RF 1 -> 2 rather than 1 -> 3: at QUORUM the planner stages 1 -> 3 as two steps, twice the suite time for the
same code path."""

from __future__ import annotations

from collections import defaultdict

import pytest
from cassandra import ConsistencyLevel
from cassandra.concurrent import execute_concurrent_with_args
from cassandra.metadata import Murmur3Token
from cassandra.query import SimpleStatement
from ringward.repair import SegmentState
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OpsStore
from schema_agreement import settle_schema
from test_hazard import assert_alter_without_repair_loses_reads_at_one
from test_migration_dag import dag_run_state, failures, run_migration, write_rows
from test_nightly_repair import conf, run_dag

pytestmark = pytest.mark.integration

PARTITIONS, ROWS_PER_PARTITION = 200, 5


def test_hazard_migration_nightly_and_rollback_on_4_1(cassandra41_cluster: LocalCluster) -> None:
    smoke(cassandra41_cluster)


def test_hazard_migration_nightly_and_rollback_on_4_0(cassandra40_cluster: LocalCluster) -> None:
    smoke(cassandra40_cluster)


def smoke(cluster: LocalCluster) -> None:
    topology = cluster.topology()
    nodes, series = topology.addresses, topology.cassandra or ""
    assert series < "5" and cluster.version().startswith(f"{series}.")
    assert_alter_without_repair_loses_reads_at_one(cluster, "hazard")
    with connect(nodes) as session:
        release = session.execute("SELECT release_version FROM system.local").one().release_version
        assert release.startswith(f"{series}.")
        assert session.cluster.protocol_version == 4  # negotiated, then pinned below 5.0
        session.execute("DROP KEYSPACE IF EXISTS grow41")
        session.execute(
            "CREATE KEYSPACE grow41 WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 1}"
        )
        # Every node has the keyspace before its tables are created: a coordinator without it refused the
        # CREATE TABLE ("Keyspace 'grow41' doesn't exist", 4.1, a full run of 2b09722 on 2026-11-30).
        settle_schema(session)
        write_rows(session, "grow41", partitions=PARTITIONS, rows_per_partition=ROWS_PER_PARTITION)
        # A non-frozen collection: 4.x refuses writetime() of it, so the verification must date rows without it.
        session.execute("CREATE TABLE grow41.tagged (pk int PRIMARY KEY, note text, labels set<text>)")
        settle_schema(session)
        tag = session.prepare("INSERT INTO grow41.tagged (pk, note, labels) VALUES (?, ?, ?)")
        tag.consistency_level = ConsistencyLevel.ALL
        only_labels = session.prepare("INSERT INTO grow41.tagged (pk, labels) VALUES (?, ?)")
        only_labels.consistency_level = ConsistencyLevel.ALL
        for ok, outcome in execute_concurrent_with_args(
            session, tag, [(k, f"n{k}", {"a", f"l{k}"}) for k in range(50)]
        ):
            assert ok, outcome
        for ok, outcome in execute_concurrent_with_args(session, only_labels, [(k, {"b"}) for k in range(50, 60)]):
            assert ok, outcome

    result = run_migration(
        {"keyspace": "grow41", "replication": {"class": "SimpleStrategy", "replication_factor": 2},
         "require_approval": False, "client_read_consistency": "QUORUM"}
    )  # fmt: skip
    log = result.stdout + result.stderr
    assert dag_run_state(result) == "success", failures(result)
    assert f"Cassandra {release} has no AutoRepair" in log, "AutoRepair skipped, saying why"
    # Every row was on one replica: the repair of the gained ranges brought it to the second.
    assert rows_missing_on_replicas(nodes) == {}

    with connect(nodes) as session:  # a row after the migration, on both replicas
        session.execute(
            SimpleStatement(
                "INSERT INTO grow41.events (pk, ck, body) VALUES (1, 99, 'nightly')",
                consistency_level=ConsistencyLevel.ALL,
            )
        )
    nightly = run_dag(conf("grow41"))
    nightly_log = nightly.stdout + nightly.stderr
    assert nightly.returncode == 0 and "state=success" in nightly_log, nightly_log[-3000:]
    with connect(nodes) as session:
        history = OpsStore(session).repair_history("grow41")
        (migration_id,) = [
            row.migration_id
            for row in session.execute("SELECT migration_id, keyspace_name FROM ringward_ops.migrations")
            if row.keyspace_name == "grow41"
        ]
    assert history and all(row.record.state is SegmentState.DONE for row in history), history

    rolled_back = run_migration({"rollback_of": migration_id, "require_approval": False}, "keyspace_migration_rollback")
    assert dag_run_state(rolled_back) == "success", failures(rolled_back)
    with connect(nodes) as session:
        replication = (
            session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = 'grow41'")
            .one()
            .replication
        )
        assert replication["class"].endswith("SimpleStrategy") and replication["replication_factor"] == "1"
        # One replica per partition again, and it holds every row (the one written after the migration too).
        total = session.execute(
            SimpleStatement("SELECT count(*) FROM grow41.events", consistency_level=ConsistencyLevel.ONE)
        ).one()[0]
    assert total == PARTITIONS * ROWS_PER_PARTITION + 1


def rows_missing_on_replicas(nodes: list[str]) -> dict[tuple[str, int], int]:
    """(replica, partition) -> rows it lacks, read at ONE with the replica as the only coordinator: a replica
    serves ONE from its own data (the local cluster ranks replicas by proximity only, itself first)."""
    replicas_of: dict[str, list[int]] = defaultdict(list)
    with connect(nodes) as session:
        token_map = session.cluster.metadata.token_map
        for row in session.execute("SELECT DISTINCT pk, token(pk) AS t FROM grow41.events"):
            for host in token_map.get_replicas("grow41", Murmur3Token(row.t)):
                replicas_of[host.address].append(row.pk)
    assert sorted(replicas_of) == sorted(nodes) and sum(map(len, replicas_of.values())) == 2 * PARTITIONS
    missing: dict[tuple[str, int], int] = {}
    for replica, keys in replicas_of.items():
        with connect([replica], coordinator=replica) as session:
            count = session.prepare("SELECT count(*) FROM grow41.events WHERE pk = ?")
            count.consistency_level = ConsistencyLevel.ONE
            answers = execute_concurrent_with_args(session, count, [(k,) for k in keys], concurrency=32)
            for key, (ok, rows) in zip(keys, answers, strict=True):
                found = int(rows.one()[0]) if ok else 0
                if found != ROWS_PER_PARTITION:
                    missing[(replica, key)] = ROWS_PER_PARTITION - found
    return missing
