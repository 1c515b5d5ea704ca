from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ringward.errors import RingError
from ringward.repair import (
    RepairConfig,
    RepairUnit,
    Segment,
    SizeEstimate,
    parse_config,
    plan_segments,
    select_units,
)
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring, TokenRange

RING_SIZE = 2**64


def make_ring(tokens_by_node: Mapping[str, Sequence[int]], dc_of: Mapping[str, str] | None = None) -> Ring:
    return Ring.of(
        Node(address, (dc_of or {}).get(address, "dc1"), "r1", tuple(tokens))
        for address, tokens in tokens_by_node.items()
    )


def replica_map(ring: Ring, factors: Mapping[str, int]) -> list[tuple[TokenRange, tuple[str, ...]]]:
    """Per range, walk the ring from its end token taking distinct nodes until each DC has its factor
    (NetworkTopologyStrategy without racks; one DC is SimpleStrategy)."""
    entries = []
    for token_range in ring.ranges():
        chosen: list[str] = []
        per_dc: dict[str, int] = {}
        for node in ring.ring_walk(token_range.end):
            wanted = factors.get(node.datacenter, 0)
            if node.address not in chosen and per_dc.get(node.datacenter, 0) < wanted:
                chosen.append(node.address)
                per_dc[node.datacenter] = per_dc.get(node.datacenter, 0) + 1
        entries.append((token_range, tuple(chosen)))
    return entries


def assert_tiles_exactly(segments: Sequence[Segment], expected: Sequence[TokenRange]) -> None:
    """Segments are non-wrapping, disjoint and cover exactly the expected ranges."""
    for segment in segments:
        assert segment.range.unwrap() == [segment.range]
    pieces = sorted((s.range for s in segments), key=lambda r: r.start)
    for left, right in itertools.pairwise(pieces):
        left_end = left.end if left.end != MIN_TOKEN else MIN_TOKEN + RING_SIZE  # (x, MIN] runs to the top
        assert left_end <= right.start, f"{left} overlaps {right}"
    assert sum(r.width() for r in pieces) == sum(r.width() for r in expected)


FOUR_NODES = make_ring({"10.0.0.1": [-6000], "10.0.0.2": [-1000], "10.0.0.3": [3000], "10.0.0.4": [8000]})


def test_fixed_splitter_gives_n_subranges_per_range_and_unwraps_the_wrapping_one() -> None:
    config = parse_config({"merge_ranges_with_same_replicas": False, "splitter": {"subranges_per_range": 4}})
    plan = plan_segments(FOUR_NODES, replica_map(FOUR_NODES, {"dc1": 3}), RepairUnit("ks"), config)
    # 4 ranges x 4 pieces; exactly one piece of the wrap-around range crosses MIN_TOKEN and becomes two.
    assert len(plan.segments) == 17
    assert plan.skipped == ()
    assert_tiles_exactly(plan.segments, FOUR_NODES.ranges())
    assert any(s.range.end == MIN_TOKEN for s in plan.segments)
    assert any(s.range.start == MIN_TOKEN for s in plan.segments)


def test_segment_replicas_come_from_the_replica_map() -> None:
    config = parse_config({"merge_ranges_with_same_replicas": False, "splitter": {"subranges_per_range": 1}})
    entries = replica_map(FOUR_NODES, {"dc1": 2})
    plan = plan_segments(FOUR_NODES, entries, RepairUnit("ks"), config)
    by_range = dict(entries)
    for segment in plan.segments:
        owner_range = next(r for r in by_range if r.contains(segment.range.end))
        assert segment.replicas == by_range[owner_range]


def test_merge_joins_adjacent_ranges_with_the_same_replica_set() -> None:
    # RF = node count: every range has the same replica set, so the whole ring becomes one range.
    config = parse_config({"merge_ranges_with_same_replicas": True, "splitter": {"subranges_per_range": 1}})
    plan = plan_segments(FOUR_NODES, replica_map(FOUR_NODES, {"dc1": 4}), RepairUnit("ks"), config)
    assert [s.range for s in plan.segments] == TokenRange(8000, 8000).unwrap()
    assert sum(s.range.width() for s in plan.segments) == RING_SIZE


