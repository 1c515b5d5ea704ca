"""The hazard ringward exists to prevent, reproduced on real Cassandra 5.0 (seed 000): after SimpleStrategy
RF 2 -> NetworkTopologyStrategy dc1: 2 a new replica answers CL ONE with nothing. 4.1 and 4.0: test_cassandra_4x."""

from __future__ import annotations

from cassandra import ConsistencyLevel
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.seed_scenario import count_at_one_from, create_seed_keyspace
from schema_agreement import settle_schema


def _endpoints(cluster: LocalCluster, keyspace: str) -> list[str]:
    result = cluster.nodetool(cluster.topology().addresses[0], ["getendpoints", keyspace, "users", "1"])
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


def test_alter_without_repair_loses_reads_at_one(seed_cluster: LocalCluster) -> None:
    assert_alter_without_repair_loses_reads_at_one(seed_cluster, "test")


def assert_alter_without_repair_loses_reads_at_one(cluster: LocalCluster, keyspace: str) -> None:
    """The seed's hazard on the seed preset's nodes (any Cassandra line; 127.0.0.2-4, or the test lane's shifted
    addresses, in that order): `keyspace` is created and altered."""
    first, second, third = cluster.topology().addresses
    with connect([first, second, third]) as session:
        create_seed_keyspace(session, keyspace)
        assert _endpoints(cluster, keyspace) == [second, first]
        assert count_at_one_from(third, keyspace) == 1  # not a replica yet: it asks one

        session.execute(
            f"ALTER KEYSPACE {keyspace} WITH replication = {{'class': 'NetworkTopologyStrategy', 'dc1': 2}}"
        )
        settle_schema(session)

    assert _endpoints(cluster, keyspace) == [second, third]
    assert count_at_one_from(third, keyspace) == 0
    # The row still exists on the second node (and, orphaned, on the first): a read at ALL reconciles it, and
    # with read_repair = 'NONE' writes nothing back.
    assert count_at_one_from(second, keyspace, consistency=ConsistencyLevel.ALL) == 1
