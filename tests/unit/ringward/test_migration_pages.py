"""The Migration page's view of a plan (`pages_of_plan`) is what the plan and its repair stages are, range by range
and segment by segment: compared with `plan.ranges` and `repair_segments`, which build an object per range."""

from __future__ import annotations

import random
from typing import Any

import pytest
from ringward.migration import migration_steps, repair_segments
from ringward.migration_pages import MigrationPages, PageRanges, pages_of_plan
from ringward.plan import MigrationPlan, build_plan
from ringward.ring import MIN_TOKEN, Node, Ring, TokenRange

NTS = "NetworkTopologyStrategy"


def _ring(nodes: int, vnodes: int, seed: int, datacenters: int = 2, racks: int = 2) -> Ring:
    rng = random.Random(seed)
    tokens = rng.sample(range(-(2**63) + 1, 2**63 - 1, 2**40), nodes * vnodes)
    return Ring.of(
        Node(f"10.0.0.{i + 1}", f"dc{i % datacenters + 1}", f"r{i % racks + 1}",
             tuple(tokens[i * vnodes : (i + 1) * vnodes]))
        for i in range(nodes)
    )  # fmt: skip


CHANGES = {  # (ring, old, new): staged routes, a stage of single-replica ranges, SimpleStrategy, one token a node
    "add_dc_in_steps": (_ring(12, 4, 1), {"class": NTS, "dc1": 3}, {"class": NTS, "dc1": 3, "dc2": 3}),
    "rf1_to_second_dc": (_ring(6, 3, 5), {"class": NTS, "dc1": 1}, {"class": NTS, "dc1": 1, "dc2": 1}),
    "simple_rf_up": (_ring(7, 2, 3, datacenters=1), {"class": "SimpleStrategy", "replication_factor": 1},
                     {"class": "SimpleStrategy", "replication_factor": 3}),
    "one_token_each": (_ring(5, 1, 7), {"class": NTS, "dc1": 2}, {"class": NTS, "dc1": 2, "dc2": 2}),
    "rf_down": (_ring(10, 3, 6), {"class": NTS, "dc1": 3, "dc2": 2}, {"class": NTS, "dc1": 3, "dc2": 1}),
    # Rack-aware placement moves only the ranges whose next two nodes share a rack: 8 of 32.
    "simple_to_racks": (_ring(8, 4, 9, datacenters=1), {"class": "SimpleStrategy", "replication_factor": 2},
                        {"class": NTS, "dc1": 2}),
}  # fmt: skip


def _pages(name: str) -> tuple[MigrationPlan, MigrationPages]:
    ring, old, new = CHANGES[name]
    plan = build_plan(ring, old, new, keyspace="shop")
    return plan, pages_of_plan(plan, max_arcs=16)


def _rows(ranges: PageRanges) -> list[dict[str, Any]]:
    return ranges.rows(range(len(ranges)))


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_each_stage_is_the_segments_repair_segments_repairs(name: str) -> None:
    """Segment for segment (bounds, participants, coordinator first), the wrap-around range in its two pieces."""
    plan, pages = _pages(name)
    steps = migration_steps(plan)
    assert [step.index for step in pages.steps] == [step.index for step in steps] and steps
    for step, shown in zip(steps, pages.steps, strict=True):
        for phase, stage in zip(("pre", "post"), shown.stages, strict=True):
            expected = [
                (s.range.start, s.range.end, s.replicas) for s in repair_segments(plan.ring, step, "shop", phase)
            ]
            got = [(stage.starts[k], stage.ends[k], stage.replicas[k]) for k in range(len(stage.starts))]
            assert stage.stage == f"{phase}_repair:{step.index}"
            assert len(stage.ends) == len(stage.replicas) == len(expected)
            assert got == expected


def test_a_stage_of_single_replica_ranges_is_empty_and_the_wrap_around_range_is_split() -> None:
    """What the comparison above covers, shown to happen: RF 1 before, nothing to pre-repair; a range crossing
    the minimum token repaired as two segments."""
    _, pages = _pages("rf1_to_second_dc")
    pre, post = pages.steps[0].stages
    assert len(pre.starts) == 0 and len(post.starts) > 0
    _, pages = _pages("add_dc_in_steps")
    post = pages.steps[0].stages[1]
    pieces = [TokenRange(start, end) for start, end in zip(post.starts, post.ends, strict=True)]
    assert all(piece.unwrap() == [piece] for piece in pieces)  # none crosses the minimum token
    assert len(pieces) == pages.total + 1  # every range gains a replica; the wrap-around one in two pieces
    assert [p.end for p in pieces].count(MIN_TOKEN) == 1 and [p.start for p in pieces].count(MIN_TOKEN) == 1


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_the_ranges_are_the_plans_affected_first_in_the_page_order(name: str) -> None:
    plan, pages = _pages(name)
    one_by_one = PageRanges.of_changes(plan.ranges)
    assert _rows(pages.ranges) == _rows(one_by_one) and list(pages.ranges.triaged) == list(one_by_one.triaged)
    affected = {c.range.end for c in plan.affected}
    ends = [pages.ranges.ends[i] for i in pages.ranges.triaged]
    assert sorted(pages.ranges.triaged) == list(range(plan.total_ranges))
    assert set(ends[: len(affected)]) == affected and pages.affected == len(affected) > 0


def test_only_the_changed_ranges_are_repaired_and_listed_first() -> None:
    plan, pages = _pages("simple_to_racks")
    assert (plan.total_ranges, pages.affected) == (32, 8)
    changed = {c.range.end for c in plan.ranges if c.affected}
    assert {pages.ranges.ends[i] for i in pages.ranges.triaged[:8]} == changed
    assert all({stage.ends[k] for k in range(len(stage.ends))} <= changed for stage in pages.steps[0].stages)


def test_findings_keep_their_ranges_as_typed() -> None:
    plan, pages = _pages("add_dc_in_steps")
    staged = [(finding, ranges) for finding, ranges in pages.findings if finding["code"] == "staged_route"]
    assert staged and staged[0][1] == next(f.ranges for f in plan.findings if f.code == "staged_route")
    assert staged[0][0]["ranges"] == []  # the JSON carries the window's, written by the page
