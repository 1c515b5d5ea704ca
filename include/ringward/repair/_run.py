"""One nightly run (Reaper's RepairRun): what to do tonight, and how it went.

`select_due` picks tonight's segments from the plan and their history, most urgent first, and reports
every segment left out with its reason; `backlog_first` holds back segments that are merely due while a backlog
(never repaired, or near their gc_grace deadline) needs their nodes; `RunSummary` counts the outcome with CEP-37
metric names.
"""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from enum import Enum
from typing import cast

from ringward.repair._config import RepairConfig
from ringward.repair._segments import Segment
from ringward.repair._state import DueRecord, SegmentRecord, SegmentState

__all__ = [
    "DEFAULT_GC_GRACE_SECONDS",
    "DueSelection",
    "GcGrace",
    "RunState",
    "RunSummary",
    "backlog_first",
    "live_metrics",
    "needs_replan",
    "select_due",
]

# {keyspace: {table: gc_grace_seconds}}, as the cluster's plan reads it from the schema (`ClusterPlan.gc_grace`).
GcGrace = Mapping[str, Mapping[str, int]]
# A segment whose tables' gc_grace is unknown is given Cassandra's default (10 days).
DEFAULT_GC_GRACE_SECONDS = 864_000


def needs_replan(stored_fingerprint: str | None, current_fingerprint: str) -> bool:
    """Segments planned on another ring or replication must be planned again before running."""
    return stored_fingerprint != current_fingerprint


@dataclass(frozen=True)
class DueSelection:
    """Tonight's segments sorted by reason: `due` (most urgent first) runs; the others are reported."""

    due: tuple[Segment, ...]
    not_due: tuple[Segment, ...]  # repaired within min_repair_interval (or repair disabled, or held back)
    exhausted: tuple[Segment, ...]  # retries of this run used up: reported, tried again next run
    # Of `not_due`: due, but held back behind the backlog on their nodes (`backlog_first`); due again next run.
    held_back: tuple[Segment, ...] = ()


def _grace_seconds(segment: Segment, gc_grace: GcGrace) -> int:
    """The smallest gc_grace of the segment's tables (`tables == ()`: every table of its keyspace)."""
    tables = gc_grace.get(segment.keyspace, {})
    known = [tables[t] for t in (segment.tables or tables) if t in tables]
    return min(known, default=DEFAULT_GC_GRACE_SECONDS)


def backlog_first(
    due: Sequence[Segment],
    records: Mapping[str, SegmentRecord],
    now: datetime,
    *,
    gc_grace: GcGrace | None = None,
    alarm_share: float = 0.8,
) -> tuple[list[Segment], list[Segment]]:
    """(what runs tonight, what is held back) of `due`, ordered by the time left to each segment's gc_grace deadline
    (its last success + the smallest gc_grace of its tables; never repaired: first).

    The backlog is what is never repaired or past `alarm_share` of its gc_grace (the alarm point). While there is a
    backlog, a segment that is merely due (repaired within `alarm_share` of its gc_grace) is held back when one of
    its replicas is a replica of the backlog: re-repairing it tonight would take a node the backlog waits for, and a
    backlog of several nights would never finish first. Merely-due segments on other nodes run, after the backlog.
    Nothing is held back past the alarm point: by then it is backlog itself."""
    get = records.get
    lasts = []
    for segment in due:
        record = get(segment.segment_id)
        lasts.append((None if record is None else record.last_success, segment))
    return _hold_behind_backlog(lasts, now, gc_grace or {}, alarm_share)


def _hold_behind_backlog(
    due: Iterable[tuple[datetime | None, Segment]], now: datetime, grace_of: GcGrace, alarm_share: float
) -> tuple[list[Segment], list[Segment]]:
    """`backlog_first` of due segments given with their last success (None: never repaired), in `due`'s order."""
    given = list(due)
    segments = [segment for _, segment in given]
    run, held = _hold_positions_behind_backlog(
        ((last, index) for index, (last, _) in enumerate(given)), segments, now, grace_of, alarm_share
    )
    return [segments[i] for i in run], [segments[i] for i in held]