def test_merge_keeps_ranges_with_different_replica_sets_apart() -> None:
    ring = make_ring({"a": [-100, 100], "b": [-50, 150], "c": [0, 200]})
    unmerged = parse_config({"merge_ranges_with_same_replicas": False, "splitter": {"subranges_per_range": 1}})
    merged = parse_config({"merge_ranges_with_same_replicas": True, "splitter": {"subranges_per_range": 1}})
    entries = replica_map(ring, {"dc1": 2})
    plain = plan_segments(ring, entries, RepairUnit("ks"), unmerged).segments
    joined = plan_segments(ring, entries, RepairUnit("ks"), merged).segments
    assert len(joined) <= len(plain)
    for first, second in itertools.pairwise(joined):
        if first.range.end == second.range.start and first.range.end != MIN_TOKEN:
            assert set(first.replicas) != set(second.replicas)
    assert_tiles_exactly(joined, ring.ranges())


def test_rf1_ranges_are_skipped_with_a_reason() -> None:
    plan = plan_segments(FOUR_NODES, replica_map(FOUR_NODES, {"dc1": 1}), RepairUnit("ks"), RepairConfig())
    assert plan.segments == ()
    assert len(plan.skipped) == 4
    assert all("RF 1" in s.reason for s in plan.skipped)


def test_ignore_dcs_removes_nodes_and_skips_ranges_left_without_two_replicas() -> None:
    ring = make_ring(
        {"a1": [-9000], "a2": [-3000], "a3": [3000], "b1": [-6000], "b2": [0], "b3": [6000]},
        {"a1": "dcA", "a2": "dcA", "a3": "dcA", "b1": "dcB", "b2": "dcB", "b3": "dcB"},
    )
    ignore_b = parse_config({"ignore_dcs": ["dcB"], "splitter": {"subranges_per_range": 2}})
    plan = plan_segments(ring, replica_map(ring, {"dcA": 2, "dcB": 2}), RepairUnit("ks"), ignore_b)
    assert plan.segments and plan.skipped == ()
    assert all(r.startswith("a") for s in plan.segments for r in s.replicas)
    assert_tiles_exactly(plan.segments, ring.ranges())

    only_b = plan_segments(ring, replica_map(ring, {"dcB": 3}), RepairUnit("ks"), ignore_b)
    assert only_b.segments == ()
    assert {s.reason for s in only_b.skipped} == {"every replica is in an ignored datacenter"}


def test_node_scoped_unit_takes_primary_ranges_only_when_configured() -> None:
    entries = replica_map(FOUR_NODES, {"dc1": 2})
    unit = RepairUnit("ks", nodes=frozenset({"10.0.0.2"}))
    pr = parse_config({"primary_range_only": True, "splitter": {"subranges_per_range": 1}})
    everything = parse_config({"primary_range_only": False, "splitter": {"subranges_per_range": 1}})
    primary = plan_segments(FOUR_NODES, entries, unit, pr).segments
    assert [s.range for s in primary] == FOUR_NODES.primary_ranges("10.0.0.2")
    replicated = plan_segments(FOUR_NODES, entries, unit, everything).segments
    assert all("10.0.0.2" in s.replicas for s in replicated)
    assert sum(s.range.width() for s in replicated) > sum(s.range.width() for s in primary)


def test_size_splitter_cuts_ranges_by_estimated_bytes() -> None:
    ring = make_ring({"a": [0], "b": [1200], "c": [2400]})
    # (0, 1200] holds 40 MB of ks.t1 and 8 MB of ks.t2; (1200, 2400] holds 4 MB; the wrap range nothing.
    rows = [
        SizeEstimate("ks", "t1", "0", "1200", 4000, 10_000),
        SizeEstimate("ks", "t2", 0, 1200, 4000, 2_000),
        SizeEstimate("ks", "t1", 1200, 2400, 4000, 1_000),
        SizeEstimate("ks", "t1", 1200, 2400, 4000, 1_000),  # same range reported by a second node
        SizeEstimate("other", "t1", 0, 1200, 10**9, 10**9),
    ]
    config = parse_config(
        {
            "merge_ranges_with_same_replicas": False,
            "splitter": {"type": "size", "max_bytes_per_segment": 16_000_000},
        }
    )
    plan = plan_segments(ring, replica_map(ring, {"dc1": 2}), RepairUnit("ks"), config, rows)
    inside = [s for s in plan.segments if s.range.start >= 0 and 0 < s.range.end <= 1200]
    assert len(inside) == math.ceil(48_000_000 / 16_000_000)
    assert all(s.estimated_bytes is not None and s.estimated_bytes <= 16_000_000 for s in plan.segments)
    assert sum(s.estimated_bytes or 0 for s in plan.segments) == 52_000_000
    assert_tiles_exactly(plan.segments, ring.ranges())
    only_t2 = plan_segments(ring, replica_map(ring, {"dc1": 2}), RepairUnit("ks", ("t2",)), config, rows)
    assert sum(s.estimated_bytes or 0 for s in only_t2.segments) == 8_000_000


