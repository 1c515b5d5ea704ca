"""The nightly repair's view of a live cluster: selected keyspaces and tables, their segments, their history.

Shared by the Airflow operators and `ringward repair status`, so both see the same segments (segment ids
are hashes of keyspace, tables and range: the same config on the same ring gives the same ids).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from types import SimpleNamespace
from typing import Any, Protocol

from ringward.placement import replica_map
from ringward.repair import (
    NodeSizeEstimate,
    RecordedSegment,
    RepairConfig,
    RepairHistoryRow,
    RepairStatus,
    Segment,
    SegmentRecord,
    SizeEstimate,
    SizeSplitter,
    SkippedSegment,
    TableFeatures,
    bytes_per_replica_node,
    checked_replica_map,
    coverage_records,
    incremental_unit,
    plan_segments,
    repair_status,
    select_units,
)
from ringward.replication import Replication
from ringward.ring import Ring

from ringward_cassandra.schema import keyspace_names, keyspace_replication, table_gc_grace

__all__ = [
    "ClusterCatalog",
    "ClusterRepairPlan",
    "CqlCatalog",
    "DatacenterSessionPool",
    "node_size_estimates",
    "plan_cluster",
    "records_by_segment",
    "size_estimates",
    "status_records",
    "table_statuses",
]

_LOG = logging.getLogger(__name__)
# How long past the driver's connect timeout a read waits for a live node's pool still opening.
POOL_WAIT_SECONDS = 5.0

SIZE_ESTIMATES_QUERY = (
    "SELECT keyspace_name, table_name, range_start, range_end, mean_partition_size, partitions_count "
    "FROM system.size_estimates WHERE keyspace_name = %s"
)
# The same rows summed per table by the node itself: 20 rows instead of 5,120 from a node with 256 vnodes and 20
# tables (arithmetic in selectors: Cassandra 4.0+; 3.11 gets the rows and they are summed here).
NODE_SIZE_ESTIMATES_QUERY = (
    "SELECT table_name, sum(partitions_count) AS partitions_count, "
    "sum(partitions_count * mean_partition_size) AS data_bytes "
    "FROM system.size_estimates WHERE keyspace_name = %s GROUP BY table_name"
)


@dataclass(frozen=True)
class ClusterRepairPlan:
    """Segments of every selected keyspace; `gc_grace[ks][table]`; keyspaces left out and why."""

    segments: tuple[Segment, ...]
    skipped_ranges: tuple[SkippedSegment, ...]
    gc_grace: Mapping[str, Mapping[str, int]]
    excluded_keyspaces: Mapping[str, str] = field(default_factory=dict)
    excluded_tables: Mapping[str, str] = field(default_factory=dict)  # "ks.table" -> why (incremental guards)

    def tables(self) -> list[tuple[str, str]]:
        """(keyspace, table) pairs the plan repairs, sorted."""
        covered = {(s.keyspace, t) for s in self.segments for t in (s.tables or self.gc_grace.get(s.keyspace, {}))}
        return sorted(covered)


class ClusterCatalog(Protocol):
    """What the nightly repair reads of a cluster besides its ring (the real one: CqlCatalog, through CQL)."""

    def tables(self) -> dict[str, dict[str, int]]: ...  # {keyspace: {table: gc_grace_seconds}}

    def replication(self, keyspace: str) -> Replication: ...

    def size_estimates(self, keyspace: str) -> list[SizeEstimate] | list[NodeSizeEstimate]: ...

    def table_features(self) -> dict[str, TableFeatures]: ...  # {"ks.table": views, CDC} of tables with either


class CqlCatalog:
    """The catalog of a live cluster, read through a driver session. Per-node reads of other datacenters' nodes
    share one side session per datacenter for the catalog's life (`close` ends them; `plan_cluster` does)."""

    def __init__(self, session: Any, open_dc_session: DatacenterSessions | None = None) -> None:
        self.session = session
        self._datacenters = DatacenterSessionPool(open_dc_session)

    def close(self) -> None:
        self._datacenters.close()

    def tables(self) -> dict[str, dict[str, int]]:
        return {ks: table_gc_grace(self.session, ks) for ks in keyspace_names(self.session)}

    def replication(self, keyspace: str) -> Replication:
        return keyspace_replication(self.session, keyspace)

    def size_estimates(self, keyspace: str) -> list[NodeSizeEstimate]:
        """Per node and table: the plan spreads a node's totals over its primary ranges (`SizeIndex`)."""
        return node_size_estimates(self.session, keyspace, self._datacenters)

    def table_features(self) -> dict[str, TableFeatures]:
        """ "ks.table" -> its materialized views and CDC flag, for tables that have either."""
        return table_features(self.session)


