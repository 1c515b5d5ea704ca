"""The migration pipeline's decisions on the seed's ring (seed 000): which ranges are repaired where,
what is verified, which nodes are cleaned up, and how a resumed task skips finished ranges."""

from __future__ import annotations

from pathlib import Path

import pytest
from ringward.errors import UnsafeChangeError
from ringward.migration import (
    RangeState,
    cleanup_nodes,
    migration_steps,
    pending,
    repair_segments,
    repair_waves,
    verify_targets,
)
from ringward.placement import replica_map
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward.ring import Ring
from ringward.ring_sources import load_ring_file

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "rings"
SIMPLE_2 = Replication.simple(2)
NTS_2 = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})


@pytest.fixture
def ring() -> Ring:
    return load_ring_file(FIXTURES / "local_num_tokens_4.json")


def test_seed_change_is_one_step(ring: Ring) -> None:
    steps = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))
    assert [(s.before, s.after) for s in steps] == [(SIMPLE_2, NTS_2)]


def test_post_repair_covers_exactly_the_affected_ranges_coordinated_by_a_new_replica(ring: Ring) -> None:
    step = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))[0]
    segments = repair_segments(ring, step, "test", "post")
    before, after = replica_map(ring, SIMPLE_2), replica_map(ring, NTS_2)
    for segment in segments:
        old, new = set(before.for_token(segment.range.end)), set(after.for_token(segment.range.end))
        assert old != new
        assert set(segment.replicas) == new
        assert segment.coordinator in new - old  # the seed: repair on the new replica
        assert segment.range.unwrap() == [segment.range]  # nodetool -st/-et needs non-wrapping ranges
    covered = sum(s.range.width() for s in segments)
    affected = sum(r.width() for r in ring.ranges() if set(before[r]) != set(after[r]))
    assert covered == affected


def test_pre_repair_runs_among_the_old_replicas(ring: Ring) -> None:
    step = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))[0]
    before = replica_map(ring, SIMPLE_2)
    for segment in repair_segments(ring, step, "test", "pre"):
        assert set(segment.replicas) == set(before.for_token(segment.range.end))


def test_waves_never_put_a_node_in_two_sessions(ring: Ring) -> None:
    step = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))[0]
    segments = repair_segments(ring, step, "test", "post")
    waves = repair_waves(segments, parallelism=3)
    commands = [command for wave in waves for command in wave]
    assert sorted(s.segment_id for c in commands for s in c.segments) == sorted(s.segment_id for s in segments)
    for wave in waves:
        nodes = [node for command in wave for node in command.replicas]
        assert len(nodes) == len(set(nodes))


def test_ranges_with_the_same_participants_share_one_command(ring: Ring) -> None:
    # The seed's change: six affected ranges (seven pieces once unwrapped) over two replica sets.
    step = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))[0]
    segments = repair_segments(ring, step, "test", "post")
    commands = [command for wave in repair_waves(segments, parallelism=2) for command in wave]
    assert len(segments) == 7
    assert sorted(c.replicas for c in commands) == sorted({s.replicas for s in segments})
    for command in commands:
        assert all(s.replicas == command.replicas for s in command.segments)
    capped = [c for wave in repair_waves(segments, parallelism=2, ranges_per_command=2) for c in wave]
    assert max(len(c.segments) for c in capped) == 2
    assert sum(len(c.segments) for c in capped) == len(segments)


def test_a_resumed_repair_skips_journalled_ranges(ring: Ring) -> None:
    step = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))[0]
    segments = repair_segments(ring, step, "test", "post")
    journal = {segments[0].range: RangeState.DONE.value, segments[1].range: RangeState.FAILED.value}
    assert pending(segments, journal) == segments[1:]


def test_verify_targets_are_the_gained_replicas(ring: Ring) -> None:
    step = migration_steps(build_plan(ring, SIMPLE_2, NTS_2, keyspace="test"))[0]
    targets = verify_targets(ring, step)
    assert {t.replica for t in targets} == {"127.0.0.4"}
    assert all(t.range.unwrap() == [t.range] for t in targets)


def test_cleanup_only_on_nodes_that_lost_ranges(ring: Ring) -> None:
    assert cleanup_nodes(ring, SIMPLE_2, NTS_2) == ["127.0.0.2", "127.0.0.3"]
    assert cleanup_nodes(ring, Replication.simple(1), Replication.simple(3)) == []


def test_refused_change_names_the_refusals(ring: Ring) -> None:
    plan = build_plan(ring, SIMPLE_2, {"class": "NetworkTopologyStrategy", "dc9": 2}, keyspace="test")
    with pytest.raises(UnsafeChangeError, match="dc9"):
        migration_steps(plan)


def test_refusal_text_puts_each_refusal_and_each_fix_on_its_own_line(ring: Ring) -> None:
    plan = build_plan(ring, SIMPLE_2, {"class": "NetworkTopologyStrategy", "dc9": 2}, keyspace="test")
    with pytest.raises(UnsafeChangeError) as refusal:
        migration_steps(plan)
    text = str(refusal.value)
    problem, fix = text.split("\nFix:", 1)
    assert problem.startswith("The change of test is refused:\n- ")
    fixes = fix.strip().splitlines()
    assert len(fixes) >= 2 and all(line.startswith("- ") and line.endswith(".") for line in fixes), text
    assert any("Use the ring's datacenters: dc1." in line for line in fixes)
