from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import (
    Segment,
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
from ringward.ring import Node, Ring, TokenRange

NOW = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def segment(start: int) -> Segment:
    return Segment("ks", (), TokenRange(start, start + 10), ("a", "b"))


def test_state_predicates() -> None:
    terminal = {s for s in SegmentState if s.is_terminal}
    wanting = {s for s in SegmentState if s.needs_run}
    assert terminal == {SegmentState.DONE, SegmentState.SKIPPED, SegmentState.POSTPONED}
    assert wanting == {SegmentState.NOT_STARTED, SegmentState.FAILED, SegmentState.POSTPONED}
    assert not SegmentState.RUNNING.is_terminal and not SegmentState.RUNNING.needs_run


def test_due_when_never_repaired_or_older_than_min_interval() -> None:
    assert is_due(None, NOW, DAY)
    assert is_due(SegmentRecord("x"), NOW, DAY)
    assert is_due(SegmentRecord("x", last_success=NOW - DAY), NOW, DAY)
    assert not is_due(SegmentRecord("x", last_success=NOW - DAY + timedelta(seconds=1)), NOW, DAY)


def test_due_segments_orders_never_repaired_then_oldest_first() -> None:
    fresh, old, older, never = segment(0), segment(100), segment(200), segment(300)
    records = {
        fresh.segment_id: SegmentRecord(fresh.segment_id, last_success=NOW - timedelta(hours=1)),
        old.segment_id: SegmentRecord(old.segment_id, last_success=NOW - 2 * DAY),
        older.segment_id: SegmentRecord(older.segment_id, last_success=NOW - 5 * DAY),
    }
    assert due_segments([fresh, old, older, never], records, NOW, DAY) == [never, older, old]


def test_attempts_count_per_run_and_exhaust_after_max_retries() -> None:
    record = None
    for _ in range(3):  # first attempt + 2 retries
        record = record_failure(record_start(record, "seg", "run-1"), "timeout", 10.0)
    assert record is not None
    assert record.attempts == 3 and record.state is SegmentState.FAILED and record.last_error == "timeout"
    assert retries_exhausted(record, "run-1", max_retries=2)
    assert not retries_exhausted(record, "run-1", max_retries=3)
    assert not retries_exhausted(record, "run-2", max_retries=2)  # a new run tries again
    assert record_start(record, "seg", "run-2").attempts == 1
    assert not retries_exhausted(None, "run-1", max_retries=0)


def test_success_clears_error_and_only_full_repair_counts_as_full() -> None:
    started = record_start(SegmentRecord("seg", last_error="boom"), "seg", "run-1")
    done = record_success(started, NOW, 12.5)
    assert done.state is SegmentState.DONE and done.last_error is None and done.duration == 12.5
    assert done.last_success == done.last_full_success == NOW
    later = NOW + DAY
    preview = record_success(record_start(done, "seg", "run-2"), later, 3.0, repair_type="preview")
    # Issue 24: a preview recorded on the full history does not count as a repair for its cadence.
    assert preview.last_success == NOW
    assert preview.last_full_success == NOW
    own = record_success(SegmentRecord("seg", repair_type="preview"), later, 3.0, repair_type="preview")
    assert own.last_success == later and own.last_full_success is None  # the preview's own cadence


def test_backoff_doubles_from_the_base_for_each_retry() -> None:
    assert [backoff_delay(n, 60) for n in (1, 2, 3, 4)] == [0.0, 60.0, 120.0, 240.0]
    assert backoff_delay(10, 60, cap_seconds=600) == 600
    with pytest.raises(ConfigurationError):
        backoff_delay(0, 60)


def test_ring_fingerprint_changes_with_tokens_owners_dcs_or_replication() -> None:
    ring = Ring.of([Node("a", "dc1", "r", (1, 5)), Node("b", "dc1", "r", (3,))])
    replication = {"ks": {"class": "NetworkTopologyStrategy", "dc1": 2}}
    base = ring_fingerprint(ring, replication)
    assert base == ring_fingerprint(Ring.of(reversed(ring.nodes)), replication)
    moved = Ring.of([Node("a", "dc1", "r", (1, 6)), Node("b", "dc1", "r", (3,))])
    swapped = Ring.of([Node("a", "dc1", "r", (3,)), Node("b", "dc1", "r", (1, 5))])
    other_dc = Ring.of([Node("a", "dc2", "r", (1, 5)), Node("b", "dc1", "r", (3,))])
    changed = {
        ring_fingerprint(moved, replication),
        ring_fingerprint(swapped, replication),
        ring_fingerprint(other_dc, replication),
        ring_fingerprint(ring, {"ks": {"class": "NetworkTopologyStrategy", "dc1": 3}}),
    }
    assert base not in changed and len(changed) == 4


def test_a_rings_fingerprint_is_computed_once_per_replication(monkeypatch: pytest.MonkeyPatch) -> None:
    """The repair task looks at the ring once a minute all night: an unchanged Ring is not hashed again."""
    from ringward.repair import _state

    computed: list[object] = []
    real = _state._fingerprint
    monkeypatch.setattr(_state, "_fingerprint", lambda ring, rep: computed.append(rep) or real(ring, rep))
    ring = Ring.of([Node("a", "dc1", "r", (1, 5)), Node("b", "dc1", "r", (3,))])
    first = ring_fingerprint(ring, {})
    assert [ring_fingerprint(ring, {}) for _ in range(3)] == [first] * 3 and computed == [{}]
    assert ring_fingerprint(ring, {"ks": 1}) != first and computed == [{}, {"ks": 1}]
    # An equal ring read again (a new object) is fingerprinted again, and agrees.
    assert ring_fingerprint(Ring.of(ring.nodes), {}) == first and len(computed) == 3