def table_features(session: Any) -> dict[str, TableFeatures]:
    """What makes tables unfit for incremental repair (system_schema.views and the tables' `cdc` option)."""
    views: dict[str, list[str]] = {}
    for row in session.execute("SELECT keyspace_name, view_name, base_table_name FROM system_schema.views"):
        views.setdefault(f"{row.keyspace_name}.{row.base_table_name}", []).append(row.view_name)
    cdc = {f"{row.keyspace_name}.{row.table_name}" for row in
           session.execute("SELECT keyspace_name, table_name, cdc FROM system_schema.tables") if row.cdc}  # fmt: skip
    return {name: TableFeatures(tuple(sorted(views.get(name, ()))), name in cdc) for name in sorted(set(views) | cdc)}


def _catalog(source: Any) -> ClusterCatalog:
    return source if hasattr(source, "replication") and hasattr(source, "tables") else CqlCatalog(source)


def plan_cluster(
    source: Any, ring: Ring, config: RepairConfig, leased: Mapping[str, str] | None = None
) -> ClusterRepairPlan:
    """Plan every keyspace and table `config` selects; keyspaces in `leased` (name -> why) are left out.

    `source`: a ClusterCatalog, or a driver session (read through CqlCatalog). Keyspaces with the same
    replication share one replica map (at fleet size each map is a second of CPU)."""
    catalog = _catalog(source)
    try:
        return _plan_cluster(catalog, ring, config, leased)
    finally:
        close = getattr(catalog, "close", None)
        if close is not None:
            close()


def _plan_cluster(
    catalog: ClusterCatalog, ring: Ring, config: RepairConfig, leased: Mapping[str, str] | None
) -> ClusterRepairPlan:
    leased = leased or {}
    schema = catalog.tables()
    by_size = isinstance(config.splitter, SizeSplitter)
    estimates: dict[str, list[SizeEstimate] | list[NodeSizeEstimate]] = {}
    table_bytes: dict[str, int] | None = None
    replications: dict[str, Replication] = {}
    if by_size and config.split_outlier_tables:  # sizes tell an outlier table (it gets a unit of its own)
        selected = {u.keyspace for u in select_units({ks: sorted(t) for ks, t in schema.items()}, config)}
        table_bytes = {}
        for keyspace in sorted(selected - set(leased or {})):
            estimates[keyspace] = catalog.size_estimates(keyspace)
            one_copy: dict[str, int] = {}  # the nodes' estimates cover their primary ranges: one copy together
            for row in estimates[keyspace]:
                one_copy[row.table] = one_copy.get(row.table, 0) + row.data_bytes
            replication = replications[keyspace] = catalog.replication(keyspace)
            for table, size in one_copy.items():
                table_bytes[f"{keyspace}.{table}"] = bytes_per_replica_node(size, ring, replication)
    units = select_units({ks: sorted(tables) for ks, tables in schema.items()}, config, table_bytes)
    excluded_tables: dict[str, str] = {}
    if config.session_type == "incremental":
        units, excluded_tables = _incremental_units(units, schema, catalog)
    segments: list[Segment] = []
    skipped: list[SkippedSegment] = []
    excluded: dict[str, str] = {}
    maps: dict[str, Any] = {}
    for unit in units:
        if unit.keyspace in leased:
            excluded[unit.keyspace] = leased[unit.keyspace]
            continue
        if unit.keyspace not in replications:
            replications[unit.keyspace] = catalog.replication(unit.keyspace)
        replication = replications[unit.keyspace]
        key = replication.to_cql()
        if key not in maps:  # checked against the ring once, for every unit planned on it
            maps[key] = checked_replica_map(ring, replica_map(ring, replication).entries())
        entries = maps[key]
        if by_size and unit.keyspace not in estimates:
            estimates[unit.keyspace] = catalog.size_estimates(unit.keyspace)
        sizes = estimates.get(unit.keyspace, [])
        plan = plan_segments(ring, entries, unit, config, sizes, config.max_segments_per_plan - len(segments))
        segments.extend(plan.segments)
        skipped.extend(plan.skipped)
    planned = {u.keyspace for u in units} - set(excluded)  # a keyspace may have several units (outliers)
    gc_grace = {ks: schema[ks] for ks in planned}
    return ClusterRepairPlan(tuple(segments), tuple(skipped), gc_grace, excluded, excluded_tables)


