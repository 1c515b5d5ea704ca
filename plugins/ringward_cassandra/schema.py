"""Reads a keyspace's replication and its tables' gc_grace_seconds from the live schema.

Works on any object with the driver Session's `execute(query, parameters)`; rows may be named
tuples (the driver's default) or mappings.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ringward.errors import ClusterError
from ringward.replication import DEFAULT_KEYSPACE_RF, Replication

__all__ = [
    "CqlSession",
    "LiveCql",
    "connect",
    "data_disk_max_sizes",
    "default_keyspace_rf",
    "describe_schema_versions",
    "driver_schema",
    "keyspace_names",
    "keyspace_replication",
    "release_versions",
    "schema_versions",
    "table_gc_grace",
]

DEFAULT_PORT = 9042


class CqlSession(Protocol):
    def execute(self, query: str, parameters: Any = ...) -> Iterable[Any]: ...


def connect(contact_point: str, **settings: Any) -> Any:
    """A driver session to `host[:port]` (the driver is imported only here); `settings`: login and TLS."""
    from ringward_cassandra.cql import build_cluster

    host, _, port = contact_point.partition(":")
    cluster = build_cluster([host], int(port) if port else DEFAULT_PORT, **settings)
    try:
        return cluster.connect()
    except Exception as error:
        cluster.shutdown()
        raise ClusterError(
            f"Cannot connect to {contact_point}: {error}.",
            "Check the address and port (host[:9042]) and that the node is up.",
        ) from error


def keyspace_replication(session: CqlSession, keyspace: str) -> Replication:
    rows = list(
        session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", (keyspace,))
    )
    if not rows:
        raise ClusterError(
            f"Keyspace {keyspace!r} does not exist.",
            "Check the name (case-sensitive); `ringward plan --from JSON` plans without a cluster.",
        )
    return Replication.parse(dict(_field(rows[0], "replication")))


def default_keyspace_rf(session: CqlSession) -> int:
    """cassandra.yaml's `default_keyspace_rf` of the node the session asks (`system_views.settings`): the
    factor a SimpleStrategy or bare NTS request without a factor may take. 1 (Cassandra's default) when
    the setting is not listed (Cassandra 4.0 has no such setting; 3.11 has no system_views at all)."""
    from cassandra import InvalidRequest

    try:
        rows = list(
            session.execute("SELECT value FROM system_views.settings WHERE name = %s", ("default_keyspace_rf",))
        )
    except InvalidRequest:  # 3.11: "Keyspace system_views does not exist"
        return DEFAULT_KEYSPACE_RF
    value = str(_field(rows[0], "value")) if rows else ""
    if not value.isdigit() or int(value) < 1:
        return DEFAULT_KEYSPACE_RF
    return int(value)


def data_disk_max_sizes(session: Any, addresses: Iterable[str]) -> dict[str, int | None]:
    """Each node's cassandra.yaml `data_disk_usage_max_disk_size` in bytes (Cassandra 4.1+), asked of the node
    itself (`system_views.settings` is node-local), for incremental repair's disk-headroom guard. None where
    unset, not a size, or unreadable (node down, a release before 4.1, no SELECT permission): the guard then
    uses the configured `data_disk_capacity`."""
    from cassandra.query import SimpleStatement
    from ringward.capacity import parse_size
    from ringward.repair import DISK_SIZE_SETTING

    wanted = list(addresses)
    hosts = {str(host.address): host for host in session.cluster.metadata.all_hosts()}
    query = SimpleStatement(f"SELECT value FROM system_views.settings WHERE name = '{DISK_SIZE_SETTING}'")
    asked = {a: session.execute_async(query, host=hosts[a]) for a in wanted if a in hosts}
    sizes: dict[str, int | None] = dict.fromkeys(wanted)
    for address, future in asked.items():
        try:
            rows = list(future.result())
            value = _field(rows[0], "value") if rows else None
            sizes[address] = parse_size(value, DISK_SIZE_SETTING) if value not in (None, "", "null") else None
        except Exception:  # any of the reasons above: the configured capacity is the fallback
            sizes[address] = None
    return sizes


def table_gc_grace(session: CqlSession, keyspace: str) -> dict[str, int]:
    """gc_grace_seconds of every table of `keyspace`, by table name."""
    rows = session.execute(
        "SELECT table_name, gc_grace_seconds FROM system_schema.tables WHERE keyspace_name = %s",
        (keyspace,),
    )
    return {str(_field(row, "table_name")): int(_field(row, "gc_grace_seconds")) for row in rows}


def driver_schema(session: Any) -> dict[str, list[str]]:
    """Keyspace -> its tables (every keyspace of the cluster), from the driver's schema metadata (kept current
    by its control connection): no query."""
    keyspaces = session.cluster.metadata.keyspaces
    return {name: sorted(meta.tables) for name, meta in keyspaces.items()}


def keyspace_names(session: CqlSession) -> list[str]:
    rows = session.execute("SELECT keyspace_name FROM system_schema.keyspaces")
    return sorted(str(_field(row, "keyspace_name")) for row in rows)


def schema_versions(session: Any) -> dict[str, list[str]]:
    """Schema version -> node addresses, as one live node sees them (its own version and its peers')."""
    return _per_node(session, "schema_version", "which schema version each node holds")


def release_versions(session: Any) -> dict[str, list[str]]:
    """Cassandra release -> node addresses, as one live node sees them (`system.local` and `system.peers`)."""
    return _per_node(session, "release_version", "which Cassandra release it runs")


def _per_node(session: Any, column: str, what: str) -> dict[str, list[str]]:
    """Value of `column` -> node addresses, from `system.local` and `system.peers` of one live node.

    Both tables are read from the same node; a node whose connection the driver just dropped is skipped
    (the driver marks a host down when it fails to decode a response, e.g. a schema refresh), and the
    next live one asked.
    """
    last_error: Exception | None = None
    for host in [h for h in session.cluster.metadata.all_hosts() if h.is_up]:
        try:
            local = session.execute(f"SELECT broadcast_address, {column} FROM system.local", host=host)
            peers = session.execute(f"SELECT peer, {column} FROM system.peers", host=host)
        except Exception as error:  # the driver raises several kinds; another node may answer
            last_error = error
            continue
        values: dict[str, list[str]] = {}
        for address, value in [(_field(r, "broadcast_address"), _field(r, column)) for r in local] + [
            (_field(r, "peer"), _field(r, column)) for r in peers
        ]:
            values.setdefault(str(value), []).append(str(address))
        return {value: sorted(addresses) for value, addresses in values.items()}
    raise ClusterError(
        f"No node answered {what}: {last_error or 'no node is up'}.",
        "Check that the nodes accept CQL connections, then retry.",
    )


def describe_schema_versions(versions: Mapping[str, list[str]]) -> str:
    """'version 317bd95f on 127.0.0.6; version 7134970d on 127.0.0.2, 127.0.0.3': fewest nodes first,
    since the odd node out is the one to look at."""
    ordered = sorted(versions.items(), key=lambda item: (len(item[1]), item[0]))
    return "; ".join(f"version {version[:8]} on {', '.join(nodes)}" for version, nodes in ordered)


def _field(row: Any, name: str) -> Any:
    return row[name] if isinstance(row, Mapping) else getattr(row, name)


class LiveCql:
    """What the migration stages ask of a driver session (`ringward_airflow.migration_stages.Cql`)."""

    def __init__(self, session: Any) -> None:
        self.session = session

    def replication(self, keyspace: str) -> Replication:
        return keyspace_replication(self.session, keyspace)

    def alter_replication(self, keyspace: str, replication: Replication) -> str:
        """Run the ALTER; return the statement (for the log)."""
        from ringward_cassandra.cql import quote_identifier

        statement = f"ALTER KEYSPACE {quote_identifier(keyspace)} WITH replication = {replication.to_cql()}"
        self.session.execute(statement)
        return statement

    def schema_agreed(self, wait_seconds: float) -> bool:
        return bool(self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=wait_seconds))

    def schema_versions_text(self) -> str:
        """Which node is on which schema version, for a refusal; the refusal must survive failing to read it."""
        try:
            return describe_schema_versions(schema_versions(self.session))
        except ClusterError as error:  # the refusal it goes into has its own fix
            return f"versions unreadable: {error.problem}"
        except Exception as error:  # the driver raises several kinds; the refusal says why the versions are missing
            return f"versions unreadable: {error}"

    def release_versions(self) -> dict[str, list[str]]:
        return release_versions(self.session)
