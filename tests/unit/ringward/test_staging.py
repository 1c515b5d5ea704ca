"""Staged routes: every step keeps a replica of every range (checked independently with
replicas_for_token) and, by default, moves at most one replica per datacenter."""

from __future__ import annotations

import random
import re
from collections import Counter
from itertools import combinations, product
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ringward.errors import UnsafeChangeError
from ringward.placement import replicas_for_token
from ringward.replication import Replication
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring
from ringward.ring_sources import load_ring_file
from ringward.staging import staged_route, staged_steps, unsafe_step_ranges

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"


def nts(**factors: int) -> Replication:
    return Replication.network_topology(factors)


_REPLICAS: dict[tuple[int, Replication], tuple[Ring, list[set[str]]]] = {}


def replicas(ring: Ring, replication: Replication) -> list[set[str]]:
    """Replica sets of every range from `replicas_for_token` (cached: the brute-force search asks often)."""
    key = (id(ring), replication)
    cached = _REPLICAS.get(key)
    if cached is None or cached[0] is not ring:
        cached = _REPLICAS[key] = (ring, [set(replicas_for_token(ring, replication, r.end)) for r in ring.ranges()])
    return cached[1]


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


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_single_dc_routes_exist_or_the_refusal_offers_a_working_fix(data: st.DataObject) -> None:
    """In one datacenter, raising to every node and lowering again is always a safe route within one class.
    Across classes (SimpleStrategy <-> NTS, changing class once) a route may not exist; the refusal then
    offers a fix this test follows: a route without the QUORUM rules, or a first SimpleStrategy migration."""
    ring = data.draw(rings())
    ring = Ring.of(Node(n.address, "dc1", n.rack, n.tokens) for n in ring.nodes)
    old, new = data.draw(replications(ring)), data.draw(replications(ring))
    try:
        steps = staged_steps(ring, old, new)
    except UnsafeChangeError as refusal:
        assert old.strategy != new.strategy, "within one class a single-DC route always exists"
        assert_fix_works(ring, old, new, refusal.fix)
        return
    assert not steps or steps[-1] == new


def assert_fix_works(ring: Ring, old: Replication, new: Replication, fix: str) -> None:
    detour = re.search(r"first change to (\{.*?\})", fix)
    if detour:
        middle = Replication.parse(detour.group(1))
        assert staged_steps(ring, old, middle) and staged_steps(ring, middle, new)
    else:
        assert "--allow-quorum-gap" in fix
        assert staged_steps(ring, old, new, keep_quorum=False)


# --- routes an operator would write (issue 15) ----------------------------------------------------------


def ring_of(nodes_per_dc: dict[str, int], racks_per_dc: dict[str, int], vnodes: int = 4, seed: int = 1) -> Ring:
    rng = random.Random(seed)
    nodes = []
    for dc, count in nodes_per_dc.items():
        for i in range(count):
            tokens = tuple(rng.randrange(MIN_TOKEN + 1, MAX_TOKEN) for _ in range(vnodes))
            nodes.append(Node(f"10.{len(nodes)}.0.1", dc, f"r{i % racks_per_dc[dc]}", tokens))
    return Ring.of(nodes)


def effective(ring: Ring, replication: Replication) -> dict[str, int]:
    """Replicas per datacenter an NTS setting gives (factors capped at the datacenter's nodes)."""
    dcs = ring.datacenters()
    return {dc: min(replication.factor_for(dc), len(nodes)) for dc, nodes in dcs.items()}


