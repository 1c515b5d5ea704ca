"""Markdown a person reads: the approval request, a refusal, the final migration report."""

from __future__ import annotations

from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from ringward.plan import MigrationPlan, build_plan
from ringward.replication import Replication
from ringward.report import (
    RANGE_ROWS,
    approval_markdown,
    markdown_table,
    migration_report_markdown,
    refusal_markdown,
    stage_seconds,
)
from ringward.ring import Node, Ring
from ringward.ring_sources import load_ring_file

RINGS = Path(__file__).resolve().parents[2] / "fixtures" / "rings"


@pytest.fixture(scope="module")
def seed_ring() -> Ring:
    return load_ring_file(RINGS / "seed_num_tokens_4.txt")


@pytest.fixture(scope="module")
def seed_plan(seed_ring: Ring) -> MigrationPlan:
    return build_plan(seed_ring, Replication.simple(2), Replication.network_topology({"dc1": 2}), keyspace="test")


def test_table_is_padded_markdown() -> None:
    text = markdown_table(("a", "long header"), [("x|y", 1), ("wide value", "")])
    lines = text.splitlines()
    assert lines[0] == "| a          | long header |"
    assert lines[1] == "| ---------- | ----------- |"
    assert lines[2] == "| x\\|y       | 1           |"  # a pipe in a cell is escaped, not a new column
    assert len({len(line) for line in lines}) == 1


def test_approval_starts_with_the_verdict_and_shows_cql_and_json(seed_plan: MigrationPlan) -> None:
    text = approval_markdown(seed_plan, migration_id="test@run1", plan_picture="/plans/test.svg")
    first = text.splitlines()[0]
    affected = seed_plan.diff.affected_count()
    assert first.startswith("## SAFE to apply") and f"{affected} of {seed_plan.total_ranges}" in first
    assert "`{'class': 'SimpleStrategy', 'replication_factor': '2'}`" in text  # CQL
    assert '`{"class": "NetworkTopologyStrategy", "dc1": 2}`' in text  # JSON, as the trigger form takes it
    assert "{'class': 'NetworkTopologyStrategy', 'dc1': 2}" not in text  # never Python's dict repr
    assert "\n| node " in text and "\n| range " in text
    for change in seed_plan.affected:
        assert str(change.range) in text
    assert "test@run1" in text and "/plans/test.svg" in text
    assert text.index("## SAFE") < text.index("### Placement change") < text.index("### After approval")


def test_approval_lists_a_bounded_number_of_ranges() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    plan = build_plan(ring, Replication.simple(1), Replication.network_topology({"dc1": 2, "dc2": 2}), keyspace="ks")
    text = approval_markdown(plan, migration_id="ks@r")
    rows = [line for line in text.splitlines() if line.startswith("| (")]
    assert len(rows) == min(RANGE_ROWS, len(plan.affected))
    if len(plan.affected) > RANGE_ROWS:
        assert f"and {len(plan.affected) - RANGE_ROWS} more" in text


def test_approval_of_a_staged_route_numbers_its_alters() -> None:
    ring = load_ring_file(RINGS / "two_dc.json")
    old = Replication.network_topology({"dc1": 2, "dc2": 0})
    plan = build_plan(ring, old, Replication.network_topology({"dc1": 0, "dc2": 2}), keyspace="ks")
    text = approval_markdown(plan, migration_id="ks@r")
    assert f"Staged route: {len(plan.steps)} ALTERs" in text
    for index, step in enumerate(plan.steps, 1):
        assert f"{index}. `{step.to_cql()}`" in text


def test_refusal_keeps_problem_and_fix_apart() -> None:
    text = refusal_markdown("change of `ks`", "Datacenter 'dc9' is not in the ring.", "Use the ring's datacenters.")
    assert text.splitlines()[0] == "## REFUSED: change of `ks`"
    assert "Nothing was changed" in text
    assert text.index("**Problem**") < text.index("dc9") < text.index("**Fix**") < text.index("Use the ring")


def test_stage_seconds_keep_tasks_that_ran_in_dag_order() -> None:
    rows = [
        {"task_id": "report", "state": "success", "duration": 0.42, "map_index": -1},
        {"task_id": "step_1.repair", "state": "success", "duration": 12.34, "map_index": -1},
        {"task_id": "step_2.alter", "state": "skipped", "duration": None, "map_index": -1},
        {"task_id": "precheck", "state": "success", "duration": 3.0, "map_index": -1},
        {"task_id": "step_1.verify_preview", "state": "failed", "duration": 1.0, "map_index": -1},
    ]
    order = ["precheck", "step_1.repair", "step_1.verify_preview", "step_2.alter", "report"]
    assert stage_seconds(rows, order) == {
        "precheck": 3.0,
        "step_1.repair": 12.3,
        "step_1.verify_preview": 1.0,
        "report": 0.4,
    }
    assert list(stage_seconds(rows, order)) == ["precheck", "step_1.repair", "step_1.verify_preview", "report"]