def test_size_splitter_refines_pieces_where_data_is_uneven() -> None:
    # One ring range spans two estimate rows: nearly all data sits in its first tenth.
    ring = make_ring({"a": [0], "b": [10_000]})
    rows = [SizeEstimate("ks", "t", 0, 1000, 4000, 9_000), SizeEstimate("ks", "t", 1000, 10_000, 4000, 1_000)]
    config = parse_config(
        {"merge_ranges_with_same_replicas": True, "splitter": {"type": "size", "max_bytes_per_segment": 8_000_000}}
    )
    plan = plan_segments(ring, replica_map(ring, {"dc1": 2}), RepairUnit("ks"), config, rows)
    assert all((s.estimated_bytes or 0) <= 8_000_000 for s in plan.segments)
    assert sum(s.estimated_bytes or 0 for s in plan.segments) == 40_000_000
    assert_tiles_exactly(plan.segments, ring.ranges())


def test_size_splitter_by_partitions_and_without_estimates() -> None:
    ring = make_ring({"a": [0], "b": [1000]})
    rows = [SizeEstimate("ks", "t", 0, 1000, 10, 100_000)]
    config = parse_config(
        {
            "merge_ranges_with_same_replicas": False,
            "splitter": {"type": "size", "max_partitions_per_segment": 10_000},
        }
    )
    plan = plan_segments(ring, replica_map(ring, {"dc1": 2}), RepairUnit("ks"), config, rows)
    assert len([s for s in plan.segments if s.range.start >= 0 and 0 < s.range.end <= 1000]) == 10
    bare = plan_segments(ring, replica_map(ring, {"dc1": 2}), RepairUnit("ks"), config)
    assert all(s.estimated_bytes is None for s in bare.segments)
    assert_tiles_exactly(bare.segments, ring.ranges())


def test_segment_ids_are_stable_and_distinguish_keyspace_tables_and_range() -> None:
    r = TokenRange(1, 2)
    same = Segment("ks", ("b", "a"), r, ("x", "y"))
    assert same.segment_id == Segment("ks", ("a", "b"), r, ("y", "x"), 5).segment_id
    assert same.tables == ("a", "b")
    others = {
        Segment("ks2", ("a", "b"), r, ("x",)).segment_id,
        Segment("ks", ("a",), r, ("x",)).segment_id,
        Segment("ks", ("a", "b"), TokenRange(1, 3), ("x",)).segment_id,
    }
    assert same.segment_id not in others and len(others) == 3
    config = RepairConfig()
    entries = replica_map(FOUR_NODES, {"dc1": 3})
    first = plan_segments(FOUR_NODES, entries, RepairUnit("ks"), config)
    again = plan_segments(FOUR_NODES, entries, RepairUnit("ks"), config)
    assert [s.segment_id for s in first.segments] == [s.segment_id for s in again.segments]


def test_ranges_narrower_than_the_piece_count_split_into_single_tokens() -> None:
    ring = make_ring({"a": [0], "b": [3]})
    config = parse_config({"merge_ranges_with_same_replicas": False, "splitter": {"subranges_per_range": 16}})
    plan = plan_segments(ring, replica_map(ring, {"dc1": 2}), RepairUnit("ks"), config)
    narrow = sorted(s.range for s in plan.segments if s.range.start >= 0 and 0 < s.range.end <= 3)
    assert narrow == [TokenRange(0, 1), TokenRange(1, 2), TokenRange(2, 3)]
    assert_tiles_exactly(plan.segments, ring.ranges())


