"""The Migration page's view as bytes (`pages_to_bytes`) reads back (`pages_from_bytes`) as the same view: every
field, range row, stage segment and participant, finding and picture; a malformed or foreign blob is refused."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from ringward.migration_page_codec import PAGES_FORMAT, pages_format, pages_from_bytes, pages_to_bytes
from ringward.migration_pages import MigrationPages
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
