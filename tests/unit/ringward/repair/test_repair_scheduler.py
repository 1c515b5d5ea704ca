from __future__ import annotations

from datetime import UTC, datetime, time, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ringward.errors import ConfigurationError
from ringward.repair import (
    RepairWindow,
    ReplicaLocks,
    Segment,
    allowed_parallelism,
    intensity_pause,
    next_runnable,
    parse_config,
    plan_waves,
    window_allows_start,
)
from ringward.ring import TokenRange


def seg(start: int, *replicas: str) -> Segment:
    return Segment("ks", (), TokenRange(start, start + 1), replicas)


@pytest.mark.parametrize(
    ("count", "percentage", "nodes", "expected"),
    [(3, 3, 10, 3), (3, 3, 200, 6), (0, 10, 5, 1), (0, 50, 7, 4), (2, 0, 100, 2), (1, 100, 9, 9)],
)
def test_parallelism_is_the_larger_of_count_and_percentage_of_nodes(
    count: int, percentage: float, nodes: int, expected: int
) -> None:
    config = parse_config({"parallel_repair_count": count, "parallel_repair_percentage": percentage})
    assert allowed_parallelism(config, nodes) == expected


def test_replica_locks_refuse_a_busy_node_and_release_it() -> None:
    locks = ReplicaLocks()
    first, overlapping, apart = seg(0, "a", "b"), seg(10, "b", "c"), seg(20, "c", "d")
    assert locks.acquire(first)
    assert not locks.acquire(overlapping)
    assert locks.busy == {"a", "b"}  # a refused acquire locks nothing
    assert locks.acquire(apart)
    locks.release(first)
    assert locks.busy == {"c", "d"}
    assert not locks.can_take(overlapping)


def test_next_runnable_respects_busy_nodes_order_and_limit() -> None:
    segments = [seg(0, "a", "b"), seg(10, "c", "d"), seg(20, "e", "f"), seg(30, "g", "h")]
    assert next_runnable(segments, ["a"], limit=2) == segments[1:3]
    assert next_runnable(segments, [], limit=0) == []


def test_waves_put_conflicting_segments_apart() -> None:
    a, b, c = seg(0, "n1", "n2"), seg(10, "n2", "n3"), seg(20, "n4", "n5")
    assert plan_waves([a, b, c], parallelism=5) == [[a, c], [b]]
    assert plan_waves([a, b, c], parallelism=1) == [[a], [b], [c]]
    assert plan_waves([], parallelism=2) == []
    with pytest.raises(ConfigurationError):
        plan_waves([a], parallelism=0)


NODES = [f"n{i}" for i in range(8)]
segment_lists = st.lists(
    st.tuples(st.integers(-(2**40), 2**40), st.sets(st.sampled_from(NODES), min_size=1, max_size=4)),
    max_size=40,
).map(lambda items: [seg(start, *sorted(replicas)) for start, replicas in items])


@settings(max_examples=150, deadline=None)
@given(segments=segment_lists, parallelism=st.integers(1, 6))
def test_waves_never_share_a_node_and_cover_each_segment_exactly_once(
    segments: list[Segment], parallelism: int
) -> None:
    waves = plan_waves(segments, parallelism)
    for wave in waves:
        assert 1 <= len(wave) <= parallelism
        nodes = [node for s in wave for node in s.replicas]
        assert len(nodes) == len(set(nodes)), "a node takes part in two concurrent segments"
    placed = [id(s) for wave in waves for s in wave]
    assert sorted(placed) == sorted(id(s) for s in segments)


def greedy_reference(segments: list[Segment], parallelism: int) -> list[list[Segment]]:
    """Wave by wave: each wave takes, in order, every remaining segment that still fits."""
    remaining = list(segments)
    waves = []
    while remaining:
        wave: list[Segment] = []
        used: set[str] = set()
        for segment in remaining:
            if len(wave) < parallelism and used.isdisjoint(segment.replicas):
                wave.append(segment)
                used.update(segment.replicas)
        remaining = [s for s in remaining if all(s is not w for w in wave)]
        waves.append(wave)
    return waves


@settings(max_examples=150, deadline=None)
@given(segments=segment_lists, parallelism=st.integers(1, 6))
def test_waves_are_the_in_order_greedy_waves(segments: list[Segment], parallelism: int) -> None:
    expected = greedy_reference(segments, parallelism)
    actual = plan_waves(segments, parallelism)
    assert [[id(s) for s in wave] for wave in actual] == [[id(s) for s in wave] for wave in expected]


@settings(max_examples=100, deadline=None)
@given(segments=segment_lists, busy=st.sets(st.sampled_from(NODES)), limit=st.integers(0, 6))
def test_next_runnable_never_uses_a_busy_node_or_one_node_twice(
    segments: list[Segment], busy: set[str], limit: int
) -> None:
    chosen = next_runnable(segments, busy, limit)
    nodes = [node for s in chosen for node in s.replicas]
    assert len(chosen) <= limit
    assert len(nodes) == len(set(nodes)) and busy.isdisjoint(nodes)
    if len(chosen) < limit:  # greedy: every segment left out conflicts with busy or chosen nodes
        taken = busy | set(nodes)
        assert all(not taken.isdisjoint(s.replicas) for s in segments if s not in chosen)


def at(hour: int, minute: int = 0) -> datetime:
    return datetime(2026, 11, 22, hour, minute, tzinfo=UTC)


def test_window_across_midnight() -> None:
    window = RepairWindow(start=time(22, 0), end=time(4, 0))
    assert window_allows_start(at(23), window)
    assert window_allows_start(at(3, 59), window)
    assert not window_allows_start(at(4), window)
    assert not window_allows_start(at(12), window)
    assert window_allows_start(at(12), None)


def test_daytime_window_and_other_time_zones_are_read_as_utc() -> None:
    window = RepairWindow(start=time(1, 0), end=time(5, 0))
    assert window_allows_start(at(1), window)
    assert not window_allows_start(at(5), window)
    plus_two = at(4).astimezone(timezone(timedelta(hours=2)))
    assert plus_two.hour == 6 and window_allows_start(plus_two, window)


def test_max_duration_stops_new_segments() -> None:
    window = RepairWindow(max_duration=timedelta(hours=2))
    assert window_allows_start(at(3), window, run_started=at(1, 30))
    assert not window_allows_start(at(3, 30), window, run_started=at(1, 30))
    both = RepairWindow(start=time(1, 0), end=time(6, 0), max_duration=timedelta(hours=1))
    assert not window_allows_start(at(2, 30), both, run_started=at(1, 0))


def test_intensity_pause_follows_reaper() -> None:
    assert intensity_pause(60, 1.0) == timedelta(0)
    assert intensity_pause(60, 0.5) == timedelta(seconds=60)
    assert intensity_pause(60, 0.25) == timedelta(seconds=180)
    with pytest.raises(ConfigurationError):
        intensity_pause(60, 0)
