"""The migration plan: placement diff, findings, staged route and deadline of one replication change."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from functools import cached_property

from ringward.cassandra_release import CASSANDRA_5_0, CassandraRelease
from ringward.diff import PlacementDiff, RangeChange, diff_replication, diff_rings
from ringward.errors import UnsafeChangeError
from ringward.placement import ReplicaMap, replica_map
from ringward.replication import DEFAULT_KEYSPACE_RF, Replication
from ringward.ring import Ring, TokenRange
from ringward.safety import (
    Finding,
    ReplicationInput,
    analyse,
    analyse_rings,
    coerce_replication,
    deadline_seconds,
    read_window,
)
from ringward.staging import staged_route, unsafe_step_ranges
from ringward.stored_replication import altered_replication

__all__ = ["MigrationPlan", "NodeChange", "build_plan", "build_ring_change_plan", "range_changes"]


@dataclass(frozen=True)
class NodeChange:
    """How many ranges a node starts or stops replicating."""

    gained: int = 0
    lost: int = 0


@dataclass(frozen=True)
class MigrationPlan:
    keyspace: str
    ring: Ring
    old: Replication
    new: Replication
    placement_before: ReplicaMap
    placement_after: ReplicaMap
    diff: PlacementDiff
    findings: tuple[Finding, ...]
    steps: tuple[Replication, ...]
    deadline_seconds: int | None
    ring_after: Ring | None = None
    step_notes: tuple[str, ...] = ()  # one line per step: what changes, on which ranges, why the step exists

    @property
    def safe(self) -> bool:
        return not self.refusals

    @property
    def refusals(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "refuse")

    @cached_property
    def ranges(self) -> tuple[RangeChange, ...]:
        """Every range, changed or not, in ring order (built on demand: big rings have 256,000)."""
        return range_changes(self.placement_before, self.placement_after)

    def counted_ranges(self) -> tuple[Sequence[TokenRange], list[bool]] | None:
        """The ring's ranges in ring order and, aligned with them, whether each one's replica set changes, without
        an object per range (a fleet's ring has 256,000): when the plan's placements share the ring's ranges and
        its diff is theirs. None otherwise (placements of two rings): then `ranges` has them."""
        before, after, diff = self.placement_before, self.placement_after, self.diff
        if before.ranges is after.ranges and diff.before is before and diff.after is after:
            return before.ranges, diff.counts.changed()
        return None

    @property
    def total_ranges(self) -> int:
        if self.placement_before.ranges is self.placement_after.ranges:
            return len(self.placement_before.ranges)
        return len(self.ranges)

    @cached_property
    def affected(self) -> tuple[RangeChange, ...]:
        """Ranges whose replica set changes, in ring order (the diff holds them on the same boundaries)."""
        return tuple(self.diff.affected())

    def node_changes(self) -> dict[str, NodeChange]:
        """Per node, ranges gained and lost, for every node that gains or loses any."""
        return dict(self._node_changes)

    @cached_property
    def _node_changes(self) -> dict[str, NodeChange]:
        gained, lost = self.diff.counts.ranges_gained, self.diff.counts.ranges_lost
        return {a: NodeChange(gained[a], lost[a]) for a in sorted(gained.keys() | lost.keys())}

    def read_window_counts(self) -> dict[str, int]:
        return dict(self._read_window_counts)

    @cached_property
    def _read_window_counts(self) -> dict[str, int]:
        ring = self.ring_after or self.ring
        return {level: len(ranges) for level, ranges in read_window(self.diff, ring).items()}

    def deadline_at(self, start: datetime) -> datetime | None:
        """When the migration started at `start` must be finished (repair and verification included)."""
        if self.deadline_seconds is None:
            return None
        return start + timedelta(seconds=self.deadline_seconds)

    def to_json(self) -> dict[str, object]:
        return {
            "keyspace": self.keyspace,
            "old": self.old.as_json(),
            "new": self.new.as_json(),
            "ring_change": self.ring_after is not None,
            "safe": self.safe,
            "ranges": [_range_json(c) for c in self.ranges],
            "affected_ranges": self.diff.affected_count(),
            "total_ranges": self.total_ranges,
            "nodes": {a: {"gained": n.gained, "lost": n.lost} for a, n in self.node_changes().items()},
            "read_window": self.read_window_counts(),
            "findings": [f.to_json() for f in self.findings],
            "steps": [s.as_json() for s in self.steps],
            "step_notes": list(self.step_notes),
            "deadline_seconds": self.deadline_seconds,
        }

    def summary(self) -> str:
        return "\n".join(self.summary_lines())

    def summary_lines(self) -> list[str]:
        """The summary's lines: each a line of its own even when a name in it holds a line break (a log writes
        each with `ringward.text.log_safe`, so a datacenter or rack name cannot start a forged line)."""
        lines = [f"keyspace {self.keyspace}: {self._change_title()}"]
        affected, total = self.diff.affected_count(), self.total_ranges
        lines.append(f"affected {affected} of {total} ranges")
        for address, change in self.node_changes().items():
            parts = [f"gains {change.gained}"] if change.gained else []
            parts += [f"loses {change.lost}"] if change.lost else []
            lines.append(f"  {address} {' and '.join(parts)} ranges")
        window = {level: n for level, n in self.read_window_counts().items() if n}
        if window:
            lines.append("read window (ranges that may read empty until repair): " + _counts(window))
        if len(self.steps) > 1:
            lines.append(f"staged route, {len(self.steps)} steps:")
            notes = self.step_notes if len(self.step_notes) == len(self.steps) else ("",) * len(self.steps)
            for i, (step, note) in enumerate(zip(self.steps, notes, strict=True), 1):
                lines.append(f"  {i}. {step.to_cql()}" + (f" -- {note}" if note else ""))
        lines += [f"  {finding}" for finding in self.findings]
        warnings = sum(f.severity == "warn" for f in self.findings)
        if self.safe:
            lines.append(f"SAFE to apply ({warnings} warnings)")
        else:
            lines.append(f"REFUSED: {len(self.refusals)} refusals, {warnings} warnings")
        return lines

    def table(self) -> str:
        return "\n".join(self.table_lines())

    def table_lines(self) -> list[str]:
        """One row per range. A refused plan still shows the target's placement where it can be computed
        (datacenters not in the ring have none), marks moves as "would-move" and names on each range the
        refusals that concern it (those naming ranges) or the whole change."""
        header = ("range", "old", "new", "+gained", "-lost", "marks")
        whole = [f.code for f in self.refusals if not f.ranges]
        by_range: dict[TokenRange, list[str]] = {}
        for finding in self.refusals:
            for token_range in finding.ranges:
                by_range.setdefault(token_range, []).append(finding.code)
        rows = [header, *(_table_row(c, [*by_range.get(c.range, ()), *whole]) for c in self.ranges)]
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        rendered = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows]
        rendered.insert(1, "  ".join("-" * w for w in widths))
        return [line.rstrip() for line in rendered]

    def _change_title(self) -> str:
        if self.ring_after is not None:
            return f"ring change under {self.new.to_cql()}"
        return f"{self.old.to_cql()} -> {self.new.to_cql()}"


def build_plan(
    ring: Ring,
    old: ReplicationInput,
    new: ReplicationInput,
    *,
    keyspace: str,
    table_gc_grace_seconds: Mapping[str, int] | None = None,
    client_consistency: str | None = None,
    known_keyspaces: Iterable[str] | None = None,
    keep_quorum: bool = True,
    default_keyspace_rf: int = DEFAULT_KEYSPACE_RF,
    release: CassandraRelease = CASSANDRA_5_0,
) -> MigrationPlan:
    """The plan for changing `keyspace` from `old` to `new`; malformed settings raise ReplicationError.

    `new` is read as ALTER KEYSPACE reads it against `old` (`ringward.stored_replication`); `default_keyspace_rf` is the
    cluster's cassandra.yaml setting, which a SimpleStrategy or bare NTS request without a factor may take;
    `release` the cluster's Cassandra release, whose ALTER semantics the plan models.
    """
    old_replication, new_replication = coerce_replication(old), coerce_replication(new)
    dcs = ring.datacenters()
    stored_old = altered_replication(None, old_replication, dcs, default_keyspace_rf, release=release)
    stored_new = altered_replication(stored_old, new_replication, dcs, default_keyspace_rf, release=release)
    findings = analyse(
        ring,
        old_replication,
        new_replication,
        keyspace=keyspace,
        table_gc_grace_seconds=table_gc_grace_seconds,
        client_consistency=client_consistency,
        known_keyspaces=known_keyspaces,
        default_keyspace_rf=default_keyspace_rf,
        release=release,
    )
    steps: tuple[Replication, ...] = ()
    notes: tuple[str, ...] = ()
    if stored_old != stored_new:
        try:
            route = staged_route(
                ring,
                old_replication,
                new_replication,
                keep_quorum=keep_quorum,
                default_keyspace_rf=default_keyspace_rf,
                release=release,
            )
            steps, notes = route.steps, route.notes
        except UnsafeChangeError as error:
            findings.append(Finding("refuse", "no_safe_staging", error.problem, error.fix))
        findings += _route_findings(ring, stored_old, stored_new, steps, keep_quorum)
    return MigrationPlan(
        keyspace=keyspace,
        ring=ring,
        old=old_replication,
        new=new_replication,
        placement_before=replica_map(ring, stored_old),
        placement_after=replica_map(ring, stored_new),
        diff=diff_replication(ring, stored_old, stored_new),
        findings=tuple(findings),
        steps=steps,
        deadline_seconds=deadline_seconds(table_gc_grace_seconds),
        step_notes=notes,
    )


def build_ring_change_plan(
    before: Ring,
    after: Ring,
    replication: ReplicationInput,
    *,
    keyspace: str,
    table_gc_grace_seconds: Mapping[str, int] | None = None,
    client_consistency: str | None = None,
) -> MigrationPlan:
    """The plan for a topology change (nodes added, removed or re-tokened) under one replication."""
    replication_ = coerce_replication(replication)
    findings = analyse_rings(
        before,
        after,
        replication_,
        keyspace=keyspace,
        table_gc_grace_seconds=table_gc_grace_seconds,
        client_consistency=client_consistency,
    )
    return MigrationPlan(
        keyspace=keyspace,
        ring=before,
        old=replication_,
        new=replication_,
        placement_before=replica_map(before, replication_),
        placement_after=replica_map(after, replication_),
        diff=diff_rings(before, after, replication_),
        findings=tuple(findings),
        steps=(),
        deadline_seconds=deadline_seconds(table_gc_grace_seconds),
        ring_after=after,
    )


def range_changes(before: ReplicaMap, after: ReplicaMap) -> tuple[RangeChange, ...]:
    """Every range, changed or not, on the token boundaries of both placements, in ring order."""
    if before.ranges is after.ranges:  # one ring: the boundaries agree already
        return tuple(map(RangeChange, before.ranges, before.replicas, after.replicas))
    ends = sorted({r.end for r in before.ranges} | {r.end for r in after.ranges})
    return tuple(
        RangeChange(TokenRange(ends[i - 1], end), before.for_token(end), after.for_token(end))
        for i, end in enumerate(ends)
    )


def _route_findings(
    ring: Ring, old: Replication, new: Replication, steps: tuple[Replication, ...], keep_quorum: bool
) -> list[Finding]:
    if len(steps) <= 1:
        return []
    broken = tuple(unsafe_step_ranges(ring, old, new, keep_quorum=keep_quorum))
    route = " -> ".join(step.to_cql() for step in steps)
    return [
        Finding(
            "warn",
            "staged_route",
            f"Changing in one ALTER breaks the step rules on {len(broken)} ranges "
            "(no replica kept, more than one replica moved per datacenter, or QUORUM overlap lost).",
            f"Apply {len(steps)} ALTERs, repairing the affected ranges after each: {route}.",
            broken,
        )
    ]


def _range_json(change: RangeChange) -> dict[str, object]:
    return {
        "start": change.range.start,
        "end": change.range.end,
        "old": list(change.old),
        "new": list(change.new),
        "gained": list(change.gained),
        "lost": list(change.lost),
    }


def _table_row(change: RangeChange, refusals: Sequence[str] = ()) -> tuple[str, ...]:
    """One range's row. A target that places no replica (e.g. an unknown datacenter) leaves the range with
    no replica at all: it says so instead of an empty `new` cell marked as an ordinary move."""
    marks = []
    if change.old and not change.new:
        marks.append("NO-REPLICA-LEFT")
    elif change.affected:
        marks.append("would-move" if refusals else "moved")
    if change.old and change.new and not change.kept:
        marks.append("NO-REPLICA-KEPT")
    if refusals:
        marks.append(f"REFUSED({','.join(dict.fromkeys(refusals))})")
    return (
        f"({change.range.start}, {change.range.end}]",
        ",".join(change.old) or "(none)",
        ",".join(change.new) or "(none)",
        ",".join(change.gained),
        ",".join(change.lost),
        " ".join(marks),
    )


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{key} {value}" for key, value in counts.items())
