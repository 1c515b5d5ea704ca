"""What each page shows, as plain data (the JSON endpoints return it; `pages.py` renders it as HTML).

Built with ringward's own code from what ringward stores: the page's view of the migration's plan is the one its
precheck built and stored beside the record in ringward_ops, or else rebuilt from the ring and settings the record
holds (so any API server draws it), progress from each repair stage's progress its worker stores beside the
journal and the journal entries of the rows shown (an older worker's journal, without it: read whole), repair
coverage from the nightly runs' stored reports and live progress, the ring from the live cluster.
"""

from __future__ import annotations

import copy
import json
import logging
import os
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from itertools import groupby
from operator import attrgetter
from typing import Any, Generic, TypeVar

from ringward.clusters import ClusterTarget
from ringward.errors import RingwardError
from ringward.migration_page_codec import pages_from_bytes, pages_of_record, view_version
from ringward.migration_pages import MigrationPages, PageRanges, PageStage
from ringward.migration_progress import PENDING, StageCodes, StageProgress, segments_digest
from ringward.migration_record import MigrationRecord, MigrationState
from ringward.migration_storage import JournalSpan
from ringward.repair import (
    REPAIR_TYPES,
    Exclusion,
    load_config,
    progress_figures,
    repair_scope,
    reported_coverage,
    reported_types,
    status_config,
)
from ringward.ring import Ring
from ringward.ring_picture import render_ring_svg
from ringward.svg import xml_text
from ringward_cassandra.ops_store import REPAIR_SWITCH, MigrationRow, OpsStore

from ringward_airflow.ui.airflow_reads import AirflowAccessRefused
from ringward_airflow.ui.formats import format_replication
from ringward_airflow.ui.source import Source

log = logging.getLogger(__name__)

__all__ = [
    "MIGRATION_DAGS",
    "REPAIR_DAG",
    "SINGLE_CLUSTER",
    "RunAccess",
    "StoredStateError",
    "Window",
    "by_type_view",
    "cluster_view",
    "migration_view",
    "repair_view",
]

SINGLE_CLUSTER = ClusterTarget()  # the single-cluster deployment: today's DAG ids and connection
MIGRATION_DAGS = SINGLE_CLUSTER.migration_dags  # the single cluster's; a declared cluster's: `ClusterTarget`
REPAIR_DAG = SINGLE_CLUSTER.repair_dag
CONFIG_PATH_ENV = "RINGWARD_REPAIR_CONFIG"
T = TypeVar("T")
RANGE_ROWS = 1000  # range and segment tables show at most this many rows (the JSON has all)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


# -- migration -------------------------------------------------------------------------------------------


class StoredStateError(RingwardError):
    """A row of ringward_ops this ringward cannot read (written by hand, or by another version)."""


def _stored(table: str, read: Callable[[], T]) -> T:
    """`read()` of ringward_ops.`table`; a row that cannot be parsed is named as such, with the fix."""
    try:
        return read()
    except (KeyError, TypeError, ValueError) as error:  # json.loads, an unknown enum value, a missing column
        raise StoredStateError(
            f"A row of ringward_ops.{table} cannot be read ({type(error).__name__}: {error}).",
            f"It was written by hand or by another ringward version: find it with SELECT * FROM ringward_ops.{table} "
            "and correct or delete it.",
        ) from error


def _checked_record(row: MigrationRow) -> MigrationPages:
    """The page's view of a stored migration's plan; a record or state ringward cannot read is refused with its
    fix."""
    try:
        checked = MigrationRecord.from_json(row.record, row.state)  # every field and the state, as a resume does
        return pages_of_record(row.record, checked.ring)  # the ring parsed once (a fleet's: 256,000 tokens)
    except RingwardError as error:
        raise StoredStateError(f"Migration {row.migration_id} (ringward_ops.migrations): {error.problem}",
                               error.fix) from error  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise StoredStateError(
            f"Migration {row.migration_id} (ringward_ops.migrations): its record cannot be read "
            f"({type(error).__name__}: {error}).",
            "Rerun the migration from a fresh precheck (clear the precheck task).",
        ) from error


def find_migration(
    store: OpsStore, dag_id: str, run_id: str, migration_dags: Sequence[str] = MIGRATION_DAGS
) -> MigrationRow | None:
    """The migration run `run_id` of `dag_id` owns: its record names exactly that DAG and that run.

    Nothing looser: the page is served under the permission to read `dag_id`, so a record of another DAG, or one
    without a DAG, or one whose id merely ends with the run id, must not be shown under it. `migration_dags`: the
    cluster's migration DAGs (the store is that cluster's)."""
    if dag_id not in migration_dags:
        return None
    for row in _stored("migrations", lambda: store.run_migrations(dag_id, run_id)):  # the run's rows, not all
        if row.record.get("dag_id") == dag_id and row.record.get("run_id") == run_id:
            return row
    return None


def _taken_over(store: OpsStore, dag_id: str, run_id: str) -> str | None:
    """The run of the same DAG that took over the migration `run_id` started (resumed it), if any."""
    for row in _stored("migrations", lambda: store.run_migrations(dag_id, run_id)):
        record = row.record
        if record.get("dag_id") == dag_id and row.migration_id == f"{record.get('keyspace')}@{run_id}":
            return str(record.get("run_id") or "") or None
    return None


@dataclass(frozen=True)
class RunAccess:
    """What of a DAG run the user may see beyond the run itself, as Airflow's own API asks for it: its XComs
    (XCom read permission) and its task instances (task instance read permission)."""

    xcoms: bool = True
    task_instances: bool = True


