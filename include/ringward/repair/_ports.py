"""What the night needs from the world, as narrow Protocols (the plugins' adapters implement them; tests hand
in-memory ones): the nightly subset of ringward_ops, the cluster view (ring, planning on the catalog, clock)
and the night's log and gauges. Rows the store hands back are typed by the fields the night reads.

Below the night's ports, the ops stores' own storage Protocols, one per record kind of ringward_ops (as Reaper
has one storage interface per record kind): repair history, run plans, run progress, repair runs, preview
findings and the pause switch. `ringward_cassandra.ops` implements each on Cassandra and `MemoryOpsStore` all of
them in memory; the contract suite (tests/ops_store_contract.py) runs on both. The migration's kinds (leases,
migrations and their journal, controller pauses) are in `ringward.migration_storage`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ringward.repair._backpressure import NodeBacklog
from ringward.repair._config import RepairConfig
from ringward.repair._executor import RecordUpdate, SessionPool
from ringward.repair._ops_rows import PreviewFinding, RepairHistoryRow, RepairRunRow, SwitchEvent
from ringward.repair._segments import RepairCommand, Segment
from ringward.repair._state import SegmentRecord
from ringward.repair._status import RepairStatus
from ringward.ring import Ring, TokenRange

__all__ = [
    "ClusterPlan",
    "ClusterView",
    "FindingRow",
    "Gauge",
    "HistoryRow",
    "KeyspaceLeases",
    "LeaseRow",
    "NightLog",
    "NightRuntime",
    "NodeStatus",
    "Nodetool",
    "PlanChunks",
    "PlanStore",
    "PreviewFindings",
    "PreviewKeeper",
    "PreviewStorage",
    "RepairHistoryStorage",
    "RepairRun",
    "RepairRunStorage",
    "RepairRuns",
    "RepairSwitch",
    "ReportStore",
    "RunPlanStorage",
    "RunProgress",
    "RunProgressStorage",
    "RunRow",
    "RunStore",
    "SegmentHistory",
    "SwitchPress",
    "SwitchStorage",
]


# -- rows ---------------------------------------------------------------------------------------------------
class HistoryRow(Protocol):
    """One segment's recorded repair (`tables == ()`: every table of the keyspace)."""

    @property
    def keyspace(self) -> str: ...
    @property
    def tables(self) -> tuple[str, ...]: ...
    @property
    def range(self) -> TokenRange: ...
    @property
    def record(self) -> SegmentRecord: ...


class RunRow(Protocol):
    """A recorded night: its report (`NightReport.to_json`)."""

    @property
    def summary(self) -> Mapping[str, object]: ...


class LeaseRow(Protocol):
    """Who holds a keyspace's migration lease, and why."""

    @property
    def owner(self) -> str: ...
    @property
    def purpose(self) -> str: ...


class SwitchPress(Protocol):
    """One press of the UI's pause switch."""

    @property
    def paused(self) -> bool: ...
    @property
    def changed_at(self) -> datetime | None: ...
    @property
    def changed_by(self) -> str: ...
    @property
    def reason(self) -> str: ...


class FindingRow(Protocol):
    """A kept preview finding: the run that found it."""

    @property
    def run_id(self) -> str | None: ...


# -- ringward_ops ---------------------------------------------------------------------------------------------
class SegmentHistory(Protocol):
    """The repair history: read by segment (only the partitions their ranges fall in), or whole for coverage."""

    def segment_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, SegmentRecord]: ...

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> Sequence[HistoryRow]: ...

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None: ...


class PlanChunks(Protocol):
    """A night's stored plan: chunks of encoded segments under a plan id, dropped when the run is over."""

    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int: ...

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]: ...

    def drop_run_plan(self, run_id: str, chunks: int) -> None: ...


class RepairRuns(Protocol):
    """One row per night: its state and report."""

    def record_repair_run(
        self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]
    ) -> None: ...

    def latest_repair_run(self) -> RunRow | None: ...


class PreviewFindings(Protocol):
    def preview_findings(self, keyspace: str | None = None) -> Sequence[FindingRow]: ...


