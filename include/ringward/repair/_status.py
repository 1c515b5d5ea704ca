"""How well each table is protected: share of the ring fully repaired within gc_grace_seconds.

Data deleted on one replica and not repaired before gc_grace_seconds expires can come back (zombie
rows); the deadline column tells when the oldest range crosses that line.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from itertools import pairwise

from ringward.repair._segments import Segment
from ringward.repair._state import SegmentRecord, SegmentState
from ringward.repair._units import format_duration
from ringward.ring import TokenRange

__all__ = ["RecordedSegment", "RepairStatus", "coverage_entries", "coverage_records", "repair_status", "status_table"]


@dataclass(frozen=True)
class RepairStatus:
    """Repair coverage of one `keyspace.table` at `now`."""

    keyspace: str
    table: str
    gc_grace_seconds: int
    now: datetime
    repaired_share: float | None  # None: no segment needs repair (RF 1 everywhere, ...)
    oldest_success: datetime | None  # None: some range was never fully repaired (or no segments)
    never_repaired: int
    failing_segments: int
    alarm_share: float = 0.8

    @property
    def repaired_percent(self) -> str:
        """Rounded down, so `100.0%` means every range really is covered."""
        if self.repaired_share is None:
            return "n/a"
        return f"{math.floor(self.repaired_share * 1000) / 10:.1f}%"

    @property
    def oldest_age(self) -> timedelta | None:
        return None if self.oldest_success is None else self.now - self.oldest_success

    @property
    def deadline(self) -> datetime | None:
        """When the oldest fully repaired range passes gc_grace_seconds."""
        if self.oldest_success is None:
            return None
        return self.oldest_success + timedelta(seconds=self.gc_grace_seconds)

    @property
    def health(self) -> str:
        """OK, ALARM (older than alarm_share of gc_grace, or failing), OVERDUE (beyond gc_grace or never)."""
        if self.repaired_share is None:
            return "OK"
        if self.never_repaired or (self.deadline is not None and self.now >= self.deadline):
            return "OVERDUE"
        age = self.oldest_age
        late = age is not None and age.total_seconds() >= self.alarm_share * self.gc_grace_seconds
        return "ALARM" if late or self.failing_segments else "OK"


def _covers(segment: Segment, keyspace: str, table: str) -> bool:
    return segment.keyspace == keyspace and (not segment.tables or table in segment.tables)


def repair_status(
    keyspace: str,
    table: str,
    segments: Iterable[Segment],
    records: Mapping[str, SegmentRecord],
    gc_grace_seconds: int,
    now: datetime,
    alarm_share: float = 0.8,
) -> RepairStatus:
    """Status of `keyspace.table` from the planned segments and their history."""
    mine = [s for s in segments if _covers(s, keyspace, table)]
    window = timedelta(seconds=gc_grace_seconds)
    total = sum(s.range.width() for s in mine)
    fresh = 0
    successes: list[datetime] = []
    never = failing = 0
    for segment in mine:
        record = records.get(segment.segment_id)
        last = record.last_full_success if record else None
        if last is None:
            never += 1
        else:
            successes.append(last)
            fresh += segment.range.width() if now - last < window else 0
        failing += record is not None and record.state is SegmentState.FAILED
    return RepairStatus(
        keyspace=keyspace,
        table=table,
        gc_grace_seconds=gc_grace_seconds,
        now=now,
        repaired_share=fresh / total if total else None,
        oldest_success=min(successes) if successes and not never else None,
        never_repaired=never,
        failing_segments=failing,
        alarm_share=alarm_share,
    )


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else "-"


def status_table(statuses: Sequence[RepairStatus]) -> str:
    """A fixed-width table for the CLI, one line per table."""
    header = ("TABLE", "REPAIRED", "OLDEST", "DEADLINE", "FAILING", "HEALTH")
    rows = [header]
    for status in statuses:
        age = status.oldest_age
        oldest = "never" if status.never_repaired else ("-" if age is None else format_duration(age.total_seconds()))
        rows.append(
            (
                f"{status.keyspace}.{status.table}",
                status.repaired_percent,
                oldest,
                _when(status.deadline),
                str(status.failing_segments),
                status.health,
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)


def coverage_entries(
    segments: Iterable[Segment],
    records: Mapping[str, SegmentRecord],
    gc_grace_seconds: int,
    now: datetime,
) -> list[tuple[TokenRange, float | None]]:
    """(range, age of the last full repair as a share of gc_grace) per segment, in token order; None = never.

    A share >= 1 means the range is past gc_grace: deleted data may resurrect there.
    """
    entries: list[tuple[TokenRange, float | None]] = []
    for segment in sorted(segments, key=lambda s: (s.range.start, s.range.end)):
        record = records.get(segment.segment_id)
        last = record.last_full_success if record else None
        share = None if last is None else (now - last).total_seconds() / gc_grace_seconds
        entries.append((segment.range, share))
    return entries


@dataclass(frozen=True)
class RecordedSegment:
    """A segment as the history holds it: repaired under whatever splitter the run that repaired it used."""

    keyspace: str
    tables: tuple[str, ...]  # () = every table of the keyspace
    range: TokenRange
    record: SegmentRecord


def coverage_records(segments: Iterable[Segment], history: Iterable[RecordedSegment]) -> dict[str, SegmentRecord]:
    """The record of each planned segment, its last full repair read from the whole history.

    Runs with other splitters (another `subranges_per_range`, a manual run of one table) record other
    segments; a planned segment counts as repaired at the latest time by which recorded full repairs cover all
    of its range: each part of the range takes its newest covering repair, the segment its oldest part. Only
    repairs of every table it needs count (a keyspace-wide segment is not covered by one table's repair). The
    rest of the record (state, attempts, last error) is the segment's own, when it has one.
    """
    history_list = list(history)
    own = {row.record.segment_id: row.record for row in history_list}
    # Per keyspace, the full repairs sorted by where they start, and the widest one: the repairs that can
    # overlap a segment start in [segment start - widest, segment end), found by bisection (the status of a
    # 256-vnode, 1,000-node ring plans millions of segments; a scan of every repair for each would not end).
    repairs: dict[str, tuple[list[int], list[tuple[int, int, datetime, RecordedSegment]], int]] = {}
    for row in history_list:
        if row.record.last_full_success is not None:
            low, high = _bounds(row.range)
            repairs.setdefault(row.keyspace, ([], [], 0))[1].append((low, high, row.record.last_full_success, row))
    for keyspace, (_, entries, _) in list(repairs.items()):
        entries.sort(key=lambda entry: entry[0])
        repairs[keyspace] = ([e[0] for e in entries], entries, max(e[1] - e[0] for e in entries))
    records: dict[str, SegmentRecord] = {}
    for segment in segments:
        since = None
        if segment.keyspace in repairs:
            starts, entries, widest = repairs[segment.keyspace]
            low, high = _bounds(segment.range)
            nearby = entries[bisect_left(starts, low - widest) : bisect_left(starts, high)]
            pieces = [(a, b, when) for a, b, when, row in nearby if b > low and _repairs_tables_of(row, segment)]
            since = _covered_since((low, high), pieces)
        record = own.get(segment.segment_id) or SegmentRecord(segment.segment_id)
        if since is not None and (record.last_full_success is None or since > record.last_full_success):
            record = replace(record, last_full_success=since)
        if segment.segment_id in own or since is not None:
            records[segment.segment_id] = record
    return records


def _repairs_tables_of(row: RecordedSegment, segment: Segment) -> bool:
    return not row.tables or (bool(segment.tables) and set(segment.tables) <= set(row.tables))


def _bounds(token_range: TokenRange) -> tuple[int, int]:
    """(lo, hi] on a line: a range that wraps (or ends at the ring's minimum token) runs on past the maximum."""
    start, end = token_range.start, token_range.end
    return start, end if end > start else end + 2**64


def _covered_since(target: tuple[int, int], pieces: Sequence[tuple[int, int, datetime]]) -> datetime | None:
    low, high = target
    inside = [(max(a, low), min(b, high), when) for a, b, when in pieces if a < high and b > low]
    cuts = sorted({low, high, *(a for a, _, _ in inside), *(b for _, b, _ in inside)})
    oldest: datetime | None = None
    for left, right in pairwise(cuts):
        newest = max((when for a, b, when in inside if a <= left and b >= right), default=None)
        if newest is None:
            return None  # a part of the range no recorded full repair covers
        oldest = newest if oldest is None else min(oldest, newest)
    return oldest
