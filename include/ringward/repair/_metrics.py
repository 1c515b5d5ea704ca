"""Tagged metric points of the nightly repair and of migrations: pure data from the report's figures, sent by
`ringward_airflow.metrics` through Airflow's own Stats (StatsD / DogStatsD / OpenTelemetry).

Every name and its tags is in `METRIC_SPECS` (the operator's guide, "Metrics and alerts", lists them; the Grafana
dashboard and the Prometheus rules under deploy/ use only these). Names are StatsD names: statsd_exporter
turns `ringward.repair.table.coverage_ratio` into the Prometheus series `ringward_repair_table_coverage_ratio`
(after Airflow's `statsd_prefix`, `airflow_` by default). Tag values are cut down to what Airflow lets through
a stat name with InfluxDB-style tags (letters, digits, `_ . - /`), anything else becomes `_`.

The untagged CEP-37 gauges the report and the repair task sent before (`ringward.repair.<Name>`,
`ringward.repair.<type>.<Name>`) are still sent, unchanged, by the operators.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from ringward.repair._run import RunSummary
from ringward.repair._state import SegmentState
from ringward.repair._status import RepairStatus

__all__ = [
    "METRIC_SPECS",
    "NIGHT_STATES",
    "MetricPoint",
    "MetricSpec",
    "approval_points",
    "live_points",
    "migration_points",
    "nightly_points",
    "outcome_points",
    "tag_value",
]

REPAIR: Final = "ringward.repair"
MIGRATION: Final = "ringward.migration"
# The states a night's report ends in (`ringward.repair.run.outcome`: 1 for the night's, 0 for the others).
NIGHT_STATES: Final = ("DONE", "PARTIAL", "FAILED", "DISABLED")


@dataclass(frozen=True)
class MetricSpec:
    """One metric: its StatsD name, the tags every point of it carries, and what it measures."""

    name: str
    tags: tuple[str, ...]
    help: str


_TABLE = ("cluster", "keyspace", "table", "repair_type")
_RUN = ("cluster", "repair_type")
_MIGRATION = ("cluster", "keyspace")

METRIC_SPECS: Final[Mapping[str, MetricSpec]] = {
    spec.name: spec
    for spec in (
        MetricSpec(f"{REPAIR}.table.coverage_ratio", _TABLE,
                   "Share (0-1) of the table's token ranges repaired within gc_grace_seconds."),
        MetricSpec(f"{REPAIR}.table.oldest_repair_age_seconds", _TABLE,
                   "Age of the oldest range's last successful repair; -1: some range was never repaired."),
        MetricSpec(f"{REPAIR}.table.gc_grace_seconds", _TABLE, "The table's gc_grace_seconds."),
        MetricSpec(f"{REPAIR}.table.gc_grace_used_ratio", _TABLE,
                   "oldest_repair_age / gc_grace_seconds (>= 1: past the deadline); 1 when a range was never "
                   "repaired."),
        MetricSpec(f"{REPAIR}.table.overdue", _TABLE,
                   "1 when a range is past gc_grace_seconds or was never repaired, else 0."),
        MetricSpec(f"{REPAIR}.table.failing_segments", _TABLE, "Segments whose last repair failed."),
        MetricSpec(f"{REPAIR}.run.segments_done", _RUN, "Segments the night repaired."),
        MetricSpec(f"{REPAIR}.run.segments_failed", _RUN, "Segments that failed after every retry."),
        MetricSpec(f"{REPAIR}.run.segments_postponed", _RUN,
                   "Segments left for the next night (window over, back-pressure, time budget)."),
        MetricSpec(f"{REPAIR}.run.segments_skipped", _RUN, "Segments not due (repaired recently)."),
        MetricSpec(f"{REPAIR}.run.outcome", ("cluster", "state"),
                   "1 for the state the night ended in (DONE, PARTIAL, DISABLED from the report; FAILED when a "
                   "task of the night failed for good), 0 for the others."),
        MetricSpec(f"{REPAIR}.run.finished_timestamp_seconds", ("cluster",), "When the night's report ran (epoch)."),
        MetricSpec(f"{REPAIR}.run.duration_seconds", ("cluster",), "Seconds the repair task ran."),
        MetricSpec(f"{REPAIR}.run.longest_unrepaired_seconds", ("cluster",),
                   "CEP-37 LongestUnrepairedSec over the planned segments; -1: some segment never repaired."),
        MetricSpec(f"{REPAIR}.live.segments_done", _RUN, "Segments repaired so far in the running night."),
        MetricSpec(f"{REPAIR}.live.segments_failed", _RUN, "Segments failed so far in the running night."),
        MetricSpec(f"{REPAIR}.live.segments_postponed", _RUN, "Segments postponed so far in the running night."),
        MetricSpec(f"{REPAIR}.live.segments_total", _RUN, "Segments the running night has to repair."),
        MetricSpec(f"{REPAIR}.live.sessions_running", _RUN, "Repair sessions running now (0 once the night ends)."),
        MetricSpec(f"{REPAIR}.live.back_pressure_holds", _RUN,
                   "Repair commands held back by back-pressure (pending compactions, hints, disk) this night."),
        MetricSpec(f"{MIGRATION}.ranges_moved", _MIGRATION, "Token ranges whose replicas the migration changed."),
        MetricSpec(f"{MIGRATION}.total_ranges", _MIGRATION, "Token ranges of the keyspace."),
        MetricSpec(f"{MIGRATION}.steps", _MIGRATION, "ALTER steps of the migration."),
        MetricSpec(f"{MIGRATION}.duration_seconds", _MIGRATION, "Seconds from precheck to report."),
        MetricSpec(f"{MIGRATION}.stage_seconds", (*_MIGRATION, "stage"), "Seconds each stage (task) took."),
        MetricSpec(f"{MIGRATION}.finished_timestamp_seconds", _MIGRATION, "When the migration finished (epoch)."),
        MetricSpec(f"{MIGRATION}.approval_waiting_since_seconds", (*_MIGRATION, "approval"),
                   "When the approval started waiting (epoch); 0 once answered."),
    )
}  # fmt: skip

_UNSAFE = re.compile(r"[^A-Za-z0-9_./-]")


def tag_value(text: object) -> str:
    """A tag value Airflow's StatsD loggers pass on: anything but letters, digits and `_ . - /` becomes `_`."""
    return _UNSAFE.sub("_", str(text)) or "_"


