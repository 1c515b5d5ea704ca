"""Nightly subrange repair domain (Reaper / CEP-37 style): configuration, segments, state, scheduling,
status and progress. Pure data in, pure data out: no Airflow, Spark or driver imports.

The public API is exactly `__all__`; the private modules behind it may change.
"""

from __future__ import annotations

from ringward.repair._backpressure import NodeBacklog, back_pressure_reason, unit_time_exceeded
from ringward.repair._config import (
    DEFAULT_CONFIG_PATH,
    BackPressure,
    FixedSplitter,
    NameFilter,
    RepairConfig,
    RepairWindow,
    SizeSplitter,
    apply_overrides,
    dump_config,
    load_config,
    parse_config,
)
from ringward.repair._estimates import SizeEstimate
from ringward.repair._executor import (
    RING_CHANGED,
    BatchEffects,
    BatchResult,
    RecordUpdate,
    SegmentOutcome,
    SessionPool,
    SessionResult,
    ThreadSessionPool,
    run_batch,
)
from ringward.repair._payload import decode_segment, encode_segment
from ringward.repair._planning import ReplicaMapCache, ReplicaMapEntries, SegmentPlan, plan_segments
from ringward.repair._progress import Progress
from ringward.repair._run import DueSelection, RunState, RunSummary, needs_replan, select_due
from ringward.repair._scheduler import (
    ReplicaLocks,
    allowed_parallelism,
    intensity_pause,
    next_runnable,
    plan_waves,
    window_allows_start,
)
from ringward.repair._scope import RECENT_RUNS, Exclusion, StatusConfig, repair_scope, status_config
from ringward.repair._segments import (
    LOCAL_KEYSPACES,
    RepairCommand,
    RepairUnit,
    Segment,
    SkippedSegment,
    group_segments,
    select_units,
)
from ringward.repair._state import (
    SegmentRecord,
    SegmentState,
    backoff_delay,
    due_segments,
    is_due,
    record_failure,
    record_start,
    record_success,
    retries_exhausted,
    ring_fingerprint,
)
from ringward.repair._status import (
    RecordedSegment,
    RepairStatus,
    coverage_entries,
    coverage_records,
    repair_status,
    status_table,
)
from ringward.repair._units import format_duration, parse_bytes, parse_duration

__all__ = [
    "DEFAULT_CONFIG_PATH",
    "LOCAL_KEYSPACES",
    "RECENT_RUNS",
    "RING_CHANGED",
    "BackPressure",
    "BatchEffects",
    "BatchResult",
    "DueSelection",
    "Exclusion",
    "FixedSplitter",
    "NameFilter",
    "NodeBacklog",
    "Progress",
    "RecordUpdate",
    "RecordedSegment",
    "RepairCommand",
    "RepairConfig",
    "RepairStatus",
    "RepairUnit",
    "RepairWindow",
    "ReplicaLocks",
    "ReplicaMapCache",
    "ReplicaMapEntries",
    "RunState",
    "RunSummary",
    "Segment",
    "SegmentOutcome",
    "SegmentPlan",
    "SegmentRecord",
    "SegmentState",
    "SessionPool",
    "SessionResult",
    "SizeEstimate",
    "SizeSplitter",
    "SkippedSegment",
    "StatusConfig",
    "ThreadSessionPool",
    "allowed_parallelism",
    "apply_overrides",
    "back_pressure_reason",
    "backoff_delay",
    "coverage_entries",
    "coverage_records",
    "decode_segment",
    "due_segments",
    "dump_config",
    "encode_segment",
    "format_duration",
    "group_segments",
    "intensity_pause",
    "is_due",
    "load_config",
    "needs_replan",
    "next_runnable",
    "parse_bytes",
    "parse_config",
    "parse_duration",
    "plan_segments",
    "plan_waves",
    "record_failure",
    "record_start",
    "record_success",
    "repair_scope",
    "repair_status",
    "retries_exhausted",
    "ring_fingerprint",
    "run_batch",
    "select_due",
    "select_units",
    "status_config",
    "status_table",
    "unit_time_exceeded",
    "window_allows_start",
]