def brute_step_ok(ring: Ring, before: Replication, after: Replication, keep_quorum: bool) -> bool:
    """The step rules, range by range from `replicas_for_token`, quorums enumerated."""
    dc_of = {n.address: n.datacenter for n in ring.nodes}
    for old, new in zip(replicas(ring, before), replicas(ring, after), strict=True):
        if not old or old == new:
            continue
        if not old & new:
            return False
        if not keep_quorum:
            continue
        if max(Counter(dc_of[a] for a in new - old).values(), default=0) > 1:
            return False
        if max(Counter(dc_of[a] for a in old - new).values(), default=0) > 1:
            return False
        scopes = [(old, new)] + [
            ({a for a in old if dc_of[a] == dc}, {a for a in new if dc_of[a] == dc}) for dc in set(dc_of.values())
        ]
        for old_scope, new_scope in scopes:
            if not old_scope or not new_scope:
                continue
            # Some read quorum misses a write quorum iff the new replicas outside that write quorum can
            # make up a read quorum by themselves.
            writes = combinations(sorted(old_scope), len(old_scope) // 2 + 1)
            if any(len(new_scope - set(w)) >= len(new_scope) // 2 + 1 for w in writes):
                return False
    return True


def brute_fewest_steps(ring: Ring, old: Replication, new: Replication, keep_quorum: bool) -> int | None:
    """Fewest ALTERs over every monotone NTS route (any factor jumps), by breadth-first search."""
    dcs = list(ring.datacenters())
    target = effective(ring, new)
    if old.is_simple:
        most = {dc: max(sum(1 for a in rs if a in members) for rs in replicas(ring, old)) for dc, members in
                ((dc, {n.address for n in nodes}) for dc, nodes in ring.datacenters().items())}  # fmt: skip
        firsts = list(product(*(range(min(most[dc], target[dc]), max(most[dc], target[dc]) + 1) for dc in dcs)))
    else:
        start = effective(ring, old)
        firsts = [tuple(start[dc] for dc in dcs)]
    goal = tuple(target[dc] for dc in dcs)

    def setting(vector: tuple[int, ...]) -> Replication:
        return nts(**{dc: f for dc, f in zip(dcs, vector, strict=True) if f})

    level = [(v, 1) for v in firsts if any(v) and brute_step_ok(ring, old, setting(v), keep_quorum)]
    if old.is_simple:
        if any(v == goal for v, _ in level):
            return 1
    else:
        level = [(firsts[0], 0)]
    seen = {v for v, _ in level}
    while level:
        following = []
        for vector, steps in level:
            ways = [range(v, t + (1 if t >= v else -1), 1 if t >= v else -1) for v, t in zip(vector, goal, strict=True)]
            for candidate in product(*ways):
                if candidate in seen or not any(candidate):
                    continue
                if brute_step_ok(ring, setting(vector), setting(candidate), keep_quorum):
                    if candidate == goal:
                        return steps + 1
                    seen.add(candidate)
                    following.append((candidate, steps + 1))
        level = following
    return None


def test_issue_examples_give_monotone_nts_routes_on_a_two_dc_ring() -> None:
    ring = ring_of({"dc1": 6, "dc2": 6}, {"dc1": 3, "dc2": 3})
    assert staged_steps(ring, nts(dc1=1, dc2=1), nts(dc1=3, dc2=1)) == [nts(dc1=2, dc2=1), nts(dc1=3, dc2=1)]
    assert staged_steps(ring, nts(dc1=3), nts(dc1=3, dc2=3)) == [
        nts(dc1=3, dc2=1),
        nts(dc1=3, dc2=2),
        nts(dc1=3, dc2=3),
    ]
    assert staged_steps(ring, nts(dc1=2), nts(dc1=4)) == [nts(dc1=3), nts(dc1=4)]


def test_issue_examples_on_the_seed_ring() -> None:
    """The seed ring is one datacenter of three nodes in two racks: a factor of 4 places 3 replicas."""
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    assert staged_steps(ring, nts(dc1=2), nts(dc1=4)) == [nts(dc1=4)]  # one replica more: no SimpleStrategy detour
    assert staged_steps(ring, nts(dc1=1), nts(dc1=3)) == [nts(dc1=2), nts(dc1=3)]
    assert staged_steps(ring, nts(dc1=4), nts(dc1=1)) == [nts(dc1=2), nts(dc1=1)]


def test_datacenters_move_in_the_same_step_when_the_rules_allow() -> None:
    ring = ring_of({"dc1": 5, "dc2": 5}, {"dc1": 5, "dc2": 5})
    assert staged_steps(ring, nts(dc1=2, dc2=2), nts(dc1=4, dc2=4)) == [nts(dc1=3, dc2=3), nts(dc1=4, dc2=4)]


def test_datacenters_move_in_turn_when_together_they_break_quorum_overlap() -> None:
    """From one replica, two gained at once leave a QUORUM read (2 of 3) able to miss the write (1 of 1)."""
    ring = ring_of({"dc1": 3, "dc2": 3}, {"dc1": 3, "dc2": 3})
    steps = staged_steps(ring, nts(dc1=1, dc2=0), nts(dc1=2, dc2=1))
    assert len(steps) == 2 and steps[-1] == nts(dc1=2, dc2=1)
    assert brute_fewest_steps(ring, nts(dc1=1), nts(dc1=2, dc2=1), True) == 2


def test_each_step_is_explained_in_one_line() -> None:
    ring = ring_of({"dc1": 6, "dc2": 6}, {"dc1": 3, "dc2": 3})
    route = staged_route(ring, nts(dc1=3), nts(dc1=3, dc2=2))
    assert len(route.notes) == len(route.steps) == 2
    assert all("\n" not in note for note in route.notes)
    ranges = len(ring.ranges())
    assert route.notes[0].startswith(f"dc2 0 -> 1; {ranges} of {ranges} ranges gain a replica, 0 lose one;")
    assert "dc2 moves one replica per step (0 -> 2 in all)" in route.notes[0]
    assert route.notes[1].startswith("dc2 1 -> 2;")


def test_a_simple_to_nts_refusal_offers_a_route_that_exists() -> None:
    """The issue's 3-DC example: SimpleStrategy RF 1 -> NTS {us-east: 2, eu_west: 3, ap-south-1: 0}.

    Every range's one replica must stay, so the first NTS step names every datacenter that owns ranges:
    three replicas where there was one, which a QUORUM read (2 of 3) need not meet. The fix offered is a
    route without the QUORUM rules, and that route exists."""
    ring = ring_of({"us-east": 12, "eu_west": 12, "ap-south-1": 11}, {"us-east": 3, "eu_west": 3, "ap-south-1": 3})
    old, new = Replication.simple(1), nts(**{"us-east": 2, "eu_west": 3, "ap-south-1": 0})
    with pytest.raises(UnsafeChangeError) as refusal:
        staged_steps(ring, old, new)
    assert "--allow-quorum-gap" in refusal.value.fix
    assert brute_fewest_steps(ring, old, new, True) is None
    relaxed = staged_steps(ring, old, new, keep_quorum=False)
    assert relaxed[-1] == new
    assert all(step.strategy == "NetworkTopologyStrategy" for step in relaxed)
    assert_route_keeps_a_replica(ring, old, relaxed)
    assert " -> ".join(s.to_cql() for s in relaxed[:-1]) in refusal.value.fix


@st.composite
def multi_dc_rings(draw: st.DrawFn, max_dcs: int = 4, max_nodes: int = 5) -> Ring:
    """1-4 datacenters, each with 1-`max_nodes` nodes in 1-3 racks (fewer and more racks than factors)."""
    dc_count = draw(st.integers(1, max_dcs))
    shape = [(draw(st.integers(1, 3)), draw(st.integers(1, max_nodes))) for _ in range(dc_count)]
    total = sum(count for _, count in shape)
    tokens = draw(st.lists(st.integers(MIN_TOKEN + 1, MAX_TOKEN), min_size=total, max_size=3 * total, unique=True))
    nodes = []
    for d, (racks, count) in enumerate(shape):
        for i in range(count):
            n = len(nodes)
            nodes.append(Node(f"10.{d}.{i}.1", f"dc{d + 1}", f"r{i % racks}", tuple(tokens[n::total])))
    return Ring.of(nodes)


@st.composite
def nts_settings(draw: st.DrawFn, ring: Ring) -> Replication:
    dcs = ring.datacenters()
    factors = {dc: draw(st.integers(0, len(nodes) + 1)) for dc, nodes in dcs.items()}
    if not any(factors.values()):
        factors[next(iter(dcs))] = 1
    return nts(**factors)


def assert_operator_route(ring: Ring, old: Replication, new: Replication, steps: list[Replication]) -> None:
    """Class kept (or switched once), factors monotone per datacenter, untouched datacenters untouched."""
    assert steps[-1] == new
    if old.is_simple and new.is_simple:
        assert all(s.is_simple for s in steps)
        factors = [min(s.factor_for(""), len(ring.nodes)) for s in (old, *steps)]
        assert factors == sorted(factors) or factors == sorted(factors, reverse=True)
        return
    if new.is_simple:  # NTS -> SimpleStrategy: the class changes once
        switch = next(i for i, s in enumerate(steps) if s.is_simple)
        assert all(s.is_simple for s in steps[switch:]) and not any(s.is_simple for s in steps[:switch])
        return
    assert all(not s.is_simple for s in steps), "a route to NTS passes through NTS only"
    chain = [effective(ring, s) for s in ([] if old.is_simple else [old]) + steps]
    for dc in ring.datacenters():
        factors = [c[dc] for c in chain]
        assert factors == sorted(factors) or factors == sorted(factors, reverse=True), (dc, factors)
        if not old.is_simple and old.factor_for(dc) == new.factor_for(dc):
            assert all(s.factor_for(dc) == old.factor_for(dc) for s in steps), f"{dc} is touched"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), keep_quorum=st.booleans())