@dataclass(frozen=True)
class MetricPoint:
    """One gauge value with its tags (in `METRIC_SPECS[name].tags` order)."""

    name: str
    value: float
    tags: tuple[tuple[str, str], ...]

    @property
    def tag_map(self) -> dict[str, str]:
        return dict(self.tags)


def _point(name: str, value: float, **tags: object) -> MetricPoint:
    spec = METRIC_SPECS[name]
    if set(tags) != set(spec.tags):
        raise ValueError(f"Metric {name} takes the tags {spec.tags}, not {sorted(tags)}.")
    return MetricPoint(name, float(value), tuple((key, tag_value(tags[key])) for key in spec.tags))


def _table_points(cluster: str, repair_type: str, status: RepairStatus) -> list[MetricPoint]:
    """A table's coverage points; none for a table nothing needs repairing (RF 1 everywhere)."""
    if status.repaired_share is None:
        return []
    tags = {"cluster": cluster, "keyspace": status.keyspace, "table": status.table, "repair_type": repair_type}
    age = status.oldest_age
    grace = status.gc_grace_seconds
    if age is None:
        age_seconds, used = -1.0, 1.0
    else:
        age_seconds = age.total_seconds()
        used = age_seconds / grace if grace > 0 else 1.0
    return [
        _point(f"{REPAIR}.table.coverage_ratio", status.repaired_share, **tags),
        _point(f"{REPAIR}.table.oldest_repair_age_seconds", round(age_seconds), **tags),
        _point(f"{REPAIR}.table.gc_grace_seconds", grace, **tags),
        _point(f"{REPAIR}.table.gc_grace_used_ratio", round(used, 4), **tags),
        _point(f"{REPAIR}.table.overdue", 1 if status.health == "OVERDUE" else 0, **tags),
        _point(f"{REPAIR}.table.failing_segments", status.failing_segments, **tags),
    ]


