"""The cells of ringward_ops as both ops stores write and read them (`OpsStore` on Cassandra and `MemoryOpsStore`
in memory): the history bucket arithmetic, the columns of a history, preview or plan write, the row types built
from cells, and the refusals both stores raise. Pure: no driver, so the in-memory store runs without one."""

from __future__ import annotations

import collections
import functools
import itertools
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol, TypeVar, cast

from ringward.errors import MigrationError, RepairError
from ringward.repair import (
    DueRecord,
    PreviewFinding,
    RecordKey,
    RepairHistoryRow,
    Segment,
    SegmentRecord,
    SegmentState,
    segment_id_of,
)
from ringward.ring import TokenRange

__all__ = [
    "DEFAULT_HISTORY_TTL",
    "DUE_COLUMNS",
    "HISTORY_BUCKETS",
    "LEASE_TTL_SECONDS",
    "PLAN_CHUNK_ROWS",
    "PLAN_PAGE_COMMANDS",
    "RECORD_COLUMNS",
    "REPAIR_SWITCH",
    "DueRecordsOf",
    "RecordKey",
    "add_due_records",
    "add_records",
    "bucket_bounds",
    "check_chunk",
    "due_records_in_order",
    "history_bucket",
    "history_columns",
    "history_row",
    "history_table",
    "lease_held",
    "merged",
    "plan_pages",
    "preview_columns",
    "preview_finding",
    "record_of_cells",
    "segment_records",
    "utc",
]

REPAIR_SWITCH = "nightly_subrange_repair"
# A migration's keyspace lease lives this long from its last renewal (each migration task renews it): longer
# than the approval's 48 h wait, so the lease taken by the precheck is still held when a late approval starts
# the ALTER; a migration abandoned half done frees its keyspace for the nightly repair 3 days after its last task.
LEASE_TTL_SECONDS = 72 * 3600
DEFAULT_HISTORY_TTL = 30 * 24 * 3600  # seconds: a range not repaired (nor planned) for 30 days is forgotten
PLAN_CHUNK_ROWS = 5000  # repair commands per repair_plan partition
# Commands per repair_plan row, one per line: a fleet night's plan is 2.5 million commands, and one INSERT each
# would cost the plan task minutes of driver CPU; 100 a row is 25,600 writes of ~20 KB.
PLAN_PAGE_COMMANDS = 100
HISTORY_BUCKETS = 256
_BUCKET_SHIFT = 56  # 64-bit tokens, top 8 bits


_TOKEN_OFFSET = 2**63
_UNIT = operator.attrgetter("keyspace", "tables")
_RANGE = operator.attrgetter("range")
_BOUNDS = operator.attrgetter("start", "end")


def history_bucket(token: int) -> int:
    """The history partition of a range starting at `token`: its top 8 bits as an unsigned value (0..255)."""
    return (token + _TOKEN_OFFSET) >> _BUCKET_SHIFT


Found = TypeVar("Found", SegmentRecord, DueRecord)
RecordsOf = Callable[[str, Sequence[str], Iterable[int], Mapping[tuple[int, int], str], str], dict[str, Found]]


class DueRecordsOf(Protocol):
    """A store's `due_records_of`: the records of the ranges `ids` names, keyed by whatever `ids` maps them to."""

    def __call__(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], ids: Mapping[tuple[int, int], RecordKey],
        repair_type: str = "full",
    ) -> dict[RecordKey, DueRecord]: ...  # fmt: skip