class KeyspaceLeases(Protocol):
    def leased_keyspaces(self) -> Mapping[str, LeaseRow]: ...


class RunProgress(Protocol):
    """A run's live progress (the Repair page reads it)."""

    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None: ...


class RepairSwitch(Protocol):
    """The pause switch: its latest presses, newest first."""

    def switch_events(self, limit: int = 20) -> Sequence[SwitchPress]: ...


class PreviewKeeper(Protocol):
    """Keeps what a preview session of `command` found: `out_of_sync_ranges` of its ranges differ among the
    replicas of `keyspace.table`."""

    def keep_preview(
        self, command: RepairCommand, keyspace: str, table: str, out_of_sync_ranges: int, found_at: datetime,
        run_id: str, ttl_seconds: int | None = None,
    ) -> None: ...  # fmt: skip


class PlanStore(SegmentHistory, PlanChunks, RepairRuns, KeyspaceLeases, Protocol):
    """What `plan_night` reads and writes."""


class ReportStore(SegmentHistory, RepairRuns, PreviewFindings, Protocol):
    """What `report_night` reads and writes."""


class RunStore(SegmentHistory, PlanChunks, RunProgress, RepairSwitch, KeyspaceLeases, PreviewKeeper, Protocol):
    """What `run_night` reads and writes."""


# -- the ops stores' storage, one Protocol per record kind ------------------------------------------------------
class RepairHistoryStorage(Protocol):
    """repair_segments (full) and repair_type_segments (the other types): one row per segment, partitioned by
    (keyspace, tables, bucket), each write with a TTL (`ttl_seconds`, default: the store's history TTL)."""

    def record_repair(
        self, keyspace: str, tables: tuple[str, ...], token_range: TokenRange, record: SegmentRecord, *,
        started_at: datetime | None = None, finished_at: datetime | None = None, replicas: tuple[str, ...] = (),
        ttl_seconds: int | None = None,
    ) -> None: ...  # fmt: skip

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None: ...

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]: ...

    def history_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], repair_type: str = "full"
    ) -> list[RepairHistoryRow]: ...

    def records_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], ids: Mapping[tuple[int, int], str],
        repair_type: str = "full",
    ) -> dict[str, SegmentRecord]: ...  # fmt: skip


class RunPlanStorage(Protocol):
    """repair_plan: a run's repair commands (opaque one-line strings) in chunks; RepairError for a chunk too long
    or a command not one line of text, before it is written."""

    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int: ...

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]: ...

    def drop_run_plan(self, run_id: str, chunks: int) -> None: ...


class RunProgressStorage(Protocol):
    """repair_progress: a running run's live progress, one JSON value per top-level key."""

    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None: ...

    def run_progress(self, run_id: str) -> dict[str, Any] | None: ...

    def progress_runs(self) -> dict[str, datetime | None]: ...


class RepairRunStorage(Protocol):
    """repair_runs: one row per run, its state, report and config; read latest first."""

    def record_repair_run(
        self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]
    ) -> None: ...

    def repair_runs(self) -> list[RepairRunRow]: ...

    def latest_repair_run(self) -> RepairRunRow | None: ...


class PreviewStorage(Protocol):
    """repair_previews: what preview repairs found, per keyspace, latest first, expiring with a TTL."""

    def record_preview(self, finding: PreviewFinding, ttl_seconds: int | None = None) -> None: ...

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]: ...


class SwitchStorage(Protocol):
    """repair_switch: every press of a pause switch (default: the nightly repair's), newest first."""

    def switch_events(self, name: str = ..., limit: int = 20) -> list[SwitchEvent]: ...

    def repair_paused(self, name: str = ...) -> bool: ...

    def set_switch(self, paused: bool, changed_by: str, reason: str = "", name: str = ...) -> SwitchEvent: ...


