"""Fleet-size planning (issue 23): the fast paths keep ids, plans and groups exactly as before."""

from __future__ import annotations

import dataclasses
import pickle
import random

from ringward.placement import replica_map
from ringward.repair import (
    RepairCommand,
    RepairUnit,
    ReplicaMapCache,
    Segment,
    group_segments,
    parse_config,
    plan_segments,
)
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Node, Ring, TokenRange

NTS = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})


def random_ring(nodes: int = 12, vnodes: int = 8, seed: int = 3) -> Ring:
    rng = random.Random(seed)
    return Ring.of(
        Node(
            f"10.0.0.{n + 1}",
            f"dc{n % 2 + 1}",
            f"r{n % 3}",
            tuple(rng.randrange(MIN_TOKEN + 1, 2**63) for _ in range(vnodes)),
        )
        for n in range(nodes)
    )


def test_segment_ids_are_the_ones_the_repair_history_already_holds() -> None:
    # Golden values computed before ids became lazy: history rows are keyed by them.
    assert Segment("ks", ("b", "a"), TokenRange(1, 2), ("x",)).segment_id == "38ba569099c88166c765"
    assert Segment("ks", (), TokenRange(MIN_TOKEN, -5), ("x", "y")).segment_id == "d27af77a9d3285bd6499"
    assert Segment("ks", ["a", "a"], TokenRange(5, MIN_TOKEN), ("x", "y")).segment_id == "d7aa6accdfd955def67b"  # type: ignore[arg-type]


def test_planned_segments_equal_segments_built_the_checked_way() -> None:
    ring = random_ring()
    unit = RepairUnit("ks", ("t2", "t1"))
    plan = plan_segments(ring, replica_map(ring, NTS).entries(), unit, parse_config({}))
    rebuilt = [Segment(s.keyspace, s.tables, s.range, s.replicas, s.estimated_bytes) for s in plan.segments]
    assert list(plan.segments) == rebuilt
    assert [s.segment_id for s in plan.segments] == [s.segment_id for s in rebuilt]
    assert all(s.tables == ("t1", "t2") for s in plan.segments)


def test_replica_map_cache_builds_one_entry_list_per_placement() -> None:
    ring = random_ring()
    cache = ReplicaMapCache(ring)
    expanded = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})
    assert cache.entries(NTS) is cache.entries(expanded)
    assert list(cache.entries(NTS)) == replica_map(ring, NTS).entries()
    simple = Replication.parse({"class": "SimpleStrategy", "replication_factor": 3})
    assert list(cache.entries(simple)) == replica_map(ring, simple).entries()


def test_group_segments_groups_by_replica_set_across_tuple_objects_in_first_seen_order() -> None:
    r = [TokenRange(i * 10, i * 10 + 5) for i in range(6)]
    segments = [
        Segment("ks", (), r[0], ("a", "b")),
        Segment("other", (), r[1], ("a", "b")),
        Segment("ks", (), r[2], ("b", "a")),  # same set, another tuple object and order
        Segment("ks", ("t",), r[3], ("a", "b")),  # another table set: another command
        Segment("ks", (), r[4], ("a", "c")),
        Segment("ks", (), r[5], tuple(["a", "b"])),
    ]
    commands = group_segments(segments, 2)
    assert [[s.range for s in c.segments] for c in commands] == [[r[0], r[2]], [r[5]], [r[1]], [r[3]], [r[4]]]
    assert all(isinstance(c, RepairCommand) for c in commands)
    # Built through the checked constructor, the same commands compare equal.
    assert commands == [RepairCommand(c.segments) for c in commands]


def test_a_replaced_segment_gets_the_id_of_its_new_range_not_the_cached_one() -> None:
    segment = Segment("ks", (), TokenRange(1, 2), ("x", "y"))
    assert segment.segment_id == Segment("ks", (), TokenRange(1, 2), ()).segment_id  # cached now
    moved = dataclasses.replace(segment, range=TokenRange(2, 3))
    assert moved.segment_id == Segment("ks", (), TokenRange(2, 3), ()).segment_id != segment.segment_id
    assert "segment_id" not in repr(segment)
    assert segment == Segment("ks", (), TokenRange(1, 2), ("x", "y"))  # a cached id does not take part
    assert pickle.loads(pickle.dumps(segment)).segment_id == segment.segment_id


def test_a_replica_map_checked_once_plans_every_unit_as_checked_each_time() -> None:
    """`checked_replica_map`: the map checked against the ring once for all the units planned on it (a fleet
    night's 13 units share one); the same segments as a map checked per unit; refused as `plan_segments` refuses;
    handed with another ring, it is checked again."""
    import pytest
    from ringward.errors import RingError
    from ringward.repair import CheckedReplicaMap, checked_replica_map

    ring = random_ring()
    entries = replica_map(ring, NTS).entries()
    checked = checked_replica_map(ring, entries)
    assert isinstance(checked, CheckedReplicaMap) and list(checked) == entries
    assert checked_replica_map(ring, checked) is checked
    config = parse_config({})
    for unit in (RepairUnit("ks", ("t2", "t1")), RepairUnit("other"), RepairUnit("ks", nodes=frozenset({"10.0.0.1"}))):
        assert plan_segments(ring, checked, unit, config) == plan_segments(ring, entries, unit, config)
    with pytest.raises(RingError):
        checked_replica_map(ring, entries[1:])
    with pytest.raises(RingError):  # checked against another ring: checked again, against this one
        plan_segments(random_ring(seed=4), checked, RepairUnit("ks"), config)
