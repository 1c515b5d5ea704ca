"""The live ring, read through cassandra-driver from system.local and system.peers_v2 (system.peers on 3.11,
which has no peers_v2).

Both tables are read from the same coordinator: system.local describes the coordinator and
system.peers_v2 every other node, so rows from two different coordinators would list one node
twice and miss another. Node addresses are the broadcast (gossip) addresses, as `nodetool ring`
shows them. Up/down comes from the driver's view of the cluster when the session has one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from ringward.errors import ClusterError
from ringward.ring import Node, Ring

__all__ = [
    "node_from_local_row",
    "node_from_peer_row",
    "ring_from_cluster",
    "ring_from_contact_point",
    "ring_from_rows",
]

LOCAL_QUERY = (
    "SELECT broadcast_address, listen_address, data_center, rack, tokens, host_id FROM system.local WHERE key = 'local'"
)
PEERS_V2_QUERY = "SELECT peer, data_center, rack, tokens, host_id FROM system.peers_v2"
PEERS_QUERY = "SELECT peer, data_center, rack, tokens, host_id FROM system.peers"  # Cassandra 3.x


def node_from_local_row(row: Any, *, up: bool | None = None) -> Node:
    """A system.local row as a Node (its address: broadcast_address, else listen_address)."""
    address = getattr(row, "broadcast_address", None) or getattr(row, "listen_address", None)
    return _node(row, address, "system.local", up)


def node_from_peer_row(row: Any, *, up: bool | None = None, table: str = "system.peers_v2") -> Node:
    """A system.peers_v2 (or system.peers, `table`) row as a Node."""
    return _node(row, getattr(row, "peer", None), table, up)


def ring_from_rows(
    local_row: Any,
    peer_rows: Iterable[Any],
    up_by_host_id: dict[str, bool] | None = None,
    peers_table: str = "system.peers_v2",
) -> Ring:
    """The ring from one coordinator's system.local row and its `peers_table` rows."""
    states = up_by_host_id or {}
    local = node_from_local_row(local_row, up=states.get(str(local_row.host_id)))
    peers = [node_from_peer_row(row, up=states.get(str(row.host_id)), table=peers_table) for row in peer_rows]
    if any(peer.address == local.address for peer in peers):
        raise ClusterError(
            f"{local.address} is listed both in system.local and in {peers_table}.",
            "Read both tables from the same coordinator (ring_from_cluster pins one host).",
        )
    return Ring.of([local, *peers])


def ring_from_cluster(session: Any) -> Ring:
    """The live ring through a connected cassandra-driver Session."""
    host = _pinned_host(session)
    local_rows = list(_execute(session, LOCAL_QUERY, host))
    if len(local_rows) != 1:
        raise ClusterError(f"system.local returned {len(local_rows)} rows.", "Connect to a Cassandra node and retry.")
    peers_table, peer_rows = _peer_rows(session, host)
    return ring_from_rows(local_rows[0], peer_rows, _up_by_host_id(session), peers_table)


def ring_from_contact_point(host: str, port: int = 9042, **settings: Any) -> Ring:
    """Connect to one node, read the ring through it, disconnect; `settings`: login and TLS."""
    from ringward_cassandra.cql import build_cluster

    # Pinned to the contact point: both system tables must come from the same coordinator.
    cluster = build_cluster([host], port, **{**settings, "coordinator": host})
    try:
        session = cluster.connect()
    except Exception as error:  # the driver raises NoHostAvailable and several socket errors
        raise ClusterError(
            f"Cannot connect to Cassandra at {host}:{port}: {error}.",
            "Check that the node is up and its native transport port is reachable.",
        ) from error
    try:
        return ring_from_cluster(session)
    finally:
        cluster.shutdown()


def _node(row: Any, address: object, table: str, up: bool | None) -> Node:
    if not address:
        raise ClusterError(f"A {table} row has no address: {row!r}.", "Check the node's broadcast_address.")
    tokens = getattr(row, "tokens", None)
    if not tokens:
        raise ClusterError(
            f"Node {address} has no tokens in {table}.",
            "Wait until the node has joined the ring, or remove the stale peer (nodetool removenode).",
        )
    for field_name in ("data_center", "rack"):
        if not getattr(row, field_name, None):
            raise ClusterError(f"Node {address} has no {field_name} in {table}.", "Check the node's snitch.")
    host_id = getattr(row, "host_id", None)
    return Node(
        address=str(address),
        datacenter=str(row.data_center),
        rack=str(row.rack),
        tokens=tuple(sorted(int(token) for token in tokens)),
        host_id=None if host_id is None else str(host_id),
        state="DN" if up is False else "UN",
    )


def _execute(session: Any, query: str, host: Any) -> Iterable[Any]:
    if host is None:
        return session.execute(query)  # type: ignore[no-any-return]
    return session.execute(query, host=host)  # type: ignore[no-any-return]


def _peer_rows(session: Any, host: Any) -> tuple[str, list[Any]]:
    """The peers table read and its rows."""
    from cassandra import InvalidRequest

    try:
        return "system.peers_v2", list(_execute(session, PEERS_V2_QUERY, host))
    except InvalidRequest:  # no system.peers_v2 before Cassandra 4.0: 3.11 answers "unconfigured table peers_v2"
        return "system.peers", list(_execute(session, PEERS_QUERY, host))


def _driver_hosts(session: Any) -> list[Any]:
    cluster = getattr(session, "cluster", None)
    metadata = getattr(cluster, "metadata", None)
    return list(metadata.all_hosts()) if metadata is not None else []


def _pinned_host(session: Any) -> Any:
    """One host with an open connection pool, to send both queries to; None leaves the choice to the driver.

    A host the metadata calls up may still have no pool in this session (pools open asynchronously, and a
    busy node's pool may be closed after a heartbeat timeout): pinning a query to it fails at once.
    """
    pools = getattr(session, "_pools", {})
    open_hosts = [host for host, pool in dict(pools).items() if not getattr(pool, "is_shutdown", True)]
    return next((h for h in open_hosts if h.is_up), None)


def _up_by_host_id(session: Any) -> dict[str, bool]:
    return {str(h.host_id): bool(h.is_up) for h in _driver_hosts(session) if h.host_id and h.is_up is not None}