def nightly_points(
    cluster: str,
    state: str,
    coverage: Mapping[str, Sequence[RepairStatus]],
    summaries: Mapping[str, RunSummary],
    *,
    finished: datetime,
    run_seconds: float | None = None,
    longest_unrepaired_seconds: int | None = None,
) -> list[MetricPoint]:
    """The points of a night's report: per table and repair type its coverage (`coverage`: each type's table
    statuses; a preview's are of ranges compared, not repaired, and are left out), per repair type the
    segment counts (`summaries`), and the night's outcome (`state`; a state not in NIGHT_STATES sets every
    outcome point to 0)."""
    points: list[MetricPoint] = []
    for repair_type, statuses in coverage.items():
        if repair_type == "preview":
            continue
        for status in statuses:
            points.extend(_table_points(cluster, repair_type, status))
    counted = {"done": SegmentState.DONE, "failed": SegmentState.FAILED, "postponed": SegmentState.POSTPONED,
               "skipped": SegmentState.SKIPPED}  # fmt: skip
    for repair_type, summary in summaries.items():
        for word, segment_state in counted.items():
            points.append(_point(f"{REPAIR}.run.segments_{word}", summary.counts.get(segment_state, 0),
                                 cluster=cluster, repair_type=repair_type))  # fmt: skip
    points.extend(outcome_points(cluster, state))
    points.append(_point(f"{REPAIR}.run.finished_timestamp_seconds", round(finished.timestamp()), cluster=cluster))
    if run_seconds is not None:
        points.append(_point(f"{REPAIR}.run.duration_seconds", round(run_seconds), cluster=cluster))
    if longest_unrepaired_seconds is not None:
        points.append(_point(f"{REPAIR}.run.longest_unrepaired_seconds", longest_unrepaired_seconds, cluster=cluster))
    return points


def outcome_points(cluster: str, state: str) -> list[MetricPoint]:
    """`ringward.repair.run.outcome`: 1 for `state`, 0 for the other NIGHT_STATES (no stale 1 is left behind)."""
    return [_point(f"{REPAIR}.run.outcome", 1 if s == state else 0, cluster=cluster, state=s) for s in NIGHT_STATES]


def _count(progress: Mapping[str, object], key: str) -> int:
    value = progress.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def live_points(cluster: str, repair_type: str, progress: Mapping[str, object]) -> list[MetricPoint]:
    """The points of a running night's progress record (what the repair task stores each minute for the
    Repair page: done, failed, postponed, total, sessions, held_back, final)."""
    tags = {"cluster": cluster, "repair_type": repair_type}
    sessions = 0 if progress.get("final") else _count(progress, "sessions")
    return [
        _point(f"{REPAIR}.live.segments_done", _count(progress, "done"), **tags),
        _point(f"{REPAIR}.live.segments_failed", _count(progress, "failed"), **tags),
        _point(f"{REPAIR}.live.segments_postponed", _count(progress, "postponed"), **tags),
        _point(f"{REPAIR}.live.segments_total", _count(progress, "total"), **tags),
        _point(f"{REPAIR}.live.sessions_running", sessions, **tags),
        _point(f"{REPAIR}.live.back_pressure_holds", _count(progress, "held_back"), **tags),
    ]


def migration_points(cluster: str, report: Mapping[str, object], finished: datetime) -> list[MetricPoint]:
    """The points of a finished migration's report (`MigrationReportOperator`'s return value): ranges moved of
    the keyspace's, steps, duration, and each stage's seconds."""
    tags = {"cluster": cluster, "keyspace": report["keyspace"]}
    steps = report.get("steps")
    points = [
        _point(f"{MIGRATION}.ranges_moved", _count(report, "ranges_moved"), **tags),
        _point(f"{MIGRATION}.total_ranges", _count(report, "total_ranges"), **tags),
        _point(f"{MIGRATION}.steps", len(steps) if isinstance(steps, Sequence) else 0, **tags),
        _point(f"{MIGRATION}.finished_timestamp_seconds", round(finished.timestamp()), **tags),
    ]
    total = report.get("total_seconds")
    if isinstance(total, int | float):
        points.append(_point(f"{MIGRATION}.duration_seconds", round(total), **tags))
    stages = report.get("stage_seconds")
    if isinstance(stages, Mapping):
        points.extend(
            _point(f"{MIGRATION}.stage_seconds", round(float(seconds)), **tags, stage=stage)
            for stage, seconds in sorted(stages.items())
            if isinstance(seconds, int | float)
        )
    return points


def approval_points(cluster: str, keyspace: str, approval: str, waiting_since: datetime | None) -> list[MetricPoint]:
    """An approval's waiting point: when it started waiting, or 0 once answered (`waiting_since` None)."""
    since = 0 if waiting_since is None else round(waiting_since.timestamp())
    return [_point(f"{MIGRATION}.approval_waiting_since_seconds", since, cluster=cluster, keyspace=keyspace,
                   approval=approval)]  # fmt: skip
