"""The seed article's scenario: SimpleStrategy RF 2, one row, then a strategy change (used by the demo and tests)."""

from __future__ import annotations

from typing import Unpack

from cassandra import ConsistencyLevel
from cassandra.cluster import Session
from cassandra.query import SimpleStatement

from ringward_cassandra.cql import ClusterSettings, connect, quote_identifier

__all__ = ["count_at_one_from", "create_seed_keyspace"]


def create_seed_keyspace(session: Session, keyspace: str) -> None:
    """Keyspace with SimpleStrategy RF 2 and the seed's `users` table, read repair and speculation off."""
    ks = quote_identifier(keyspace)
    session.execute(f"DROP KEYSPACE IF EXISTS {ks}")
    session.execute(f"CREATE KEYSPACE {ks} WITH replication = {{'class': 'SimpleStrategy', 'replication_factor': 2}}")
    # A coordinator that has not seen the keyspace yet refuses the table ("Keyspace ... doesn't exist").
    session.cluster.control_connection.wait_for_schema_agreement(wait_time=90)
    session.execute(
        f"CREATE TABLE {ks}.users (app_id int, id int, name text, created_at timestamp, "
        "PRIMARY KEY (app_id, id)) WITH speculative_retry = 'NONE' AND read_repair = 'NONE'"
    )
    # The write at ALL fails on a node that has not seen the new table yet (INCOMPATIBLE_SCHEMA): a DDL
    # statement's own agreement wait is bounded by half the request timeout, and a loaded node takes longer.
    session.cluster.control_connection.wait_for_schema_agreement(wait_time=90)
    insert = SimpleStatement(
        f"INSERT INTO {ks}.users (app_id, id, name, created_at) VALUES (1, 1, 'Foo', '2019-01-01 00:00:00')",
        consistency_level=ConsistencyLevel.ALL,
    )
    session.execute(insert)


def count_at_one_from(
    node: str,
    keyspace: str,
    /,
    app_id: int = 1,
    consistency: int = ConsistencyLevel.ONE,
    **settings: Unpack[ClusterSettings],
) -> int:
    """Rows of partition `app_id` read (at CL ONE by default) with `node` as the only coordinator
    (`settings`: the login and TLS of a secured cluster)."""
    pinned: ClusterSettings = {**settings, "coordinator": node}
    with connect([node], **pinned) as session:
        statement = SimpleStatement(
            f"SELECT * FROM {quote_identifier(keyspace)}.users WHERE app_id = %s",
            consistency_level=consistency,
        )
        return len(list(session.execute(statement, (app_id,))))
