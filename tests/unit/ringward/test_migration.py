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
    range_count,
    repair_segments,
    repair_waves,
    verify_targets,
)
from ringward.placement import replica_map
from ringward.plan import build_plan
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Ring
from ringward.ring_sources import load_ring_file

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
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
    before, after = replica_map(ring, SIMPLE_2), replica_map(ring, NTS_2)
    segments = repair_segments(ring, step, "test", "pre")
    assert segments  # the seed change moves ranges: there is something to repair before it
    for segment in segments:
        assert set(segment.replicas) == set(before.for_token(segment.range.end))
    # Exactly the ranges whose replicas change, as the post repair covers them.
    affected = sum(r.width() for r in ring.ranges() if set(before[r]) != set(after[r]))
    assert sum(s.range.width() for s in segments) == affected


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


# -- resuming a half-done migration ----------------------------------------------------------------------


def _recorded(migration_id: str, state: str, target: dict[str, object], *, owner: str = "", minute: int = 0):  # type: ignore[no-untyped-def]
    from datetime import UTC, datetime

    from ringward.migration import RecordedMigration
    from ringward.migration_record import MigrationState

    return RecordedMigration(migration_id, "loadks", MigrationState.parse(state), Replication.parse(target),
                             owner or migration_id,
                             updated_at=datetime(2026, 11, 23, 12, minute, tzinfo=UTC))  # fmt: skip


NTS2 = {"class": "NetworkTopologyStrategy", "dc1": 2}
NTS3 = {"class": "NetworkTopologyStrategy", "dc1": 3}


def test_the_same_target_resumes_the_half_done_migration() -> None:
    from ringward.migration import migration_to_resume

    half_done = _recorded("loadks@run1", "altered:1", NTS2)
    assert migration_to_resume([half_done], "loadks", Replication.parse(NTS2)) is half_done
    # dc factor 0 is what Cassandra drops: the same setting
    same = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2, "dc2": 0})
    assert migration_to_resume([half_done], "loadks", same) is half_done


def test_done_and_rolled_back_migrations_are_not_resumed() -> None:
    from ringward.migration import migration_to_resume

    done = _recorded("loadks@run1", "done", NTS2)
    undone = _recorded("loadks@run2", "altered:1", NTS2, minute=1)
    its_rollback = _recorded("loadks@run3", "done", {"class": "SimpleStrategy", "replication_factor": 2},
                             owner="loadks@run2", minute=2)  # fmt: skip
    assert migration_to_resume([done, undone, its_rollback], "loadks", Replication.parse(NTS2)) is None
    other_keyspace = _recorded("other@run1", "altered:1", NTS2)
    object.__setattr__(other_keyspace, "keyspace", "other")
    assert migration_to_resume([other_keyspace], "loadks", Replication.parse(NTS3)) is None


def test_a_different_target_while_half_done_is_refused_with_both_ways_on() -> None:
    from ringward.errors import MigrationError
    from ringward.migration import migration_to_resume

    half_done = _recorded("loadks@run1", "altered:1", NTS2)
    with pytest.raises(MigrationError) as refusal:
        migration_to_resume([half_done], "loadks", Replication.parse(NTS3))
    assert "unfinished migration loadks@run1" in refusal.value.problem and "ALTER is applied" in refusal.value.problem
    assert "keyspace_migration_rollback with rollback_of loadks@run1" in refusal.value.fix
    assert "SET state = 'done' WHERE migration_id = 'loadks@run1'" in refusal.value.fix
    assert "'dc1': '2'" in refusal.value.fix or "'dc1': 2" in refusal.value.fix


def test_a_cleaned_migration_counts_as_altered_and_not_done() -> None:
    from ringward.errors import MigrationError
    from ringward.migration import migration_to_resume

    cleaned = _recorded("loadks@run1", "cleaned", NTS2)
    assert cleaned.is_altered and not cleaned.is_done
    assert _recorded("loadks@run1", "done", NTS2).is_done and not _recorded("loadks@run1", "planned", NTS2).is_altered
    with pytest.raises(MigrationError) as refusal:
        migration_to_resume([cleaned], "loadks", Replication.parse(NTS3))
    assert "(its ALTER is applied; state cleaned)" in refusal.value.problem  # the state as the row stores it


