"""What the Migration page shows of a migration's plan, compact.

`pages_of_plan` builds it from the page's plan (`build_plan` of the stored record's ring, settings and keyspace):
the plan's summary, its ranges with their replicas before and after, each step's repair stages segment for
segment, and the placement picture. A fleet's plan (1000 nodes x 256 tokens, three steps) has 256,000 ranges and
1.5 million repair segments: they are held in arrays, and replica tuples are built only for the rows a page shows.

Pure: the precheck builds it and stores it beside the record (`ringward.migration_page_codec`); the API server reads
it, or builds it when none is stored, once per stored record and keeps it (`ringward_airflow.ui.views`).
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import chain, compress, repeat
from operator import and_, attrgetter, ge, gt, not_
from typing import Any, Literal, overload

from ringward.errors import RingwardError
from ringward.migration import MigrationStep, migration_steps, repair_participants, repair_pieces, step_changes
from ringward.placement import ReplicaMap, replica_delta
from ringward.plan import MigrationPlan
from ringward.ring import Ring, TokenRange
from ringward.svg import render_placement_svg

__all__ = [
    "PLACEMENT_ARCS",
    "MigrationPages",
    "PageRanges",
    "PageStage",
    "PageStep",
    "pages_of_plan",
]

PLACEMENT_ARCS = 720  # the placement picture draws a larger plan as this many arcs per ring (runs of ranges)

Replicas = tuple[str, ...]


class PageRanges:
    """A plan's ranges, compact: token bounds in arrays, replica tuples shared (the placements' own lists, one
    object per distinct set, or node numbers); `triaged`: their indexes, the affected ones first."""

    def __init__(self, starts: array[int], ends: array[int], old: Sequence[Replicas], new: Sequence[Replicas],
                 triaged: array[int]) -> None:  # fmt: skip
        self.starts, self.ends, self.old, self.new, self.triaged = starts, ends, old, new, triaged

    @classmethod
    def of_changes(cls, changes: Sequence[Any]) -> PageRanges:
        """From `plan.ranges` (a `RangeChange` per range)."""
        shared: dict[Replicas, Replicas] = {}
        affected = [i for i, c in enumerate(changes) if set(c.old) != set(c.new)]
        chosen = set(affected)
        return cls(
            array("q", (c.range.start for c in changes)), array("q", (c.range.end for c in changes)),
            [shared.setdefault(tuple(c.old), tuple(c.old)) for c in changes],
            [shared.setdefault(tuple(c.new), tuple(c.new)) for c in changes],
            array("q", affected + [i for i in range(len(changes)) if i not in chosen]),
        )  # fmt: skip

    @classmethod
    def of_placements(cls, bounds: _Bounds, before: ReplicaMap, after: ReplicaMap, changed: list[bool]) -> PageRanges:
        """The ranges of two placements of one ring (`before.ranges is after.ranges is bounds.ranges`) and whether
        each one's replica set changes (`changed`, aligned with them): the same as `of_changes(plan.ranges)`,
        without an object per range (a fleet's ring has 256,000 ranges; every pass here runs in C)."""
        every = range(len(changed))
        triaged = array("q", chain(compress(every, changed), compress(every, map(not_, changed))))
        return cls(bounds.starts, bounds.ends, before.replicas, after.replicas, triaged)

    def __len__(self) -> int:
        return len(self.starts)

    def rows(self, indexes: Sequence[int]) -> list[dict[str, Any]]:
        rows = []
        for i in indexes:
            old, new = self.old[i], self.new[i]
            gained, lost = [a for a in new if a not in old], [a for a in old if a not in new]
            rows.append({"range": [self.starts[i], self.ends[i]], "old": list(old), "new": list(new),
                         "gained": gained, "lost": lost})  # fmt: skip
        return rows


class Participants(Sequence[Replicas]):
    """The participants of a stage's segments, built for the segments a page shows: segment k repairs ring range
    `of[k]`, whose replicas are `old[i]` before the step and `new[i]` after it (`repair_participants`, as
    `repair_pieces` orders them)."""

    def __init__(self, of: array[int], old: Sequence[Replicas], new: Sequence[Replicas], pre: bool) -> None:
        self.of, self.old, self.new, self.pre = of, old, new, pre

    def __len__(self) -> int:
        return len(self.of)

    @overload
    def __getitem__(self, k: int) -> Replicas: ...

    @overload
    def __getitem__(self, k: slice) -> list[Replicas]: ...

    def __getitem__(self, k: int | slice) -> Replicas | list[Replicas]:
        if isinstance(k, slice):
            return [self[j] for j in range(*k.indices(len(self)))]
        i = self.of[k]
        return repair_participants(self.old[i], self.new[i], "pre" if self.pre else "post")


@dataclass(frozen=True)
class PageStage:
    """One repair stage of a step: its segments in ring order, compact."""

    stage: str
    name: str
    starts: array[int]
    ends: array[int]
    replicas: Sequence[Replicas]  # each segment's participants, coordinator first


@dataclass(frozen=True)
class PageStep:
    index: int
    count: int
    before: str
    after: str
    after_shown: str
    stages: tuple[PageStage, ...]


@dataclass(frozen=True)
class MigrationPages:
    """What a migration's plan is, as the Migration page shows it (`pages_of_plan`)."""

    keyspace: str
    old: str
    new: str
    old_shown: str
    new_shown: str
    safe: bool
    affected: int
    total: int
    findings: tuple[tuple[dict[str, Any], Sequence[TokenRange]], ...]  # each as JSON but its ranges, and those
    ranges: PageRanges
    steps: tuple[PageStep, ...]
    svg: str


@dataclass(frozen=True)
class _Bounds:
    """The token bounds of a ring's ranges (`ranges`, ring order), in arrays: read once for every step."""

    ranges: Sequence[TokenRange]
    starts: array[int]
    ends: array[int]

    @classmethod
    def of(cls, ranges: Sequence[TokenRange]) -> _Bounds:
        return cls(ranges, array("q", map(attrgetter("start"), ranges)), array("q", map(attrgetter("end"), ranges)))


def pages_of_plan(plan: MigrationPlan, *, max_arcs: int = PLACEMENT_ARCS) -> MigrationPages:
    """The page's view of `plan` (its picture in at most `max_arcs` arcs per ring)."""
    try:
        steps = migration_steps(plan)
    except RingwardError:
        steps = []
    before, after = plan.placement_before, plan.placement_after
    bounds = _Bounds.of(before.ranges)
    built_steps = tuple(
        PageStep(step.index, step.count, step.before.to_cql(), step.after.to_cql(), step.after.describe(),
                 _stages(plan.ring, step, bounds))
        for step in steps
    )  # fmt: skip
    counted = plan.counted_ranges()
    ranges = (PageRanges.of_placements(bounds, before, after, counted[1]) if counted is not None
              else PageRanges.of_changes(plan.ranges))  # fmt: skip
    findings = tuple((replace(f, ranges=()).to_json(), f.ranges) for f in plan.findings)  # ranges: per window
    # The picture names the settings as the pages do (`NetworkTopologyStrategy {dc1: 3}`), from the typed plan.
    return MigrationPages(
        plan.keyspace, plan.old.to_cql(), plan.new.to_cql(), plan.old.describe(), plan.new.describe(), plan.safe,
        plan.diff.affected_count(), plan.total_ranges, findings, ranges, built_steps,
        render_placement_svg(plan, max_arcs=max_arcs),
    )  # fmt: skip


_PHASES: tuple[tuple[Literal["pre", "post"], str], ...] = (("pre", "pre-repair"), ("post", "repair"))


def _stages(ring: Ring, step: MigrationStep, bounds: _Bounds) -> tuple[PageStage, ...]:
    """The step's two repair stages, segment for segment what `repair_pieces(step_changes(...))` repairs, by its
    rules in arrays: the changed ranges, less those with one participant, the wrap-around one as its `unwrap`
    pieces, each with its `repair_participants` (tests/unit/ringward/test_migration_pages.py holds them equal)."""
    before, after = step.placements(ring)
    if not (before.ranges is after.ranges is bounds.ranges):  # placements of one ring share its ranges; kept general
        return _stages_of_pieces(ring, step)
    changed = replica_delta(ring, step.before, step.after).changed()  # the step's ranges
    starts, ends = bounds.starts, bounds.ends
    stages = []
    for (phase, name), placement in zip(_PHASES, (before, after), strict=True):
        # A range with one participant (its replicas before, or after: the gained ones and the rest) is not repaired.
        count = placement.replica_count
        counts = repeat(count) if count is not None else map(len, placement.replicas)
        of = array("q", compress(range(len(changed)), map(and_, changed, map(gt, counts, repeat(1)))))
        seg_starts, seg_ends = array("q", map(starts.__getitem__, of)), array("q", map(ends.__getitem__, of))
        # A range crossing the minimum token (the wrap-around one) is repaired as its `unwrap` pieces.
        for k in reversed(list(compress(range(len(of)), map(ge, seg_starts, seg_ends)))):
            pieces = TokenRange(seg_starts[k], seg_ends[k]).unwrap()
            seg_starts[k : k + 1] = array("q", (p.start for p in pieces))
            seg_ends[k : k + 1] = array("q", (p.end for p in pieces))
            of[k : k + 1] = array("q", [of[k]] * len(pieces))
        replicas = Participants(of, before.replicas, after.replicas, phase == "pre")
        stages.append(PageStage(f"{phase}_repair:{step.index}", name, seg_starts, seg_ends, replicas))
    return tuple(stages)


def _stages_of_pieces(ring: Ring, step: MigrationStep) -> tuple[PageStage, ...]:
    """The step's two repair stages from `repair_pieces`, one object per segment (placements of different ranges)."""
    shared: dict[Replicas, Replicas] = {}
    changes = step_changes(ring, step)  # both phases' ranges, computed once
    stages = []
    for phase, name in _PHASES:
        pieces = repair_pieces(changes, phase)  # what repair_segments repairs
        replicas = [shared.setdefault(participants, participants) for _, participants in pieces]
        stages.append(PageStage(f"{phase}_repair:{step.index}", name, array("q", (p.start for p, _ in pieces)),
                                array("q", (p.end for p, _ in pieces)), replicas))  # fmt: skip
    return tuple(stages)