def test_nts_routes_are_monotone_and_fewest(data: st.DataObject, keep_quorum: bool) -> None:
    ring = data.draw(multi_dc_rings(max_dcs=3, max_nodes=3))
    old, new = data.draw(nts_settings(ring)), data.draw(nts_settings(ring))
    fewest = brute_fewest_steps(ring, old, new, keep_quorum)
    try:
        steps = staged_steps(ring, old, new, keep_quorum=keep_quorum)
    except UnsafeChangeError as refusal:
        assert fewest is None, f"a route of {fewest} steps exists"
        assert refusal.fix
        return
    if effective(ring, old) == effective(ring, new):
        assert len(steps) <= 1
        return
    assert_operator_route(ring, old, new, steps)
    assert all(brute_step_ok(ring, a, b, keep_quorum) for a, b in zip([old, *steps], steps, strict=False))
    assert len(steps) == fewest


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), keep_quorum=st.booleans())
def test_nts_routes_on_up_to_four_datacenters_keep_the_rules(data: st.DataObject, keep_quorum: bool) -> None:
    ring = data.draw(multi_dc_rings(max_dcs=4, max_nodes=5))
    old, new = data.draw(nts_settings(ring)), data.draw(nts_settings(ring))
    try:
        steps = staged_steps(ring, old, new, keep_quorum=keep_quorum)
    except UnsafeChangeError as refusal:
        assert refusal.fix
        return
    if effective(ring, old) == effective(ring, new):
        assert len(steps) <= 1
        return
    assert_operator_route(ring, old, new, steps)
    assert all(brute_step_ok(ring, a, b, keep_quorum) for a, b in zip([old, *steps], steps, strict=False))
    if keep_quorum:  # a lower bound: each step moves a datacenter by one replica at most
        start, target = effective(ring, old), effective(ring, new)
        assert len(steps) >= max(abs(start[dc] - target[dc]) for dc in start)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), keep_quorum=st.booleans())