def test_only_the_latest_unfinished_migration_is_resumable() -> None:
    from ringward.errors import MigrationError
    from ringward.migration import migration_to_resume

    # A rollback (target: the original setting) took over the lease after the migration to NTS2 half ran.
    original = _recorded("loadks@run1", "altered:1", NTS2, minute=1)
    rollback = _recorded("loadks@run2", "altered:1", {"class": "SimpleStrategy", "replication_factor": 2},
                         owner="loadks@run1", minute=5)  # fmt: skip
    with pytest.raises(MigrationError, match="unfinished migration loadks@run2"):
        migration_to_resume([original, rollback], "loadks", Replication.parse(NTS2))


def test_repair_counts_ranges_as_the_plan_does_and_says_the_split_once(ring: Ring) -> None:
    """The plan's "N of M ranges" and the repair stage count the same ring ranges: the wrap-around range is
    one range, repaired as two segments split at the ring's minimum token (said once, in the count)."""
    plan = build_plan(ring, SIMPLE_2, NTS_2, keyspace="test")
    step = migration_steps(plan)[0]
    segments = repair_segments(ring, step, "test", "post")
    affected = plan.diff.affected_count()
    wrap_affected = any(c.range.wraps for c in plan.affected)
    assert len(segments) == affected + wrap_affected
    expected = f"{affected} ranges"
    if wrap_affected:
        expected += f" ({affected + 1} repair segments: the wrap-around range is split at the ring's minimum token)"
    assert range_count(segments) == expected
    if wrap_affected:  # half of the wrap-around range alone is still that one range
        assert range_count([s for s in segments if s.range.start != MIN_TOKEN]) == f"{affected} ranges"


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


def test_checked_keyspace_is_the_one_place_a_keyspace_name_is_refused() -> None:
    from ringward.errors import ConfigurationError
    from ringward.migration import checked_keyspace

    assert checked_keyspace("  shop_1 ") == "shop_1"
    assert checked_keyspace("Shop", known=["Shop", "system"]) == "Shop"
    with pytest.raises(ConfigurationError) as invalid:
        checked_keyspace("bad name!")
    assert "not a valid Cassandra keyspace name" in invalid.value.problem
    with pytest.raises(UnsafeChangeError) as system:
        checked_keyspace("system_auth", known=["system_auth"])
    assert "system keyspace" in system.value.problem
    with pytest.raises(ConfigurationError) as unknown:
        checked_keyspace("shop", known=["Shop", "other"])
    assert unknown.value.problem == "Keyspace 'shop' does not exist."
    assert unknown.value.fix == "Did you mean 'Shop'? Names are case-sensitive."


def test_placements_of_one_ring_pair_their_replicas_as_a_lookup_per_range_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """Placements of one ring share its ranges: their replicas are zipped in ring order, no lookup per range (the
    fleet page's first request). The same segments, targets and cleanup nodes as looking every range up."""
    import random

    import ringward.migration as migration
    from ringward.placement import ReplicaMap
    from ringward.ring import Node

    rng = random.Random(36)
    tokens = rng.sample(range(-(2**63) + 1, 2**63 - 1, 2**40), 12 * 8)
    ring = Ring.of(Node(f"10.0.0.{i + 1}", f"dc{i % 3 + 1}", f"rack{i % 2}", tuple(tokens[i * 8 : (i + 1) * 8]))
                   for i in range(12))  # fmt: skip
    old = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 2})
    new = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3, "dc3": 3})
    steps = migration_steps(build_plan(ring, old, new, keyspace="shop"))

    def results() -> tuple[object, ...]:
        return (
            [repair_segments(ring, step, "shop", phase) for step in steps for phase in ("pre", "post")],  # type: ignore[misc]
            [verify_targets(ring, step) for step in steps],
            cleanup_nodes(ring, old, new),
        )

    zipped = results()
    real = migration.replica_map
    looked_up = []

    def copied(ring: Ring, replication: Replication) -> ReplicaMap:
        """The placement with its ranges copied: not the same object, so every range is looked up."""
        placement = real(ring, replication)
        looked_up.append(replication)
        return ReplicaMap(list(placement.ranges), placement.replicas, placement.replica_count)

    monkeypatch.setattr(migration, "replica_map", copied)
    assert results() == zipped
    assert looked_up  # the lookup path ran
    assert sum(len(segments) for segments in zipped[0]) > 0  # type: ignore[arg-type]