def test_report_reads_as_a_summary_without_null_entries(seed_plan: MigrationPlan) -> None:
    report = {
        "migration_id": "test@run1",
        "keyspace": "test",
        "from": seed_plan.old.as_json(),
        "to": seed_plan.new.as_json(),
        "steps": [seed_plan.new.as_json()],
        "ranges_moved": 6,
        "total_ranges": 12,
        "started_at": "2026-11-23T22:00:00+00:00",
        "finished_at": "2026-11-23T22:05:07+00:00",
        "total_seconds": 307.0,
        "stage_seconds": {"precheck": 3.0, "step_1.repair": 40.0},
        "repairs": {"step_1.repair": {"ranges": 6, "repaired": 6}},
        "verification": {
            "step_1.verify_preview": {"preview_ranges_in_sync": 6},
            "step_1.verify_counts": {"users": {"rows_verified": 50, "not_in_sync": []}},
        },
        "cleaned_nodes": ["127.0.0.2"],
    }
    text = migration_report_markdown(report)
    assert text.splitlines()[0] == "## Migration `test@run1` done in 5m07s"
    assert "| step_1.repair | 40s  |" in text and "| precheck      | 3s   |" in text
    assert "users: rows verified 50, not in sync none" in text
    assert "6 of 12" in text and "2026-11-23 22:00:00" in text
    assert "Cleanup ran on: 127.0.0.2." in text
    assert "None" not in text and "null" not in text


# -- names from users and the cluster are text, never Markdown or HTML (security review, issue 25, finding 11) --
HOSTILE = "dc`<img src=x onerror=alert(1)>`[x](javascript:alert(2))"


def _html(markdown: str) -> str:
    """The Markdown as a CommonMark renderer that passes raw HTML through shows it (the worst case)."""
    return MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)


def _hostile_ring(seed_ring: Ring) -> Ring:
    return Ring.of(Node(n.address, HOSTILE, n.rack, n.tokens) for n in seed_ring.nodes)


def test_markdown_escape_and_code_spans_keep_any_text_literal() -> None:
    from ringward.markdown import markdown_code, markdown_escape

    assert markdown_escape("dc1") == "dc1" and markdown_escape("127.0.0.2") == "127.0.0.2"
    assert markdown_escape("<b>a_b*</b>") == "&lt;b&gt;a\\_b\\*&lt;/b&gt;"
    assert markdown_escape("a\nb|c") == "a b\\|c"
    assert markdown_code("ks") == "`ks`"
    assert markdown_code("a`b") == "``a`b``"
    assert markdown_code("`x``") == "``` `x`` ```"
    for text in (HOSTILE, "`", "a\nb", "<script>alert(1)</script>"):
        html = _html(f"before {markdown_code(text)} after {markdown_escape(text)}")
        assert "<img" not in html and "<script" not in html and "<a " not in html


def test_hostile_names_stay_text_in_the_approval(seed_ring: Ring) -> None:
    ring = _hostile_ring(seed_ring)
    plan = build_plan(ring, Replication.simple(1), Replication.network_topology({HOSTILE: 2}), keyspace="test")
    text = approval_markdown(plan, migration_id=f"test@{HOSTILE}", plan_picture=f"/plans/{HOSTILE}.svg")
    html = _html(text)
    assert "<img" not in html and "<a " not in html
    assert html.count("&lt;img src=x onerror=alert(1)&gt;") >= 4  # shown, as text: settings, id, picture


def test_hostile_names_stay_text_in_a_refusal_and_the_report(seed_plan: MigrationPlan) -> None:
    refusal = refusal_markdown("change of `ks`", f"Datacenter {HOSTILE!r} is not in the ring.", f"Use {HOSTILE}.")
    report = migration_report_markdown({
        "migration_id": f"test@{HOSTILE}", "keyspace": HOSTILE, "from": seed_plan.old.as_json(),
        "to": seed_plan.new.as_json(), "ranges_moved": 1, "total_ranges": 12,
        "verification": {"step_1.verify_counts": {HOSTILE: {"rows_verified": 1}}}, "cleaned_nodes": [HOSTILE],
    })  # fmt: skip
    for text in (refusal, report):
        html = _html(text)
        assert "<img" not in html and "<a " not in html and "&lt;img src=x onerror=alert(1)&gt;" in html
