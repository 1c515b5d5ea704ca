"""MigrationPlan: JSON shape, counts checked against an independent placement count, text output."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from ringward.placement import replicas_for_token
from ringward.plan import MigrationPlan, build_plan, build_ring_change_plan
from ringward.replication import Replication
from ringward.ring import Node, Ring
from ringward.ring_sources import load_ring_file

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
SIMPLE_2 = Replication.simple(2)
NTS_DC1_2 = Replication.network_topology({"dc1": 2})


@pytest.fixture(scope="module")
def seed_ring() -> Ring:
    return load_ring_file(RINGS / "seed_num_tokens_4.txt")


@pytest.fixture(scope="module")
def seed_plan(seed_ring: Ring) -> MigrationPlan:
    return build_plan(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="test", table_gc_grace_seconds={"users": 864000})


def independent_affected_count(ring: Ring, old: Replication, new: Replication) -> int:
    return sum(
        set(replicas_for_token(ring, old, r.end)) != set(replicas_for_token(ring, new, r.end)) for r in ring.ranges()
    )


def test_seed_affected_count_matches_an_independent_count(seed_ring: Ring, seed_plan: MigrationPlan) -> None:
    expected = independent_affected_count(seed_ring, SIMPLE_2, NTS_DC1_2)
    assert 0 < expected < len(seed_ring.ranges())
    assert seed_plan.to_json()["affected_ranges"] == expected
    assert f"affected {expected} of 12 ranges" in seed_plan.summary()


def test_seed_example_key_moves_from_2_to_4(seed_plan: MigrationPlan) -> None:
    """The article's app_id = 1 (token -4069959284402364209): replicas .3,.2 become .3,.4."""
    change = next(c for c in seed_plan.ranges if c.range.contains(-4069959284402364209))
    assert (change.old, change.new) == (("172.24.0.3", "172.24.0.2"), ("172.24.0.3", "172.24.0.4"))
    assert change.gained == ("172.24.0.4",) and change.lost == ("172.24.0.2",)


def test_json_has_one_entry_per_ring_token_in_ring_order(seed_ring: Ring, seed_plan: MigrationPlan) -> None:
    data = json.loads(json.dumps(seed_plan.to_json()))
    ranges = data["ranges"]
    assert [(r["start"], r["end"]) for r in ranges] == [(r.start, r.end) for r in seed_ring.ranges()]
    for entry in ranges:
        assert set(entry) == {"start", "end", "old", "new", "gained", "lost"}
        assert isinstance(entry["start"], int) and isinstance(entry["end"], int)
        assert all(isinstance(a, str) for key in ("old", "new", "gained", "lost") for a in entry[key])
        token = entry["end"]
        assert entry["old"] == list(replicas_for_token(seed_ring, SIMPLE_2, token))
        assert entry["new"] == list(replicas_for_token(seed_ring, NTS_DC1_2, token))
    assert data["steps"] == [NTS_DC1_2.as_json()]
    assert data["safe"] is True
    assert data["deadline_seconds"] == 864000
    assert data["read_window"]["ONE"] == data["affected_ranges"]
    assert data["read_window"]["QUORUM"] == 0


def test_node_totals_add_up_to_the_moved_replicas(seed_plan: MigrationPlan) -> None:
    nodes = seed_plan.node_changes()
    assert sum(n.gained for n in nodes.values()) == sum(len(c.gained) for c in seed_plan.ranges)
    assert sum(n.lost for n in nodes.values()) == sum(len(c.lost) for c in seed_plan.ranges)
    assert nodes["172.24.0.4"].gained == len(seed_plan.affected)


def test_table_marks_every_moved_range(seed_plan: MigrationPlan) -> None:
    lines = seed_plan.table().splitlines()
    assert len(lines) == 2 + len(seed_plan.ranges)
    assert sum(line.rstrip().endswith("moved") for line in lines) == len(seed_plan.affected)


def test_refused_plan_is_not_safe_and_says_so(seed_ring: Ring) -> None:
    plan = build_plan(seed_ring, SIMPLE_2, NTS_DC1_2, keyspace="system_auth")
    assert not plan.safe
    assert "REFUSED" in plan.summary() and "system_keyspace" in plan.summary()


def test_staged_plan_lists_its_steps() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    old = Replication.network_topology({"dc1": 2, "dc2": 0})
    new = Replication.network_topology({"dc1": 0, "dc2": 2})
    plan = build_plan(ring, old, new, keyspace="ks")
    assert not plan.safe and len(plan.steps) > 1
    assert {f.code for f in plan.findings} >= {"no_replica_kept", "staged_route"}
    assert "staged route" in plan.summary()
    assert plan.to_json()["steps"] == [s.as_json() for s in plan.steps]