def _hold_positions_behind_backlog(
    due: Iterable[tuple[datetime | None, int]],
    segments: Sequence[Segment],
    now: datetime,
    grace_of: GcGrace,
    alarm_share: float,
) -> tuple[list[int], list[int]]:
    """`_hold_behind_backlog` of the due segments given by their position in `segments` (with their last success),
    answered by position too: (what runs, what is held back)."""
    never = datetime.min.replace(tzinfo=now.tzinfo)
    # Per unit (keyspace, tables): its gc_grace and the success before which a segment is backlog (a fleet night
    # is 3.3 million segments of a few hundred units, whose segments mostly come one after another).
    per_unit: dict[tuple[str, tuple[str, ...]], tuple[timedelta, datetime]] = {}
    urgent: list[tuple[datetime, int]] = []
    routine: list[tuple[datetime, int]] = []
    keyspace: str | None = None
    tables: tuple[str, ...] | None = None
    grace = timedelta()
    alarm = never
    for last, index in due:
        if last is None:
            urgent.append((never, index))
            continue
        segment = segments[index]
        if segment.keyspace is not keyspace or segment.tables is not tables:
            keyspace, tables = segment.keyspace, segment.tables
            known = per_unit.get((keyspace, tables))
            if known is None:
                unit_grace = timedelta(seconds=_grace_seconds(segment, grace_of))
                known = per_unit[keyspace, tables] = (unit_grace, now - unit_grace * alarm_share)
            grace, alarm = known
        (urgent if last <= alarm else routine).append((last + grace, index))
    # Stable sorts on the deadline alone: ties keep `due`'s order.
    urgent.sort(key=_deadline)
    routine.sort(key=_deadline)
    run = [index for _, index in urgent]
    if not urgent:
        return [index for _, index in routine], []
    backlog_nodes = {node for index in run for node in segments[index].replicas}
    held: list[int] = []
    for _, index in routine:
        (held if not backlog_nodes.isdisjoint(segments[index].replicas) else run).append(index)
    return run, held


_deadline = operator.itemgetter(0)  # the sort key of (deadline, position) pairs


def select_due(
    segments: Sequence[Segment],
    records: Mapping[str, SegmentRecord | DueRecord] | Sequence[SegmentRecord | DueRecord | None],
    *,
    run_id: str,
    now: datetime,
    config: RepairConfig,
    gc_grace: GcGrace | None = None,
) -> DueSelection:
    """What the run repairs, most urgent first (`backlog_first`: by the time left to the gc_grace deadline, with
    merely-due segments held back while a backlog needs their nodes; `gc_grace`: the plan's `{keyspace: {table:
    seconds}}`, a table missing from it has Cassandra's default). It builds no waves and leaves nodes that are
    down to the executor (it waits for them during the run): at fleet size the plan is only this list. `records`:
    the segments' records, whole or as due selection reads them (`DueRecord`, what the plan task reads), keyed by
    segment id, or by position (a sequence: the i-th is `segments[i]`'s, None when it has none; no segment id is
    computed then)."""
    if not config.enabled:
        return DueSelection((), tuple(segments), ())
    if isinstance(records, Mapping):
        get = records.get
        in_order: Sequence[SegmentRecord | DueRecord | None] = [get(segment.segment_id) for segment in segments]
    else:
        in_order = records
        if len(in_order) != len(segments):
            raise ValueError(f"{len(in_order)} records by position for {len(segments)} segments")
    at_once = _select_due_at_once(segments, in_order, run_id, now, config, gc_grace or {})
    if at_once is not None:
        return at_once
    return _select_due_by_record(segments, in_order, run_id, now, config, gc_grace or {})


