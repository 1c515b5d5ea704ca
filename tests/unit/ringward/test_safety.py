"""Safety analysis: refusals, the read window, the deadline. Placement counts are checked independently
with replicas_for_token at each range's end token."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward.consistency import CONSISTENCY_LEVELS, quorum, unsafe_levels
from ringward.placement import replicas_for_token
from ringward.replication import Replication
from ringward.ring import Node, Ring
from ringward.ring_sources import load_ring_file
from ringward.safety import SYSTEM_KEYSPACES, Finding, analyse

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
SIMPLE_2 = Replication.parse({"class": "SimpleStrategy", "replication_factor": 2})
NTS_DC1_2 = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})


@pytest.fixture(scope="module")
def seed_ring() -> Ring:
    return load_ring_file(RINGS / "seed_num_tokens_4.txt")


@pytest.fixture(scope="module")
def two_dc_ring() -> Ring:
    return load_ring_file(RINGS / "two_dc.json")


def codes(findings: list[Finding], severity: str | None = None) -> set[str]:
    return {f.code for f in findings if severity is None or f.severity == severity}


def gained_per_range(ring: Ring, old: Replication, new: Replication) -> list[int]:
    """Independent count: new replicas that were not replicas before, per ring range."""
    counts = []
    for token_range in ring.ranges():
        before = set(replicas_for_token(ring, old, token_range.end))
        after = set(replicas_for_token(ring, new, token_range.end))
        counts.append(len(after - before))
    return counts


class TestSeedChange:
    """SimpleStrategy RF2 -> NTS dc1:2 on the seed's num_tokens=4 ring (the data-loss article)."""

    def test_is_not_refused_because_every_range_keeps_a_replica(self, seed_ring: Ring) -> None:
        findings = analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="test")
        assert codes(findings, "refuse") == set()

    def test_read_window_counts_ranges_with_a_gained_replica_for_one(self, seed_ring: Ring) -> None:
        findings = analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="test", client_consistency="ONE")
        moved = sum(1 for g in gained_per_range(seed_ring, SIMPLE_2, NTS_DC1_2) if g >= 1)
        assert moved > 0
        window = next(f for f in findings if f.code == "read_window")
        assert f"ONE {moved}" in window.message
        warning = next(f for f in findings if f.code == "client_consistency_unsafe")
        assert warning.severity == "warn"
        assert len(warning.ranges) == moved
        assert "ONE" in warning.message and "QUORUM" in warning.fix

    def test_quorum_reads_are_safe_when_one_of_two_replicas_is_new(self, seed_ring: Ring) -> None:
        findings = analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="test", client_consistency="QUORUM")
        assert "client_consistency_unsafe" not in codes(findings)