def _incremental_units(
    units: list[Any], schema: Mapping[str, Mapping[str, int]], catalog: ClusterCatalog
) -> tuple[list[Any], dict[str, str]]:
    """Units without the tables incremental repair must not take (materialized views, CDC), and why."""
    features = catalog.table_features()
    kept: list[Any] = []
    excluded: dict[str, str] = {}
    for unit in units:
        narrowed, reasons = incremental_unit(unit, sorted(schema.get(unit.keyspace, {})), features)
        if narrowed is not None:
            kept.append(narrowed)
        for reason in reasons:
            excluded[reason.split(" ", 1)[0]] = reason
    return kept, excluded


def size_estimates(
    session: Any, keyspace: str, open_dc_session: DatacenterSessions | None = None
) -> list[SizeEstimate]:
    """system.size_estimates rows of `keyspace` from every node that is up, in every datacenter: each node lists
    only its own ranges, so one coordinator would leave the rest of the ring without estimates (a range without
    one is kept as one segment, never skipped)."""
    rows: list[SizeEstimate] = []
    for _node, answer in _from_each_live_node(session, open_dc_session, lambda s, h: s.execute(
            SIZE_ESTIMATES_QUERY, (keyspace,), host=h)):  # fmt: skip
        for row in answer:
            rows.append(
                SizeEstimate(row.keyspace_name, row.table_name, row.range_start, row.range_end,
                             row.mean_partition_size, row.partitions_count)
            )  # fmt: skip
    return rows


def node_size_estimates(
    session: Any, keyspace: str, open_dc_session: DatacenterSessions | None = None
) -> list[NodeSizeEstimate]:
    """Each live node's system.size_estimates rows of `keyspace` summed per table by the node (one query per node,
    one row per table), named by the node's broadcast address as the ring names it. Nodes of every datacenter
    are read, also those the session's load balancing ignores (see `_from_each_live_node`)."""
    from cassandra import InvalidRequest
    from cassandra.protocol import RequestValidationException

    def read(on: Any, host: Any) -> list[Any]:
        try:
            return list(on.execute(NODE_SIZE_ESTIMATES_QUERY, (keyspace,), host=host))
        except (InvalidRequest, RequestValidationException):  # 3.11: no arithmetic in selectors (a syntax error)
            return _summed(on.execute(SIZE_ESTIMATES_QUERY, (keyspace,), host=host))

    rows: list[NodeSizeEstimate] = []
    for node, answer in _from_each_live_node(session, open_dc_session, read):
        for row in answer:
            rows.append(
                NodeSizeEstimate(keyspace, row.table_name, node, int(row.partitions_count or 0),
                                 int(row.data_bytes or 0))
            )  # fmt: skip
    return rows


class DatacenterSessions(Protocol):
    """Opens a session whose local datacenter is `datacenter`, with `base`'s credentials, TLS and port, on
    `contact_points` (that datacenter's nodes); the caller shuts its cluster down."""

    def __call__(self, base: Any, datacenter: str, contact_points: list[str]) -> Any: ...