def segment_records(segments: Sequence[Segment], repair_type: str, records_of: RecordsOf[Found]) -> dict[str, Found]:
    """The records of `segments` of one type, keyed by segment id, read by `records_of` (a store's `records_of`,
    or `due_records_of` for what due selection reads of them) from only the history partitions their ranges fall
    in: one call per (keyspace, tables), never a scan of the whole history (at fleet size millions of rows across
    every node)."""
    units: dict[tuple[str, tuple[str, ...]], dict[tuple[int, int], str]] = {}
    keyspace: str | None = None
    tables: tuple[str, ...] | None = None
    ids: dict[tuple[int, int], str] = {}
    for segment in segments:  # a unit's segments come one after another, sharing their keyspace and tables
        if segment.keyspace is not keyspace or segment.tables is not tables:
            keyspace, tables = segment.keyspace, segment.tables
            ids = units.setdefault((keyspace, tables), {})
        token_range = segment.range
        ids[token_range.start, token_range.end] = segment.segment_id
    records: dict[str, Found] = {}
    for (unit_keyspace, unit_tables), unit_ids in units.items():
        buckets = {history_bucket(start) for start, _ in unit_ids}
        records.update(records_of(unit_keyspace, unit_tables, buckets, unit_ids, repair_type))
    return records


def due_records_in_order(
    segments: Sequence[Segment], repair_type: str, due_records_of: DueRecordsOf
) -> list[DueRecord | None]:
    """What due selection reads of `segments`' records of one type by position: the i-th is `segments[i]`'s (None:
    never repaired), read by `due_records_of` from the same partitions as `segment_records`, found by unit and range
    alone: no segment id is computed (a sha256 each; the plan task reads millions a fleet night)."""
    # A unit's segments come one after another: each run of them is taken at C speed (no Python step per segment).
    runs: list[tuple[tuple[str, tuple[str, ...]], int, list[TokenRange]]] = []
    index = 0
    for unit, members in itertools.groupby(segments, _UNIT):
        ranges = list(map(_RANGE, members))
        runs.append((unit, index, ranges))
        index += len(ranges)
    if len({unit for unit, _, _ in runs}) < len(runs):  # a unit in several runs: keyed by position in the plan
        return _due_records_by_plan_position(segments, runs, repair_type, due_records_of)
    found: list[DueRecord | None] = [None] * len(segments)
    # Units on the same ring ranges (keyspaces that share a replication: 13 units a fleet night) share one key map,
    # each range to its place in the unit's run, and their records are placed at the run's offset.
    shared: list[tuple[list[TokenRange], dict[tuple[int, int], int], set[int]]] = []
    for (unit_keyspace, unit_tables), offset, ranges in runs:
        alike = [(places, buckets) for known_ranges, places, buckets in shared if known_ranges == ranges]
        if alike:  # the same range objects: compared by identity at C speed
            places, buckets = alike[0]
        else:
            places = dict(zip(map(_BOUNDS, ranges), itertools.count()))
            if len(places) < len(ranges):  # a range planned twice in one unit: each copy gets the record
                return _due_records_by_plan_position(segments, runs, repair_type, due_records_of)
            buckets = _buckets(places)
            shared.append((ranges, places, buckets))
        records = due_records_of(unit_keyspace, unit_tables, buckets, places, repair_type)
        where = map(operator.add, records.keys(), itertools.repeat(offset)) if offset else records.keys()
        collections.deque(map(found.__setitem__, where, records.values()), maxlen=0)
    return found


def _buckets(keys: Iterable[tuple[int, int]]) -> set[int]:
    """`history_bucket` of each range's start, at C speed."""
    starts = map(operator.add, map(operator.itemgetter(0), keys), itertools.repeat(_TOKEN_OFFSET))
    return set(map(operator.rshift, starts, itertools.repeat(_BUCKET_SHIFT)))


