"""What the night needs from the world, as narrow Protocols (the plugins' adapters implement them; tests hand
in-memory ones): the nightly subset of ringward_ops, the cluster view (ring, planning on the catalog, clock)
and the night's log and gauges. Rows the store hands back are typed by the fields the night reads.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from ringward.repair._backpressure import NodeBacklog
from ringward.repair._config import RepairConfig
from ringward.repair._executor import RecordUpdate, SessionPool
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
    "RepairRun",
    "RepairRuns",
    "RepairSwitch",
    "ReportStore",
    "RunProgress",
    "RunRow",
    "RunStore",
    "SegmentHistory",
    "SwitchPress",
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