def migration_view(
    source: Source,
    dag_id: str,
    run_id: str,
    *,
    access: RunAccess = RunAccess(),
    window: Window | None = None,
    cluster: ClusterTarget = SINGLE_CLUSTER,
) -> tuple[dict[str, Any], str | None]:
    """(the page's data, the placement SVG) of the migration a run planned; the SVG is None without one.

    `access`: what the user may read of the run besides the migration; nothing read from the rest is returned.
    `window`: which rows of each list of ranges to return (the first `JSON_ROWS` in ring order by default); the
    counts are of every row. The plan's view is read or built once per stored record (`_planned`); each request
    reads the stages' stored progress and the journal entries of its window (`_journal`).
    `cluster`: the cluster whose store `source` reads (its migration DAGs are the ones shown)."""
    window = window or Window()
    if dag_id not in cluster.migration_dags:  # no cluster or database read for a run of any other DAG
        return {
            "cluster": cluster.name, "dag_id": dag_id, "run_id": run_id, "found": False, "run": None,
            "message": f"{dag_id} is not a ringward migration DAG: the Migration page shows runs of "
                       f"{' and '.join(cluster.migration_dags)}.",
        }, None  # fmt: skip
    store = source.ops()
    found = None if store is None else find_migration(store, dag_id, run_id, cluster.migration_dags)
    full_run = _dag_run(source, dag_id, run_id)
    run = _shown_run(full_run, dag_id, access)
    xcoms = ((full_run or {}).get("xcoms") or {}) if access.xcoms else {}
    if found is None or store is None:
        taken_over = None if store is None else _taken_over(store, dag_id, run_id)
        message = (
            f"This run's migration was resumed by run {taken_over}: its progress is on that run's Migration page."
            if taken_over else
            "No ringward migration is recorded for this run: its precheck has not stored a plan yet (a dry run "
            "or a refused precheck records none)."
        )  # fmt: skip
        return {
            "cluster": cluster.name, "dag_id": dag_id, "run_id": run_id, "found": False, "run": run,
            "message": message, "taken_over_by": taken_over,
        }, None  # fmt: skip
    record = found.record
    built, key = _planned(dag_id, run_id, found, _view_reader(store, found))
    state = found.state
    try:
        MigrationState.parse(state)  # the record was checked when its plan was built; the state is checked each time
    except RingwardError as error:
        raise StoredStateError(f"Migration {found.migration_id} (ringward_ops.migrations): {error.problem}",
                               error.fix) from error  # fmt: skip
    journal = _journal(key, built, store, found.migration_id)
    altered = _altered_steps(state, len(built.steps))
    if window.triage:  # the page's window: the same page of every list, clamped to the longest list's last page
        longest = max([len(built.ranges), *(len(stage.starts) for step in built.steps for stage in step.stages)])
        window = replace(window, offset=window.start(longest))
    progress = []
    for step in built.steps:
        whole = [_whole_stage(key, built, store, found, stage) for stage in step.stages]
        stages = [_stage_progress(stage, journal.get(stage.stage), window, read)
                  for stage, read in zip(step.stages, whole, strict=True)]  # fmt: skip
        progress.append({
            "index": step.index, "count": step.count, "before": step.before, "after": step.after,
            "after_shown": step.after_shown, "altered": step.index <= altered, "stages": stages,
            "verification": _verification(xcoms, step.index),
        })  # fmt: skip
    data = {
        "cluster": cluster.name, "dag_id": dag_id, "run_id": run_id, "found": True, "run": run,
        "migration_id": found.migration_id, "keyspace": built.keyspace, "state": state,
        "updated_at": _iso(found.updated_at), "started_at": record.get("started_at"),
        "old": built.old, "new": built.new, "safe": built.safe,
        "old_shown": built.old_shown, "new_shown": built.new_shown,
        "rollback_of": record.get("rollback_of"),
        "stored_steps": [str(s) for s in record.get("steps", [])],
        "stored_steps_shown": [format_replication(s) for s in record.get("steps", [])],
        "summary": record.get("summary", ""),
        "affected_ranges": built.affected, "total_ranges": built.total,
        "findings": [_finding_window(f, ranges, window) for f, ranges in built.findings],
        "window": {"offset": window.offset, "limit": window.limit},
        "ranges_total": len(built.ranges),
        "ranges": built.ranges.rows(_window_indexes(built.ranges, window)),
        "steps": progress,
        "xcoms_readable": access.xcoms,
        "cleanup": _cleanup(xcoms, state),
    }  # fmt: skip
    return data, built.svg


def _whole_stage(
    key: tuple[str, ...], built: MigrationPages, store: OpsStore, row: MigrationRow, stage: PageStage
) -> Callable[[], _StageJournal]:
    return lambda: _journal_state(key, built, lambda: store.journal_of(row.migration_id), row.migration_id)[stage.stage]


# -- the migration's plan, read or built once per stored record ----------------------------------------------

JSON_ROWS = 500  # rows of each list per JSON response (?offset=&limit=, limit at most this): 1 MB at 1000 x 256
PLANS_KEPT = 2  # plans' views kept in memory (at 1000 nodes x 256 tokens, three steps: 190 MB built, 55 MB read)


