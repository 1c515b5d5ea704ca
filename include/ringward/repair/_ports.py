"""What the night needs from the world, as Protocols (the stores and the plugins' adapters implement them; tests
hand in-memory ones): ringward_ops, the cluster view (ring, planning on the catalog, clock), nodetool, the
runtime and the night's log and gauges.

ringward_ops is one storage Protocol per record kind (as Reaper has one storage interface per record kind):
repair history, run plans, run progress, repair runs, preview findings and the pause switch here, the
migration's kinds (leases, migrations and their journal, controller pauses) in `ringward.migration_storage`.
Where a night's stage sees less of a kind than its storage holds, the narrower Protocol is declared once and the
kind's storage extends it; the night's stores (`PlanStore`, `ReportStore`, `RunStore`) are compositions of
them, so `OpsStore` (on Cassandra, `ringward_cassandra.ops`) and `MemoryOpsStore` are the night's stores as they
are, with no adapter between. Rows are the records' own dataclasses (`_ops_rows`, `ringward.migration_storage`).
The contract suite (tests/ops_store_contract.py) runs on both stores.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol, TypeVar

from ringward.migration_storage import LeaseReader
from ringward.repair._backpressure import NodeBacklog
from ringward.repair._config import RepairConfig
from ringward.repair._executor import RecordUpdate, SessionPool
from ringward.repair._ops_rows import PreviewFinding, RepairHistoryRow, RepairRunRow, SwitchEvent
from ringward.repair._segments import RepairCommand, Segment
from ringward.repair._state import DueRecord, SegmentRecord
from ringward.repair._status import RepairStatus
from ringward.ring import Ring, TokenRange

__all__ = [
    "ClusterPlan",
    "ClusterView",
    "Gauge",
    "NightLog",
    "NightRuntime",
    "NodeStatus",
    "Nodetool",
    "PlanStore",
    "PreviewFindings",
    "PreviewKeeper",
    "PreviewStorage",
    "RecordKey",
    "RepairHistoryStorage",
    "RepairRun",
    "RepairRunStorage",
    "RepairRuns",
    "RepairSwitch",
    "ReportStore",
    "RunPlanStorage",
    "RunProgress",
    "RunProgressStorage",
    "RunStore",
    "SegmentHistory",
    "SwitchStorage",
]


# The key `due_records_of` files each record under: whatever its `ids` map the ranges to (segment ids, positions).
RecordKey = TypeVar("RecordKey", bound=Hashable)


# -- ringward_ops: one storage Protocol per record kind --------------------------------------------------------
# A stage that must see less than a record kind's whole storage gets a narrower Protocol that the kind's own one
# extends (declared once: the store classes satisfy both); the night's stores are compositions of them.
class SegmentHistory(Protocol):
    """The repair history as the night reads and writes it: by segment (only the partitions their ranges fall
    in: never a scan of the whole table, at fleet size millions of rows), or whole for coverage."""

    def segment_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, SegmentRecord]: ...

    def due_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, DueRecord]:
        """What due selection reads of `segments`' records of one type, keyed by segment id (a segment never
        repaired has none): the same partitions as `segment_records`, only the cells it needs, no record built."""
        ...

    def due_records_in_order(self, segments: Sequence[Segment], repair_type: str) -> list[DueRecord | None]:
        """`due_records` by position: the i-th is `segments[i]`'s (None: never repaired). The same partitions and
        cells, each record found by its unit and range, so no segment id is computed (a sha256 each: the plan
        task reads millions a fleet night)."""
        ...

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]: ...

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None: ...


class RepairHistoryStorage(SegmentHistory, Protocol):
    """repair_segments (full) and repair_type_segments (the other types): one row per segment, partitioned by
    (keyspace, tables, bucket), each write with a TTL (`ttl_seconds`, default: the store's history TTL)."""

    def record_repair(
        self, keyspace: str, tables: tuple[str, ...], token_range: TokenRange, record: SegmentRecord, *,
        started_at: datetime | None = None, finished_at: datetime | None = None, replicas: tuple[str, ...] = (),
        ttl_seconds: int | None = None,
    ) -> None: ...  # fmt: skip

    def history_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], repair_type: str = "full"
    ) -> list[RepairHistoryRow]: ...

    def records_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], ids: Mapping[tuple[int, int], str],
        repair_type: str = "full",
    ) -> dict[str, SegmentRecord]: ...  # fmt: skip

    def due_records_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], ids: Mapping[tuple[int, int], RecordKey],
        repair_type: str = "full",
    ) -> dict[RecordKey, DueRecord]: ...  # fmt: skip


class RunPlanStorage(Protocol):
    """repair_plan: a night's stored plan, its repair commands (opaque one-line strings) in chunks under a plan id,
    dropped when the run is over; RepairError for a chunk too long or a command not one line of text, before it is
    written."""

    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int: ...

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]: ...

    def drop_run_plan(self, run_id: str, chunks: int) -> None: ...


class RunProgress(Protocol):
    """A run's live progress as the night writes it (the Repair page reads it)."""

    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None: ...


class RunProgressStorage(RunProgress, Protocol):
    """repair_progress: a running run's live progress, one JSON value per top-level key."""

    def run_progress(self, run_id: str) -> dict[str, Any] | None: ...

    def progress_runs(self) -> dict[str, datetime | None]: ...


class RepairRuns(Protocol):
    """One row per night as the night writes it and reads the last one."""

    def record_repair_run(
        self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]
    ) -> None: ...

    def latest_repair_run(self) -> RepairRunRow | None: ...


class RepairRunStorage(RepairRuns, Protocol):
    """repair_runs: one row per run, its state, report and config; read latest first."""

    def repair_runs(self) -> list[RepairRunRow]: ...


class PreviewKeeper(Protocol):
    """Keeps what a preview session found (the run task writes findings, never reads them)."""

    def record_preview(self, finding: PreviewFinding, ttl_seconds: int | None = None) -> None: ...


class PreviewFindings(Protocol):
    """What preview sessions found (the report counts its run's)."""

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]: ...


class PreviewStorage(PreviewKeeper, PreviewFindings, Protocol):
    """repair_previews: what preview repairs found, per keyspace, latest first, expiring with a TTL."""


class RepairSwitch(Protocol):
    """The pause switch as the night reads it: its latest presses, newest first."""

    def switch_events(self, name: str = ..., limit: int = 20) -> list[SwitchEvent]: ...


class SwitchStorage(RepairSwitch, Protocol):
    """repair_switch: every press of a pause switch (default: the nightly repair's), newest first."""

    def repair_paused(self, name: str = ...) -> bool: ...

    def set_switch(self, paused: bool, changed_by: str, reason: str = "", name: str = ...) -> SwitchEvent: ...


# The migration leases are a migration record kind: `LeaseStorage` (ringward.migration_storage); the night takes
# only its `LeaseReader` part (`leased_keyspaces`), to leave leased keyspaces alone: it cannot take or release one.


# -- the night's stores: compositions of the record kinds' Protocols -------------------------------------------
class PlanStore(SegmentHistory, RunPlanStorage, RepairRuns, LeaseReader, Protocol):
    """What `plan_night` reads and writes."""


class ReportStore(SegmentHistory, RepairRuns, PreviewFindings, Protocol):
    """What `report_night` reads and writes."""


class RunStore(SegmentHistory, RunPlanStorage, RunProgress, RepairSwitch, LeaseReader, PreviewKeeper, Protocol):
    """What `run_night` reads and writes."""


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