class DatacenterSessionPool:
    """One side session per datacenter, opened on first use and kept until `close`: a plan reads many keyspaces
    and must not connect to a remote datacenter once per keyspace. A datacenter that could not be opened is not
    tried again until `close` (its error is raised again: a connect timeout is paid once per plan, not per
    keyspace)."""

    def __init__(self, opener: DatacenterSessions | None = None) -> None:
        self._open = opener or open_datacenter_session
        self._sessions: dict[str, Any] = {}
        self._failed: dict[str, Exception] = {}

    def __call__(self, base: Any, datacenter: str, contact_points: list[str]) -> Any:
        if datacenter in self._failed:
            raise self._failed[datacenter]
        if datacenter not in self._sessions:
            try:
                self._sessions[datacenter] = self._open(base, datacenter, contact_points)
            except Exception as error:
                self._failed[datacenter] = error
                raise
        return self._sessions[datacenter]

    def close(self) -> None:
        sessions, self._sessions, self._failed = self._sessions, {}, {}
        for side in sessions.values():
            side.cluster.shutdown()


def open_datacenter_session(base: Any, datacenter: str, contact_points: list[str]) -> Any:
    """A short-lived session local to `datacenter`: the same port, credentials, TLS and protocol as `base` (the
    plan's own cluster), no schema or token metadata (only per-node reads run on it)."""
    from cassandra.cluster import EXEC_PROFILE_DEFAULT, Cluster, ExecutionProfile
    from cassandra.policies import DCAwareRoundRobinPolicy

    timeout = base.profile_manager.default.request_timeout
    profile = ExecutionProfile(load_balancing_policy=DCAwareRoundRobinPolicy(local_dc=datacenter),
                               request_timeout=timeout)  # fmt: skip
    side = Cluster(
        contact_points=contact_points,
        port=base.port,
        auth_provider=base.auth_provider,
        ssl_context=base.ssl_context,
        ssl_options=base.ssl_options,
        protocol_version=base.protocol_version,
        connect_timeout=base.connect_timeout,
        control_connection_timeout=base.control_connection_timeout,
        execution_profiles={EXEC_PROFILE_DEFAULT: profile},
        schema_metadata_enabled=False,
        token_metadata_enabled=False,
    )
    return side.connect()


def _ignored_by(session: Any, host: Any) -> bool:
    """Whether the session's load balancing keeps no connection to `host` (a node of a remote datacenter, with
    the driver's DC-aware policy): a request sent to it with `host=` fails with NoHostAvailable."""
    from cassandra.policies import HostDistance

    manager = getattr(session.cluster, "profile_manager", None)
    return manager is not None and manager.distance(host) == HostDistance.IGNORED


def _from_each_live_node(
    session: Any, open_dc_session: DatacenterSessions | None, read: Callable[[Any, Any], Iterable[Any]]
) -> Iterator[tuple[str, Iterable[Any]]]:
    """`read(session, host)` on every live node, named by its broadcast address. Nodes the session's load
    balancing ignores (other datacenters than its local one; the driver knows no up/down state of them) are read
    through a short-lived session local to their datacenter, one per datacenter. A node that cannot be read is
    logged by name, with the reason: its ranges get no estimate (one segment each), which is safe but not sized."""
    from cassandra.cluster import NoHostAvailable

    # The driver tracks no reliable state of a node it keeps no connection to: `is_up` is None, or False after a
    # gossip DOWN event it never follows with UP (seen on a loaded two-DC cluster). Such nodes are asked through
    # their datacenter's side session, whose own view decides.
    hosts = [h for h in session.cluster.metadata.all_hosts() if h.is_up or _ignored_by(session, h)]
    remote: dict[str, list[Any]] = {}
    missed: list[str] = []

    def name(host: Any) -> str:
        return str(getattr(host, "broadcast_address", None) or host.address)

    for host in hosts:
        if _ignored_by(session, host):
            remote.setdefault(str(host.datacenter), []).append(host)
            continue
        try:
            answer = _read_when_pooled(session, host, read)
        except NoHostAvailable:  # no pool within the wait, or node just went down: its ranges get no estimate
            missed.append(f"{name(host)} (no connection)")
            continue
        yield name(host), answer
    # A pool passed in is the caller's (kept open for its next reads); any other opener gets a pool for this call.
    pool = open_dc_session if isinstance(open_dc_session, DatacenterSessionPool) else None
    sides = pool or DatacenterSessionPool(open_dc_session)
    try:
        for datacenter, dc_hosts in sorted(remote.items()):
            try:
                side = sides(session.cluster, datacenter, [str(h.address) for h in dc_hosts])
            except Exception as error:  # the driver's NoHostAvailable, an auth or TLS error: reported, skipped
                missed.extend(f"{name(h)} (datacenter {datacenter} unreachable: {error})" for h in dc_hosts)
                continue
            for host in dc_hosts:
                target = side.cluster.metadata.get_host(host.address) or host
                try:
                    answer = _read_when_pooled(side, target, read)
                except NoHostAvailable:
                    missed.append(f"{name(host)} (no connection from datacenter {datacenter}'s session)")
                    continue
                yield name(host), answer
    finally:
        if pool is None:
            sides.close()
    if missed:
        _LOG.warning(
            "system.size_estimates not read from %d node(s), whose ranges are planned without a size "
            "estimate (one segment each): %s. Fix: make sure the Airflow workers can reach every node's native "
            "port, in every datacenter.", len(missed), "; ".join(missed),
        )  # fmt: skip