@dataclass(frozen=True)
class Window:
    """Which rows of each list of ranges a response carries: `limit` rows from `offset`, in ring order (the
    JSON); or, with `triage`, the page's order (affected ranges first; failed, then pending, then done) and
    `offset` clamped to the last page of the longest list."""

    offset: int = 0
    limit: int = JSON_ROWS
    triage: bool = False

    def start(self, longest: int) -> int:
        """`offset`, or the start of the last page of a list of `longest` rows when it is past that list's end."""
        if self.offset < longest:
            return self.offset
        return max(0, (longest - 1) // self.limit * self.limit)


def _window_indexes(ranges: PageRanges, window: Window) -> Sequence[int]:
    """The indexes of the window's rows of `ranges` (affected first in the page's order)."""
    if window.triage:
        return ranges.triaged[window.offset : window.offset + window.limit]
    return range(window.offset, min(window.offset + window.limit, len(ranges)))


def _view_reader(store: OpsStore, row: MigrationRow) -> Callable[[], bytes | None]:
    """What reads the view of `row`'s plan its precheck stored (`ringward.migration_page_codec.stored_view`), if
    the store keeps views."""
    read = getattr(store, "migration_pages", None)
    if read is None:
        return lambda: None
    return lambda: read(row.migration_id, view_version(row.record))


def _build(row: MigrationRow, read_view: Callable[[], bytes | None]) -> MigrationPages:
    """The page's view of `row`'s plan: the one its precheck stored (built by a worker, from this very record),
    read; else built here from the record, checked as a resume checks it."""
    data = _stored("migration_pages", read_view)
    if data is not None:
        try:
            pages = pages_from_bytes(data)
        except ValueError as error:  # another format (an older worker's), not written whole, or markup
            # ringward does not draw (`checked_document`): built here instead, from the record
            log.warning("Migration %r: the stored view of its plan is not used (%s); the page builds it from the "
                        "record.", row.migration_id, error)  # fmt: skip
        else:
            STORED_VIEWS[row.migration_id] += 1
            return pages
    COLD_BUILDS[row.migration_id] += 1
    return _checked_record(row)


@dataclass
class _Building:
    done: threading.Event = field(default_factory=threading.Event)
    built: MigrationPages | None = None
    error: BaseException | None = None


class _Latest(Generic[T]):
    """The `kept` latest-used values, by what each was built from: a value is built outside the lock (two requests
    asking for a new key at once may both build it; the last one built is kept), looked up and stored under it."""

    def __init__(self, kept: int) -> None:
        self.kept = kept
        self._values: OrderedDict[tuple[Any, ...], T] = OrderedDict()

    def get(self, key: tuple[Any, ...], build: Callable[[], T]) -> T:
        with _PLANS_LOCK:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
        value = build()
        with _PLANS_LOCK:
            self._values[key] = value
            while len(self._values) > self.kept:
                self._values.popitem(last=False)
        return value

    def clear(self) -> None:
        with _PLANS_LOCK:
            self._values.clear()


_PLANS: OrderedDict[tuple[str, ...], MigrationPages] = OrderedDict()  # record key -> its built plan, latest used last
_BUILDING: dict[tuple[str, ...], _Building] = {}
_PLANS_LOCK = threading.Lock()
COLD_BUILDS = Counter[str]()  # migration id -> how many times its plan was built (what the tests count)
STORED_VIEWS = Counter[str]()  # migration id -> how many times its stored view was read instead


def _record_key(dag_id: str, run_id: str, row: MigrationRow) -> tuple[str, ...]:
    """Everything the built plan is made of: the record as stored (its ring is stored as text). Not the state:
    the plan does not depend on it. No viewer in it: the plan of a record is the same for every viewer, and the
    route has checked the viewer may read `dag_id`'s runs before this is asked."""
    record = row.record
    ring = record.get("ring")
    rest = {k: v for k, v in record.items() if k != "ring"}
    ring_text = ring if isinstance(ring, str) else json.dumps(ring, sort_keys=True, default=str)
    return dag_id, run_id, row.migration_id, json.dumps(rest, sort_keys=True, default=str), ring_text


def _planned(
    dag_id: str, run_id: str, row: MigrationRow, read_view: Callable[[], bytes | None] = lambda: None
) -> tuple[MigrationPages, tuple[str, ...]]:
    """(the record's pages, its key): read from the store or built (`_build`) once (by one request; others asking
    for it meanwhile wait for that one rather than start their own), then kept while it is one of the
    `PLANS_KEPT` latest used."""
    key = _record_key(dag_id, run_id, row)
    with _PLANS_LOCK:
        if key in _PLANS:
            _PLANS.move_to_end(key)
            return _PLANS[key], key
        building = _BUILDING.get(key)
        mine = building is None
        if building is None:
            building = _BUILDING[key] = _Building()
    if not mine:
        building.done.wait()
        if building.error is not None:
            raise copy.copy(building.error) from building.error
        assert building.built is not None
        return building.built, key
    try:
        building.built = _build(row, read_view)
        with _PLANS_LOCK:
            _PLANS[key] = building.built
            while len(_PLANS) > PLANS_KEPT:
                _PLANS.popitem(last=False)
        return building.built, key
    except BaseException as error:
        building.error = error
        raise
    finally:
        with _PLANS_LOCK:
            _BUILDING.pop(key, None)
        building.done.set()


def _finding_window(finding: dict[str, Any], ranges: Sequence[Any], window: Window) -> dict[str, Any]:
    """A finding (as JSON, but its `ranges`) with the window's share of the ranges it names (a fleet's plan may name
    256,000: written out only for the window), and their count."""
    first = 0 if window.triage else window.offset
    shown = [[r.start, r.end] for r in ranges[first : first + window.limit]]
    return {**finding, "ranges": shown, "ranges_total": len(ranges)}


@dataclass(frozen=True)
class _StageJournal:
    """A stage's journal: its entries by range end, and its segments' indexes by what their entry says."""

    entries: dict[int, Any]
    failed: list[int]
    others: list[int]  # pending, or any status but failed and done
    done: list[int]


@dataclass(frozen=True)
class _StageSummary:
    """A stage's stored progress (`ringward.migration_progress`): its counts and order from its codes; the
    entries of a window's segments read from the journal (`read`: `journal_spans` of the stage)."""

    migration_id: str
    codes: StageCodes
    read: Callable[[Sequence[JournalSpan]], list[Any]]


JOURNAL_TTL = 10.0  # seconds a large journal's reading is reused (the Migration page reloads every 10 s)
JOURNAL_CACHED_FROM = 10_000  # entries: a smaller journal is read for every request
_JOURNALS: dict[tuple[str, ...], tuple[float, dict[str, _StageJournal]]] = {}  # record key -> (read at, journal)
_clock = time.monotonic
JOURNAL_READS = Counter[str]()  # migration id -> journal entries read for its page (what the tests count)
_SPAN_SLACK = 8  # entries a window's span may read beyond the segments it is for (entries of no segment of the plan)
_FIRST, _LAST = (-(2**63), -(2**63)), (2**63 - 1, 2**63 - 1)  # a stage's whole slice of the journal


def _journal(
    key: tuple[str, ...], built: MigrationPages, store: OpsStore, migration_id: str
) -> dict[str, _StageJournal | _StageSummary]:
    """Each stage's journal as the page reads it. From the stage's stored progress when the store keeps it and it
    is of the stage's segments (then only a window's entries are read, `_window_entries`); a stage with neither
    progress nor any journal entry (not started) is all pending; else (a journal written before the progress was
    kept, by an older worker) the whole journal is read, once per `JOURNAL_TTL` (`_journal_state`)."""
    stages = [stage for step in built.steps for stage in step.stages]
    read_progress = getattr(store, "stage_progress", None)
    read_spans = getattr(store, "journal_spans", None)
    if read_progress is None or read_spans is None:  # a store without it (an older one)
        return dict(_journal_state(key, built, lambda: store.journal_of(migration_id), migration_id))
    stored = {p.step: p for p in _stored("migration_progress", lambda: read_progress(migration_id))}
    found: dict[str, _StageJournal | _StageSummary] = {}
    for stage in stages:
        progress = stored.get(stage.stage)
        codes = None if progress is None else _progress_codes(key, migration_id, stage, progress)
        if codes is not None:
            found[stage.stage] = _StageSummary(migration_id, codes, _spans_reader(read_spans, migration_id, stage))
        # no progress: a stage not started (all pending), or one whose worker kept none; one entry tells
        elif progress is None and not _spans_reader(read_spans, migration_id, stage)([(_FIRST, _LAST, 1)]):
            found[stage.stage] = _StageJournal({}, [], [], [])
    if len(found) < len(stages):  # a stage's journal without its progress: read whole
        full = _journal_state(key, built, lambda: store.journal_of(migration_id), migration_id)
        return {stage.stage: found[stage.stage] if stage.stage in found else full[stage.stage] for stage in stages}
    return found


def _progress_codes(
    key: tuple[str, ...], migration_id: str, stage: PageStage, progress: StageProgress
) -> StageCodes | None:
    """The stage's codes when `progress` is of its segments (same bounds, same order) and readable; else None."""
    if progress.count != len(stage.starts) or progress.segments != _digest(key, stage):
        return None  # of another plan of the stage (a resume's) or written by hand: the journal is read
    try:
        return progress.codes()
    except ValueError as error:
        log.warning("Migration %r: the stored progress of %s is not used (%s); the page reads the journal.",
                    migration_id, stage.stage, error)  # fmt: skip
        return None


_DIGESTS: dict[tuple[tuple[str, ...], str], str] = {}  # (record key, stage) -> its segments' digest


def _digest(key: tuple[str, ...], stage: PageStage) -> str:
    """`segments_digest` of the stage of the plan of record `key`: hashed once per plan kept (2 x 2 MB at fleet
    size: 15 ms a stage)."""
    with _PLANS_LOCK:
        found = _DIGESTS.get((key, stage.stage))
    if found is None:
        found = segments_digest(stage.starts, stage.ends)
        with _PLANS_LOCK:
            for old in [k for k in _DIGESTS if k[0] not in _PLANS]:
                del _DIGESTS[old]
            _DIGESTS[key, stage.stage] = found
    return found


def _spans_reader(
    read: Callable[[str, str, Sequence[JournalSpan]], list[Any]], migration_id: str, stage: PageStage
) -> Callable[[Sequence[JournalSpan]], list[Any]]:
    def spans(wanted: Sequence[JournalSpan]) -> list[Any]:
        entries = _stored("migration_journal", lambda: read(migration_id, stage.stage, wanted))
        JOURNAL_READS[migration_id] += len(entries)
        return entries

    return spans


def _journal_state(
    key: tuple[str, ...], built: MigrationPages, read: Callable[[], list[Any]], migration_id: str = ""
) -> dict[str, _StageJournal]:
    """The migration's journal by stage, read whole (a journal whose stages keep no progress: an older worker's).
    A large one (a fleet's: 256,000 entries a stage) is read and sorted at most once per `JOURNAL_TTL` for every
    viewer of the run (the route has checked the viewer may read it; the key is the record's, its DAG and run
    included): its progress is then up to that old."""
    now = _clock()
    with _PLANS_LOCK:
        kept = _JOURNALS.get(key)
    if kept is not None and now - kept[0] < JOURNAL_TTL:
        return kept[1]
    journal = _stored("migration_journal", read)
    JOURNAL_READS[migration_id] += len(journal)
    # stage -> range end -> entry (a stage's segments do not overlap: their ends differ; the start is checked)
    by_stage: dict[str, dict[int, Any]] = {}
    for step_name, entries in groupby(journal, key=attrgetter("step")):  # stored in (stage, range) order
        by_stage.setdefault(step_name, {}).update({e.range.end: e for e in entries})
    state = {stage.stage: _stage_journal(stage, by_stage.get(stage.stage, {}))
             for step in built.steps for stage in step.stages}  # fmt: skip
    with _PLANS_LOCK:
        for old in [k for k, (at, _) in _JOURNALS.items() if now - at >= JOURNAL_TTL or k not in _PLANS]:
            del _JOURNALS[old]
        if len(journal) >= JOURNAL_CACHED_FROM:
            _JOURNALS[key] = (now, state)
    return state


def _stage_journal(stage: PageStage, entries: dict[int, Any]) -> _StageJournal:
    """One pass over the segments of a stage with entries; none over those of a stage without (all pending)."""
    failed: list[int] = []
    done: list[int] = []
    others: list[int] = []
    if entries:
        get, starts = entries.get, stage.starts
        for i, end in enumerate(stage.ends):
            entry = get(end)
            status = None if entry is None or entry.range.start != starts[i] else entry.status
            (failed if status == "failed" else done if status == "done" else others).append(i)
    return _StageJournal(entries, failed, others, done)


def _window_entries(stage: PageStage, summary: _StageSummary, indexes: Sequence[int]) -> dict[int, Any] | None:
    """The journal entries of the window's segments (`indexes`) that have one (their code says so), by range end:
    read as spans of the journal holding those entries and no other of the stage's segments (a span is cut where
    an entry not shown lies between two shown ones, or where the ring order wraps), so no more entries are read
    than the window shows (and `_SPAN_SLACK` per span of entries of no segment of the plan, which nothing writes).
    None when a span was cut short by its limit before an entry it was for (more such entries than the slack):
    the caller reads the stage's journal whole then."""
    codes, starts, ends = summary.codes, stage.starts, stage.ends
    wanted = sorted(i for i in indexes if codes.code(i) != PENDING)
    if not wanted:
        return {}
    runs: list[list[int]] = [[wanted[0]]]
    for i in wanted[1:]:
        last = runs[-1][-1]
        if (starts[i], ends[i]) > (starts[last], ends[last]) and not codes.entries_between(last + 1, i - 1):
            runs[-1].append(i)
        else:
            runs.append([i])
    spans = [((starts[run[0]], ends[run[0]]), (starts[run[-1]], ends[run[-1]]), len(run) + _SPAN_SLACK)
             for run in runs]  # fmt: skip
    read = summary.read(spans)
    entries = {(e.range.start, e.range.end): e for e in read}
    missing = {i for i in wanted if (starts[i], ends[i]) not in entries}
    for run, (low, high, cap) in zip(runs, spans, strict=True) if missing else ():
        if missing.intersection(run) and sum(1 for key in entries if low <= key <= high) >= cap:
            return None  # cut short by its limit before an entry it was for
    return {ends[i]: entries[starts[i], ends[i]] for i in wanted if (starts[i], ends[i]) in entries}


def _stage_progress(
    stage: PageStage, journal: _StageJournal | _StageSummary | None, window: Window, full: Callable[[], _StageJournal]
) -> dict[str, Any]:
    """A stage's counts and the window's rows, its journal merged in. `full`: the stage's journal read whole (a
    window's entries that could not be read in bounded spans)."""
    total = len(stage.starts)
    if isinstance(journal, _StageSummary):
        codes = journal.codes
        if window.triage:
            indexes: Sequence[int] = codes.triaged(window.offset, window.limit)
        else:
            indexes = range(window.offset, min(window.offset + window.limit, total))
        entries = _window_entries(stage, journal, indexes)
        if entries is not None:
            return _stage_rows(stage, indexes, entries, codes.done, codes.failed)
        journal = full()
    entries = journal.entries if journal else {}
    failed, others, done = (journal.failed, journal.others, journal.done) if journal else ([], [], [])
    if window.triage:  # what needs a look first: failed, then not done yet, then done (ring order within each)
        order: Sequence[int] = failed + others + done if entries else range(total)
        indexes = order[window.offset : window.offset + window.limit]
    else:
        indexes = range(window.offset, min(window.offset + window.limit, total))
    return _stage_rows(stage, indexes, entries, len(done), len(failed))


def _stage_rows(
    stage: PageStage, indexes: Sequence[int], entries: Mapping[int, Any], done: int, failed: int
) -> dict[str, Any]:
    rows = []
    for i in indexes:
        entry = entries.get(stage.ends[i]) if entries else None
        entry = entry if entry is not None and entry.range.start == stage.starts[i] else None
        replicas = stage.replicas[i]
        rows.append({
            "range": [stage.starts[i], stage.ends[i]], "replicas": list(replicas),
            "status": entry.status if entry else "pending",
            "coordinator": entry.coordinator if entry else replicas[0] if replicas else "",
            "attempts": entry.attempts if entry else 0,
            "seconds": entry.seconds if entry else None,
            "detail": entry.detail if entry else "",
        })  # fmt: skip
    return {"stage": stage.stage, "name": stage.name, "total": len(stage.starts), "done": done, "failed": failed,
            "ranges": rows}  # fmt: skip


def _altered_steps(state: str, count: int) -> int:
    if state.startswith("altered:"):
        return int(state.split(":", 1)[1])
    return count if state in ("cleaned", "done") else 0


def _dag_run(source: Source, dag_id: str, run_id: str | None) -> dict[str, Any] | None:
    try:
        run = source.dag_run(dag_id, run_id)
    except AirflowAccessRefused:  # the viewer may not read the run: the page's access error, not a note in it
        raise
    except Exception as error:  # Airflow's API failing must not hide ringward's own data: said in the run's place
        return {"error": f"Airflow's record of the run could not be read: {error}"}
    if run is None:
        return None
    return {
        "run_id": run.run_id, "state": run.state, "start": _iso(run.start), "end": _iso(run.end),
        "seconds": (run.end - run.start).total_seconds() if run.start and run.end else None,
        "tasks": [
            {"task_id": t.task_id, "map_index": t.map_index, "state": t.state, "start": _iso(t.start),
             "end": _iso(t.end), "seconds": t.seconds, "tries": t.tries}
            for t in run.tasks
        ],
        "xcoms": run.xcoms,
    }  # fmt: skip


def _shown_run(run: dict[str, Any] | None, dag_id: str, access: RunAccess) -> dict[str, Any] | None:
    """The run as the migration data returns it: never its raw XComs (Airflow's API serves them, under their
    permission); its task instances only to a user who may read them."""
    if run is None or "error" in run:
        return run
    shown = {k: v for k, v in run.items() if k != "xcoms"}
    hidden = []
    if not access.xcoms:
        hidden.append(f"The verification evidence and cleanup details come from this run's XComs: reading them needs "
                      f"the XCom read permission on {dag_id}.")  # fmt: skip
    if not access.task_instances:
        shown["tasks"] = []
        hidden.append(f"The task timings are this run's task instances: reading them needs the task instance read "
                      f"permission on {dag_id}.")  # fmt: skip
    shown["hidden"] = hidden
    return shown


def _verification(xcoms: dict[str, Any], index: int) -> dict[str, Any]:
    return {name: xcoms[f"step_{index}.{name}"] for name in ("verify_preview", "verify_counts")
            if f"step_{index}.{name}" in xcoms}  # fmt: skip


def _cleanup(xcoms: dict[str, Any], state: str) -> dict[str, Any]:
    nodes = xcoms.get("cleanup")
    done = state in ("cleaned", "done") and nodes is not None
    return {"done": state in ("cleaned", "done"), "nodes": nodes if done else None,
            "report": xcoms.get("report")}  # fmt: skip


# -- repair ----------------------------------------------------------------------------------------------


def _repair_config(runs: list[Any], path: str | None = None) -> tuple[Any, str | None]:
    """(the configuration whose selection and kill switch the page shows, a note when the last run's could not
    be used). `path`: the cluster's configuration file (None: $RINGWARD_REPAIR_CONFIG, else the shipped one), as
    the DAG factory gives it to the cluster's nightly repair.

    A configuration file that cannot be read raises its ConfigurationError (the page says which and why)."""
    base = load_config(path or os.environ.get(CONFIG_PATH_ENV) or None)
    last = runs[0] if runs else None
    chosen = status_config(base, last.config if last else None, last.run_id if last else None)
    return chosen.config, chosen.note


_PREVIEWS_SHOWN = 20  # the latest preview findings on the Repair page


TABLE_ROWS = 200  # tables per page of the Repair page (and bars of its coverage picture)
EXCLUDED_ROWS = 200  # keyspaces and tables left out, listed (the rest counted)


def repair_view(
    source: Source, window: Window | None = None, cluster: ClusterTarget = SINGLE_CLUSTER
) -> tuple[dict[str, Any], str]:
    """(the page's data, a picture of each table's coverage) from what the nightly repair stored: the reports of
    its runs (ringward_ops.repair_runs: per-table coverage, metrics) and the live progress of the running run
    (ringward_ops.repair_progress). Nothing is planned here, nor the repair history scanned: a request costs a
    few small reads whatever the size of the cluster (the page reloads every 15 s while a run goes on).

    `window`: which tables (sorted by name) the per-table lists and the picture show, the first `TABLE_ROWS` by
    default; `tables_total` counts them all. `cluster`: the cluster `source` reads (its repair DAG's latest run,
    its repair configuration)."""
    window = window or Window(limit=TABLE_ROWS)
    store = source.ops()
    runs = _stored("repair_runs", store.repair_runs) if store else []
    events = _stored("repair_switch", lambda: store.switch_events(REPAIR_SWITCH)) if store else []
    config, config_note = _repair_config(runs, cluster.repair_config)
    # The tables in scope: the schema the driver keeps (no query), the configuration's selection, narrowed to
    # what the recent runs selected.
    covered, excluded = repair_scope(source.schema(), config, [(run.run_id, run.config) for run in runs])
    latest = runs[0] if runs else None
    if latest is not None:
        skipped = latest.summary.get("skipped_keyspaces")
        for keyspace, why in sorted(skipped.items() if isinstance(skipped, Mapping) else ()):
            excluded.append(Exclusion(keyspace, None, f"skipped by the latest run ({latest.run_id}): {why}"))
    index = _report_index(cluster.name, runs)
    reported = index.reported
    tables = []
    first = window.start(len(covered)) if window.triage else window.offset  # the page's: clamped to the last
    shown = covered[first : first + window.limit]
    for keyspace, table in shown:
        name = f"{keyspace}.{table}"
        found = reported.get(name)
        tables.append({
            "table": name, "repaired": found[0] if found else None, "run_id": found[1] if found else None,
            "recorded_at": _iso(found[2]) if found else None,
        })  # fmt: skip
    run = _dag_run(source, cluster.repair_dag, None)
    progress = None
    if store is not None and run is not None and "error" not in run:
        progress = _stored("repair_progress", lambda: store.run_progress(run["run_id"]))
    paused = bool(events and events[0].paused)
    read_previews = getattr(store, "preview_findings", None) if store is not None else None
    findings = _stored("repair_previews", read_previews) if read_previews is not None else []
    previews = findings[:_PREVIEWS_SHOWN]
    data = {
        "cluster": cluster.name, "repair_dag": cluster.repair_dag,
        "ops_keyspace": store is not None,
        "latest_run": None if latest is None else {
            "run_id": latest.run_id, "state": latest.state, "updated_at": _iso(latest.updated_at),
            "metrics": latest.summary.get("metrics") or {},
        },
        "tables": tables, "tables_total": len(covered),
        "window": {"offset": first, "limit": window.limit},
        "by_type": by_type_view(runs, [f"{keyspace}.{table}" for keyspace, table in shown], findings, index),
        "current_run": _current_run(run, progress),
        "switch": {"paused": paused, "events": [
            {"paused": e.paused, "changed_at": _iso(e.changed_at), "changed_by": e.changed_by, "reason": e.reason}
            for e in events]},
        "config_enabled": config.enabled, "config_note": config_note,
        "excluded": [{"name": e.name, "keyspace": e.keyspace, "table": e.table, "reason": e.reason}
                     for e in excluded[:EXCLUDED_ROWS]],
        "excluded_total": len(excluded),
        "runs": [{"run_id": r.run_id, "state": r.state, "updated_at": _iso(r.updated_at),
                  "tables": r.summary.get("tables", {})} for r in runs[:10]],
        "previews": [{"table": f"{f.keyspace}.{f.table}", "out_of_sync_ranges": f.out_of_sync_ranges,
                      "ranges": ", ".join(f"({r.start}, {r.end}]" for r in f.ranges[:3])
                                + (f" and {len(f.ranges) - 3} more" if len(f.ranges) > 3 else ""),
                      "found_at": _iso(f.found_at), "run_id": f.run_id, "coordinator": f.coordinator}
                     for f in previews],
    }  # fmt: skip
    return data, coverage_svg(tables)


@dataclass(frozen=True)
class _ReportIndex:
    """What the Repair page reads from the stored run reports, table by table: built once per set of reports."""

    reported: dict[str, Any]  # keyspace.table -> Reported (reported_coverage)
    coverage: dict[tuple[str, str], dict[str, Any]]  # (table, type) -> its latest report's share and run
    shares: dict[str, dict[str, Any]]  # table -> its latest repaired/unrepaired split (incremental)
    previewed: dict[str, tuple[str, datetime | None]]  # table -> (run id, recorded at) of its latest preview
    kinds: frozenset[str]  # the repair types the reports hold


def _index_reports(runs: Sequence[Any]) -> _ReportIndex:
    coverage: dict[tuple[str, str], dict[str, Any]] = {}
    shares: dict[str, dict[str, Any]] = {}
    previewed: dict[str, tuple[str, datetime | None]] = {}
    kinds: set[str] = set()
    for run in runs:
        for kind, entry in reported_types(run.summary).items():
            if not isinstance(entry, Mapping) or kind not in REPAIR_TYPES:
                continue
            kinds.add(kind)
            covered = entry.get("previewed" if kind == "preview" else "repaired") or {}
            for table, share in covered.items() if isinstance(covered, Mapping) else ():
                coverage.setdefault((str(table), kind), {"share": str(share), "run_id": run.run_id})
                if kind == "preview":
                    previewed.setdefault(str(table), (run.run_id, run.updated_at))
            split = entry.get("repaired_share") or {}
            for table, share in split.items() if isinstance(split, Mapping) else ():
                if isinstance(share, Mapping):
                    shares.setdefault(str(table), {**share, "run_id": run.run_id})
    return _ReportIndex(dict(reported_coverage(runs)), coverage, shares, previewed, frozenset(kinds))


# The reports' index, per cluster and set of reports as stored (each report's run, state and when it was written: a
# report is rewritten, never changed in place). A fleet's two months of reports (60 x 4,000 tables) took 0.8 s of CPU
# to index, on every reload of the page (every 15 s while a run goes on); reading them is what a request still pays.
_REPORT_INDEXES = _Latest[_ReportIndex](kept=4)  # one per cluster whose page is being watched, about


def _report_index(cluster: str | None, runs: Sequence[Any]) -> _ReportIndex:
    key = (cluster, *((run.run_id, run.state, run.updated_at) for run in runs))
    return _REPORT_INDEXES.get(key, lambda: _index_reports(runs))


def by_type_view(
    runs: list[Any], tables: list[str], findings: list[Any], index: _ReportIndex | None = None
) -> dict[str, Any]:
    """Per repair type, per table in scope: the coverage the latest report of that type gave it (repaired
    within gc_grace; a preview's: compared), the repaired/unrepaired split of an incremental table (tablestats'
    Percent repaired, mean over the nodes and the lowest node's, read at the end of the run), and what the last
    preview of the table found: the ranges out of sync in that run's findings, none = in sync. From the stored
    reports and preview findings only (`runs` latest first; `index`: theirs, when already built)."""
    index = index or _index_reports(runs)
    coverage, shares, previewed, kinds = index.coverage, index.shares, index.previewed, index.kinds
    found: dict[tuple[str | None, str], list[Any]] = {}
    newest: dict[str, Any] = {}  # table -> its latest finding (findings come latest first)
    for finding in findings:
        name = f"{finding.keyspace}.{finding.table}"
        found.setdefault((finding.run_id, name), []).append(finding)
        newest.setdefault(name, finding)
    rows = []
    for table in tables:
        preview = None
        run_id = _last_preview_run(previewed.get(table), newest.get(table))
        if run_id is not None:
            in_run = found.get((run_id, table), [])
            preview = {"run_id": run_id, "out_of_sync_ranges": sum(f.out_of_sync_ranges for f in in_run),
                       "found_at": _iso(max(f.found_at for f in in_run)) if in_run else None}  # fmt: skip
        rows.append({
            "table": table,
            "coverage": {kind: coverage.get((table, kind)) for kind in REPAIR_TYPES if kind in kinds},
            "repaired_share": shares.get(table) if "incremental" in kinds else None,
            "last_preview": preview,
        })  # fmt: skip
    return {"types": [kind for kind in REPAIR_TYPES if kind in kinds], "tables": rows}


def _last_preview_run(reported: tuple[str, datetime | None] | None, newest: Any) -> str | None:
    """The run of a table's last preview: its latest report's, unless a finding was kept after that report (a run
    whose preview has not reported yet, or whose report failed)."""
    if newest is not None and (reported is None or reported[1] is None or newest.found_at > reported[1]):
        return str(newest.run_id) if newest.run_id is not None else None
    return reported[0] if reported is not None else None


def _percent(share: str | None) -> float | None:
    """ "40.0%" -> 40.0; None or "n/a" -> None."""
    try:
        return float(str(share).rstrip("%"))
    except ValueError:
        return None


def coverage_svg(tables: list[dict[str, Any]]) -> str:
    """One bar per table: the share of its ranges repaired within gc_grace, as the latest report gave it. Names and
    shares are element text only, escaped as they are written (`xml_text`)."""
    width, row = 640, 22
    height = 40 + row * max(1, len(tables))
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' font-family='Helvetica, Arial, "
        "sans-serif' font-size='12'>",
        "<text x='10' y='20' font-weight='bold'>Repaired within gc_grace, per table (latest report)</text>",
    ]
    if not tables:
        parts.append("<text x='10' y='45'>no table to repair</text>")
    for i, t in enumerate(tables):
        y = 32 + i * row
        percent = _percent(t["repaired"])
        label = t["repaired"] if t["repaired"] is not None else "not reported yet"
        colour = "#bbb" if percent is None else "#2b7a2b" if percent >= 100 else "#b9770e" if percent >= 50 \
            else "#c0392b"  # fmt: skip
        fill = 0 if percent is None else max(0.0, min(percent, 100.0)) * 3
        parts.append(
            f"<g class='table'><title>{xml_text(t['table'])}: {xml_text(label)}</title>"
            f"<text x='10' y='{y + 14}'>{xml_text(t['table'])}</text>"
            f"<rect x='250' y='{y + 2}' width='300' height='14' fill='#eee' stroke='#bbb'/>"
            f"<rect class='bar' x='250' y='{y + 2}' width='{fill:.1f}' height='14' fill='{colour}'/>"
            f"<text x='{560}' y='{y + 14}'>{xml_text(label)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _current_run(run: dict[str, Any] | None, progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """The latest nightly run (Airflow's) with the progress its repair task last stored: segments done, failed
    and postponed of the total, sessions running per node, the ETA the worker estimated."""
    if run is None or "error" in run:
        return run
    running = run["state"] in ("running", "queued")
    current: dict[str, Any] = {"run_id": run["run_id"], "state": run["state"], "start": run["start"], "end": run["end"],
                               "progress": None}  # fmt: skip
    if not progress:
        return current
    current["progress"] = progress_figures(progress, running)
    return current


# -- cluster ---------------------------------------------------------------------------------------------


NODE_ROWS = 200  # nodes per page of the Cluster page
RING_ARCS = 720  # the ring picture draws a larger ring as this many arcs (runs of neighbouring ranges)
RING_LEGEND = 40  # nodes the ring picture's legend names (the down ones first); the page lists every node


def cluster_view(
    source: Source, window: Window | None = None, cluster: ClusterTarget = SINGLE_CLUSTER
) -> tuple[dict[str, Any], str]:
    """(the page's data, the ring picture); `window`: which nodes the list shows (the first `NODE_ROWS` by
    default), `nodes_total` counts them all. The picture's size is bounded (`RING_ARCS`, `RING_LEGEND`)."""
    window = window or Window(limit=NODE_ROWS)
    connection = source.connection()
    nodes = source.nodes()
    ring = source.ring()
    schema_versions = sorted({n.schema_version for n in nodes if n.schema_version})
    first = window.start(len(nodes)) if window.triage else window.offset  # the page's: clamped to the last
    data = {
        "cluster": cluster.name,
        "connection": {"conn_id": connection.conn_id, "conn_type": connection.conn_type,
                       "target": connection.target, "login_set": connection.login_set, "ssl": connection.ssl,
                       "local_dc": connection.local_dc, "protocol_version": connection.protocol_version},
        "nodes": [n.__dict__ | {"load": "-" if n.load_mib is None else f"{n.load_mib:.1f} MiB"}
                  for n in nodes[first : first + window.limit]],
        "nodes_total": len(nodes), "window": {"offset": first, "limit": window.limit},
        "schema_agreement": len(schema_versions) <= 1,
        "datacenters": {dc: len(members) for dc, members in ring.datacenters().items()},
        "tokens": len(ring.sorted_tokens),
    }  # fmt: skip
    return data, _ring_picture(ring)


_RING_PICTURES = _Latest[str](kept=2)  # what the picture shows -> the picture


def _ring_picture(ring: Ring) -> str:
    """The ring's picture, drawn once per ring as it shows it (each node's address, place, state and tokens): a
    fleet's ring (256,000 ranges) takes 0.4 s to draw even in `RING_ARCS` arcs. The same for every viewer (the
    Cluster routes serve only users who may read the connection)."""
    key = tuple((n.address, n.datacenter, n.rack, n.state, n.tokens) for n in ring.nodes)
    title = f"{len(ring.nodes)} nodes, {len(ring.sorted_tokens)} tokens: primary ranges by owner"
    return _RING_PICTURES.get(
        key, lambda: render_ring_svg(ring, title=title, max_arcs=RING_ARCS, max_legend=RING_LEGEND)
    )
