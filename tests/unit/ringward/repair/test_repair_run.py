from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st
from ringward.repair import (
    ReplicaLocks,
    RunState,
    RunSummary,
    Segment,
    SegmentRecord,
    SegmentState,
    needs_replan,
    next_runnable,
    parse_config,
    record_failure,
    record_start,
    select_due,
)
from ringward.ring import TokenRange

NOW = datetime(2026, 11, 22, 2, 0, tzinfo=UTC)


def seg(start: int, *replicas: str) -> Segment:
    return Segment("ks", (), TokenRange(start, start + 1), replicas)


def test_select_due_sorts_segments_by_reason() -> None:
    """Down replicas are not a reason here: the executor waits for them during the run."""
    fresh, failing, down, never, old = (
        seg(0, "a", "b"),
        seg(10, "b", "c"),
        seg(20, "c", "x"),
        seg(30, "a", "c"),
        seg(40, "d", "e"),  # on nodes no never-repaired segment needs: not held back (`backlog_first`)
    )
    failed = None
    for _ in range(3):
        failed = record_failure(record_start(failed, failing.segment_id, "run-7"), "timeout", 1.0)
    assert failed is not None
    records = {
        fresh.segment_id: SegmentRecord(fresh.segment_id, last_success=NOW - timedelta(hours=2)),
        failing.segment_id: failed,
        old.segment_id: SegmentRecord(old.segment_id, last_success=NOW - timedelta(days=3)),
    }
    config = parse_config({"max_retries": 2})
    selection = select_due([fresh, failing, down, never, old], records, run_id="run-7", now=NOW, config=config)
    assert selection.not_due == (fresh,)
    assert selection.exhausted == (failing,)
    assert selection.due[-1] == old and set(selection.due[:2]) == {down, never}  # never-repaired first
    next_run = select_due([failing], records, run_id="run-8", now=NOW, config=config)
    assert next_run.due == (failing,)  # retried next run


def test_kill_switch_runs_nothing() -> None:
    segments = [seg(0, "a", "b")]
    selection = select_due(segments, {}, run_id="r", now=NOW, config=parse_config({"enabled": False}))
    assert selection.due == () and selection.not_due == tuple(segments)


def test_replan_only_when_the_fingerprint_changed() -> None:
    assert needs_replan(None, "abc")
    assert needs_replan("abc", "abd")
    assert not needs_replan("abc", "abc")


def test_run_summary_state_and_cep37_metrics() -> None:
    done = RunSummary.of([SegmentState.DONE, SegmentState.DONE, SegmentState.SKIPPED])
    assert done.state is RunState.DONE and done.state.is_terminal
    assert done.metrics()["SucceededTokenRangesCount"] == 2
    assert done.metrics()["SkippedTokenRangesCount"] == 1
    partial = RunSummary.of([SegmentState.DONE, SegmentState.FAILED, SegmentState.POSTPONED])
    assert partial.state is RunState.PARTIAL
    assert partial.metrics()["FailedTokenRangesCount"] == 1
    assert partial.line() == "PARTIAL: 3 segments (1 done, 1 failed, 1 postponed)"
    running = RunSummary.of([SegmentState.DONE, SegmentState.NOT_STARTED])
    assert running.state is RunState.RUNNING and not running.state.is_terminal
    assert RunSummary.of([SegmentState.NOT_STARTED]).state is RunState.NOT_STARTED
    assert RunSummary.of([SegmentState.RUNNING]).metrics()["RepairsInProgress"] == 1
    assert RunSummary.of([]).state is RunState.DONE


NODES = [f"n{i}" for i in range(7)]


@settings(max_examples=100, deadline=None)
@given(
    items=st.lists(st.sets(st.sampled_from(NODES), min_size=1, max_size=3), min_size=1, max_size=30),
    limit=st.integers(1, 4),
    seed=st.integers(0, 2**16),
)
def test_simulated_run_with_locks_never_overlaps_a_node_and_finishes_everything(
    items: list[set[str]], limit: int, seed: int
) -> None:
    """Sessions finish in random order; free slots are refilled with next_runnable, as a runner would."""
    rng = random.Random(seed)
    pending = [seg(i * 10, *sorted(replicas)) for i, replicas in enumerate(items)]
    locks = ReplicaLocks()
    running: list[Segment] = []
    finished: list[Segment] = []
    while pending or running:
        for segment in next_runnable(pending, locks.busy, limit - len(running)):
            assert locks.acquire(segment)
            running.append(segment)
            pending.remove(segment)
        nodes = [n for s in running for n in s.replicas]
        assert len(nodes) == len(set(nodes)) and len(running) <= limit
        done = running.pop(rng.randrange(len(running)))
        locks.release(done)
        finished.append(done)
    assert sorted(s.range.start for s in finished) == [i * 10 for i in range(len(items))]