class TestRefusals:
    def test_unknown_datacenter_suggests_the_right_case(self, seed_ring: Ring) -> None:
        new = Replication.parse({"class": "NetworkTopologyStrategy", "DC1": 2})
        findings = analyse(seed_ring, SIMPLE_2, new, keyspace="test")
        unknown = next(f for f in findings if f.code == "unknown_datacenter")
        assert unknown.severity == "refuse"
        assert "'dc1'" in unknown.fix

    def test_an_unknown_datacenter_is_refused_even_at_factor_0(self, two_dc_ring: Ring) -> None:
        # Security review (issue 25, finding 11): a name the ring does not have is refused whatever its
        # factor, so no made-up name reaches the approval.
        hostile = "<img src=x onerror=alert(1)>"
        old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})
        new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2, hostile: 0})
        unknown = next(f for f in analyse(two_dc_ring, old, new, keyspace="ks") if f.code == "unknown_datacenter")
        assert unknown.severity == "refuse"
        assert unknown.message == f"Datacenter {hostile!r} is not in the ring."
        assert "dc1, dc2" in unknown.fix and "leave it out" in unknown.fix

    def test_datacenter_dropped_by_omission_is_refused(self, two_dc_ring: Ring) -> None:
        old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})
        new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})
        dropped = next(f for f in analyse(two_dc_ring, old, new, keyspace="ks") if f.code == "datacenter_dropped")
        assert dropped.severity == "refuse"
        assert "'dc2': 0" in dropped.fix

    def test_explicit_zero_drops_a_datacenter_without_refusal(self, two_dc_ring: Ring) -> None:
        old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 2})
        new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 0})
        assert codes(analyse(two_dc_ring, old, new, keyspace="ks"), "refuse") == set()

    def test_a_dc_missing_from_the_ring_can_be_left_out(self, seed_ring: Ring) -> None:
        old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "gone": 2})
        new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3})
        assert "datacenter_dropped" not in codes(analyse(seed_ring, old, new, keyspace="ks"))

    def test_factor_above_nodes_is_refused_and_above_racks_warned(self, seed_ring: Ring) -> None:
        four = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 4})
        three = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3})
        assert "rf_exceeds_nodes" in codes(analyse(seed_ring, SIMPLE_2, four, keyspace="ks"), "refuse")
        three_findings = analyse(seed_ring, SIMPLE_2, three, keyspace="ks")
        assert "rf_exceeds_racks" in codes(three_findings, "warn")
        assert codes(three_findings, "refuse") == set()

    @pytest.mark.parametrize("keyspace", sorted(SYSTEM_KEYSPACES))
    def test_system_keyspaces_are_refused(self, seed_ring: Ring, keyspace: str) -> None:
        assert "system_keyspace" in codes(analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace=keyspace), "refuse")

    def test_unchanged_settings_are_a_refused_no_op(self, seed_ring: Ring) -> None:
        assert "no_op" in codes(analyse(seed_ring, NTS_DC1_2, NTS_DC1_2, keyspace="ks"), "refuse")

    def test_same_placement_with_other_settings_is_not_a_no_op(self, seed_ring: Ring) -> None:
        simple_1 = Replication.parse({"class": "SimpleStrategy", "replication_factor": 1})
        nts_1 = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 1})
        findings = analyse(seed_ring, simple_1, nts_1, keyspace="ks")
        assert "placement_unchanged" in codes(findings, "info")
        assert codes(findings, "refuse") == set()

    @pytest.mark.parametrize(
        "bad",
        [
            '{"class": "EverywhereStrategy"}',
            '{"class": "NetworkTopologyStrategy", "dc1": "3/1"}',
            "not json",
        ],
    )
    def test_malformed_replication_becomes_a_refusal(self, seed_ring: Ring, bad: str) -> None:
        findings = analyse(seed_ring, SIMPLE_2, bad, keyspace="ks")
        malformed = next(f for f in findings if f.code == "malformed_replication")
        assert malformed.severity == "refuse" and malformed.fix

    def test_unknown_keyspace_suggests_the_right_case(self, seed_ring: Ring) -> None:
        findings = analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="Test", known_keyspaces=["test", "other"])
        unknown = next(f for f in findings if f.code == "unknown_keyspace")
        assert "'test'" in unknown.fix

    def test_moving_every_replica_to_another_dc_is_refused_per_range(self, two_dc_ring: Ring) -> None:
        old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 0})
        new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 0, "dc2": 2})
        refusal = next(f for f in analyse(two_dc_ring, old, new, keyspace="ks") if f.code == "no_replica_kept")
        kept_none = [
            r
            for r in two_dc_ring.ranges()
            if not set(replicas_for_token(two_dc_ring, old, r.end)) & set(replicas_for_token(two_dc_ring, new, r.end))
        ]
        assert list(refusal.ranges) == kept_none
        assert "staged" in refusal.fix


