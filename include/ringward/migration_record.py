"""The migration record: what the precheck decided, built once and stored in `ringward_ops`.

Every later task reads it (XCom or the ops keyspace) and never plans again: the ring snapshot, the ALTER
steps and the settings are all in it. `to_json` gives the stored dict (the same keys the stages wrote
before the record was typed, so the UI and older rows read the same); `from_json` reads it back,
including rows written by that older dict format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Literal

from ringward.errors import MigrationError
from ringward.migration import MigrationStep, repair_segments
from ringward.plan import MigrationPlan
from ringward.repair import Segment
from ringward.replication import Replication
from ringward.report import approval_markdown
from ringward.ring import Ring
from ringward.ring_sources import ring_from_json, ring_to_json

__all__ = ["MigrationPhase", "MigrationRecord", "MigrationState"]


class MigrationPhase(Enum):
    """Where a migration is; the stored text is `MigrationState`'s (`altered:N` carries the step)."""

    PLANNED = "planned"
    ALTERED = "altered"
    CLEANED = "cleaned"
    DONE = "done"


@dataclass(frozen=True)
class MigrationState:
    """A migration's state: its phase and, once altered, how many ALTER steps are applied."""

    phase: MigrationPhase = MigrationPhase.PLANNED
    altered_steps: int = 0

    @classmethod
    def parse(cls, text: str | None) -> MigrationState:
        """The stored text (`planned`, `altered:N`, `cleaned`, `done`; empty: planned)."""
        value = (text or "").strip()
        if not value:
            return cls()
        if value.startswith("altered:"):
            count = value.split(":", 1)[1]
            if count.isdigit() and int(count) > 0:
                return cls(MigrationPhase.ALTERED, int(count))
        else:
            for phase in MigrationPhase:
                if phase.value == value and phase is not MigrationPhase.ALTERED:
                    return cls(phase)
        raise MigrationError(
            f"Migration state {value!r} is not one ringward writes.",
            "Set the row's state in ringward_ops.migrations to planned, altered:<step>, cleaned or done.",
        )

    @classmethod
    def altered(cls, step: int) -> MigrationState:
        return cls(MigrationPhase.ALTERED, step)

    @classmethod
    def cleaned(cls) -> MigrationState:
        return cls(MigrationPhase.CLEANED)

    @classmethod
    def done(cls) -> MigrationState:
        return cls(MigrationPhase.DONE)

    def __str__(self) -> str:
        if self.phase is MigrationPhase.ALTERED:
            return f"altered:{self.altered_steps}"
        return str(self.phase.value)

    @property
    def is_done(self) -> bool:
        return self.phase is MigrationPhase.DONE

    @property
    def is_cleaned(self) -> bool:
        """Cleanup ran (or the migration is done): the former replicas no longer hold the data."""
        return self.phase in {MigrationPhase.CLEANED, MigrationPhase.DONE}

    @property
    def is_altered(self) -> bool:
        """Some ALTER is applied (cleanup comes after the last one)."""
        return self.phase is not MigrationPhase.PLANNED

    def step_applied(self, index: int, step_count: int) -> bool:
        """Whether step `index` (1-based) of `step_count` is applied in this state."""
        if self.phase is MigrationPhase.ALTERED:
            return index <= self.altered_steps
        return self.is_cleaned and index <= step_count