def test_routes_from_simple_strategy_pass_through_nts_only(data: st.DataObject, keep_quorum: bool) -> None:
    ring = data.draw(multi_dc_rings(max_dcs=3, max_nodes=4))
    old = Replication.simple(data.draw(st.integers(1, len(ring.nodes))))
    new = data.draw(nts_settings(ring))
    fewest = brute_fewest_steps(ring, old, new, keep_quorum)
    try:
        steps = staged_steps(ring, old, new, keep_quorum=keep_quorum)
    except UnsafeChangeError as refusal:
        assert fewest is None, f"a route of {fewest} steps exists"
        if keep_quorum:
            assert_fix_works(ring, old, new, refusal.fix)
        return
    assert_operator_route(ring, old, new, steps)
    assert all(brute_step_ok(ring, a, b, keep_quorum) for a, b in zip([old, *steps], steps, strict=False))
    assert len(steps) == fewest


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), keep_quorum=st.booleans())
def test_routes_to_simple_strategy_change_class_once(data: st.DataObject, keep_quorum: bool) -> None:
    ring = data.draw(multi_dc_rings(max_dcs=3, max_nodes=4))
    old = data.draw(st.one_of(nts_settings(ring), st.builds(Replication.simple, st.integers(1, len(ring.nodes)))))
    new = Replication.simple(data.draw(st.integers(1, len(ring.nodes))))
    try:
        steps = staged_steps(ring, old, new, keep_quorum=keep_quorum)
    except UnsafeChangeError as refusal:
        assert refusal.fix
        return
    if not steps:
        return
    assert_operator_route(ring, old, new, steps)
    assert all(brute_step_ok(ring, a, b, keep_quorum) for a, b in zip([old, *steps], steps, strict=False))
