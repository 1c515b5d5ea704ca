"""Where the pages read from: the cluster (ring, system tables, ringward_ops) and Airflow (a DAG run, its task
instances and XComs, read through Airflow's REST API as the viewer: `airflow_reads.py`, which also names the
Airflow internals the plugin still uses and why).

A `Source` is opened per request. The driver session behind it is kept between requests (one per connection,
rebuilt when the connection changes) with short timeouts, so a page loads fast or says at once that the
cluster cannot be reached. Tests give the app another `Source` (an in-memory one) through `app.state`.
"""

from __future__ import annotations

import copy
import threading
from dataclasses import dataclass, field
from typing import Any, Protocol

from ringward.errors import ClusterError, ConfigurationError, RingwardError
from ringward.ring import Ring
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.schema import driver_schema

from ringward_airflow.ui.airflow_reads import ApiRunReader, RunInfo, TaskTiming, airflow_connection

__all__ = [
    "CONNECTION_ID",
    "CassandraSource",
    "ClusterUnreachable",
    "ConnectionInfo",
    "ConnectionSettingError",
    "NodeInfo",
    "RunInfo",
    "Source",
    "TaskTiming",
    "check_connection",
    "drop_sessions",
    "unreachable",
]

CONNECTION_ID = "cassandra_default"
CONNECT_TIMEOUT = 2.0  # seconds: a closed port or a dead host must not hold a page
REQUEST_TIMEOUT = 4.0


class ClusterUnreachable(RingwardError):
    """The cluster behind the connection did not answer in time."""


class ConnectionSettingError(ConfigurationError):
    """A setting of the connection that the driver cannot take (e.g. `protocol_version` not a number)."""


@dataclass(frozen=True)
class ConnectionInfo:
    """What the pages show of the connection: never its password nor any secret extra."""

    conn_id: str
    conn_type: str
    hosts: tuple[str, ...]
    port: int
    login_set: bool
    ssl: bool
    local_dc: str | None
    protocol_version: int | None

    @property
    def target(self) -> str:
        return ", ".join(f"{h}:{self.port}" for h in self.hosts)


@dataclass(frozen=True)
class NodeInfo:
    address: str
    datacenter: str
    rack: str
    status: str  # "up", "down" or "unknown" (the driver's view)
    load_mib: float | None  # sum of system_views.disk_usage on that node; None when it could not be read
    tokens: int
    schema_version: str
    release_version: str
    host_id: str


class Source(Protocol):
    """Everything the pages read or write, in the shapes ringward's own code uses."""

    def connection(self) -> ConnectionInfo: ...
    def ring(self) -> Ring: ...
    def nodes(self) -> list[NodeInfo]: ...
    def schema(self) -> dict[str, list[str]]: ...  # keyspace -> its tables (every keyspace of the cluster)
    def ops(self) -> OpsStore | None: ...  # None: ringward_ops was never created on this cluster
    def repair_plan(self, config: Any) -> Any: ...  # ClusterRepairPlan of the tables the config selects
    def dag_run(self, dag_id: str, run_id: str | None) -> RunInfo | None: ...  # None run_id: the latest run
    def close(self) -> None: ...


# -- the connection ------------------------------------------------------------------------------------------


_NUMBERS = {"protocol_version": (int, "a protocol version such as 5"),
            "request_timeout": (float, "a number of seconds"),
            "schema_agreement_wait": (float, "a number of seconds")}  # fmt: skip


def check_connection(conn: Any) -> None:
    """Refuse, naming it, a connection extra the driver's settings convert to a number and cannot."""
    extra = conn.extra_dejson
    for name, (kind, wanted) in _NUMBERS.items():
        value = extra.get(name)
        if value is None:
            continue
        try:
            kind(value)
        except (TypeError, ValueError):
            raise ConnectionSettingError(
                f"The connection {conn.conn_id!r} has extra {name}={value!r}, which is not {wanted}.",
                f"Edit the connection under Admin → Connections: set {name} in its extra to {wanted}, or remove it "
                "to use the default.",
            ) from None