class TestDeadline:
    def test_smallest_gc_grace_is_the_deadline(self, seed_ring: Ring) -> None:
        gc = {"users": 864000, "events": 7200}
        findings = analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="ks", table_gc_grace_seconds=gc)
        deadline = next(f for f in findings if f.code == "deadline")
        assert "7200 s" in deadline.message and "events" in deadline.message
        assert "gc_grace_short" in codes(findings, "warn")

    def test_default_gc_grace_is_not_short(self, seed_ring: Ring) -> None:
        findings = analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="ks", table_gc_grace_seconds={"t": 864000})
        assert "gc_grace_short" not in codes(findings)
        assert "10d" in next(f for f in findings if f.code == "deadline").message

    def test_unknown_gc_grace_is_reported(self, seed_ring: Ring) -> None:
        assert "deadline_unknown" in codes(analyse(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="ks"), "info")


def test_findings_serialise_ranges_as_integer_pairs(two_dc_ring: Ring) -> None:
    old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 1, "dc2": 0})
    new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 0, "dc2": 1})
    refusal = next(f for f in analyse(two_dc_ring, old, new, keyspace="ks") if f.code == "no_replica_kept")
    data = refusal.to_json()
    ranges = data["ranges"]
    assert isinstance(ranges, list) and ranges
    assert all(isinstance(t, int) for pair in ranges for t in pair)


# --- consistency levels ------------------------------------------------------------------------------

DC_OF = {"a": "dc1", "b": "dc1", "c": "dc1", "x": "dc2", "y": "dc2", "z": "dc2"}


def block_for(level: str, replicas: tuple[str, ...], dc: str | None) -> int:
    per_dc = [a for a in replicas if dc is None or DC_OF[a] == dc]
    return {
        "ONE": 1,
        "TWO": 2,
        "THREE": 3,
        "QUORUM": quorum(len(replicas)),
        "ALL": len(replicas),
        "LOCAL_ONE": 1,
        "LOCAL_QUORUM": quorum(len(per_dc)),
    }[level]


def can_miss(level: str, replicas: tuple[str, ...], gained: set[str]) -> bool:
    """Brute force: is there a set of replicas the coordinator may contact holding only gained ones?"""
    if level == "EACH_QUORUM":
        dcs = {DC_OF[a] for a in replicas}
        return all(can_miss_in(quorum(sum(DC_OF[a] == dc for a in replicas)), replicas, gained, dc) for dc in dcs)
    dcs = sorted({DC_OF[a] for a in replicas}) if level.startswith("LOCAL") else [None]
    return any(can_miss_in(block_for(level, replicas, dc), replicas, gained, dc) for dc in dcs)


def can_miss_in(k: int, replicas: tuple[str, ...], gained: set[str], dc: str | None) -> bool:
    scope = [a for a in replicas if dc is None or DC_OF[a] == dc]
    return k <= len(scope) and any(set(chosen) <= gained for chosen in combinations(scope, k))


@given(
    replicas=st.lists(st.sampled_from(sorted(DC_OF)), min_size=1, max_size=6, unique=True).map(tuple),
    data=st.data(),
)
def test_unsafe_levels_match_a_brute_force_search(replicas: tuple[str, ...], data: st.DataObject) -> None:
    gained = set(data.draw(st.lists(st.sampled_from(replicas), unique=True)))
    unsafe = set(unsafe_levels(replicas, gained, DC_OF))
    for level in CONSISTENCY_LEVELS:
        assert (level in unsafe) == can_miss(level, replicas, gained), level


def test_local_quorum_misses_only_in_a_dc_with_a_quorum_of_new_replicas() -> None:
    replicas = ("a", "b", "c", "x", "y", "z")
    assert "LOCAL_QUORUM" not in unsafe_levels(replicas, {"a", "x"}, DC_OF)
    assert "LOCAL_QUORUM" in unsafe_levels(replicas, {"x", "y"}, DC_OF)


def test_single_node_rings_have_one_range_and_no_read_window_without_change() -> None:
    ring = Ring.of([Node("10.0.0.1", "dc1", "r1", (0,))])
    one = Replication.parse({"class": "SimpleStrategy", "replication_factor": 1})
    nts = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 1})
    assert "read_window" not in codes(analyse(ring, one, nts, keyspace="ks"))
