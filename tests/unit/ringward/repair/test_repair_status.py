from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ringward.repair import (
    RecordedSegment,
    RepairStatus,
    Segment,
    SegmentRecord,
    SegmentState,
    coverage_entries,
    coverage_records,
    repair_status,
    status_table,
)
from ringward.ring import MIN_TOKEN, TokenRange

NOW = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
GC_GRACE = 10 * 86400  # 10 days, Cassandra's default

QUARTERS = [
    Segment("ks", (), TokenRange(MIN_TOKEN, -(2**62)), ("a", "b")),
    Segment("ks", (), TokenRange(-(2**62), 0), ("b", "c")),
    Segment("ks", (), TokenRange(0, 2**62), ("c", "a")),
    Segment("ks", (), TokenRange(2**62, MIN_TOKEN), ("a", "c")),
]


def records(*ages_days: float | None, failed: int | None = None) -> dict[str, SegmentRecord]:
    result = {}
    for index, (segment, age) in enumerate(zip(QUARTERS, ages_days, strict=True)):
        last = None if age is None else NOW - timedelta(days=age)
        state = SegmentState.FAILED if index == failed else SegmentState.DONE
        result[segment.segment_id] = SegmentRecord(segment.segment_id, state, last, last)
    return result


def test_fully_repaired_ring_is_100_percent_and_ok() -> None:
    status = repair_status("ks", "t", QUARTERS, records(1, 2, 3, 4), GC_GRACE, NOW)
    assert status.repaired_percent == "100.0%"
    assert status.oldest_age == timedelta(days=4)
    assert status.deadline == NOW - timedelta(days=4) + timedelta(seconds=GC_GRACE)
    assert status.health == "OK"


def test_share_is_by_token_width_and_ranges_past_gc_grace_do_not_count() -> None:
    status = repair_status("ks", "t", QUARTERS, records(1, 11, 2, 12), GC_GRACE, NOW)
    assert status.repaired_share == 0.5
    assert status.repaired_percent == "50.0%"
    assert status.health == "OVERDUE"


def test_alarm_after_the_configured_share_of_gc_grace_and_on_failures() -> None:
    late = repair_status("ks", "t", QUARTERS, records(1, 1, 1, 8.5), GC_GRACE, NOW, alarm_share=0.8)
    assert late.health == "ALARM" and late.repaired_percent == "100.0%"
    failing = repair_status("ks", "t", QUARTERS, records(1, 1, 1, 1, failed=2), GC_GRACE, NOW)
    assert failing.failing_segments == 1 and failing.health == "ALARM"


def test_never_repaired_ranges_make_the_table_overdue_without_a_deadline() -> None:
    status = repair_status("ks", "t", QUARTERS, records(1, None, 1, 1), GC_GRACE, NOW)
    assert status.never_repaired == 1
    assert status.repaired_share == 0.75
    assert status.oldest_success is None and status.deadline is None
    assert status.health == "OVERDUE"


def test_percent_rounds_down_so_full_coverage_is_never_overstated() -> None:
    tiny = [
        Segment("ks", (), TokenRange(0, 1), ("a", "b")),
        Segment("ks", (), TokenRange(1, 10**6), ("a", "b")),
    ]
    history = {tiny[1].segment_id: SegmentRecord(tiny[1].segment_id, last_full_success=NOW)}
    assert repair_status("ks", "t", tiny, history, GC_GRACE, NOW).repaired_percent == "99.9%"


def test_only_segments_of_the_table_count_and_no_segments_is_not_applicable() -> None:
    other = [
        Segment("ks", ("u",), TokenRange(0, 10), ("a", "b")),
        Segment("ks2", (), TokenRange(0, 10), ("a", "b")),
    ]
    status = repair_status("ks", "t", other, {}, GC_GRACE, NOW)
    assert status.repaired_share is None and status.repaired_percent == "n/a" and status.health == "OK"
    named = repair_status("ks", "u", other, {}, GC_GRACE, NOW)
    assert named.repaired_share == 0.0


