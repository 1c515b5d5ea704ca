"""Placement diffs: the seed's data-loss change, totals, byte estimates, and ring changes."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st
from ringward.diff import RangeChange, diff_maps, diff_replication, diff_rings
from ringward.placement import replica_map, replicas_for_token
from ringward.replication import Replication
from ringward.ring import Node, Ring, TokenRange

RACKS = {"172.24.0.2": "rack1", "172.24.0.3": "rack1", "172.24.0.4": "rack2"}
TOKENS_4 = {
    "172.24.0.3": (-8556096403387275620, -3855495865544340301, -2848014410424999526, 2896250345574616760),
    "172.24.0.2": (-8151920490432810868, -433108085672519511, 8824499221154258863, 9216178714344602529),
    "172.24.0.4": (-443119614084012, 3123411945676703294, 3785937351724272180, 6479672427606371611),
}
SIMPLE_2 = Replication.simple(2)
NTS_DC1_2 = Replication.network_topology({"dc1": 2})


def seed_ring(load: int | None = None) -> Ring:
    return Ring.of(
        Node(address, "dc1", RACKS[address], tokens, load_bytes=load) for address, tokens in TOKENS_4.items()
    )


def test_range_change_parts_keep_cassandra_order() -> None:
    change = RangeChange(TokenRange(0, 10), ("a", "b", "c"), ("c", "d", "a"))
    assert change.gained == ("d",)
    assert change.lost == ("b",)
    assert change.kept == ("c", "a")
    assert change.affected
    assert not RangeChange(TokenRange(0, 10), ("a", "b"), ("b", "a")).affected


def test_seed_strategy_change_moves_app_id_1_from_node_2_to_node_4() -> None:
    diff = diff_replication(seed_ring(), SIMPLE_2, NTS_DC1_2)
    (change,) = [c for c in diff.changes if c.range == TokenRange(-8151920490432810868, -3855495865544340301)]
    assert (change.old, change.new) == (("172.24.0.3", "172.24.0.2"), ("172.24.0.3", "172.24.0.4"))
    assert (change.gained, change.lost, change.kept) == (("172.24.0.4",), ("172.24.0.2",), ("172.24.0.3",))


def test_diff_holds_exactly_the_ranges_whose_replicas_differ() -> None:
    ring = seed_ring()
    old, new = replica_map(ring, SIMPLE_2), replica_map(ring, NTS_DC1_2)
    diff = diff_replication(ring, SIMPLE_2, NTS_DC1_2)
    assert [c.range for c in diff.changes] == [r for r in ring.ranges() if old[r] != new[r]]
    assert diff.affected_ranges() == [r for r in ring.ranges() if set(old[r]) != set(new[r])]
    assert all(c.affected for c in diff.affected())


def test_same_replication_is_an_empty_diff() -> None:
    assert diff_replication(seed_ring(), NTS_DC1_2, NTS_DC1_2).changes == ()


def test_node_totals_count_ranges_and_tokens() -> None:
    diff = diff_replication(seed_ring(), SIMPLE_2, NTS_DC1_2)
    totals = diff.node_totals()
    for address, total in totals.items():
        gained = [c for c in diff.affected() if address in c.gained]
        lost = [c for c in diff.affected() if address in c.lost]
        assert (total.ranges_gained, total.ranges_lost) == (len(gained), len(lost))
        assert total.tokens_gained == sum(c.range.width() for c in gained)
        assert total.tokens_lost == sum(c.range.width() for c in lost)
        assert total.bytes_in is None and total.bytes_out is None  # no load known
    assert totals["172.24.0.4"].ranges_gained > 0 and totals["172.24.0.4"].ranges_lost == 0


def test_byte_estimates_are_proportional_to_width_over_owned_width() -> None:
    ring = seed_ring(load=1_000_000)
    old = replica_map(ring, SIMPLE_2)
    diff = diff_replication(ring, SIMPLE_2, NTS_DC1_2)
    owned = {a: sum(r.width() for r in old.ranges_of(a)) for a in ring.addresses()}
    totals = diff.node_totals()
    node_2 = totals["172.24.0.2"]
    expected_out = sum(
        1_000_000 * c.range.width() / owned["172.24.0.2"] for c in diff.affected() if "172.24.0.2" in c.lost
    )
    assert node_2.bytes_out == round(expected_out)
    node_4 = totals["172.24.0.4"]
    expected_in = sum(
        c.range.width() * sum(1_000_000 / owned[a] for a in c.old) / len(c.old)
        for c in diff.affected()
        if "172.24.0.4" in c.gained
    )
    assert node_4.bytes_in == round(expected_in)
    assert node_4.bytes_in > 0


def test_rack_relabel_moves_ownership() -> None:
    before = seed_ring()
    after = Ring.of(replace(n, rack="rack1") if n.address == "172.24.0.4" else n for n in before.nodes)
    diff = diff_rings(before, after, NTS_DC1_2)
    assert diff.affected()
    for change in diff.changes:
        assert change.old == replica_map(before, NTS_DC1_2)[change.range]
        assert change.new == replica_map(after, NTS_DC1_2)[change.range]


def test_ring_change_refines_to_both_token_sets() -> None:
    before = seed_ring()
    added = Node("172.24.0.5", "dc1", "rack2", (-6000000000000000000, 5000000000000000000))
    after = Ring.of([*before.nodes, added])
    diff = diff_rings(before, after, SIMPLE_2)
    for change in diff.changes:
        assert change.old == replicas_for_token(before, SIMPLE_2, change.range.end)
        assert change.new == replicas_for_token(after, SIMPLE_2, change.range.end)
    assert {c.range.end for c in diff.changes} <= set(after.sorted_tokens)
    assert any("172.24.0.5" in c.gained for c in diff.affected())


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=12, unique=True),
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=12, unique=True),
    st.integers(1, 3),
)
def test_refined_diff_agrees_with_both_maps_everywhere(old_tokens: list[int], new_tokens: list[int], rf: int) -> None:
    def ring_of(tokens: list[int]) -> Ring:
        return Ring.of(Node(f"n{i % 3}", "dc1", "r1", tuple(tokens[i::3])) for i in range(min(3, len(tokens))))

    before, after = ring_of(old_tokens), ring_of(new_tokens)
    replication = Replication.simple(rf)
    diff = diff_maps(replica_map(before, replication), replica_map(after, replication))
    changed = {c.range.end: c for c in diff.changes}
    for end in sorted(set(old_tokens) | set(new_tokens)):
        old, new = replicas_for_token(before, replication, end), replicas_for_token(after, replication, end)
        if old == new:
            assert end not in changed
        else:
            assert (changed[end].old, changed[end].new) == (old, new)


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=30, unique=True),
    st.lists(st.tuples(st.sampled_from(["dc1", "dc2"]), st.sampled_from(["r1", "r2"])), min_size=1, max_size=6),
    st.dictionaries(st.sampled_from(["dc1", "dc2"]), st.integers(0, 4)),
    st.dictionaries(st.sampled_from(["dc1", "dc2"]), st.integers(0, 4)),
)
def test_diff_replication_lists_every_changed_range_with_its_set_differences(
    tokens: list[int], locations: list[tuple[str, str]], old: dict[str, int], new: dict[str, int]
) -> None:
    count = min(len(tokens), len(locations))
    ring = Ring.of(Node(f"n{i}", *locations[i], tuple(tokens[i::count])) for i in range(count))
    before, after = Replication.network_topology(old), Replication.network_topology(new)
    totals = diff_replication(ring, before, after).node_totals()
    changes = {c.range: c for c in diff_replication(ring, before, after).changes}
    gained: dict[str, int] = {}
    for token_range in ring.ranges():
        was = replicas_for_token(ring, before, token_range.end)
        now = replicas_for_token(ring, after, token_range.end)
        if was == now:
            assert token_range not in changes
            continue
        change = changes[token_range]
        assert set(change.gained) == set(now) - set(was)
        assert set(change.lost) == set(was) - set(now)
        assert set(change.kept) == set(now) & set(was)
        for address in change.gained:
            gained[address] = gained.get(address, 0) + 1
    assert {a: t.ranges_gained for a, t in totals.items() if t.ranges_gained} == gained
