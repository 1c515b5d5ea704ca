"""What a person reads about a migration, as Markdown: the approval request, a refusal, the final report.

Airflow renders the approval body (HITL) as Markdown; the log and the task's rendered fields show the
text as it is, so every table is padded to read as plain text too. Every name from a user or the cluster
goes in through `ringward.markdown` (escaped text or a code span), never as Markdown or HTML. Pure: the
operators hand in the plan, the record and Airflow's own task-instance facts.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ringward.markdown import markdown_code, markdown_escape
from ringward.plan import MigrationPlan
from ringward.repair import format_duration
from ringward.replication import Replication

__all__ = [
    "RANGE_ROWS",
    "approval_markdown",
    "markdown_table",
    "migration_report_markdown",
    "refusal_markdown",
    "stage_seconds",
]

# The approval lists at most this many changed ranges (a big ring changes thousands; the counts say the rest).
RANGE_ROWS = 24

# Task-instance states of a stage that ran (skipped stages, e.g. steps the route does not have, are left out).
_RAN = frozenset({"success", "failed"})


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A GitHub-flavoured Markdown table with padded columns (it reads as plain text as well)."""
    cells = [[_cell(value) for value in header], *[[_cell(value) for value in row] for row in rows]]
    widths = [max(3, *(len(row[i]) for row in cells)) for i in range(len(header))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |" for row in cells]
    lines.insert(1, "| " + " | ".join("-" * w for w in widths) + " |")
    return "\n".join(lines)


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _cql(replication: Replication | Mapping[str, Any] | str) -> str:
    """A replication setting as CQL writes it (`{'class': ..., 'dc1': '2'}`), in backticks."""
    parsed = replication if isinstance(replication, Replication) else Replication.parse(replication)
    return markdown_code(parsed.to_cql())


def _json(replication: Replication | Mapping[str, Any] | str) -> str:
    parsed = replication if isinstance(replication, Replication) else Replication.parse(replication)
    return markdown_code(json.dumps(parsed.as_json()))


def approval_markdown(plan: MigrationPlan, *, migration_id: str, plan_picture: str | None = None) -> str:
    """The approval request: the verdict first, then the settings, the placement change and what follows."""
    warnings = [f for f in plan.findings if f.severity == "warn"]
    verdict = "SAFE to apply" if plan.safe and not warnings else "SAFE to apply, with warnings"
    if not plan.safe:  # a refused plan never reaches the approval; said plainly should it ever happen
        verdict = "REFUSED"
    affected, total = plan.diff.affected_count(), plan.total_ranges
    lines = [
        f"## {verdict}: {affected} of {total} ranges of {markdown_code(plan.keyspace)} change replicas",
        "",
        markdown_table(
            ("", "replication (CQL)", "as JSON (trigger form)"),
            [("from", _cql(plan.old), _json(plan.old)), ("to", _cql(plan.new), _json(plan.new))],
        ),
        "",
    ]
    if len(plan.steps) > 1:
        lines += [f"**Staged route: {len(plan.steps)} ALTERs**, each repaired and verified before the next:", ""]
        lines += [f"{i}. {_cql(step)}" for i, step in enumerate(plan.steps, 1)]
        lines.append("")
    if warnings:
        lines += ["### Warnings", ""]
        lines += [f"- **{f.code}**: {markdown_escape(f.message)}"
                  + (f" *Fix:* {markdown_escape(f.fix)}" if f.fix else "") for f in warnings]  # fmt: skip
        lines.append("")
    nodes = plan.node_changes()
    if nodes:
        lines += ["### Placement change per node", ""]
        lines.append(markdown_table(("node", "gains ranges", "loses ranges"),
                                    [(markdown_escape(a), c.gained, c.lost) for a, c in nodes.items()]))  # fmt: skip
        lines.append("")
    window = {level: n for level, n in plan.read_window_counts().items() if n}
    if window:
        lines += ["Ranges that may read empty at these consistency levels until the repair finishes: "
                  + ", ".join(f"{level} {n}" for level, n in window.items()), ""]  # fmt: skip
    changed = plan.affected
    if changed:
        lines += ["### Ranges that change replicas", ""]
        rows = [(str(c.range), _nodes(c.old) or "(none)", _nodes(c.new) or "(none)", _nodes(c.gained),
                 _nodes(c.lost)) for c in changed[:RANGE_ROWS]]  # fmt: skip
        lines.append(markdown_table(("range", "old replicas", "new replicas", "gains", "loses"), rows))
        if len(changed) > RANGE_ROWS:
            lines.append(f"\n… and {len(changed) - RANGE_ROWS} more (the precheck's log has the full table).")
        lines.append("")
    lines += [
        "### After approval",
        "",
        "Per ALTER: full repair of the affected ranges (old placement), the ALTER, full repair of the same ranges "
        "(new placement), then verification. `nodetool cleanup` runs last, only on nodes that lose ranges.",
        "",
        f"Migration id: {markdown_code(migration_id)} (give it to `keyspace_migration_rollback` to undo before "
        "cleanup).",
    ]
    if plan_picture:
        lines.append(f"Ring picture of the change: {markdown_code(plan_picture)}")
    return "\n".join(lines)


def refusal_markdown(subject: str, problem: str, fix: str) -> str:
    """A refused change: what was refused, why, and what to do; the cluster was left unchanged. `subject` is
    Markdown (names in it through `markdown_code`); `problem` and `fix` are text, shown as they are (they
    quote what the user gave), one Markdown line per line of theirs."""
    lines = [f"## REFUSED: {subject}", "", "Nothing was changed on the cluster.", "", "**Problem**", "",
             _text(problem)]  # fmt: skip
    if fix:
        lines += ["", "**Fix**", "", _text(fix)]
    return "\n".join(lines)


def _text(text: str) -> str:
    """Plain text of several lines as Markdown: each line escaped, kept a line of its own (a hard break)."""
    return "  \n".join(markdown_escape(line) for line in text.splitlines())


def _nodes(addresses: Iterable[str]) -> str:
    return ", ".join(markdown_escape(a) for a in addresses)


def stage_seconds(task_instances: Iterable[Mapping[str, Any]], order: Sequence[str]) -> dict[str, float]:
    """Seconds per task that ran, in `order` (the DAG's task order), from Airflow's task-instance rows
    (`task_id`, `state`, `duration`). Skipped tasks and tasks with no duration are left out."""
    ran = {
        str(ti["task_id"]): round(float(ti["duration"]), 1)
        for ti in task_instances
        if ti.get("state") in _RAN and ti.get("duration") is not None and ti.get("map_index", -1) in (-1, None)
    }
    position = {task_id: i for i, task_id in enumerate(order)}
    return {task_id: ran[task_id] for task_id in sorted(ran, key=lambda t: (position.get(t, len(order)), t))}


def migration_report_markdown(report: Mapping[str, Any]) -> str:
    """The final report (the operator's JSON report, keys as `MigrationReportOperator` writes them)."""
    total = report.get("total_seconds")
    took = f" in {format_duration(float(total))}" if total is not None else ""
    lines = [
        f"## Migration {markdown_code(report['migration_id'])} done{took}",
        "",
        markdown_table(
            ("", ""),
            [
                ("keyspace", markdown_code(report["keyspace"])),
                ("from", _cql(report["from"])),
                ("to", _cql(report["to"])),
                ("ALTER steps", " -> ".join(_cql(step) for step in report.get("steps", []))),
                ("ranges that changed replicas", f"{report['ranges_moved']} of {report['total_ranges']}"),
                *([("started", _when(report["started_at"]))] if report.get("started_at") else []),
                *([("finished", _when(report["finished_at"]))] if report.get("finished_at") else []),
            ],
        ),
    ]
    stages = report.get("stage_seconds") or {}
    if stages:
        lines += ["", "### Stages (Airflow task instances, last try)", ""]
        lines.append(markdown_table(("task", "took"), [(t, format_duration(s)) for t, s in stages.items()]))
    repairs = report.get("repairs") or {}
    if repairs:
        lines += ["", "### Repairs", ""]
        rows = [(task, r.get("ranges", "?"), r.get("repaired", "?")) for task, r in repairs.items()]
        lines.append(markdown_table(("task", "affected ranges", "repaired by its last try"), rows))
    verification = report.get("verification") or {}
    if verification:
        lines += ["", "### Verification", ""]
        results = [(markdown_escape(t), markdown_escape(_result(r))) for t, r in verification.items()]
        lines.append(markdown_table(("task", "result"), results))
    cleaned = report.get("cleaned_nodes")
    if cleaned is not None:
        lines += ["", f"Cleanup ran on: {_nodes(cleaned) or 'no node (none lost ranges)'}."]
    return "\n".join(lines)


def _when(value: str) -> str:
    try:
        return datetime.fromisoformat(value).strftime("%Y-%m-%d %H:%M:%S %Z").strip()
    except ValueError:
        return value


def _result(value: object) -> str:
    """A verification result in words: `users: replica checks 2, rows verified 50, not in sync none`."""
    if isinstance(value, Mapping):
        if not value:
            return "nothing to check (no replica gained ranges)"
        nested = any(isinstance(item, Mapping) for item in value.values())
        joiner = "; " if nested else ", "
        separator = ": " if nested else " "
        return joiner.join(f"{str(key).replace('_', ' ')}{separator}{_result(item)}" for key, item in value.items())
    if isinstance(value, list | tuple):
        return ", ".join(map(str, value)) or "none"
    return str(value)