def _select_due_by_record(
    segments: Sequence[Segment],
    in_order: Sequence[SegmentRecord | DueRecord | None],
    run_id: str,
    now: datetime,
    config: RepairConfig,
    grace_of: GcGrace,
) -> DueSelection:
    """`select_due` of records by position, record by record (every case `_select_due_at_once` declines)."""
    # One pass, one record per segment: `due_segments`, `retries_exhausted` and `backlog_first` inlined (a fleet
    # night is 3.3 million segments). The order is theirs: due by urgency (never repaired first, then the oldest
    # success; ties in plan order), the exhausted taken out, then `backlog_first`'s stable sorts.
    never = datetime.min.replace(tzinfo=now.tzinfo)
    interval, max_retries = config.min_repair_interval, config.max_retries
    due: list[tuple[datetime | None, int]] = []  # (last success, plan index) of the due segments
    urgency: list[datetime] = []
    exhausted_at: set[int] = set()
    for index, record in enumerate(in_order):
        if record is None:
            due.append((None, index))
            urgency.append(never)
            continue
        last = record.last_success
        if last is not None and now - last < interval:
            continue
        due.append((last, index))
        urgency.append(never if last is None else last)
        if (record.attempts if record.run_id == run_id else 0) > max_retries:  # `retries_exhausted`
            exhausted_at.add(len(due) - 1)
    order = sorted(range(len(due)), key=urgency.__getitem__)  # stable: ties keep plan order
    exhausted_positions = [due[i][1] for i in order if i in exhausted_at] if exhausted_at else []
    ordered = (due[i] for i in order if i not in exhausted_at) if exhausted_at else map(due.__getitem__, order)
    run, held = _hold_positions_behind_backlog(ordered, segments, now, grace_of, config.gc_grace_alarm)
    return _selection(segments, run, held, exhausted_positions)


def _due_cutoff(now: datetime, interval: timedelta) -> datetime | None:
    """The last success at or before which a segment is due (`now - last >= interval` exactly when `last <= now -
    interval`), or None when the two can differ: a clock with daylight saving time (`now - interval` is wall-clock
    arithmetic, the difference of two times is not), or a cutoff before year 1."""
    zone = now.tzinfo
    if zone is not None and type(zone) is not timezone:  # a fixed offset (UTC) or naive: the same arithmetic
        return None
    try:
        return now - interval
    except OverflowError:
        return None


def _unit_deadlines(
    segments: Sequence[Segment], now: datetime, grace_of: GcGrace, alarm_share: float
) -> tuple[list[timedelta], list[datetime]] | None:
    """Each segment's gc_grace and alarm point (the success before which it is backlog), by position, as
    `_hold_positions_behind_backlog` computes them per unit; None when some gc_grace is negative (a deadline could
    then come before a never-repaired segment's) or an alarm point falls outside the calendar."""
    graces: list[timedelta] = []
    alarms: list[datetime] = []
    per_unit: dict[tuple[str, tuple[str, ...]], tuple[timedelta, datetime]] = {}
    for unit, members in itertools.groupby(segments, _UNIT):
        count = len(list(members))
        known = per_unit.get(unit)
        if known is None:
            grace = timedelta(seconds=_grace_seconds(segments[len(graces)], grace_of))
            if grace < timedelta():
                return None
            try:
                known = per_unit[unit] = (grace, now - grace * alarm_share)
            except OverflowError:
                return None
        graces.extend(itertools.repeat(known[0], count))
        alarms.extend(itertools.repeat(known[1], count))
    return graces, alarms


_UNIT = operator.attrgetter("keyspace", "tables")
_LAST_SUCCESS, _RUN_ID = operator.attrgetter("last_success"), operator.attrgetter("run_id")


def _retries_used_up(record: SegmentRecord | DueRecord | None, run_id: str, max_retries: int) -> bool:
    """`retries_exhausted` of a record by position (None: never tried)."""
    return record is not None and (record.attempts if record.run_id == run_id else 0) > max_retries