def test_unit_and_segment_descriptions() -> None:
    assert RepairUnit("ks").name == "ks.*"
    assert RepairUnit("ks", ("b", "a", "b")).name == "ks.{a,b}"
    segment = Segment("ks", ("t",), TokenRange(-5, 7), ("10.0.0.2", "10.0.0.1"))
    assert segment.coordinator == "10.0.0.2"
    assert segment.describe() == "ks.{t} (-5, 7] on 10.0.0.2, 10.0.0.1"


def test_replica_map_from_another_ring_is_refused() -> None:
    other = make_ring({"a": [1], "b": [2]})
    with pytest.raises(RingError, match="ring order"):
        plan_segments(FOUR_NODES, replica_map(other, {"dc1": 2}), RepairUnit("ks"), RepairConfig())
    bad = [(r, ("nobody", "10.0.0.1")) for r, _ in replica_map(FOUR_NODES, {"dc1": 2})]
    with pytest.raises(RingError, match="not all in the ring"):
        plan_segments(FOUR_NODES, bad, RepairUnit("ks"), RepairConfig())


def test_select_units_filters_keyspaces_and_tables() -> None:
    schema = {
        "system": ["local"],
        "system_schema": ["tables"],
        "system_auth": ["roles"],
        "system_traces": ["events"],
        "app": ["users", "events", "tmp_1"],
        "scratch": ["x"],
        "empty": [],
    }
    config = parse_config(
        {
            "keyspaces": {"include": ["*"], "exclude": ["system_traces", "scratch"]},
            "tables": {"include": ["*"], "exclude": ["app.tmp_*"]},
        }
    )
    units = select_units(schema, config)
    assert [u.keyspace for u in units] == ["app", "system_auth"]
    assert units[0].tables == ("events", "users")
    assert units[1].tables == ()  # every table: new tables are repaired without a config change
    assert all(u.repair_type == "full" for u in units)


@settings(max_examples=60, deadline=None)
@given(
    tokens=st.lists(st.integers(MIN_TOKEN + 1, MAX_TOKEN), min_size=1, max_size=12, unique=True),
    nodes=st.integers(1, 5),
    rf=st.integers(1, 4),
    pieces=st.integers(1, 7),
    merge=st.booleans(),
)
def test_planned_segments_tile_every_replicated_range_exactly(
    tokens: list[int], nodes: int, rf: int, pieces: int, merge: bool
) -> None:
    owners: dict[str, list[int]] = {}
    for index, token in enumerate(tokens):
        owners.setdefault(f"n{index % nodes}", []).append(token)
    ring = make_ring(owners)
    config = parse_config({"merge_ranges_with_same_replicas": merge, "splitter": {"subranges_per_range": pieces}})
    entries = replica_map(ring, {"dc1": rf})
    plan = plan_segments(ring, entries, RepairUnit("ks"), config)
    repaired = [r for r, replicas in entries if len(replicas) > 1]
    assert_tiles_exactly(plan.segments, repaired)
    assert sum(s.range.width() for s in plan.skipped) + sum(r.width() for r in repaired) == RING_SIZE
    assert len({s.segment_id for s in plan.segments}) == len(plan.segments)


def test_segments_stay_within_one_vnode_range_by_default() -> None:
    # nodetool repair -st/-et refuses a range that spans two of the ring's ranges.
    plan = plan_segments(FOUR_NODES, replica_map(FOUR_NODES, {"dc1": 4}), RepairUnit("ks"), RepairConfig())
    ring_ranges = FOUR_NODES.ranges()
    assert plan.segments and not plan.skipped  # rf 4 on four nodes: every range is repaired
    for segment in plan.segments:
        assert any(_inside(segment.range, r) for r in ring_ranges), segment.range
    assert_tiles_exactly(plan.segments, ring_ranges)


def _inside(piece: TokenRange, whole: TokenRange) -> bool:
    return all(whole.contains(token) for token in (piece.start + 1, piece.end)) and piece.width() <= whole.width()