def test_status_table_lists_each_table_with_aligned_columns() -> None:
    statuses: list[RepairStatus] = [
        repair_status("ks", "users", QUARTERS, records(1, 2, 3, 4), GC_GRACE, NOW),
        repair_status("ks", "events", QUARTERS, records(1, None, 3, 4), GC_GRACE, NOW),
    ]
    lines = status_table(statuses).splitlines()
    assert lines[0].split() == ["TABLE", "REPAIRED", "OLDEST", "DEADLINE", "FAILING", "HEALTH"]
    assert lines[1].split()[:3] == ["ks.users", "100.0%", "4d00h"]
    assert "2026-11-28 02:00" in lines[1] and lines[1].endswith("OK")
    assert lines[2].split()[:3] == ["ks.events", "75.0%", "never"] and lines[2].endswith("OVERDUE")
    assert lines[1].index("100.0%") == lines[0].index("REPAIRED") == lines[2].index("75.0%")


def test_coverage_entries_give_age_as_share_of_gc_grace_in_token_order() -> None:
    entries = coverage_entries(reversed(QUARTERS), records(5, None, 10, 0), GC_GRACE, NOW)
    assert [r for r, _ in entries] == [s.range for s in QUARTERS]
    assert [share for _, share in entries] == [0.5, None, 1.0, 0.0]


def _recorded(segment: Segment, age_days: float | None, tables: tuple[str, ...] = ()) -> RecordedSegment:
    last = None if age_days is None else NOW - timedelta(days=age_days)
    record = SegmentRecord(Segment(segment.keyspace, tables, segment.range, ()).segment_id, SegmentState.DONE, last,
                           last)  # fmt: skip
    return RecordedSegment(segment.keyspace, tables, segment.range, record)


def _halves(segment: Segment) -> list[Segment]:
    start = segment.range.start
    end = segment.range.end if segment.range.end != MIN_TOKEN else 2**63
    middle = start + (end - start) // 2
    second_end = segment.range.end
    return [Segment("ks", (), TokenRange(start, middle), ()), Segment("ks", (), TokenRange(middle, second_end), ())]


def test_a_run_with_another_splitter_counts_for_the_planned_segments() -> None:
    # Planned: quarters. Recorded: each quarter repaired as two halves (another subranges_per_range), 1 and 2
    # days ago: a quarter is covered since its older half.
    history = [_recorded(half, age) for quarter in QUARTERS for half, age in zip(_halves(quarter), (1, 2), strict=True)]
    status = repair_status("ks", "t", QUARTERS, coverage_records(QUARTERS, history), GC_GRACE, NOW)
    assert status.repaired_percent == "100.0%" and status.health == "OK"
    assert status.oldest_age == timedelta(days=2)


def test_a_part_no_recorded_repair_covers_leaves_the_segment_unrepaired() -> None:
    history = [_recorded(_halves(q)[0], 1) for q in QUARTERS]  # only the first half of each quarter
    assert coverage_records(QUARTERS, history) == {}
    status = repair_status("ks", "t", QUARTERS, coverage_records(QUARTERS, history), GC_GRACE, NOW)
    assert status.never_repaired == 4 and status.health == "OVERDUE"


def test_a_newer_repair_of_another_segmentation_refreshes_an_older_own_record() -> None:
    own = [_recorded(q, 9) for q in QUARTERS]
    newer = [_recorded(half, 1) for half in _halves(QUARTERS[0])]
    covered = coverage_records(QUARTERS, own + newer)
    first = covered[QUARTERS[0].segment_id]
    assert first.last_full_success == NOW - timedelta(days=1)
    assert covered[QUARTERS[1].segment_id].last_full_success == NOW - timedelta(days=9)


def test_one_tables_repair_does_not_cover_a_keyspace_wide_segment() -> None:
    history = [_recorded(q, 1, tables=("t1",)) for q in QUARTERS]
    assert coverage_records(QUARTERS, history) == {}
    per_table = [Segment("ks", ("t1",), q.range, q.replicas) for q in QUARTERS]
    assert len(coverage_records(per_table, history)) == 4
    keyspace_wide = [_recorded(q, 1) for q in QUARTERS]
    assert len(coverage_records(per_table, keyspace_wide)) == 4  # a keyspace-wide repair covers every table
