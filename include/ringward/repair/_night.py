"""The night as pure functions over ports (`_ports`): `plan_night` (what is due, stored in chunks), `report_night`
(how it went, recorded). IO comes in through the ports, so the night runs the same on a cluster, on the fleet
simulator and on in-memory adapters in virtual time.
"""

from __future__ import annotations

import gc
import itertools
import json
import operator
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime

from ringward.errors import ClusterError, RepairError
from ringward.repair._config import RepairConfig, RepairType, dump_config
from ringward.repair._night_records import NightOutcome, NightPlan, NightReport, TypePlan, TypeReport, repair_type_of
from ringward.repair._ops_rows import RepairHistoryRow
from ringward.repair._ports import (
    ClusterPlan,
    ClusterView,
    Gauge,
    NightLog,
    NodeStatus,
    PlanStore,
    RepairRuns,
    ReportStore,
)
from ringward.repair._run import DueSelection, RunState, RunSummary
from ringward.repair._scheduler import allowed_parallelism
from ringward.repair._segments import Segment
from ringward.repair._state import SegmentRecord, SegmentState, ring_fingerprint
from ringward.repair._status import RecordedSegment, RepairStatus, coverage_records, status_table
from ringward.repair._types import TypeDue, coverage_view, joined_nodes, select_due_by_type, type_plan_id
from ringward.ring import TokenRange

__all__ = [
    "collector_paused",
    "history_ttl_seconds",
    "last_host_ids",
    "live_nodes",
    "longest_unrepaired_seconds",
    "night_types",
    "plan_chunks",
    "plan_night",
    "report_night",
    "run_summary",
]


def history_ttl_seconds(config: RepairConfig) -> int:
    """Seconds the history, the stored plan and the findings are kept (`history_ttl`)."""
    return int(config.history_ttl.total_seconds())


def plan_chunks(segments: Sequence[Segment], rows: int) -> list[list[str]]:
    """The segments as `encode_segment` JSON, in chunks of `rows`. A fleet's plan repeats a few keyspaces, table
    lists and replica sets millions of times: each is encoded once (a third of the cost of `json.dumps` per
    segment)."""
    texts: dict[object, str] = {}

    def text(value: str | tuple[str, ...]) -> str:
        found = texts.get(value)
        if found is None:
            found = texts[value] = json.dumps(value if isinstance(value, str) else list(value), separators=(",", ":"))
        return found

    def addresses(replicas: tuple[str, ...]) -> str:
        # Nearly every replica set of a vnode ring is its own: written directly when no character needs escaping.
        raw = "".join(replicas)
        if '"' in raw or "\\" in raw or not raw.isprintable() or not raw.isascii():
            return json.dumps(list(replicas), separators=(",", ":"))
        return '["' + '","'.join(replicas) + '"]' if replicas else "[]"

    # A unit's segments come one after another (in runs, once ordered by urgency), and a replica set is one tuple
    # however many keyspaces share the replication: each text is made once, a replica list's found by identity
    # (the segments keep the objects alive while this runs).
    # Keyspaces that share a replication share the ring's range objects as well: a range's text with its replicas
    # (the row after the unit's prefix) is made once, and found again by the range's identity for the next unit;
    # a run of a unit whose ranges are all known with the same replicas is written at C speed.
    encoded: list[str] = []
    lists: dict[int, str] = {}
    rests: dict[int, tuple[tuple[str, ...], str]] = {}

    def rest(token_range: TokenRange, replicas: tuple[str, ...]) -> tuple[tuple[str, ...], str]:
        known = rests.get(id(token_range))
        if known is None or known[0] is not replicas:
            listed = lists.get(id(replicas))
            if listed is None:
                listed = lists[id(replicas)] = addresses(replicas)
            known = rests[id(token_range)] = (replicas, f"{token_range.start},{token_range.end},{listed}]")
        return known

    for (keyspace, tables), members in itertools.groupby(segments, _UNIT):
        prefix = f"[{text(keyspace)},{text(tables)},"
        run = list(members)
        ranges, replicas = list(map(_RANGE, run)), list(map(_REPLICAS, run))
        known = list(map(rests.get, map(id, ranges), itertools.repeat(_UNKNOWN)))
        alike = list(map(operator.is_, map(_FIRST, known), replicas))
        if False in alike:  # made (and kept) only for the ranges not known with these replicas
            for index in itertools.compress(range(len(run)), map(operator.not_, alike)):
                known[index] = rest(ranges[index], replicas[index])
        encoded.extend(map(prefix.__add__, map(_SECOND, known)))
    return [encoded[i : i + rows] for i in range(0, len(encoded), rows)]


_UNIT = operator.attrgetter("keyspace", "tables")
_RANGE, _REPLICAS = operator.attrgetter("range"), operator.attrgetter("replicas")
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_UNKNOWN: tuple[None, str] = (None, "")  # a range not known yet: no replicas are its


