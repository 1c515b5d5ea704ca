"""The resident nodetool (one JVM for many commands) against real Cassandra 5.0: the same answers as a
nodetool process, a command that fails alone, concurrent repairs, and no JVM left after close."""

from __future__ import annotations

import dataclasses
import os
import threading

from repair_history import parent_session, repaired_ranges
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.nodetool import NodetoolClient, RepairOutcome
from ringward_cassandra.ring_reader import ring_from_cluster
from schema_agreement import settle_schema

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]


def resident(cluster: LocalCluster) -> NodetoolClient:
    client = cluster.nodetool_client()
    assert client.java_classpath, "the local cluster's client runs its commands in a resident JVM"
    return client


def test_answers_like_a_nodetool_process(seed_cluster: LocalCluster) -> None:
    client = resident(seed_cluster)
    process_client = dataclasses.replace(client, java_classpath=None)
    try:
        for node in NODES:
            assert client.status(node) == process_client.status(node) == dict.fromkeys(NODES, "UN")
        assert client.checked(NODES[0], ["version"]) == process_client.checked(NODES[0], ["version"])
        assert client._resident is not None and client._resident.pid is not None  # one JVM served them all
    finally:
        client.close()


def test_a_command_that_cannot_connect_fails_alone(seed_cluster: LocalCluster) -> None:
    client = resident(seed_cluster)
    try:
        client.status(NODES[0])
        assert client._resident is not None
        pid = client._resident.pid
        # nodetool calls System.exit(1) when it cannot connect: the server turns that into this command's end.
        unreachable = dataclasses.replace(client, jmx_ports={NODES[0]: 1}, _resident=client._resident)
        result = unreachable.run(NODES[0], ["status"], timeout=60)
        assert result.returncode == 1
        assert result.stdout.startswith("nodetool: Failed to connect to '127.0.0.1:1'")
        assert client.status(NODES[0])[NODES[0]] == "UN"
        assert client._resident.pid == pid
    finally:
        client.close()


def test_concurrent_repairs_in_one_jvm_both_complete(seed_cluster: LocalCluster) -> None:
    with connect(NODES) as session:
        session.execute("DROP KEYSPACE IF EXISTS resident")
        session.execute(
            "CREATE KEYSPACE resident WITH replication = {'class': 'SimpleStrategy', 'replication_factor': 3}"
        )
        session.execute("CREATE TABLE resident.t (id int PRIMARY KEY, v text)")
        settle_schema(session)
        ring = ring_from_cluster(session)
    client = resident(seed_cluster)
    # Two ring ranges, each replicated by every node at RF 3 (a range spanning two would be refused).
    ranges = [r for r in ring.ranges() if not r.wraps][:2]
    outcomes: list[RepairOutcome | None] = [None, None]

    def repair(index: int) -> None:
        outcomes[index] = client.repair(NODES[index], "resident", ranges[index], timeout=600)

    try:
        threads = [threading.Thread(target=repair, args=(i,)) for i in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert all(o is not None and o.succeeded for o in outcomes), outcomes
        with connect(NODES) as session:  # each its own parent session, every range of it repaired
            rows = [
                parent_session(session, "resident", [r], o.parent_id if o else None)
                for r, o in zip(ranges, outcomes, strict=True)
            ]
        assert len({row.parent_id for row in rows}) == 2
        assert [repaired_ranges(row) for row in rows] == [{f"{r.start},{r.end}"} for r in ranges]
    finally:
        client.close()


def test_close_leaves_no_jvm(seed_cluster: LocalCluster) -> None:
    client = resident(seed_cluster)
    client.status(NODES[0])
    assert client._resident is not None
    pid = client._resident.pid
    assert pid is not None
    client.close()
    assert not os.path.exists(f"/proc/{pid}")  # close() waited for it: gone, not a zombie