def _due_records_by_plan_position(
    segments: Sequence[Segment],
    runs: Sequence[tuple[tuple[str, tuple[str, ...]], int, list[TokenRange]]],
    repair_type: str,
    due_records_of: DueRecordsOf,
) -> list[DueRecord | None]:
    """`due_records_in_order` when a unit comes in several runs of the plan or plans a range twice: each unit's
    ranges keyed by their position in the plan (the last copy's), then every copy given the record."""
    units: dict[tuple[str, tuple[str, ...]], dict[tuple[int, int], int]] = {}
    for unit, offset, ranges in runs:
        units.setdefault(unit, {}).update(zip(map(_BOUNDS, ranges), range(offset, offset + len(ranges)), strict=True))
    found: list[DueRecord | None] = [None] * len(segments)
    for (unit_keyspace, unit_tables), unit_positions in units.items():
        records = due_records_of(unit_keyspace, unit_tables, _buckets(unit_positions), unit_positions, repair_type)
        collections.deque(map(found.__setitem__, records.keys(), records.values()), maxlen=0)
    if sum(map(len, units.values())) < len(segments):  # a segment planned twice: each copy gets the record
        for index, segment in enumerate(segments):
            token_range = segment.range
            found[index] = found[units[segment.keyspace, segment.tables][token_range.start, token_range.end]]
    return found


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """[first, last] start token of `bucket` (both inclusive)."""
    first = (bucket << _BUCKET_SHIFT) - 2**63
    return first, first + (1 << _BUCKET_SHIFT) - 1


def utc(moment: datetime | None) -> datetime | None:
    """The driver returns naive UTC datetimes; ringward compares aware ones."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


# -- leases ------------------------------------------------------------------------------------------------
def lease_held(keyspace: str, resource: str, owner: str, purpose: str | None, since: datetime | None) -> MigrationError:
    """The refusal when `resource` is leased to another owner."""
    return MigrationError(
        f"{resource} is held by {owner} ({purpose}, taken or last renewed at {since}).",
        "Wait for that run to finish, or, if it is dead, release it with "
        f"`DELETE FROM {keyspace}.leases WHERE resource = '{resource}' IF owner = '{owner}'`.",
    )


# -- preview findings ----------------------------------------------------------------------------------------
def preview_columns(finding: PreviewFinding) -> dict[str, object]:
    """The repair_previews cells of one finding."""
    return {
        "keyspace_name": finding.keyspace, "found_at": finding.found_at, "table_name": finding.table,
        "range_start": finding.ranges[0].start if finding.ranges else 0,
        "ranges": ",".join(f"{r.start}:{r.end}" for r in finding.ranges),
        "out_of_sync_ranges": finding.out_of_sync_ranges, "run_id": finding.run_id, "coordinator": finding.coordinator,
    }  # fmt: skip


def preview_finding(row: Mapping[str, Any]) -> PreviewFinding:
    pairs = [part.split(":") for part in (row.get("ranges") or "").split(",") if part]
    return PreviewFinding(
        keyspace=row["keyspace_name"], table=row["table_name"],
        ranges=tuple(TokenRange(int(start), int(end)) for start, end in pairs),
        out_of_sync_ranges=int(row.get("out_of_sync_ranges") or 0), found_at=utc(row["found_at"]) or row["found_at"],
        run_id=row.get("run_id"), coordinator=row.get("coordinator"),
    )  # fmt: skip


# -- run plans -----------------------------------------------------------------------------------------------
def plan_pages(commands: Sequence[str]) -> list[str]:
    """A chunk's commands as repair_plan rows: PLAN_PAGE_COMMANDS a row, one a line (`run_plan_chunk` splits)."""
    return ["\n".join(commands[i : i + PLAN_PAGE_COMMANDS]) for i in range(0, len(commands), PLAN_PAGE_COMMANDS)]


def check_chunk(run_id: str, index: int, commands: Sequence[str]) -> None:
    """Refuse a plan chunk too long, or with a command that is not one line of text (before it is written)."""
    if len(commands) > PLAN_CHUNK_ROWS:
        raise RepairError(
            f"Chunk {index} of run {run_id}'s plan has {len(commands)} commands; a chunk holds at most "
            f"{PLAN_CHUNK_ROWS}.",
            "Cut the plan into chunks of at most PLAN_CHUNK_ROWS commands before saving it.",
        )
    if all(map(isinstance, commands, itertools.repeat(str))) and not any(
        map(operator.contains, commands, itertools.repeat("\n"))
    ):  # every command one line of text, checked at C speed (a fleet night's plan is 3.3 million)
        return
    for position, command in enumerate(commands):  # which one is not, named
        if not isinstance(command, str):
            raise RepairError(
                f"Command {position} of chunk {index} of run {run_id}'s plan is a {type(command).__name__}, "
                "not a string.",
                "Save each command as its JSON string (json.dumps) and decode it after run_plan_chunk.",
            )
        if "\n" in command:
            raise RepairError(
                f"Command {position} of chunk {index} of run {run_id}'s plan has a line break.",
                "Save each command as one line of JSON (json.dumps escapes line breaks).",
            )


