"""Staged routes: every step keeps a replica of every range (checked independently with
replicas_for_token) and, by default, moves at most one replica per datacenter."""

from __future__ import annotations

from collections import Counter
from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ringward.errors import UnsafeChangeError
from ringward.placement import replicas_for_token
from ringward.replication import Replication
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring
from ringward.ring_sources import load_ring_file
from ringward.staging import staged_steps, unsafe_step_ranges

RINGS = Path(__file__).parent.parent / "fixtures" / "rings"


def nts(**factors: int) -> Replication:
    return Replication.network_topology(factors)


def replicas(ring: Ring, replication: Replication) -> list[set[str]]:
    return [set(replicas_for_token(ring, replication, r.end)) for r in ring.ranges()]


def assert_route_keeps_a_replica(ring: Ring, old: Replication, steps: list[Replication]) -> None:
    previous = replicas(ring, old)
    for step in steps:
        current = replicas(ring, step)
        for before, after in zip(previous, current, strict=True):
            assert not before or before & after, f"{step} keeps none of {before}"
        previous = current


def assert_one_change_per_dc(ring: Ring, old: Replication, steps: list[Replication]) -> None:
    dc_of = {n.address: n.datacenter for n in ring.nodes}
    previous = replicas(ring, old)
    for step in steps:
        current = replicas(ring, step)
        for before, after in zip(previous, current, strict=True):
            assert max(Counter(dc_of[a] for a in after - before).values(), default=0) <= 1
            assert max(Counter(dc_of[a] for a in before - after).values(), default=0) <= 1
        previous = current


def test_seed_change_is_a_single_safe_step() -> None:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    old, new = Replication.simple(2), nts(dc1=2)
    steps = staged_steps(ring, old, new)
    assert steps == [new]
    assert_route_keeps_a_replica(ring, old, steps)


def test_no_steps_when_nothing_changes() -> None:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    assert staged_steps(ring, nts(dc1=2), nts(dc1=2)) == []


def test_moving_a_keyspace_to_another_dc_goes_through_both() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    old, new = nts(dc1=2, dc2=0), nts(dc1=0, dc2=2)
    assert unsafe_step_ranges(ring, old, new) == ring.ranges()
    steps = staged_steps(ring, old, new)
    assert len(steps) > 1 and steps[-1] == new
    assert_route_keeps_a_replica(ring, old, steps)
    assert_one_change_per_dc(ring, old, steps)
    assert all(unsafe_step_ranges(ring, a, b) == [] for a, b in zip([old, *steps], steps, strict=False))


def test_lowering_simple_rf3_to_nts_rf1_lowers_one_replica_at_a_time() -> None:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    old, new = Replication.simple(3), nts(dc1=1)
    steps = staged_steps(ring, old, new)
    assert steps[-1] == new and len(steps) == 2
    assert_one_change_per_dc(ring, old, steps)


def test_without_keep_quorum_only_a_kept_replica_is_required() -> None:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    old, new = Replication.simple(3), nts(dc1=1)
    assert staged_steps(ring, old, new, keep_quorum=False) == [new]


def test_dropping_a_dc_names_it_with_zero_in_every_step() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    old, new = nts(dc1=2, dc2=2), nts(dc1=2, dc2=0)
    steps = staged_steps(ring, old, new)
    assert steps[-1] == new
    assert all("dc2" in step.factors for step in steps)


def test_unreachable_target_is_refused_with_a_fix() -> None:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    with pytest.raises(UnsafeChangeError) as refusal:
        staged_steps(ring, nts(dc1=2), nts(dc9=2))
    assert refusal.value.fix


# --- property: any route returned is safe ------------------------------------------------------------


@st.composite
def rings(draw: st.DrawFn) -> Ring:
    tokens = draw(st.lists(st.integers(MIN_TOKEN + 1, MAX_TOKEN), min_size=2, max_size=12, unique=True))
    node_count = draw(st.integers(1, min(5, len(tokens))))
    nodes = []
    for i in range(node_count):
        owned = tuple(tokens[i::node_count])
        dc = draw(st.sampled_from(["dc1", "dc2"]))
        rack = draw(st.sampled_from(["r1", "r2"]))
        nodes.append(Node(f"10.0.0.{i + 1}", dc, rack, owned))
    return Ring.of(nodes)


@st.composite
def replications(draw: st.DrawFn, ring: Ring) -> Replication:
    if draw(st.booleans()):
        return Replication.simple(draw(st.integers(1, len(ring.nodes))))
    dcs = ring.datacenters()
    factors = {dc: draw(st.integers(0, len(nodes))) for dc, nodes in dcs.items()}
    if not any(factors.values()):
        factors[next(iter(dcs))] = 1
    return nts(**factors)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), keep_quorum=st.booleans())
def test_every_returned_route_keeps_a_replica_per_range(data: st.DataObject, keep_quorum: bool) -> None:
    ring = data.draw(rings())
    old, new = data.draw(replications(ring)), data.draw(replications(ring))
    try:
        steps = staged_steps(ring, old, new, keep_quorum=keep_quorum)
    except UnsafeChangeError:
        return
    if replicas(ring, old) == replicas(ring, new) and old == new:
        assert steps == []
        return
    assert steps[-1] == new
    assert_route_keeps_a_replica(ring, old, steps)
    if keep_quorum:
        assert_one_change_per_dc(ring, old, steps)
        assert_quorums_meet(ring, old, steps)


def assert_quorums_meet(ring: Ring, old: Replication, steps: list[Replication]) -> None:
    """Brute force: every QUORUM read after a step meets every QUORUM write made before it."""
    previous = replicas(ring, old)
    for step in steps:
        current = replicas(ring, step)
        for before, after in zip(previous, current, strict=True):
            if not before or not after:
                continue
            writes = combinations(sorted(before), len(before) // 2 + 1)
            reads = list(combinations(sorted(after), len(after) // 2 + 1))
            assert all(set(w) & set(r) for w in writes for r in reads), (before, after)
        previous = current


@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_single_dc_routes_always_exist(data: st.DataObject) -> None:
    """In one datacenter, raising to every node and lowering again is always a safe route."""
    ring = data.draw(rings())
    ring = Ring.of(Node(n.address, "dc1", n.rack, n.tokens) for n in ring.nodes)
    old, new = data.draw(replications(ring)), data.draw(replications(ring))
    steps = staged_steps(ring, old, new)
    assert not steps or steps[-1] == new
