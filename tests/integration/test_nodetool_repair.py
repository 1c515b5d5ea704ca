"""Several ranges in one repair command, on real Cassandra 5.0: one session per replica set, every range
repaired (the new replica answers CL ONE for all of them afterwards), and the history lists each range."""

from __future__ import annotations

from cassandra import ConsistencyLevel
from cassandra.query import SimpleStatement
from repair_history import parent_session, repaired_ranges
from ringward.migration import migration_steps, repair_segments, repair_waves
from ringward.plan import build_plan
from ringward.repair import back_pressure_reason, parse_config
from ringward.replication import Replication
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ring_reader import ring_from_cluster
from schema_agreement import settle_schema

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
ROWS = 400


def rows_at_one_from(coordinator: str) -> int:
    with connect([coordinator], coordinator=coordinator) as session:
        statement = SimpleStatement("SELECT count(*) FROM multi.t", consistency_level=ConsistencyLevel.ONE)
        return int(session.execute(statement).one()[0])


def test_one_command_repairs_every_range_of_a_replica_set(seed_cluster: LocalCluster) -> None:
    with connect(NODES) as session:
        session.execute("DROP KEYSPACE IF EXISTS multi")
        session.execute("CREATE KEYSPACE multi WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 2}")
        session.execute("CREATE TABLE multi.t (id int PRIMARY KEY, v text)")
        insert = session.prepare("INSERT INTO multi.t (id, v) VALUES (?, 'x')")
        insert.consistency_level = ConsistencyLevel.ALL
        for i in range(ROWS):
            session.execute(insert, (i,))
        ring = ring_from_cluster(session)
        target = Replication.network_topology({"dc1": 2})
        session.execute(f"ALTER KEYSPACE multi WITH replication = {target.to_cql()}")
        settle_schema(session)
    assert rows_at_one_from("127.0.0.4") < ROWS  # the hazard: the new replica misses the moved ranges

    step = migration_steps(build_plan(ring, Replication.simple(2), target, keyspace="multi"))[0]
    segments = repair_segments(ring, step, "multi", "post")
    commands = [command for wave in repair_waves(segments, parallelism=2) for command in wave]
    assert len(commands) == 2 < len(segments)  # two replica sets, seven ranges
    nodetool = seed_cluster.nodetool_client()
    try:
        outcomes = [nodetool.repair(c.coordinator, c.keyspace, c.ranges, timeout=600) for c in commands]
    finally:
        nodetool.close()
    assert all(o.succeeded for o in outcomes), [o.output for o in outcomes]
    assert rows_at_one_from("127.0.0.4") == ROWS

    with connect(NODES) as session:
        for command, outcome in zip(commands, outcomes, strict=True):
            row = parent_session(session, "multi", command.ranges, outcome.parent_id)
            assert repaired_ranges(row) == {f"{r.start},{r.end}" for r in command.ranges}


def test_the_back_pressure_read_of_a_real_node_counts_sstables_per_table(seed_cluster: LocalCluster) -> None:
    """`backlog` on a real 5.0 node: three flushes of one table are three SSTables (autocompaction off), Cassandra's
    own tables are left out, a keyspace named alone is the only one counted, and a threshold below that count
    holds the node back, naming the setting."""
    node = NODES[0]
    with connect(NODES) as session:
        session.execute("DROP KEYSPACE IF EXISTS pressure")
        session.execute(
            "CREATE KEYSPACE pressure WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
        )
        session.execute("CREATE TABLE pressure.t (id int PRIMARY KEY, v text)")
        settle_schema(session)
        assert seed_cluster.nodetool(node, ["disableautocompaction", "pressure", "t"]).returncode == 0
        insert = session.prepare("INSERT INTO pressure.t (id, v) VALUES (?, 'x')")
        insert.consistency_level = ConsistencyLevel.ALL
        for flush in range(3):
            session.execute(insert, (flush,))
            assert seed_cluster.nodetool(node, ["flush", "pressure", "t"]).returncode == 0
    nodetool = seed_cluster.nodetool_client()
    try:
        backlog = nodetool.backlog(node)
        named = nodetool.backlog(node, ["pressure"])
        elsewhere = nodetool.backlog(node, ["system_distributed"])  # a keyspace without the flushed table
        dropped = nodetool.backlog(node, ["no_such_keyspace"])  # refused by the node: every table is read instead
    finally:
        nodetool.close()
    assert backlog.max_sstables_per_table >= 3, backlog
    assert named.max_sstables_per_table == backlog.max_sstables_per_table and elsewhere.max_sstables_per_table == 0
    assert dropped.max_sstables_per_table == backlog.max_sstables_per_table
    assert not backlog.streaming and not backlog.pending_ranges and not backlog.cleanup_running
    config = parse_config({"back_pressure": {"sstable_upper_threshold": 2}})
    reason = back_pressure_reason(node, backlog, config)
    assert reason is not None and "SSTables in one table" in reason and "sstable_upper_threshold" in reason
    with connect(NODES) as session:
        session.execute("DROP KEYSPACE pressure")
