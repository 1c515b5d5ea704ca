"""The night as pure functions over ports (`_ports`): `plan_night` (what is due, stored in chunks), `report_night`
(how it went, recorded). IO comes in through the ports, so the night runs the same on a cluster, on the fleet
simulator and on in-memory adapters in virtual time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import datetime

from ringward.errors import RepairError
from ringward.repair._config import RepairConfig
from ringward.repair._night_records import NightOutcome, NightPlan, NightReport, TypePlan, TypeReport, repair_type_of
from ringward.repair._ports import ClusterPlan, ClusterView, Gauge, HistoryRow, NightLog, ReportStore
from ringward.repair._run import RunState, RunSummary
from ringward.repair._segments import Segment
from ringward.repair._state import SegmentRecord, SegmentState
from ringward.repair._status import RecordedSegment, coverage_records, status_table
from ringward.repair._types import coverage_view

__all__ = ["longest_unrepaired_seconds", "report_night", "run_summary"]


def run_summary(plan: TypePlan, run_records: Sequence[SegmentRecord]) -> RunSummary:
    """A type's outcome in the run: what the history says for its segments, plus due segments no task reached.

    A session left RUNNING (task died mid-session) counts as failed; segments not due count as skipped.
    """
    states = [SegmentState.FAILED if r.state is SegmentState.RUNNING else r.state for r in run_records]
    tally = Counter(states)
    reached = sum(n for state, n in tally.items() if state is not SegmentState.POSTPONED)
    unreached = max(0, plan.due - reached)
    skipped = plan.not_due + plan.exhausted
    return RunSummary.of([*states, *[SegmentState.POSTPONED] * unreached, *[SegmentState.SKIPPED] * skipped])


def longest_unrepaired_seconds(segments: Sequence[Segment], records: Mapping[str, SegmentRecord], now: datetime) -> int:
    """Age of the oldest full repair among the planned segments (CEP-37 LongestUnrepairedSec); -1 = never."""
    ages = []
    for segment in segments:
        record = records.get(segment.segment_id)
        if record is None or record.last_full_success is None:
            return -1
        ages.append((now - record.last_full_success).total_seconds())
    return round(max(ages, default=0.0))


def _coverage_records(plan: ClusterPlan, rows: Sequence[HistoryRow], own_type: bool) -> dict[str, SegmentRecord]:
    """The planned segments' records for coverage: repairs recorded under any splitter count. `own_type`: a type
    other than full, whose coverage is its own successes (`coverage_view`)."""
    view = coverage_view if own_type else None
    history = [RecordedSegment(r.keyspace, r.tables, r.range, view(r.record) if view else r.record) for r in rows]
    return coverage_records(plan.segments, history)


def _findings_of(store: ReportStore, run_id: str, log: NightLog) -> int | None:
    """How many preview findings the run kept (None: unreadable now; the findings are in the repair log)."""
    try:
        return sum(1 for finding in store.preview_findings() if finding.run_id == run_id)
    except Exception as error:  # the report must not fail over a count the log has too
        log.warning("Preview findings unreadable now (%s): %s", type(error).__name__, error)
        return None


def report_night(
    plan: NightPlan,
    outcome: NightOutcome | None,
    config: RepairConfig,
    *,
    run_id: str,
    store: ReportStore,
    cluster: ClusterView,
    run_started: datetime | None,
    log: NightLog,
    gauge: Gauge,
) -> NightReport:
    """The night's report from the repair history, recorded in ringward_ops.repair_runs: run state, per-type and
    per-table coverage, CEP-37-named gauges. `outcome`: the repair task's result (None: it left none); the run's
    duration is its `run_seconds`, else the wall time since `run_started`.

    Raises RepairError (after recording) when segments failed with their retries used up; postponed segments make
    the run PARTIAL without failing it. A run with the kill switch off from the start is DISABLED.
    """
    now = cluster.now()
    ring = cluster.ring()
    rows = store.repair_history()
    excluded = plan.skipped_keyspaces
    whole = cluster.plan(ring, config, excluded)
    per_type: dict[str, TypeReport] = {}
    summaries: dict[str, RunSummary] = {}
    shares = outcome.repaired_shares if outcome is not None else {}
    for kind, type_plan in plan.type_plans(config.session_type).items():
        typed = config.for_type(repair_type_of(kind))
        kind_rows = rows if kind == "full" else store.repair_history(repair_type=kind)
        summary = summaries[kind] = run_summary(type_plan, [r.record for r in kind_rows if r.record.run_id == run_id])
        kind_plan = whole
        if (kind == "incremental") != (config.session_type == "incremental"):  # the type's own tables
            kind_plan = cluster.plan(ring, typed, excluded)
        records = _coverage_records(kind_plan, kind_rows, own_type=kind != "full")
        coverage = cluster.table_statuses(kind_plan, records, now, config.gc_grace_alarm)
        covered = {f"{s.keyspace}.{s.table}": s.repaired_percent for s in coverage}
        per_type[kind] = TypeReport(
            repair_type_of(kind), summary.state, summary.metrics(), covered,
            _findings_of(store, run_id, log) if kind == "preview" else None,
            # Its tables' repaired/unrepaired split, as the repair task read it at its end.
            {t: v for t, v in shares.items() if t in covered} if kind == "incremental" else {},
        )  # fmt: skip
        for name, value in summary.metrics().items():
            gauge(f"{kind}.{name}", value)
    # The run's segment counts are of the repairs: a preview never counts as a repair. Its state (and failures)
    # takes every type, the preview's too.
    repairs = [s for kind, s in summaries.items() if kind != "preview"]
    summary = RunSummary({state: sum(s.counts[state] for s in repairs) for state in SegmentState})
    overall = RunSummary({state: sum(s.counts[state] for s in summaries.values()) for state in SegmentState})
    records = _coverage_records(whole, rows, own_type=False)  # repairs recorded under any splitter count
    statuses = cluster.table_statuses(whole, records, now, config.gc_grace_alarm)
    measured = outcome.run_seconds if outcome is not None else None
    if measured is None:  # the DAG run's wall time
        measured = (now - run_started).total_seconds() if run_started is not None else 0.0
    metrics = {
        **summary.metrics(),
        "LongestUnrepairedSec": longest_unrepaired_seconds(whole.segments, records, now),
        "ClusterRepairTimeInSec": round(measured),
    }
    for name, value in metrics.items():
        gauge(name, value)
    # A run stopped by the kill switch from the start repaired nothing on purpose: say so, not DONE.
    state = overall.state if plan.enabled else RunState.DISABLED
    report = NightReport(
        run_id=run_id,
        state=state,
        metrics=metrics,
        skipped_keyspaces=dict(excluded),
        repair_type=plan.repair_type,
        types=per_type,
        host_ids=dict(plan.host_ids),
        tables={f"{s.keyspace}.{s.table}": s.repaired_percent for s in statuses},
    )
    store.record_repair_run(run_id, state.value, report.to_json(), dict(plan.config))
    log.info("Run %s\n%s", overall.line(), status_table(statuses))
    for kind, kind_summary in summaries.items():
        log.info("%s: %s", kind, kind_summary.line())
    for keyspace, why in report.skipped_keyspaces.items():
        log.warning("Keyspace %s was not repaired: %s", keyspace, why)
    failed = overall.counts[SegmentState.FAILED]
    if failed:  # fails the run (and fires the notifier); retrying the report would change nothing
        raise RepairError(
            f"{failed} segment(s) failed after {config.max_retries} retries in run {run_id}.",
            "Read the repair task logs (last_error in ringward_ops.repair_history); they stay due next run.",
        )
    return report