def connection_info(conn: Any) -> ConnectionInfo:
    check_connection(conn)
    extra = conn.extra_dejson
    local_dc = extra.get("local_dc") or (extra.get("load_balancing_policy_args") or {}).get("local_dc")
    return ConnectionInfo(
        conn_id=conn.conn_id,
        conn_type=conn.conn_type or "",
        hosts=tuple(h.strip() for h in (conn.host or "127.0.0.1").split(",") if h.strip()),
        port=int(conn.port or 9042),
        login_set=bool(conn.login),
        ssl=bool(extra.get("ssl_options")),
        local_dc=local_dc,
        protocol_version=int(extra["protocol_version"]) if "protocol_version" in extra else None,
    )


# -- the cluster -------------------------------------------------------------------------------------------


@dataclass
class _Connecting:
    """One connect attempt under way: requests for the same connection wait for it rather than start another."""

    done: threading.Event = field(default_factory=threading.Event)
    session: Any = None
    error: BaseException | None = None


_SESSIONS: dict[str, tuple[Any, Any]] = {}  # connection URI -> (Cluster, Session)
_CONNECTING: dict[str, _Connecting] = {}  # connection URI -> the attempt under way
_SESSIONS_LOCK = threading.Lock()  # guards the two dicts only: never held across a connect
CONNECT_WAIT = 3 * CONNECT_TIMEOUT  # the driver's connect is bounded by its timeouts; a waiter by this too


def _session_for(conn: Any) -> Any:
    """The kept session of `conn`, connecting once when there is none: concurrent requests for the same
    connection share that one attempt (and its failure), requests for other connections do not wait for it."""
    options = _cluster_options(conn)
    key = conn.get_uri()
    with _SESSIONS_LOCK:
        if key in _SESSIONS:
            return _SESSIONS[key][1]
        attempt = _CONNECTING.get(key)
        mine = attempt is None
        if attempt is None:
            attempt = _CONNECTING[key] = _Connecting()
    if not mine:
        if not attempt.done.wait(CONNECT_WAIT):
            raise ClusterUnreachable(
                f"The Cassandra cluster of connection {conn.conn_id!r} ({conn.host}:{conn.port or 9042}) did not "
                f"accept a connection within {CONNECT_WAIT:.0f} s.",
                "Check that the nodes are up and answer on their CQL port.",
            )
        if attempt.error is not None:  # each waiter raises its own copy: one exception object, many threads
            raise copy.copy(attempt.error) from attempt.error
        return attempt.session
    try:
        cluster, attempt.session = _connect(conn, options)
        with _SESSIONS_LOCK:
            _SESSIONS[key] = (cluster, attempt.session)
        return attempt.session
    except BaseException as error:
        attempt.error = error
        raise
    finally:
        with _SESSIONS_LOCK:
            _CONNECTING.pop(key, None)
        attempt.done.set()


