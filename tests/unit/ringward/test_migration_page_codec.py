"""The Migration page's view as bytes (`pages_to_bytes`) reads back (`pages_from_bytes`) as the same view: every
field, range row, stage segment and participant, finding and picture; a malformed or foreign blob is refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from ringward._svg import checked_document
from ringward.migration_page_codec import PAGES_FORMAT, pages_format, pages_from_bytes, pages_to_bytes
from ringward.migration_pages import MigrationPages, pages_of_plan
from ringward.plan import build_plan
from ringward.ring import Node, Ring
from ringward.svg import render_placement_svg
from test_migration_pages import CHANGES, _pages


def _served(pages: MigrationPages) -> dict[str, Any]:
    """Everything of `pages` the Migration page reads, as plain values."""
    return {
        "fields": [pages.keyspace, pages.old, pages.new, pages.old_shown, pages.new_shown, pages.safe,
                   pages.affected, pages.total, pages.svg],
        "findings": [(finding, list(ranges), len(ranges), list(ranges[1:3])) for finding, ranges in pages.findings],
        "ranges": pages.ranges.rows(range(len(pages.ranges))), "triaged": list(pages.ranges.triaged),
        "steps": [
            (step.index, step.count, step.before, step.after, step.after_shown,
             [(stage.stage, stage.name, list(stage.starts), list(stage.ends),
               [stage.replicas[k] for k in range(len(stage.starts))], list(stage.replicas[0:2]), len(stage.replicas))
              for stage in step.stages])
            for step in pages.steps
        ],
    }  # fmt: skip


@pytest.mark.parametrize("name", sorted(CHANGES))
def test_the_view_reads_back_as_it_was(name: str) -> None:
    _, pages = _pages(name)
    data = pages_to_bytes(pages)
    assert pages_format(data) == PAGES_FORMAT
    assert _served(pages_from_bytes(data)) == _served(pages)


def test_a_stage_of_listed_replicas_and_uneven_replica_counts_read_back() -> None:
    """Stages built from `repair_pieces` (a list of participants) and replica tuples of different lengths."""
    _, pages = _pages("rf1_to_second_dc")
    step = pages.steps[0]
    post = step.stages[1]
    listed = replace(post, replicas=[post.replicas[k][: 1 + k % 2] for k in range(len(post.starts))])
    pages = replace(pages, steps=(replace(step, stages=(step.stages[0], listed)),))
    assert _served(pages_from_bytes(pages_to_bytes(pages))) == _served(pages)


@pytest.mark.parametrize("damage", ["magic", "format", "truncated", "trailing", "header"])
def test_a_malformed_or_foreign_view_is_refused(damage: str) -> None:
    data = pages_to_bytes(_pages("simple_rf_up")[1])
    broken = {
        "magic": b"XXXX" + data[4:], "format": data[:4] + (PAGES_FORMAT + 1).to_bytes(4, "little") + data[8:],
        "truncated": data[:-3], "trailing": data + b"\0", "header": data[:12] + b"[" + data[13:],
    }[damage]  # fmt: skip
    with pytest.raises(ValueError):
        pages_from_bytes(broken)


# A stored view's picture is inlined by the page: markup ringward did not draw must not pass (issue 36). Each is
# markup that runs script, loads something, or reads differently to an XML parser and a browser's HTML parser.
SVG_OPEN = "<svg xmlns='http://www.w3.org/2000/svg' width='10' height='10'>"
INJECTED = {
    "script element": f"{SVG_OPEN}<script>alert(1)</script></svg>",
    "event attribute": "<svg xmlns='http://www.w3.org/2000/svg' onload='alert(2)'></svg>",
    "foreignObject": f"{SVG_OPEN}<foreignObject><img xmlns='http://www.w3.org/1999/xhtml' src='x'/></foreignObject>"
    "</svg>",
    "link": "<svg xmlns='http://www.w3.org/2000/svg' xmlns:xlink='http://www.w3.org/1999/xlink'>"
    "<a xlink:href='javascript:alert(3)'><text>x</text></a></svg>",
    "href on a drawn element": f"{SVG_OPEN}<path d='M0,0' href='javascript:alert(4)'/></svg>",
    "style attribute": f"{SVG_OPEN}<rect width='1' height='1' style='background:url(https://x.invalid/)'/></svg>",
    "CDATA": f"{SVG_OPEN}<text><![CDATA[</text><img src=x onerror=alert(5)>]]></text></svg>",
    "comment": f"{SVG_OPEN}<!-- --><text>x</text></svg>",
    "entity": "<!DOCTYPE svg [<!ENTITY e 'x'>]><svg xmlns='http://www.w3.org/2000/svg'><text>&e;</text></svg>",
    "not well-formed": f"{SVG_OPEN}<text><img src=x onerror=alert(6)></text></svg>",
    "HTML around it": "<div><svg xmlns='http://www.w3.org/2000/svg'/></div>",
    "no SVG namespace": "<svg><text>x</text></svg>",
}


@pytest.mark.parametrize("name", sorted(INJECTED))
def test_a_view_whose_picture_ringward_did_not_draw_is_refused(name: str) -> None:
    _, pages = _pages("simple_rf_up")
    with pytest.raises(ValueError, match="SVG picture"):
        pages_from_bytes(pages_to_bytes(replace(pages, svg=INJECTED[name])))


def test_every_placement_picture_ringward_draws_reads_back_hostile_names_as_text() -> None:
    """Each test plan's picture (whole, and summarised in arcs: more ranges than `max_arcs`) passes the check, and
    so does one of a ring whose datacenter and rack names are markup: drawn escaped, read back as text."""
    for name in sorted(CHANGES):
        plan, pages = _pages(name)
        assert pages_from_bytes(pages_to_bytes(pages)).svg == pages.svg
        assert checked_document(render_placement_svg(plan)) and checked_document(render_placement_svg(plan, max_arcs=4))
    hostile = "<img src=x onerror=alert(7)>"
    ring = Ring.of(Node(f"10.0.0.{i + 1}", hostile, f"{hostile}{i % 2}", (i * 2**60 - 2**62,)) for i in range(4))
    plan = build_plan(ring, {"class": "NetworkTopologyStrategy", hostile: 1},
                      {"class": "NetworkTopologyStrategy", hostile: 2}, keyspace="shop")  # fmt: skip
    pages = pages_of_plan(plan, max_arcs=16)
    assert hostile not in pages.svg and "&lt;img src=x onerror=alert(7)&gt;" in pages.svg
    assert pages_from_bytes(pages_to_bytes(pages)).svg == pages.svg