# -- the cluster ---------------------------------------------------------------------------------------------
class ClusterPlan(Protocol):
    """The segments of every keyspace and table a config selects, and what was left out and why."""

    @property
    def segments(self) -> tuple[Segment, ...]: ...
    @property
    def skipped_ranges(self) -> Sequence[object]: ...
    @property
    def gc_grace(self) -> Mapping[str, Mapping[str, int]]: ...
    @property
    def excluded_keyspaces(self) -> Mapping[str, str]: ...
    @property
    def excluded_tables(self) -> Mapping[str, str]: ...


class ClusterView(Protocol):
    """The cluster as the night sees it: its ring, its time, its catalog planned into segments, and the coverage
    of a plan's tables (`now`: the cluster's time)."""

    def ring(self) -> Ring: ...

    def now(self) -> datetime: ...

    def plan(self, ring: Ring, config: RepairConfig, excluded: Mapping[str, str]) -> ClusterPlan: ...

    def table_statuses(
        self, plan: ClusterPlan, records: Mapping[str, SegmentRecord], now: datetime, alarm_share: float
    ) -> list[RepairStatus]: ...

    def disk_max_sizes(self, addresses: Sequence[str]) -> Mapping[str, int | None]:
        """Each node's own `data_disk_usage_max_disk_size` in bytes (None: unset or unreadable)."""
        ...


# -- nodetool ------------------------------------------------------------------------------------------------
class NodeStatus(Protocol):
    """`nodetool status` on one node: every node's state as it sees it ("UN": up, normal); ClusterError when the
    node cannot answer."""

    def status(self, address: str) -> Mapping[str, str]: ...


class RepairRun(Protocol):
    """What one `nodetool repair` reported: a preview's `out_of_sync` ranges per "keyspace.table"."""

    @property
    def succeeded(self) -> bool: ...
    @property
    def seconds(self) -> float: ...
    @property
    def output(self) -> str: ...
    @property
    def out_of_sync(self) -> Mapping[str, int]: ...


class Nodetool(NodeStatus, Protocol):
    """The nodetool actions of a night: repair, abort, backlog and repaired share of a node; ClusterError when a
    node cannot answer; `terminate_all` stops every nodetool process of the task."""

    def backlog(self, address: str, keyspaces: Sequence[str] = ()) -> NodeBacklog: ...

    def repair(
        self, address: str, keyspace: str, ranges: Sequence[TokenRange], *, tables: Sequence[str] = (),
        hosts: Sequence[str] = (), timeout: float = 3600.0, flags: Sequence[str] | None = None,
    ) -> RepairRun: ...  # fmt: skip

    def abort_repairs(self, address: str) -> None: ...

    def terminate_all(self) -> None: ...

    def percent_repaired(self, address: str, keyspaces: Sequence[str]) -> Mapping[str, float]: ...


# -- the runtime ---------------------------------------------------------------------------------------------
class NightRuntime(Protocol):
    """The night's time and sessions: the wall clock and nodetool in threads in production, virtual time on the
    fleet simulator. `sessions(keep_finding)`: the runtime's own pool (None: the executor's threads), handing what a
    preview found to `keep_finding`; `run_seconds`: the run's duration on this clock (None: the wall time);
    `reads_node_state`: whether nodes' own settings and tablestats can be read."""

    @property
    def reads_node_state(self) -> bool: ...

    def now(self) -> datetime: ...

    def sleep(self, seconds: float) -> None: ...

    def monotonic(self) -> float: ...

    def sessions(self, keep_finding: Callable[[RepairCommand, Mapping[str, int]], None]) -> SessionPool | None: ...

    def run_seconds(self, started: datetime) -> float | None: ...


# -- log and gauges ------------------------------------------------------------------------------------------
class NightLog(Protocol):
    """The task's logger (printf-style arguments, as `logging.Logger` and Airflow's task logger take them)."""

    def info(self, msg: str, /, *args: Any) -> None: ...

    def warning(self, msg: str, /, *args: Any) -> None: ...


class Gauge(Protocol):
    """Sets one gauge (`name` without the `ringward.repair.` prefix)."""

    def __call__(self, name: str, value: float) -> None: ...
