"""The migration pipeline's pure decisions: which ALTER steps, which ranges to repair where, what to verify,
which nodes to clean up, and how a resumed task skips finished work.

A step moves the keyspace from `before` to `after`. Repair around a step:
- *pre-repair* (under `before`): every old replica holds every row before ownership changes, so the
  replica that stays in each range has the data (the seed's hazard: a missed write on the kept replica
  is otherwise lost once the former replica stops being asked).
- *repair* (under `after`): full repair of exactly the affected ranges, coordinated by a gained replica,
  streams the data to the replicas that are new.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Literal

from ringward.errors import ConfigurationError, MigrationError, UnsafeChangeError
from ringward.placement import ReplicaMap, replica_map
from ringward.plan import MigrationPlan
from ringward.repair import RepairCommand, Segment, group_segments, plan_waves
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Ring, TokenRange
from ringward.safety import SYSTEM_KEYSPACES

if TYPE_CHECKING:  # migration_record imports this module: its names are imported where they are used
    from ringward.migration_record import MigrationState

__all__ = [
    "MAX_STAGED_STEPS",
    "RANGES_PER_COMMAND",
    "MigrationStep",
    "RangeState",
    "RecordedMigration",
    "VerifyTarget",
    "checked_keyspace",
    "cleanup_nodes",
    "migration_steps",
    "migration_to_resume",
    "pending",
    "range_count",
    "repair_participants",
    "repair_pieces",
    "repair_segments",
    "repair_waves",
    "step_changes",
    "verify_targets",
]

# At most this many ranges per repair command: big enough to amortise a command's fixed costs, small
# enough that a failed command retries a bounded amount of work and progress moves steadily.
RANGES_PER_COMMAND = 32

# The DAG has a fixed number of step groups; routes needing more are refused with a way forward.
MAX_STAGED_STEPS = 3

# Refusals a staged route resolves: the direct change is unsafe, the steps are not.
_RESOLVED_BY_STAGING = frozenset({"no_replica_kept", "staged_route"})


_KEYSPACE_NAME = re.compile(r"^[A-Za-z0-9_]{1,48}$")


def checked_keyspace(name: object, known: Iterable[str] | None = None) -> str:
    """The keyspace a migration may change, from what a form sent: the one place its name is validated.

    Refuses a name Cassandra cannot have (ConfigurationError), a system keyspace (UnsafeChangeError) and,
    given the cluster's `known` keyspaces, one that does not exist (ConfigurationError, with the name
    differing only in case when there is one).
    """
    text = str(name or "").strip()
    if not _KEYSPACE_NAME.match(text):
        raise ConfigurationError(
            f"Keyspace name {text!r} is not a valid Cassandra keyspace name.",
            "Give the keyspace's name as stored: 1 to 48 letters, digits or underscores.",
        )
    if text in SYSTEM_KEYSPACES:
        raise UnsafeChangeError(
            f"{text} is a system keyspace: Cassandra manages its replication (or it is ringward's own).",
            "Migrate application keyspaces only.",
        )
    if known is not None:
        names = list(known)
        if text not in names:
            alike = [n for n in names if n.lower() == text.lower()]
            hint = (
                f"Did you mean {alike[0]!r}? Names are case-sensitive."
                if alike
                else "Check the name (it is case-sensitive)."
            )
            raise ConfigurationError(f"Keyspace {text!r} does not exist.", hint)
    return text


class RangeState(StrEnum):
    """Journal state of one range in one stage (stored as text in the ops keyspace)."""

    DONE = "done"
    FAILED = "failed"

    @property
    def is_done(self) -> bool:
        return self is RangeState.DONE


@dataclass(frozen=True)
class MigrationStep:
    """One ALTER: `before` -> `after`, 1-based `index` of `count`."""

    index: int
    count: int
    before: Replication
    after: Replication

    def placements(self, ring: Ring) -> tuple[ReplicaMap, ReplicaMap]:
        return replica_map(ring, self.before), replica_map(ring, self.after)


def migration_steps(plan: MigrationPlan) -> list[MigrationStep]:
    """The ALTERs to run, or raise UnsafeChangeError naming the refusals that no staged route resolves."""
    blocking = [f for f in plan.refusals if f.code not in _RESOLVED_BY_STAGING or not plan.steps]
    if blocking:
        details = "".join(f"\n- {f.code}: {f.message}" for f in blocking)
        fixes = list(dict.fromkeys(f.fix for f in blocking if f.fix))
        fix = fixes[0] if len(fixes) == 1 else "\n".join(f"- {fix}" for fix in fixes)
        raise UnsafeChangeError(f"The change of {plan.keyspace} is refused:{details}", fix)
    if len(plan.steps) > MAX_STAGED_STEPS:
        raise UnsafeChangeError(
            f"The safe route for {plan.keyspace} needs {len(plan.steps)} ALTER steps; the DAG runs at most "
            f"{MAX_STAGED_STEPS}.",
            "Run the first steps as separate migrations (see `ringward plan --format table` for the route).",
        )
    befores = [plan.old, *plan.steps[:-1]]
    return [
        MigrationStep(i, len(plan.steps), before, after)
        for i, (before, after) in enumerate(zip(befores, plan.steps, strict=True), 1)
    ]


def repair_segments(ring: Ring, step: MigrationStep, keyspace: str, phase: Literal["pre", "post"]) -> list[Segment]:
    """The non-wrapping ranges to repair for `step`, each with its participants, coordinator first.

    Only affected ranges are repaired, each ring range as its own segment: Cassandra 5.0 refuses a requested
    range that spans two of the coordinator's local ranges, so adjacent ranges are never merged into one
    (`repair_waves` sends ranges with the same participants in one command instead). Post-ALTER the
    coordinator is a gained replica (the seed: repair on the new replica, or -pr on the old one). A range
    with a single participant needs no repair and is left out.
    """
    return [Segment(keyspace, (), piece, participants)
            for piece, participants in repair_pieces(step_changes(ring, step), phase)]  # fmt: skip


def step_changes(ring: Ring, step: MigrationStep) -> list[tuple[TokenRange, tuple[str, ...], tuple[str, ...]]]:
    """The ring ranges whose replicas `step` changes: (range, replicas before, replicas after), in ring order.
    Both repair phases of the step are made of them (`repair_pieces`): computed once, they serve both."""
    before, after = step.placements(ring)
    return [(token_range, old, new) for token_range, old, new in _paired(before, after)
            if old != new and set(old) != set(new)]  # fmt: skip


def repair_pieces(
    changes: Iterable[tuple[TokenRange, tuple[str, ...], tuple[str, ...]]], phase: Literal["pre", "post"]
) -> list[tuple[TokenRange, tuple[str, ...]]]:
    """What `repair_segments` repairs of a step's `changes` (`step_changes`) in `phase`: (non-wrapping range,
    participants, coordinator first), without the segment objects (the Migration page draws 1.5 million)."""
    pieces: list[tuple[TokenRange, tuple[str, ...]]] = []
    for token_range, old, new in changes:
        participants = repair_participants(old, new, phase)
        if len(participants) <= 1:
            continue
        if token_range.start < token_range.end:  # the ring's ranges but one: no piece to split (`unwrap`)
            pieces.append((token_range, participants))
        else:
            pieces.extend((piece, participants) for piece in token_range.unwrap())
    return pieces


def repair_participants(old: tuple[str, ...], new: tuple[str, ...], phase: Literal["pre", "post"]) -> tuple[str, ...]:
    """Who repairs a changed range in `phase`, coordinator first: before the ALTER its replicas before (`old`);
    after it its replicas after (`new`), the gained ones first (the coordinator is one: it holds nothing yet)."""
    if phase == "pre":
        return old
    gained = tuple(node for node in new if node not in old)
    return gained + tuple(node for node in new if node not in gained)


def range_count(segments: Sequence[Segment]) -> str:
    """How many ring ranges `segments` cover, said the way the plan counts ranges ("6 of 12 ranges"): the
    wrap-around range is one range, repaired as two segments split at the ring's minimum token, and the
    split is said once, where it happens."""
    pieces = {segment.range for segment in segments}
    ends_at_minimum = any(piece.end == MIN_TOKEN for piece in pieces)
    split = sum(1 for piece in pieces if piece.start == MIN_TOKEN and piece.end != MIN_TOKEN and ends_at_minimum)
    ranges = len(pieces) - split
    text = f"{ranges} range{'s' if ranges != 1 else ''}"
    if split:
        text += f" ({len(pieces)} repair segments: the wrap-around range is split at the ring's minimum token)"
    return text


def _paired(before: ReplicaMap, after: ReplicaMap) -> Iterable[tuple[TokenRange, tuple[str, ...], tuple[str, ...]]]:
    """(range, replicas before, replicas after) of every range of both placements, in ring order.

    Placements of one ring share its ranges (the same object, as `plan.range_changes` relies on): their replicas
    are aligned, zipped without a lookup per range (a fleet ring's 256,000 bisections per placement were most of
    a migration page's first request). Otherwise each refined range's replicas are looked up."""
    if before.ranges is after.ranges:
        return zip(before.ranges, before.replicas, after.replicas, strict=True)
    return (
        (token_range, before.for_token(token_range.end), after.for_token(token_range.end))
        for token_range in _refined_ranges(before, after)
    )


def _refined_ranges(before: ReplicaMap, after: ReplicaMap) -> list[TokenRange]:
    """Ring ranges of both placements (they share the ring, so the same ranges; kept general)."""
    ends = sorted({r.end for r in before.ranges} | {r.end for r in after.ranges})
    return [TokenRange(ends[i - 1], ends[i]) for i in range(len(ends))]


def repair_waves(
    segments: Sequence[Segment], parallelism: int, ranges_per_command: int = RANGES_PER_COMMAND
) -> list[list[RepairCommand]]:
    """Repair commands in waves whose participants are disjoint: a node is in one session at a time.

    Ranges with the same set of participants go in one command, which Cassandra runs as one
    session: the seed's six affected ranges need two commands, not seven nodetool runs.
    """
    return plan_waves(group_segments(segments, ranges_per_command), parallelism)


def pending(segments: Iterable[Segment], journal: Mapping[TokenRange, str]) -> list[Segment]:
    """Segments not yet journalled as done (a retried or cleared task resumes here)."""
    return [s for s in segments if journal.get(s.range) != RangeState.DONE.value]


@dataclass(frozen=True)
class VerifyTarget:
    """A range whose data must be present on `replica`, a replica the step made new."""

    range: TokenRange
    replica: str


def verify_targets(ring: Ring, step: MigrationStep) -> list[VerifyTarget]:
    """Every (affected range, gained replica) pair, ranges unwrapped for token-range reads."""
    before, after = step.placements(ring)
    targets: list[VerifyTarget] = []
    for token_range, old, new in _paired(before, after):
        for replica in new:
            if replica not in old:
                targets.extend(VerifyTarget(piece, replica) for piece in token_range.unwrap())
    return targets


def cleanup_nodes(ring: Ring, first: Replication, last: Replication) -> list[str]:
    """Nodes that replicate some range under `first` but not under `last`: only they hold orphaned data."""
    before, after = replica_map(ring, first), replica_map(ring, last)
    lost: set[str] = set()
    for _, old, new in _paired(before, after):
        lost.update(set(old) - set(new))
    return sorted(lost)


@dataclass(frozen=True)
class RecordedMigration:
    """A migration as `ringward_ops` keeps it: what a new run needs to decide whether to resume it.

    `state` is the row's state as the stages write it (`MigrationState.parse` of "planned", "altered:N",
    "cleaned", "done"); `lease_owner` the migration whose lease it runs under (a rollback runs under the lease
    of the migration it undoes).
    """

    migration_id: str
    keyspace: str
    state: MigrationState
    target: Replication
    lease_owner: str
    updated_at: datetime | None = None

    @property
    def is_done(self) -> bool:
        from ringward.migration_record import MigrationPhase

        return self.state.phase is MigrationPhase.DONE

    @property
    def is_altered(self) -> bool:
        from ringward.migration_record import MigrationPhase

        return self.state.phase in (MigrationPhase.ALTERED, MigrationPhase.CLEANED)


def migration_to_resume(
    recorded: Iterable[RecordedMigration], keyspace: str, requested: Replication
) -> RecordedMigration | None:
    """The half-done migration of `keyspace` a new run for `requested` resumes, None when there is none.

    A migration is finished when it is done or a rollback of it is done (an expired lease does not
    finish it: its repair may still be owed). Only the latest unfinished one can be resumed: an older
    one was taken over by its rollback, and resuming it would trust a journal the rollback made stale.
    A different target while one is half done is refused with the two ways on.
    """
    mine = [m for m in recorded if m.keyspace == keyspace]
    undone_by = {m.lease_owner for m in mine if m.is_done and m.lease_owner != m.migration_id}
    open_ones = [m for m in mine if not m.is_done and m.migration_id not in undone_by]
    if not open_ones:
        return None
    latest = max(open_ones, key=lambda m: (m.updated_at is not None, m.updated_at or datetime.min))
    if _same_setting(latest.target, requested):
        return latest
    where = "its ALTER is applied" if latest.is_altered else "its ALTER is not applied yet"
    raise MigrationError(
        f"{keyspace} has an unfinished migration {latest.migration_id} to {latest.target.to_cql()} "
        f"({where}; state {latest.state}); a migration to {requested.to_cql()} cannot start before it ends.",
        f"Resume it: trigger keyspace_migration again with the replication {latest.target.to_cql()}; or undo it: "
        f"trigger keyspace_migration_rollback with rollback_of {latest.lease_owner}. Then migrate to the new "
        "target. If you finished it by hand (repair, verification, cleanup), record that: UPDATE "
        f"ringward_ops.migrations SET state = 'done' WHERE migration_id = '{latest.migration_id}'.",
    )


def _same_setting(a: Replication, b: Replication) -> bool:
    """Equal as Cassandra stores them (a datacenter at factor 0 is dropped)."""
    return (a.strategy, {dc: n for dc, n in a.factors.items() if n}) == (
        b.strategy,
        {dc: n for dc, n in b.factors.items() if n},
    )