def _select_due_at_once(
    segments: Sequence[Segment],
    in_order: Sequence[SegmentRecord | DueRecord | None],
    run_id: str,
    now: datetime,
    config: RepairConfig,
    grace_of: GcGrace,
) -> DueSelection | None:
    """`select_due` by position at C speed, without a Python step per record (but for the records of this run,
    whose retries may be used up): the same choice and order as `_select_due_by_record` (a fleet night is 3.3
    million records).

    The order is `_select_due_by_record`'s: due segments by urgency (never repaired first, in plan order; then by
    last success, ties in plan order), the exhausted taken out, then `backlog_first`'s stable sorts by deadline. The
    never-repaired come first in both sorts (their urgency and deadline are the least of all, given a last success
    after year 1 and gc_grace >= 0, checked), so only the segments with a last success are sorted: by last success,
    then by deadline. None when a case is outside that (the caller then goes record by record)."""
    cutoff = _due_cutoff(now, config.min_repair_interval)
    if cutoff is None:
        return None
    max_retries = config.max_retries
    if max_retries < 0:  # every record's retries would be used up, whatever its run (not a valid config)
        return None
    # Each step below is one pass at C speed over the records (or those left): which have a record, which of them
    # a last success, which of those are due, and whose retries of this run are used up (only a record of this run
    # can have used them up: `(attempts if its run is this one else 0) > max_retries`, max_retries >= 0).
    count = len(in_order)
    recorded = list(map(operator.is_not, in_order, itertools.repeat(None)))
    present: Sequence[SegmentRecord | DueRecord] = cast("Sequence[SegmentRecord | DueRecord]", in_order)
    present_at: Sequence[int] = range(count)
    never: list[int] = []  # due, never repaired, in plan order (then: urgent, deadline `never`)
    if False in recorded:
        never = list(itertools.compress(range(count), map(operator.not_, recorded)))
        present = list(itertools.compress(in_order, recorded))  # type: ignore[arg-type]
        present_at = list(itertools.compress(range(count), recorded))
    of_this_run = run_id in map(_RUN_ID, present)  # else no record has used up retries of this run
    all_lasts = list(map(_LAST_SUCCESS, present))
    succeeded = list(map(operator.is_not, all_lasts, itertools.repeat(None)))
    if False in succeeded:  # recorded, never succeeded (a failed first attempt): never repaired too
        never = sorted(never + list(itertools.compress(present_at, map(operator.not_, succeeded))))
        present = list(itertools.compress(present, succeeded))
        present_at = list(itertools.compress(present_at, succeeded))
        all_lasts = list(itertools.compress(all_lasts, succeeded))
    due = list(map(operator.le, all_lasts, itertools.repeat(cutoff)))
    dated = list(itertools.compress(present_at, due))  # due with a last success, in plan order
    dated_lasts: list[datetime] = list(itertools.compress(all_lasts, due))
    never_exhausted: list[int] = []
    dated_exhausted: list[int] = []
    exhausted_lasts: list[datetime] = []
    if of_this_run:
        used_up = {i for i in (*never, *dated) if _retries_used_up(in_order[i], run_id, max_retries)}
        if used_up:
            never_exhausted = [i for i in never if i in used_up]
            never = [i for i in never if i not in used_up]
            dated_exhausted = [i for i in dated if i in used_up]
            exhausted_lasts = [last for i, last in zip(dated, dated_lasts, strict=True) if i in used_up]
            dated_lasts = [last for i, last in zip(dated, dated_lasts, strict=True) if i not in used_up]
            dated = [i for i in dated if i not in used_up]
    lowest = datetime.min.replace(tzinfo=now.tzinfo)
    if (dated_lasts and min(dated_lasts) <= lowest) or (exhausted_lasts and min(exhausted_lasts) <= lowest):
        return None
    deadlines_of = _unit_deadlines(segments, now, grace_of, config.gc_grace_alarm) if dated else ([], [])
    if deadlines_of is None:
        return None
    graces, alarms = deadlines_of
    # By urgency: by last success, ties in plan order (a stable sort of positions in plan order).
    by_last = sorted(range(len(dated)), key=dated_lasts.__getitem__)
    positions = list(map(dated.__getitem__, by_last))
    lasts = list(map(dated_lasts.__getitem__, by_last))
    deadlines = list(map(operator.add, lasts, map(graces.__getitem__, positions)))
    backlog = list(map(operator.le, lasts, map(alarms.__getitem__, positions)))  # past the alarm point
    if True in backlog:
        urgent = _by_deadline(list(itertools.compress(positions, backlog)),
                              list(itertools.compress(deadlines, backlog)))  # fmt: skip
        merely = list(map(operator.not_, backlog))
        routine = _by_deadline(list(itertools.compress(positions, merely)), list(itertools.compress(deadlines, merely)))
    else:
        urgent, routine = [], _by_deadline(positions, deadlines)
    run = never + urgent
    held: list[int] = []
    if run:
        backlog_nodes = {node for index in run for node in segments[index].replicas}
        for index in routine:
            (held if not backlog_nodes.isdisjoint(segments[index].replicas) else run).append(index)
    else:
        run = routine
    exhausted_positions = never_exhausted + _by_deadline(dated_exhausted, exhausted_lasts)  # by last success
    return _selection(segments, run, held, exhausted_positions)