def test_deadline_is_counted_from_the_start(seed_plan: MigrationPlan) -> None:
    start = datetime(2026, 11, 22, tzinfo=UTC)
    assert seed_plan.deadline_at(start) == start + timedelta(days=10)


def test_ring_change_plan_refines_ranges_to_both_rings(seed_ring: Ring) -> None:
    """Decommissioning .4: its ranges go to the remaining nodes under NTS dc1:2."""
    after = Ring.of(n for n in seed_ring.nodes if n.address != "172.24.0.4")
    plan = build_ring_change_plan(seed_ring, after, NTS_DC1_2, keyspace="ks")
    assert len(plan.ranges) == len(seed_ring.ranges())  # after's tokens are a subset of before's
    assert all("172.24.0.4" not in c.new for c in plan.ranges)
    moved = sum(set(c.old) != set(c.new) for c in plan.ranges)
    assert plan.to_json()["affected_ranges"] == moved > 0
    assert plan.to_json()["ring_change"] is True


def test_ring_change_with_new_tokens_splits_ranges(seed_ring: Ring) -> None:
    joining = Node("172.24.0.5", "dc1", "rack2", (1, 2))
    after = Ring.of([*seed_ring.nodes, joining])
    plan = build_ring_change_plan(seed_ring, after, NTS_DC1_2, keyspace="ks")
    assert [c.range.end for c in plan.ranges] == sorted([*seed_ring.sorted_tokens, 1, 2])


def test_a_refused_plan_table_shows_the_computable_target_and_marks_the_refusals(seed_ring: Ring) -> None:
    """dc9 is not in the ring: the dc1 part of the target is still placed and shown, and every range names
    the refusal instead of reading "moved"."""
    plan = build_plan(seed_ring, SIMPLE_2, Replication.network_topology({"dc1": 2, "dc9": 1}), keyspace="test")
    assert not plan.safe
    rows = plan.table().splitlines()[2:]
    assert len(rows) == len(seed_ring.ranges())
    for row, change in zip(rows, plan.ranges, strict=True):
        expected_new = replicas_for_token(seed_ring, NTS_DC1_2, change.range.end)
        assert ",".join(expected_new) in row
        assert "REFUSED(unknown_datacenter)" in row
        assert " moved" not in row


def test_range_specific_refusals_mark_only_their_ranges() -> None:
    """SimpleStrategy RF 1 -> NTS {dc1: 1, dc2: 0}: ranges owned by a dc2 node keep none of their replicas."""
    ring = load_ring_file(RINGS / "two_dc.json")
    new = Replication.network_topology({"dc1": 1, "dc2": 0})
    plan = build_plan(ring, Replication.simple(1), new, keyspace="t")
    orphaned = {r for f in plan.refusals if f.code == "no_replica_kept" for r in f.ranges}
    assert 0 < len(orphaned) < len(ring.ranges())
    for row, change in zip(plan.table().splitlines()[2:], plan.ranges, strict=True):
        assert ("no_replica_kept" in row) == (change.range in orphaned)


def test_a_safe_plan_table_marks_moves(seed_plan: MigrationPlan) -> None:
    table = seed_plan.table()
    assert "moved" in table and "REFUSED" not in table and "would-move" not in table


def test_the_summary_explains_each_staged_step_in_one_line() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    plan = build_plan(
        ring, Replication.network_topology({"dc1": 1}), Replication.network_topology({"dc2": 1, "dc1": 0}), keyspace="m"
    )
    lines = plan.summary().splitlines()
    start = lines.index("staged route, 2 steps:")
    first, second = lines[start + 1], lines[start + 2]
    assert first.startswith("  1. {'class': 'NetworkTopologyStrategy', 'dc1': '1', 'dc2': '1'} -- dc2 0 -> 1; ")
    assert "dc1 waits: moving it in the same ALTER breaks a rule (a range keeps none of its replicas)" in first
    assert second.startswith("  2. {'class': 'NetworkTopologyStrategy', 'dc2': '1', 'dc1': '0'} -- dc1 1 -> 0; ")
    assert plan.to_json()["step_notes"] == [line.split(" -- ", 1)[1] for line in (first, second)]


def test_refused_target_without_replicas_shows_none_not_an_empty_move(seed_ring: Ring) -> None:
    plan = build_plan(seed_ring, SIMPLE_2, {"class": "NetworkTopologyStrategy", "dc9": 2}, keyspace="test")
    rows = plan.table().splitlines()[2:]
    assert len(rows) == len(plan.ranges)
    for row, change in zip(rows, plan.ranges, strict=True):
        cells = row.split()
        assert cells[2:4] == [",".join(change.old), "(none)"], row  # old kept, new says (none)
        assert "NO-REPLICA-LEFT" in row and "moved" not in row