# -- repair history ------------------------------------------------------------------------------------------
def history_table(record: SegmentRecord) -> str:
    """Where a record's history is kept: repair_segments for full, repair_type_segments for the other types."""
    return "repair_segments" if record.repair_type == "full" else "repair_type_segments"


def history_columns(
    keyspace: str,
    tables: tuple[str, ...],
    token_range: TokenRange,
    record: SegmentRecord,
    started_at: datetime | None,
    finished_at: datetime | None,
    replicas: tuple[str, ...],
    now: datetime,
) -> dict[str, object]:
    """The repair_segments columns one history write sets (columns left out keep their value): both stores
    write the same cells."""
    columns: dict[str, object] = {
        "keyspace_name": keyspace, "table_names": ",".join(tables), "bucket": history_bucket(token_range.start),
        "range_start": token_range.start, "range_end": token_range.end, "last_success": record.last_success,
        "last_full_success": record.last_full_success, "attempts": record.attempts,
        "last_error": (record.last_error or "")[-2000:] or None, "seconds": record.duration,
        "run_id": record.run_id, "state": record.state.value, "updated_at": now,
    }  # fmt: skip
    if record.repair_type != "full":  # its own history (repair_type_segments): a preview never moves full's
        columns["repair_type"] = record.repair_type
    if record.state is SegmentState.RUNNING:
        columns["last_attempt"] = started_at or now
    if started_at is not None:
        columns.update(started_at=started_at, finished_at=finished_at, coordinator=replicas[0] if replicas else None)
    if replicas:
        columns["replicas"] = ",".join(replicas)
    return columns


def merged(rows: Iterable[RepairHistoryRow], legacy: Iterable[RepairHistoryRow]) -> list[RepairHistoryRow]:
    """`rows` plus the legacy rows of (keyspace, tables, range)s `rows` does not hold: the new table wins."""
    found = list(rows)
    seen = {(r.keyspace, r.tables, r.range) for r in found}
    return found + [r for r in legacy if (r.keyspace, r.tables, r.range) not in seen]


@functools.lru_cache(maxsize=1024)
def _tables_of(names: str | None) -> tuple[str, ...]:
    """The tables of a `table_names` cell, in normal form: a partition's rows all share one (cached)."""
    return tuple(sorted({t for t in (names or "").split(",") if t}))


_STATES = {state.value: state for state in SegmentState}


# The columns `records_of` reads, in the order `record_of_cells` takes them.
RECORD_COLUMNS = ("range_start", "range_end", "state", "last_success", "last_full_success", "attempts", "last_error",
                  "seconds", "run_id")  # fmt: skip


def add_records(
    records: dict[str, SegmentRecord],
    rows: Iterable[Sequence[Any]],
    ids: Mapping[tuple[int, int], str],
    repair_type: str,
) -> None:
    """Add to `records` the rows of `RECORD_COLUMNS` whose range `ids` names."""
    for row in rows:
        segment_id = ids.get((row[0], row[1]))
        if segment_id is not None:
            records[segment_id] = record_of_cells(segment_id, row, repair_type)


# The columns `due_records_of` reads: what due selection needs of a record (`DueRecord`), after the range.
DUE_COLUMNS = ("range_start", "range_end", "last_success", "attempts", "run_id")
_ROW_RANGE, _ROW_LAST, _ROW_ATTEMPTS = operator.itemgetter(0, 1), operator.itemgetter(2), operator.itemgetter(3)
_ROW_CELLS = operator.itemgetter(2, 3, 4)  # a `DueRecord`'s cells