def _by_deadline(positions: list[int], deadlines: list[datetime]) -> list[int]:
    """`positions` by deadline, ties in their given order (a stable sort)."""
    return list(map(positions.__getitem__, sorted(range(len(positions)), key=deadlines.__getitem__)))


def _selection(segments: Sequence[Segment], run: list[int], held: list[int], exhausted: list[int]) -> DueSelection:
    """The selection of segments given by position: what runs and what is held back in their order, the exhausted,
    and the rest (not due, and held back) in plan order."""
    if len(run) + len(exhausted) == len(segments):  # every segment runs or is exhausted (a steady night)
        not_due: tuple[Segment, ...] = ()
    else:
        chosen = [False] * len(segments)
        for i in run:
            chosen[i] = True
        for i in exhausted:
            chosen[i] = True
        not_due = tuple(s for s, taken in zip(segments, chosen, strict=True) if not taken)
    get = segments.__getitem__
    return DueSelection(tuple(map(get, run)), not_due, tuple(map(get, exhausted)), tuple(map(get, held)))


class RunState(Enum):
    """State of a whole run, derived from its segments (Reaper's RepairRun.RunState, simplified)."""

    NOT_STARTED = "NOT_STARTED"
    RUNNING = "RUNNING"
    DONE = "DONE"  # every segment repaired or needing no repair
    PARTIAL = "PARTIAL"  # finished, but some segments failed or were postponed: they stay due
    DISABLED = "DISABLED"  # the kill switch was off from the start: nothing repaired, on purpose

    @property
    def is_terminal(self) -> bool:
        return self in {RunState.DONE, RunState.PARTIAL, RunState.DISABLED}


@dataclass(frozen=True)
class RunSummary:
    """Segment counts of one run by state."""

    counts: Mapping[SegmentState, int]

    @classmethod
    def of(cls, states: Iterable[SegmentState]) -> RunSummary:
        tally = Counter(states)
        return cls({state: tally.get(state, 0) for state in SegmentState})

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def state(self) -> RunState:
        if self.counts[SegmentState.RUNNING]:
            return RunState.RUNNING
        if self.counts[SegmentState.NOT_STARTED] == self.total:
            return RunState.NOT_STARTED if self.total else RunState.DONE
        if self.counts[SegmentState.NOT_STARTED]:
            return RunState.RUNNING
        troubled = self.counts[SegmentState.FAILED] + self.counts[SegmentState.POSTPONED]
        return RunState.PARTIAL if troubled else RunState.DONE

    def metrics(self) -> dict[str, int]:
        """Gauges named as CEP-37's AutoRepair metrics (plus postponed ranges, which CEP-37 lacks)."""
        return {
            "SucceededTokenRangesCount": self.counts[SegmentState.DONE],
            "FailedTokenRangesCount": self.counts[SegmentState.FAILED],
            "SkippedTokenRangesCount": self.counts[SegmentState.SKIPPED],
            "PostponedTokenRangesCount": self.counts[SegmentState.POSTPONED],
            "RepairsInProgress": self.counts[SegmentState.RUNNING],
        }

    def line(self) -> str:
        shown = ", ".join(f"{n} {s.value.lower()}" for s, n in self.counts.items() if n)
        return f"{self.state.value}: {self.total} segments" + (f" ({shown})" if shown else "")


def live_metrics(progress: Mapping[str, object], skipped: int = 0) -> dict[str, int]:
    """CEP-37-named gauges from a running batch's progress report (what `BatchEffects.progress` receives each
    minute), so they move during the run instead of once at the end. `skipped`: segments the plan left out."""

    def count(name: str) -> int:
        value = progress.get(name)
        return int(value) if isinstance(value, int | float) else 0

    running = 0 if progress.get("final") else count("sessions")
    return {
        "SucceededTokenRangesCount": count("done"),
        "FailedTokenRangesCount": count("failed"),
        "SkippedTokenRangesCount": skipped,
        "PostponedTokenRangesCount": count("postponed"),
        "RepairsInProgress": running,
    }