def _read_when_pooled(on: Any, host: Any, read: Callable[[Any, Any], Iterable[Any]]) -> Iterable[Any]:
    """`read(on, host)`; a node whose connection pool is still opening is waited for, then read again. A new
    session waits for its first pool only and opens the others in the background, so a read right after connect
    could find no pool to a live node (its estimates silently missing: seen on a loaded two-DC cluster, CI
    2026-11-28). The wait ends early when the session marks the node down (its pool failed: no use waiting)."""
    from cassandra.cluster import NoHostAvailable

    try:
        return read(on, host)
    except NoHostAvailable:
        pools = getattr(on, "get_pool_state", None)
        if pools is None:
            raise
        deadline = time.monotonic() + float(getattr(on.cluster, "connect_timeout", 5) or 5) + POOL_WAIT_SECONDS
        while host not in pools():
            if host.is_up is False or time.monotonic() >= deadline:
                raise
            time.sleep(0.1)
    return read(on, host)


def _summed(range_rows: Iterable[Any]) -> list[Any]:
    """Range rows of one node summed per table, in the shape of NODE_SIZE_ESTIMATES_QUERY's rows."""
    sums: dict[str, list[int]] = {}
    for row in range_rows:
        found = sums.setdefault(row.table_name, [0, 0])
        found[0] += row.partitions_count or 0
        found[1] += (row.partitions_count or 0) * (row.mean_partition_size or 0)
    return [SimpleNamespace(table_name=t, partitions_count=p, data_bytes=b) for t, (p, b) in sums.items()]


def records_by_segment(rows: Iterable[RepairHistoryRow]) -> dict[str, SegmentRecord]:
    return {row.record.segment_id: row.record for row in rows}


def status_records(plan: ClusterRepairPlan, rows: Iterable[RepairHistoryRow]) -> dict[str, SegmentRecord]:
    """The planned segments' records for coverage: repairs recorded under any splitter count (coverage_records)."""
    history = [RecordedSegment(row.keyspace, row.tables, row.range, row.record) for row in rows]
    return coverage_records(plan.segments, history)


def table_statuses(
    plan: ClusterRepairPlan, records: Mapping[str, SegmentRecord], now: datetime, alarm_share: float
) -> list[RepairStatus]:
    """Repair coverage of every planned table.

    Tables repaired by the same units with the same gc_grace have the same coverage: it is computed once per
    such group, over that keyspace's segments only (at fleet size, 200 tables x 2.5 M segments otherwise)."""
    units: dict[str, dict[tuple[str, ...], list[Segment]]] = {}
    for segment in plan.segments:
        units.setdefault(segment.keyspace, {}).setdefault(segment.tables, []).append(segment)
    computed: dict[tuple[str, tuple[tuple[str, ...], ...], int], RepairStatus] = {}
    statuses = []
    for keyspace, table in plan.tables():
        covering = tuple(sorted(t for t in units.get(keyspace, {}) if not t or table in t))
        gc_grace = plan.gc_grace[keyspace][table]
        key = (keyspace, covering, gc_grace)
        if key not in computed:
            segments = [s for tables in covering for s in units[keyspace][tables]]
            computed[key] = repair_status(keyspace, table, segments, records, gc_grace, now, alarm_share)
        statuses.append(replace(computed[key], table=table))
    return statuses
