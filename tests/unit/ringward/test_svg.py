"""Ring pictures: valid SVG with one arc per range per ring, moved ranges marked, repair buckets."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from ringward.plan import MigrationPlan, build_plan, build_ring_change_plan
from ringward.replication import Replication
from ringward.ring import Node, Ring, TokenRange
from ringward.ring_sources import load_ring_file
from ringward.svg import REPAIR_BUCKETS, render_placement_svg, render_repair_svg

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"
SVG = "{http://www.w3.org/2000/svg}"


@pytest.fixture(scope="module")
def seed_plan() -> MigrationPlan:
    ring = load_ring_file(RINGS / "seed_num_tokens_4.txt")
    return build_plan(ring, Replication.simple(2), Replication.network_topology({"dc1": 2}), keyspace="test")


def paths(svg: str, css_class: str) -> list[ET.Element]:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return [p for p in root.iter(f"{SVG}path") if p.get("class") == css_class]


def texts(svg: str) -> list[str]:
    return [t.text or "" for t in ET.fromstring(svg).iter(f"{SVG}text")]


def test_placement_has_an_arc_per_range_in_each_ring(seed_plan: MigrationPlan) -> None:
    svg = render_placement_svg(seed_plan)
    assert len(paths(svg, "arc")) == 2 * len(seed_plan.ranges)
    assert len(paths(svg, "moved")) == len(seed_plan.affected)


def test_arcs_share_a_colour_exactly_when_replica_sets_match(seed_plan: MigrationPlan) -> None:
    arcs = paths(render_placement_svg(seed_plan), "arc")
    sets = [frozenset(c.old) for c in seed_plan.ranges] + [frozenset(c.new) for c in seed_plan.ranges]
    fills = [a.get("fill") for a in arcs]
    for i in range(len(arcs)):
        for j in range(len(arcs)):
            assert (fills[i] == fills[j]) == (sets[i] == sets[j])


def test_placement_labels_nodes_and_summary(seed_plan: MigrationPlan) -> None:
    labels = texts(render_placement_svg(seed_plan))
    assert any(f"affected {len(seed_plan.affected)} of 12 ranges" in t for t in labels)
    assert {".2", ".3", ".4"} <= set(labels)
    assert any(t.startswith("+.4") for t in labels)


def test_single_token_ring_draws_a_whole_ring() -> None:
    ring = Ring.of([Node("10.0.0.1", "dc1", "r1", (42,))])
    plan = build_plan(ring, Replication.simple(1), Replication.network_topology({"dc1": 1}), keyspace="ks")
    arcs = paths(render_placement_svg(plan), "arc")
    assert len(arcs) == 2
    assert all((a.get("d") or "").count("M") == 2 for a in arcs)  # two half bands, no degenerate arc


def test_repair_picture_colours_ranges_by_age_bucket() -> None:
    ranges = Ring.of([Node("10.0.0.1", "dc1", "r1", (-100, 0, 100, 200, 300))]).ranges()
    shares: list[float | None] = [None, 0.1, 0.6, 0.9, 1.5]
    svg = render_repair_svg(list(zip(ranges, shares, strict=True)), title="ks repair status")
    fills = [a.get("fill") for a in paths(svg, "arc")]
    assert fills[1:] == [colour for _, colour, _ in REPAIR_BUCKETS]
    assert fills[0] not in fills[1:]
    assert any("never repaired (1)" in t for t in texts(svg))
    assert "ks repair status" in texts(svg)


def test_repair_picture_escapes_its_title() -> None:
    svg = render_repair_svg([(TokenRange(0, 10), 0.2)], title="a < b & c")
    assert "a < b & c" in texts(svg)


def _many_node_ring(nodes: int, tokens: int, *, down: str | None = None) -> Ring:
    step = 2**64 // (nodes * tokens)
    return Ring.of(
        Node(f"10.0.{i // 200}.{i % 200 + 1}", f"dc{i % 2 + 1}", "r1",
             tuple(-(2**63) + 1 + step * (i + nodes * t) for t in range(tokens)),
             state="DN" if f"10.0.{i // 200}.{i % 200 + 1}" == down else "UN")
        for i in range(nodes)
    )  # fmt: skip


def test_a_large_placement_is_drawn_in_at_most_max_arcs_per_ring_and_counts_every_range() -> None:
    ring = _many_node_ring(60, 16)  # 960 ranges
    plan = build_plan(ring, Replication.network_topology({"dc1": 2}),
                      Replication.network_topology({"dc1": 2, "dc2": 1}), keyspace="big")  # fmt: skip
    assert plan.total_ranges == 960
    svg = render_placement_svg(plan, max_arcs=100)
    arcs = paths(svg, "arc")
    assert len(arcs) == 2 * 100  # before and after
    counted = [int(a.findtext(f"{SVG}title", "").split(": ")[1].split(" ranges")[0]) for a in arcs[:100]]
    assert sum(counted) == 960 and set(counted) <= {9, 10}  # runs of neighbours, sizes differing by one at most
    moved = [int(a.findtext(f"{SVG}title", "").split("ranges, ")[1].split(" of them")[0]) for a in arcs[100:]]
    assert sum(moved) == len(plan.affected)
    labels = " ".join(texts(svg))
    assert "960 ranges drawn as 100 arcs of 9-10 neighbouring ranges" in labels and "and 20 more" in labels
    assert len(paths(render_placement_svg(plan), "arc")) == 2 * 960  # no bound asked: one arc per range


def test_a_large_ring_change_is_drawn_in_runs_of_its_refined_ranges() -> None:
    """Placements of two rings do not share their ranges: the runs are of the plan's ranges (refined to both rings'
    tokens), and their changed ranges add up to the plan's."""
    before = _many_node_ring(30, 8)
    after = Ring.of([*before.nodes, Node("10.9.9.9", "dc1", "r1", (12345, -98765, 2**40 + 7))])
    plan = build_ring_change_plan(before, after, Replication.network_topology({"dc1": 2, "dc2": 1}), keyspace="k")
    assert plan.total_ranges == 243 and plan.affected
    arcs = paths(render_placement_svg(plan, max_arcs=20), "arc")
    counted = [int(a.findtext(f"{SVG}title", "").split(": ")[1].split(" ranges")[0]) for a in arcs[:20]]
    moved = [int(a.findtext(f"{SVG}title", "").split("ranges, ")[1].split(" of them")[0]) for a in arcs[20:]]
    assert len(arcs) == 40 and sum(counted) == 243 and sum(moved) == len(plan.affected)


def test_a_large_ring_is_drawn_in_at_most_max_arcs_with_a_capped_legend_down_nodes_first() -> None:
    from ringward.ring_picture import render_ring_svg

    ring = _many_node_ring(300, 8, down="10.0.1.50")  # 2,400 ranges
    svg = render_ring_svg(ring, title="t", max_arcs=240, max_legend=10)
    arcs = paths(svg, "arc")
    assert len(arcs) == 240
    assert sum(int(a.findtext(f"{SVG}title", "").split(": ")[1].split(" primary")[0]) for a in arcs) == 2400
    assert sum(1 for a in arcs if a.get("fill") == "#c7c7c7") == 8  # the down node's 8 ranges, one per arc here
    labels = texts(svg)
    assert labels[3].split()[1:3] == ["10.0.1.50", "dc2/r1"] and " DN " in labels[3]  # the down node first
    assert sum(1 for t in labels if " tokens)" in t) == 10 and "and 290 more nodes" in " ".join(labels)
    assert len(paths(render_ring_svg(ring, title="t"), "arc")) == 2400  # no bound asked: one arc per range