def add_due_records(
    records: dict[RecordKey, DueRecord], rows: Iterable[Sequence[Any]], ids: Mapping[tuple[int, int], RecordKey]
) -> None:
    """Add to `records` the rows of `DUE_COLUMNS` whose range `ids` names (under the key it names), as
    `DueRecord`s."""
    # Millions of rows a fleet night. When every row is named by `ids`, has its attempts and a last success that is
    # None or already aware, the rows' cells are the records as they are: taken at C speed, no Python step a row.
    rows = rows if isinstance(rows, list) else list(rows)
    keys = list(map(ids.get, map(_ROW_RANGE, rows)))
    lasts = list(map(_ROW_LAST, rows))
    zones = list(map(getattr, lasts, itertools.repeat("tzinfo"), itertools.repeat(None)))  # None: no time, or naive
    if (
        None not in keys
        and None not in map(_ROW_ATTEMPTS, rows)
        and lasts.count(None) == zones.count(None)
        and all(map(operator.eq, map(len, rows), itertools.repeat(len(DUE_COLUMNS))))
    ):
        named = cast("list[RecordKey]", keys)  # none is None
        records.update(zip(named, map(tuple.__new__, itertools.repeat(DueRecord), map(_ROW_CELLS, rows)), strict=True))
        return
    # Otherwise row by row: `utc` inlined, and the named tuple made without its Python `__new__`.
    make, get = tuple.__new__, ids.get
    for start, end, last_success, attempts, run_id in rows:
        key = get((start, end))
        if key is not None:
            if last_success is not None and last_success.tzinfo is None:
                last_success = last_success.replace(tzinfo=UTC)
            records[key] = make(DueRecord, (last_success, attempts or 0, run_id))


def record_of_cells(segment_id: str, cells: Sequence[Any], repair_type: str = "full") -> SegmentRecord:
    """A SegmentRecord from a row of `RECORD_COLUMNS`."""
    _, _, state, last_success, last_full_success, attempts, last_error, seconds, run_id = cells
    return SegmentRecord(segment_id, _STATES[state] if state else SegmentState.NOT_STARTED, utc(last_success),
                         utc(last_full_success), attempts or 0, last_error, seconds, run_id, repair_type)  # fmt: skip


def history_row(row: Any) -> RepairHistoryRow:
    """A history row from a row of repair_segments, repair_type_segments or the legacy table (attributes: the
    driver's rows, or the in-memory store's cells as a namespace)."""
    # Millions of rows a night at fleet size: one getattr per cell, the tables and the state looked up.
    keyspace = row.keyspace_name
    tables = _tables_of(getattr(row, "table_names", None))
    token_range = TokenRange(row.range_start, row.range_end)
    state = getattr(row, "state", None)
    replicas = getattr(row, "replicas", None)
    record = SegmentRecord(
        segment_id=segment_id_of(keyspace, tables, token_range),  # the segment's own id, from its key
        state=_STATES[state] if state else SegmentState.NOT_STARTED,
        last_success=utc(getattr(row, "last_success", None)),
        last_full_success=utc(getattr(row, "last_full_success", None)),
        attempts=getattr(row, "attempts", None) or 0,
        last_error=getattr(row, "last_error", None),
        duration=getattr(row, "seconds", None),
        run_id=getattr(row, "run_id", None),
        repair_type=getattr(row, "repair_type", None) or "full",
    )
    return RepairHistoryRow(
        keyspace=keyspace, tables=tables, range=token_range, record=record,
        started_at=utc(getattr(row, "started_at", None)), finished_at=utc(getattr(row, "finished_at", None)),
        coordinator=getattr(row, "coordinator", None),
        replicas=tuple(r for r in replicas.split(",") if r) if replicas else (),
        updated_at=utc(getattr(row, "updated_at", None)),
    )  # fmt: skip