def _cluster_options(conn: Any) -> dict[str, Any]:
    """The driver's `Cluster` arguments with the pages' short timeouts; a malformed setting is named."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT

    from ringward_airflow.hooks import cluster_options

    options = cluster_options(conn)
    options["execution_profiles"][EXEC_PROFILE_DEFAULT].request_timeout = REQUEST_TIMEOUT
    options.update(connect_timeout=CONNECT_TIMEOUT, control_connection_timeout=CONNECT_TIMEOUT,
                   max_schema_agreement_wait=CONNECT_TIMEOUT)  # fmt: skip
    return options


def _connect(conn: Any, options: dict[str, Any]) -> tuple[Any, Any]:
    from ringward_cassandra.cql import RingwardCluster

    cluster = RingwardCluster(**options)
    try:
        return cluster, cluster.connect()
    except Exception as error:  # NoHostAvailable, socket errors, timeouts
        cluster.shutdown()
        raise ClusterUnreachable(
            f"Cannot reach the Cassandra cluster of connection {conn.conn_id!r} "
            f"({conn.host}:{conn.port or 9042}): {error}",
            "Check that the nodes are up and that the connection names them (Admin → Connections).",
        ) from error


def drop_sessions() -> None:
    """Close every kept driver session (after an error, and at shutdown); a connect under way is left to finish."""
    with _SESSIONS_LOCK:
        kept = list(_SESSIONS.values())
        _SESSIONS.clear()
    for cluster, _ in kept:  # outside the lock: a shutdown waits for the driver's threads
        cluster.shutdown()


class CassandraSource:
    """The real source: the `cassandra_default` connection's cluster, and Airflow's runs as `runs` reads them (the
    viewer's, through Airflow's REST API)."""

    def __init__(self, runs: ApiRunReader, conn_id: str = CONNECTION_ID) -> None:
        self.conn_id = conn_id
        self.runs = runs
        self._conn = airflow_connection(conn_id)
        check_connection(self._conn)  # every page needs it: say what is wrong before any of them starts

    def connection(self) -> ConnectionInfo:
        return connection_info(self._conn)

    @property
    def session(self) -> Any:
        return _session_for(self._conn)

    def ring(self) -> Ring:
        from ringward_cassandra.ring_reader import ring_from_cluster

        return ring_from_cluster(self.session)

    def nodes(self) -> list[NodeInfo]:
        from cassandra.query import SimpleStatement

        session = self.session
        hosts = {str(h.host_id): h for h in session.cluster.metadata.all_hosts()}
        local = session.execute(
            "SELECT host_id, broadcast_address, data_center, rack, tokens, schema_version, release_version "
            "FROM system.local WHERE key = 'local'"
        ).one()
        # Every node's row from the node that answered system.local: system.peers_v2 must come from the same one.
        coordinator = hosts.get(str(local.host_id))
        peers = _peer_rows(session, coordinator)
        rows = [(local.broadcast_address, local), *((p.peer, p) for p in peers)]
        usage = SimpleStatement("SELECT mebibytes FROM system_views.disk_usage")
        loads = {str(row.host_id): session.execute_async(usage, host=hosts.get(str(row.host_id))) for _, row in rows}
        nodes = []
        for address, row in rows:
            host = hosts.get(str(row.host_id))
            try:
                load: float | None = float(sum(r.mebibytes or 0 for r in loads[str(row.host_id)].result()))
            except Exception:  # a down node, or a release without the virtual table
                load = None
            nodes.append(
                NodeInfo(
                    address=str(address), datacenter=row.data_center or "", rack=row.rack or "",
                    status="unknown" if host is None else ("up" if host.is_up else "down"),
                    load_mib=load, tokens=len(row.tokens or ()), schema_version=str(row.schema_version or ""),
                    release_version=row.release_version or "", host_id=str(row.host_id),
                )
            )  # fmt: skip
        return sorted(nodes, key=lambda n: (n.datacenter, n.rack, n.address))

    def schema(self) -> dict[str, list[str]]:
        """From the driver's schema metadata (kept current by its control connection): no query."""
        return driver_schema(self.session)

    def ops(self) -> OpsStore | None:
        store = OpsStore(self.session)
        return store if store.exists() else None  # the keyspace alone may be an administrator's, still empty

    def repair_plan(self, config: Any) -> Any:
        from ringward_cassandra.cluster_repairs import plan_cluster

        return plan_cluster(self.session, self.ring(), config)

    def dag_run(self, dag_id: str, run_id: str | None) -> RunInfo | None:
        return self.runs.dag_run(dag_id, run_id)

    def close(self) -> None:
        """Sessions are kept between requests; nothing to close per request."""


def unreachable(error: BaseException) -> bool:
    """Whether an error means the cluster did not answer (rather than a bug): such errors drop the session."""
    from cassandra import OperationTimedOut, Timeout, Unavailable
    from cassandra.cluster import NoHostAvailable

    return isinstance(error, ClusterUnreachable | NoHostAvailable | OperationTimedOut | Timeout | Unavailable) or (
        isinstance(error, ClusterError) and "connect" in str(error).lower()
    )


def _peer_rows(session: Any, coordinator: Any) -> list[Any]:
    """The coordinator's peer rows: system.peers_v2 (Cassandra 4.0 and later), else system.peers (3.11)."""
    from cassandra import InvalidRequest

    columns = "host_id, {peer}, data_center, rack, tokens, schema_version, release_version"
    try:
        return list(session.execute(f"SELECT {columns.format(peer='peer')} FROM system.peers_v2", host=coordinator))
    except InvalidRequest:  # no system.peers_v2 before Cassandra 4.0
        return list(session.execute(f"SELECT {columns.format(peer='peer')} FROM system.peers", host=coordinator))