@dataclass(frozen=True)
class MigrationRecord:
    """One replication change of `keyspace`, as the precheck decided it.

    `steps` are the ALTERs in order (the first starts at `old`, the last ends at `new`); `requested` is the
    target as the form gave it (a re-trigger with it resumes); `lease_owner` the migration whose keyspace
    lease it runs under (a rollback runs under the lease of the migration it undoes).
    """

    migration_id: str
    keyspace: str
    ring: Ring
    old: Replication
    new: Replication
    requested: Replication
    steps: tuple[MigrationStep, ...]
    lease_owner: str
    run_id: str
    state: MigrationState = MigrationState()
    rollback_of: str | None = None
    dag_id: str | None = None
    started_at: str | None = None
    affected_ranges: int = 0
    total_ranges: int = 0
    deadline_seconds: float | None = None
    default_keyspace_rf: int | None = None
    keep_quorum: bool = True
    summary: str = ""
    approval_md: str = ""
    # Keys of the stored dict this class does not model (e.g. `resumed_by`): kept so a round trip loses nothing.
    extra: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def from_plan(
        cls,
        plan: MigrationPlan,
        steps: Sequence[MigrationStep],
        *,
        migration_id: str,
        requested: Replication,
        lease_owner: str,
        run_id: str,
        started_at: str,
        rollback_of: str | None = None,
        dag_id: str | None = None,
        default_keyspace_rf: int | None = None,
        keep_quorum: bool = True,
        plan_picture: str | None = None,
    ) -> MigrationRecord:
        """The record of an accepted plan (the precheck's; `steps` from `migration_steps(plan)`)."""
        return cls(
            migration_id=migration_id,
            keyspace=plan.keyspace,
            ring=plan.ring,
            old=plan.old,
            new=plan.new,
            requested=requested,
            steps=tuple(steps),
            lease_owner=lease_owner,
            run_id=run_id,
            rollback_of=rollback_of,
            dag_id=dag_id,
            started_at=started_at,
            affected_ranges=len(plan.affected),
            total_ranges=plan.total_ranges,
            deadline_seconds=plan.deadline_seconds,
            default_keyspace_rf=default_keyspace_rf,
            keep_quorum=keep_quorum,
            summary=plan.summary(),
            approval_md=approval_markdown(plan, migration_id=migration_id, plan_picture=plan_picture),
        )

    def __post_init__(self) -> None:
        if not self.steps:
            raise MigrationError(
                f"Migration {self.migration_id} has no ALTER steps.", "Rerun the migration from a fresh precheck."
            )

    @property
    def step_count(self) -> int:
        return len(self.steps)

    def step(self, index: int) -> MigrationStep:
        """Step `index` (1-based); a DAG step group the route does not need is refused by name."""
        if not 1 <= index <= len(self.steps):
            raise MigrationError(
                f"Migration {self.migration_id} has {len(self.steps)} steps; there is no step {index}.",
                "This task should have been skipped: clear the run from the precheck.",
            )
        return self.steps[index - 1]

    def repair_segments(self, index: int, phase: Literal["pre", "post"]) -> list[Segment]:
        """The segments to repair around step `index`, from the stored ring (no re-planning)."""
        return repair_segments(self.ring, self.step(index), self.keyspace, phase)

    def with_state(self, state: MigrationState) -> MigrationRecord:
        return replace(self, state=state)

    def to_json(self) -> dict[str, Any]:
        """The stored dict: JSON-safe, the keys the UI and older readers know."""
        body: dict[str, Any] = dict(self.extra)
        body.update(
            {
                "migration_id": self.migration_id,
                "lease_owner": self.lease_owner,
                "rollback_of": self.rollback_of,
                "keyspace": self.keyspace,
                "ring": ring_to_json(self.ring),
                "old": self.old.as_json(),
                "new": self.new.as_json(),
                "requested": self.requested.as_json(),
                "steps": [step.after.as_json() for step in self.steps],
                "affected_ranges": self.affected_ranges,
                "total_ranges": self.total_ranges,
                "summary": self.summary,
                "approval_md": self.approval_md,
                "started_at": self.started_at,
                "dag_id": self.dag_id,
                "run_id": self.run_id,
                "deadline_seconds": self.deadline_seconds,
                "default_keyspace_rf": self.default_keyspace_rf,
                "keep_quorum": self.keep_quorum,
                "state": str(self.state),
            }
        )
        return body

    @classmethod
    def from_json(cls, body: Mapping[str, Any], state: str | None = None) -> MigrationRecord:
        """The record from its stored dict; `state` (the row's column) wins over the dict's own.

        Dicts from before the typed record (no `state`, no `requested`) read too: a step's start is the
        previous step's end, the first starts at `old`.
        """
        try:
            old = Replication.parse(body["old"])
            afters = [Replication.parse(step) for step in body["steps"]]
            befores = [old, *afters[:-1]]
            steps = tuple(
                MigrationStep(i, len(afters), before, after)
                for i, (before, after) in enumerate(zip(befores, afters, strict=True), 1)
            )
            migration_id = str(body["migration_id"])
            known = _KNOWN_KEYS
            return cls(
                migration_id=migration_id,
                keyspace=str(body["keyspace"]),
                ring=ring_from_json(body["ring"]),
                old=old,
                new=Replication.parse(body["new"]),
                requested=Replication.parse(body.get("requested") or body["new"]),
                steps=steps,
                lease_owner=str(body.get("lease_owner") or migration_id),
                run_id=str(body.get("run_id") or ""),
                state=MigrationState.parse(state if state is not None else body.get("state")),
                rollback_of=body.get("rollback_of") or None,
                dag_id=body.get("dag_id") or None,
                started_at=body.get("started_at") or None,
                affected_ranges=int(body.get("affected_ranges") or 0),
                total_ranges=int(body.get("total_ranges") or 0),
                deadline_seconds=body.get("deadline_seconds"),
                default_keyspace_rf=body.get("default_keyspace_rf"),
                keep_quorum=bool(body.get("keep_quorum", True)),
                summary=str(body.get("summary") or ""),
                approval_md=str(body.get("approval_md") or ""),
                extra={k: v for k, v in body.items() if k not in known},
            )
        except MigrationError:
            raise
        except (KeyError, TypeError, ValueError) as error:
            raise MigrationError(
                f"The stored migration record is unreadable ({type(error).__name__}: {error}).",
                "Rerun the migration from a fresh precheck (clear the precheck task).",
            ) from error


_KNOWN_KEYS = frozenset(
    {
        "migration_id", "lease_owner", "rollback_of", "keyspace", "ring", "old", "new", "requested", "steps",
        "affected_ranges", "total_ranges", "summary", "approval_md", "started_at", "dag_id", "run_id",
        "deadline_seconds", "default_keyspace_rf", "keep_quorum", "state",
    }
)  # fmt: skip