def live_nodes(nodetool: NodeStatus, ring_addresses: Sequence[str]) -> set[str]:
    """Nodes some reachable node sees as Up/Normal (gossip view through nodetool status)."""
    for address in ring_addresses:
        try:
            states = nodetool.status(address)
        except ClusterError:
            continue
        return {node for node, state in states.items() if state == "UN"}
    return set()


def last_host_ids(runs: RepairRuns) -> list[str]:
    """Host ids of the ring the last recorded run planned on (none recorded: nothing counts as joined)."""
    try:
        last = runs.latest_repair_run()
    except Exception:  # an unreadable run record must not stop tonight's plan; nobody counts as joined
        return []
    ids = (last.summary.get("host_ids") if last is not None else None) or {}
    return [str(value) for value in ids.values()] if isinstance(ids, Mapping) else []


def night_types(config: RepairConfig) -> tuple[RepairType, ...]:
    """The types tonight's run repairs, one after another in `RUN_ORDER` (full, incremental, paxos, preview);
    none enabled: full, which the disabled run plans as not due."""
    return config.enabled_types or ("full",)


@contextmanager
def collector_paused() -> Iterator[None]:
    """The cyclic garbage collector off for the block (as it was after it). The plan task builds millions of
    objects that hold no reference cycle (segments, their records, the plan's rows): each run of the collector
    meanwhile only walks them, and its full runs walk every object of the process, again and again as the plan
    grows (measured on the fleet simulator, whose ops store lives in the same process: a third of the plan
    task's CPU). Their memory is freed by reference counting as before; a cycle made meanwhile waits for the
    collector's next run after the block."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def plan_night(
    config: RepairConfig,
    *,
    run_id: str,
    store: PlanStore,
    cluster: ClusterView,
    nodetool: NodeStatus,
    log: NightLog,
    chunk_rows: int,
    cpu_seconds: Callable[[], float],
) -> NightPlan:
    """Tonight's plan on a fresh ring and schema: per enabled type (in run order, each on its own history and
    cadence) the due segments, most urgent first, stored in chunks of `chunk_rows` under the type's plan id.
    Keyspaces under a migration lease are left out, named. `cpu_seconds`: the process's CPU clock (the plan says
    what planning cost). Raises ConfigurationError when the plan is beyond `max_segments_per_plan`.

    Planned with the cyclic garbage collector paused (`collector_paused`): the plan's objects are freed when
    `_plan_night` returns, before the collector runs again."""
    with collector_paused():
        return _plan_night(config, run_id=run_id, store=store, cluster=cluster, nodetool=nodetool, log=log,
                           chunk_rows=chunk_rows, cpu_seconds=cpu_seconds)  # fmt: skip


def _plan_night(
    config: RepairConfig,
    *,
    run_id: str,
    store: PlanStore,
    cluster: ClusterView,
    nodetool: NodeStatus,
    log: NightLog,
    chunk_rows: int,
    cpu_seconds: Callable[[], float],
) -> NightPlan:
    started = cpu_seconds()
    ring = cluster.ring()
    leased = {ks: f"held by {lease.owner} ({lease.purpose})" for ks, lease in store.leased_keyspaces().items()}
    whole = cluster.plan(ring, config, leased)
    for keyspace, why in whole.excluded_keyspaces.items():
        log.warning("Keyspace %s skipped tonight: under a migration lease, %s", keyspace, why)
    for why in whole.excluded_tables.values():
        log.warning("%s", why)
    live = live_nodes(nodetool, ring.addresses())
    host_ids = {node.address: node.host_id for node in ring.nodes if node.host_id}
    joined = joined_nodes(host_ids, last_host_ids(store))
    if joined and config.repair_new_nodes:
        log.warning("Joined since the last run, repaired tonight: %s", ", ".join(sorted(joined)))
    now = cluster.now()
    typed: list[TypeDue] = []
    plans = {"incremental": whole} if config.session_type == "incremental" else {"other": whole}
    for kind in night_types(config):
        group = "incremental" if kind == "incremental" else "other"
        if group not in plans:  # incremental leaves out tables with views or CDC: a cluster plan of its own
            plans[group] = cluster.plan(ring, config.for_type(kind), leased)
            for why in plans[group].excluded_tables.values():
                log.warning("%s", why)
        segments = plans[group].segments
        # What can make a segment due, three cells a record, by position: no segment id is computed.
        history = store.due_records_in_order(segments, kind)
        found = select_due_by_type(segments, history, run_id=run_id, now=now, config=config, joined=joined,
                                   types=[kind], gc_grace=plans[group].gc_grace)  # fmt: skip
        typed.extend(found or [TypeDue(kind, config.for_type(kind), DueSelection((), tuple(segments), ()), 0)])
    types: dict[str, TypePlan] = {}
    for item in typed:
        plan_id = type_plan_id(run_id, item.repair_type)
        due, not_due, exhausted = item.selection.due, item.selection.not_due, item.selection.exhausted
        chunks = store.save_run_plan(plan_id, plan_chunks(due, chunk_rows), ttl_seconds=history_ttl_seconds(config))
        entry = types[item.repair_type] = TypePlan(plan_id, chunks, len(due), len(not_due), len(exhausted),
                                                   item.forced, len(due) + len(not_due) + len(exhausted))  # fmt: skip
        log.info("Plan of %s repair: %d due in %d chunks, %d not due (%d of them due but held back behind the "
                 "backlog on their nodes), %d with retries used up.", item.repair_type, entry.due, chunks,
                 entry.not_due, len(item.selection.held_back), entry.exhausted)  # fmt: skip
    down = sorted(set(ring.addresses()) - live)

    def total(name: str) -> int:
        return sum(int(getattr(entry, name)) for entry in types.values())

    plan = NightPlan(
        run_id=run_id,
        enabled=config.enabled,
        fingerprint=ring_fingerprint(ring, {}),
        parallelism=allowed_parallelism(config, len(ring.nodes)),
        segments=total("segments"),  # segment x type: a segment planned for two types counts twice
        due=total("due"),
        chunks=total("chunks"),
        exhausted=total("exhausted"),
        not_due=total("not_due"),
        skipped_ranges=len(whole.skipped_ranges),
        skipped_keyspaces=dict(whole.excluded_keyspaces),
        keyspaces=tuple(sorted({keyspace for p in plans.values() for keyspace in p.gc_grace})),
        skipped_tables={k: v for p in plans.values() for k, v in p.excluded_tables.items()},
        down_nodes=tuple(down),
        planning_cpu_seconds=round(cpu_seconds() - started, 2),
        config=dump_config(config),
        types=types,
        host_ids=host_ids,
        forced=total("forced"),
        repair_type=",".join(types),
    )
    if not config.enabled:
        log.warning("Repair is disabled (enabled: false): nothing runs tonight.")
    if down:
        log.warning("Down now: %s; their segments wait for them during the run.", ", ".join(down))
    log.info(
        "Plan: %(segments)d segments, %(due)d due in %(chunks)d stored chunks (parallelism %(parallelism)d), "
        "%(not_due)d not due, %(exhausted)d with retries used up; %(planning_cpu_seconds).1f s CPU",
        plan.to_json(),
    )
    return plan


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


def _coverage_records(plan: ClusterPlan, rows: Sequence[RepairHistoryRow], own_type: bool) -> dict[str, SegmentRecord]:
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


@dataclass(frozen=True)
class RecordedNight:
    """What `report_night` recorded, for the caller's tagged metrics, alerts and asset events: the run's state,
    each type's table coverage and segment counts, the whole plan's table statuses."""

    run_id: str
    state: str
    coverages: Mapping[str, Sequence[RepairStatus]]
    summaries: Mapping[str, RunSummary]
    statuses: Sequence[RepairStatus]
    failed: int
    postponed: int
    finished: datetime
    run_seconds: float
    longest_unrepaired_seconds: int


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
    recorded: Callable[[RecordedNight], None] | None = None,
) -> NightReport:
    """The night's report from the repair history, recorded in ringward_ops.repair_runs: run state, per-type and
    per-table coverage, CEP-37-named gauges. `outcome`: the repair task's result (None: it left none); the run's
    duration is its `run_seconds`, else the wall time since `run_started`. `recorded`: called once the run is
    recorded, before a failure is raised (tagged metrics, alerts, asset events).

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
    coverages: dict[str, Sequence[RepairStatus]] = {}
    shares = outcome.repaired_shares if outcome is not None else {}
    for kind, type_plan in plan.type_plans(config.session_type).items():
        typed = config.for_type(repair_type_of(kind))
        kind_rows = rows if kind == "full" else store.repair_history(repair_type=kind)
        summary = summaries[kind] = run_summary(type_plan, [r.record for r in kind_rows if r.record.run_id == run_id])
        kind_plan = whole
        if (kind == "incremental") != (config.session_type == "incremental"):  # the type's own tables
            kind_plan = cluster.plan(ring, typed, excluded)
        records = _coverage_records(kind_plan, kind_rows, own_type=kind != "full")
        coverage = coverages[kind] = cluster.table_statuses(kind_plan, records, now, config.gc_grace_alarm)
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
    if recorded is not None:
        recorded(RecordedNight(
            run_id, state.value, coverages, summaries, statuses, overall.counts[SegmentState.FAILED],
            overall.counts[SegmentState.POSTPONED], now, float(measured), int(metrics["LongestUnrepairedSec"]),
        ))  # fmt: skip
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
