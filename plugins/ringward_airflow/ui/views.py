"""What each page shows, as plain data (the JSON endpoints return it; `pages.py` renders it as HTML).

Built with ringward's own code from what ringward stores: the migration's plan is rebuilt from the ring and
settings its precheck stored in ringward_ops (so any API server draws it), progress comes from the journal,
repair coverage from the nightly runs' stored reports and live progress, the ring from the live cluster.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from ringward.errors import RingwardError
from ringward.migration import migration_steps, repair_segments
from ringward.migration_record import MigrationRecord
from ringward.plan import MigrationPlan, build_plan
from ringward.repair import (
    REPAIR_TYPES,
    Exclusion,
    load_config,
    progress_figures,
    repair_scope,
    reported_coverage,
    reported_types,
    status_config,
)
from ringward.ring_picture import render_ring_svg
from ringward.ring_sources import ring_from_json
from ringward.svg import render_placement_svg, xml_text
from ringward_cassandra.ops_store import REPAIR_SWITCH, MigrationRow, OpsStore

from ringward_airflow.ui.airflow_reads import AirflowAccessRefused
from ringward_airflow.ui.formats import format_replication
from ringward_airflow.ui.source import Source

__all__ = [
    "MIGRATION_DAGS",
    "REPAIR_DAG",
    "RunAccess",
    "StoredStateError",
    "by_type_view",
    "cluster_view",
    "migration_view",
    "repair_view",
]

MIGRATION_DAGS = ("keyspace_migration", "keyspace_migration_rollback")
REPAIR_DAG = "nightly_subrange_repair"
CONFIG_PATH_ENV = "RINGWARD_REPAIR_CONFIG"
T = TypeVar("T")
RANGE_ROWS = 1000  # range and segment tables show at most this many rows (the JSON has all)


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


# -- migration -------------------------------------------------------------------------------------------


class StoredStateError(RingwardError):
    """A row of ringward_ops this ringward cannot read (written by hand, or by another version)."""


def _stored(table: str, read: Callable[[], T]) -> T:
    """`read()` of ringward_ops.`table`; a row that cannot be parsed is named as such, with the fix."""
    try:
        return read()
    except (KeyError, TypeError, ValueError) as error:  # json.loads, an unknown enum value, a missing column
        raise StoredStateError(
            f"A row of ringward_ops.{table} cannot be read ({type(error).__name__}: {error}).",
            f"It was written by hand or by another ringward version: find it with SELECT * FROM ringward_ops.{table} "
            "and correct or delete it.",
        ) from error


def _checked_record(row: MigrationRow) -> MigrationPlan:
    """The plan of a stored migration; a record or state ringward cannot read is refused with its fix."""
    try:
        MigrationRecord.from_json(row.record, row.state)  # checks every field, and the state, as a resume does
        return rebuilt_plan(row.record)
    except RingwardError as error:
        raise StoredStateError(f"Migration {row.migration_id} (ringward_ops.migrations): {error.problem}",
                               error.fix) from error  # fmt: skip
    except (KeyError, TypeError, ValueError) as error:
        raise StoredStateError(
            f"Migration {row.migration_id} (ringward_ops.migrations): its record cannot be read "
            f"({type(error).__name__}: {error}).",
            "Rerun the migration from a fresh precheck (clear the precheck task).",
        ) from error


def find_migration(store: OpsStore, dag_id: str, run_id: str) -> MigrationRow | None:
    """The migration run `run_id` of `dag_id` owns: its record names exactly that DAG and that run.

    Nothing looser: the page is served under the permission to read `dag_id`, so a record of another DAG, or one
    without a DAG, or one whose id merely ends with the run id, must not be shown under it."""
    if dag_id not in MIGRATION_DAGS:
        return None
    for row in _stored("migrations", store.migrations):
        if row.record.get("dag_id") == dag_id and row.record.get("run_id") == run_id:
            return row
    return None


def _taken_over(store: OpsStore, dag_id: str, run_id: str) -> str | None:
    """The run of the same DAG that took over the migration `run_id` started (resumed it), if any."""
    for row in _stored("migrations", store.migrations):
        record = row.record
        if record.get("dag_id") == dag_id and row.migration_id == f"{record.get('keyspace')}@{run_id}":
            return str(record.get("run_id") or "") or None
    return None


@dataclass(frozen=True)
class RunAccess:
    """What of a DAG run the user may see beyond the run itself, as Airflow's own API asks for it: its XComs
    (XCom read permission) and its task instances (task instance read permission)."""

    xcoms: bool = True
    task_instances: bool = True


def rebuilt_plan(record: dict[str, Any]) -> MigrationPlan:
    ring = ring_from_json(record["ring"])
    return build_plan(ring, record["old"], record["new"], keyspace=record["keyspace"])


def migration_view(
    source: Source, dag_id: str, run_id: str, *, access: RunAccess = RunAccess()
) -> tuple[dict[str, Any], str | None]:
    """(the page's data, the placement SVG) of the migration a run planned; the SVG is None without one.

    `access`: what the user may read of the run besides the migration; nothing read from the rest is returned."""
    if dag_id not in MIGRATION_DAGS:  # no cluster or database read for a run of any other DAG
        return {
            "dag_id": dag_id, "run_id": run_id, "found": False, "run": None,
            "message": f"{dag_id} is not a ringward migration DAG: the Migration page shows runs of "
                       f"{' and '.join(MIGRATION_DAGS)}.",
        }, None  # fmt: skip
    store = source.ops()
    found = None if store is None else find_migration(store, dag_id, run_id)
    full_run = _dag_run(source, dag_id, run_id)
    run = _shown_run(full_run, dag_id, access)
    xcoms = ((full_run or {}).get("xcoms") or {}) if access.xcoms else {}
    if found is None or store is None:
        taken_over = None if store is None else _taken_over(store, dag_id, run_id)
        message = (
            f"This run's migration was resumed by run {taken_over}: its progress is on that run's Migration page."
            if taken_over else
            "No ringward migration is recorded for this run: its precheck has not stored a plan yet (a dry run "
            "or a refused precheck records none)."
        )  # fmt: skip
        return {
            "dag_id": dag_id, "run_id": run_id, "found": False, "run": run, "message": message,
            "taken_over_by": taken_over,
        }, None  # fmt: skip
    record = found.record
    plan = _checked_record(found)
    state = found.state
    journal = _stored("migration_journal", lambda: store.journal_of(found.migration_id))
    by_stage: dict[str, dict[Any, Any]] = {}
    for entry in journal:
        by_stage.setdefault(entry.step, {})[entry.range] = entry
    try:
        steps = migration_steps(plan)
    except RingwardError:
        steps = []
    altered = _altered_steps(state, len(steps))
    progress = []
    for step in steps:
        stages = []
        for phase, name in (("pre", "pre-repair"), ("post", "repair")):
            stage = f"{phase}_repair:{step.index}"
            entries = by_stage.get(stage, {})
            segments = repair_segments(plan.ring, step, plan.keyspace, phase)  # type: ignore[arg-type]
            rows = []
            for segment in segments:
                entry = entries.get(segment.range)
                rows.append({
                    "range": [segment.range.start, segment.range.end],
                    "replicas": list(segment.replicas),
                    "status": entry.status if entry else "pending",
                    "coordinator": entry.coordinator if entry else segment.replicas[0] if segment.replicas else "",
                    "attempts": entry.attempts if entry else 0,
                    "seconds": entry.seconds if entry else None,
                    "detail": entry.detail if entry else "",
                })  # fmt: skip
            counts = Counter(r["status"] for r in rows)
            stages.append({"stage": stage, "name": name, "total": len(rows), "done": counts.get("done", 0),
                           "failed": counts.get("failed", 0), "ranges": rows})  # fmt: skip
        progress.append({
            "index": step.index, "count": step.count, "before": step.before.to_cql(), "after": step.after.to_cql(),
            "after_shown": step.after.describe(),
            "altered": step.index <= altered, "stages": stages,
            "verification": _verification(xcoms, step.index),
        })  # fmt: skip
    changes = plan.ranges
    data = {
        "dag_id": dag_id, "run_id": run_id, "found": True, "run": run,
        "migration_id": found.migration_id, "keyspace": plan.keyspace, "state": state,
        "updated_at": _iso(found.updated_at), "started_at": record.get("started_at"),
        "old": plan.old.to_cql(), "new": plan.new.to_cql(), "safe": plan.safe,
        "old_shown": plan.old.describe(), "new_shown": plan.new.describe(),
        "rollback_of": record.get("rollback_of"),
        "stored_steps": [str(s) for s in record.get("steps", [])],
        "stored_steps_shown": [format_replication(s) for s in record.get("steps", [])],
        "summary": record.get("summary", ""),
        "affected_ranges": len(plan.affected), "total_ranges": plan.total_ranges,
        "findings": [f.to_json() for f in plan.findings],
        "ranges": [
            {"range": [c.range.start, c.range.end], "old": list(c.old), "new": list(c.new),
             "gained": list(c.gained), "lost": list(c.lost)}
            for c in changes
        ],
        "steps": progress,
        "xcoms_readable": access.xcoms,
        "cleanup": _cleanup(xcoms, state),
    }  # fmt: skip
    # The picture names the settings as the pages do (`NetworkTopologyStrategy {dc1: 3}`), from the typed plan.
    return data, render_placement_svg(plan)


def _altered_steps(state: str, count: int) -> int:
    if state.startswith("altered:"):
        return int(state.split(":", 1)[1])
    return count if state in ("cleaned", "done") else 0


def _dag_run(source: Source, dag_id: str, run_id: str | None) -> dict[str, Any] | None:
    try:
        run = source.dag_run(dag_id, run_id)
    except AirflowAccessRefused:  # the viewer may not read the run: the page's access error, not a note in it
        raise
    except Exception as error:  # Airflow's API failing must not hide ringward's own data: said in the run's place
        return {"error": f"Airflow's record of the run could not be read: {error}"}
    if run is None:
        return None
    return {
        "run_id": run.run_id, "state": run.state, "start": _iso(run.start), "end": _iso(run.end),
        "seconds": (run.end - run.start).total_seconds() if run.start and run.end else None,
        "tasks": [
            {"task_id": t.task_id, "map_index": t.map_index, "state": t.state, "start": _iso(t.start),
             "end": _iso(t.end), "seconds": t.seconds, "tries": t.tries}
            for t in run.tasks
        ],
        "xcoms": run.xcoms,
    }  # fmt: skip


def _shown_run(run: dict[str, Any] | None, dag_id: str, access: RunAccess) -> dict[str, Any] | None:
    """The run as the migration data returns it: never its raw XComs (Airflow's API serves them, under their
    permission); its task instances only to a user who may read them."""
    if run is None or "error" in run:
        return run
    shown = {k: v for k, v in run.items() if k != "xcoms"}
    hidden = []
    if not access.xcoms:
        hidden.append(f"The verification evidence and cleanup details come from this run's XComs: reading them needs "
                      f"the XCom read permission on {dag_id}.")  # fmt: skip
    if not access.task_instances:
        shown["tasks"] = []
        hidden.append(f"The task timings are this run's task instances: reading them needs the task instance read "
                      f"permission on {dag_id}.")  # fmt: skip
    shown["hidden"] = hidden
    return shown


def _verification(xcoms: dict[str, Any], index: int) -> dict[str, Any]:
    return {name: xcoms[f"step_{index}.{name}"] for name in ("verify_preview", "verify_counts")
            if f"step_{index}.{name}" in xcoms}  # fmt: skip


def _cleanup(xcoms: dict[str, Any], state: str) -> dict[str, Any]:
    nodes = xcoms.get("cleanup")
    done = state in ("cleaned", "done") and nodes is not None
    return {"done": state in ("cleaned", "done"), "nodes": nodes if done else None,
            "report": xcoms.get("report")}  # fmt: skip


# -- repair ----------------------------------------------------------------------------------------------


def _repair_config(runs: list[Any]) -> tuple[Any, str | None]:
    """(the configuration whose selection and kill switch the page shows, a note when the last run's could not
    be used).

    A configuration file that cannot be read raises its ConfigurationError (the page says which and why)."""
    base = load_config(os.environ.get(CONFIG_PATH_ENV) or None)
    last = runs[0] if runs else None
    chosen = status_config(base, last.config if last else None, last.run_id if last else None)
    return chosen.config, chosen.note


_PREVIEWS_SHOWN = 20  # the latest preview findings on the Repair page


def repair_view(source: Source) -> tuple[dict[str, Any], str]:
    """(the page's data, a picture of each table's coverage) from what the nightly repair stored: the reports of
    its runs (ringward_ops.repair_runs: per-table coverage, metrics) and the live progress of the running run
    (ringward_ops.repair_progress). Nothing is planned here, nor the repair history scanned: a request costs a
    few small reads whatever the size of the cluster (the page reloads every 15 s while a run goes on)."""
    store = source.ops()
    runs = _stored("repair_runs", store.repair_runs) if store else []
    events = _stored("repair_switch", lambda: store.switch_events(REPAIR_SWITCH)) if store else []
    config, config_note = _repair_config(runs)
    # The tables in scope: the schema the driver keeps (no query), the configuration's selection, narrowed to
    # what the recent runs selected.
    covered, excluded = repair_scope(source.schema(), config, [(run.run_id, run.config) for run in runs])
    latest = runs[0] if runs else None
    if latest is not None:
        for keyspace, why in sorted(dict(latest.summary.get("skipped_keyspaces") or {}).items()):
            excluded.append(Exclusion(keyspace, None, f"skipped by the latest run ({latest.run_id}): {why}"))
    reported = reported_coverage(runs)
    tables = []
    for keyspace, table in covered:
        name = f"{keyspace}.{table}"
        found = reported.get(name)
        tables.append({
            "table": name, "repaired": found[0] if found else None, "run_id": found[1] if found else None,
            "recorded_at": _iso(found[2]) if found else None,
        })  # fmt: skip
    run = _dag_run(source, REPAIR_DAG, None)
    progress = None
    if store is not None and run is not None and "error" not in run:
        progress = _stored("repair_progress", lambda: store.run_progress(run["run_id"]))
    paused = bool(events and events[0].paused)
    read_previews = getattr(store, "preview_findings", None) if store is not None else None
    findings = _stored("repair_previews", read_previews) if read_previews is not None else []
    previews = findings[:_PREVIEWS_SHOWN]
    data = {
        "ops_keyspace": store is not None,
        "latest_run": None if latest is None else {
            "run_id": latest.run_id, "state": latest.state, "updated_at": _iso(latest.updated_at),
            "metrics": latest.summary.get("metrics") or {},
        },
        "tables": tables,
        "by_type": by_type_view(runs, [f"{keyspace}.{table}" for keyspace, table in covered], findings),
        "current_run": _current_run(run, progress),
        "switch": {"paused": paused, "events": [
            {"paused": e.paused, "changed_at": _iso(e.changed_at), "changed_by": e.changed_by, "reason": e.reason}
            for e in events]},
        "config_enabled": config.enabled, "config_note": config_note,
        "excluded": [{"name": e.name, "keyspace": e.keyspace, "table": e.table, "reason": e.reason}
                     for e in excluded],
        "runs": [{"run_id": r.run_id, "state": r.state, "updated_at": _iso(r.updated_at),
                  "tables": r.summary.get("tables", {})} for r in runs[:10]],
        "previews": [{"table": f"{f.keyspace}.{f.table}", "out_of_sync_ranges": f.out_of_sync_ranges,
                      "ranges": ", ".join(f"({r.start}, {r.end}]" for r in f.ranges[:3])
                                + (f" and {len(f.ranges) - 3} more" if len(f.ranges) > 3 else ""),
                      "found_at": _iso(f.found_at), "run_id": f.run_id, "coordinator": f.coordinator}
                     for f in previews],
    }  # fmt: skip
    return data, coverage_svg(tables)


def by_type_view(runs: list[Any], tables: list[str], findings: list[Any]) -> dict[str, Any]:
    """Per repair type, per table in scope: the coverage the latest report of that type gave it (repaired
    within gc_grace; a preview's: compared), the repaired/unrepaired split of an incremental table (tablestats'
    Percent repaired, mean over the nodes and the lowest node's, read at the end of the run), and what the last
    preview of the table found: the ranges out of sync in that run's findings, none = in sync. From the stored
    reports and preview findings only (`runs` latest first)."""
    coverage: dict[tuple[str, str], dict[str, Any]] = {}
    shares: dict[str, dict[str, Any]] = {}
    # table -> (run id, recorded at) of its latest reported preview
    previewed: dict[str, tuple[str, datetime | None]] = {}
    kinds: set[str] = set()
    for run in runs:
        for kind, entry in reported_types(run.summary).items():
            if not isinstance(entry, Mapping) or kind not in REPAIR_TYPES:
                continue
            kinds.add(kind)
            covered = entry.get("previewed" if kind == "preview" else "repaired") or {}
            for table, share in covered.items() if isinstance(covered, Mapping) else ():
                coverage.setdefault((str(table), kind), {"share": str(share), "run_id": run.run_id})
                if kind == "preview":
                    previewed.setdefault(str(table), (run.run_id, run.updated_at))
            split = entry.get("repaired_share") or {}
            for table, share in split.items() if isinstance(split, Mapping) else ():
                if isinstance(share, Mapping):
                    shares.setdefault(str(table), {**share, "run_id": run.run_id})
    found: dict[tuple[str | None, str], list[Any]] = {}
    newest: dict[str, Any] = {}  # table -> its latest finding (findings come latest first)
    for finding in findings:
        name = f"{finding.keyspace}.{finding.table}"
        found.setdefault((finding.run_id, name), []).append(finding)
        newest.setdefault(name, finding)
    rows = []
    for table in tables:
        preview = None
        run_id = _last_preview_run(previewed.get(table), newest.get(table))
        if run_id is not None:
            in_run = found.get((run_id, table), [])
            preview = {"run_id": run_id, "out_of_sync_ranges": sum(f.out_of_sync_ranges for f in in_run),
                       "found_at": _iso(max(f.found_at for f in in_run)) if in_run else None}  # fmt: skip
        rows.append({
            "table": table,
            "coverage": {kind: coverage.get((table, kind)) for kind in REPAIR_TYPES if kind in kinds},
            "repaired_share": shares.get(table) if "incremental" in kinds else None,
            "last_preview": preview,
        })  # fmt: skip
    return {"types": [kind for kind in REPAIR_TYPES if kind in kinds], "tables": rows}


def _last_preview_run(reported: tuple[str, datetime | None] | None, newest: Any) -> str | None:
    """The run of a table's last preview: its latest report's, unless a finding was kept after that report (a run
    whose preview has not reported yet, or whose report failed)."""
    if newest is not None and (reported is None or reported[1] is None or newest.found_at > reported[1]):
        return str(newest.run_id) if newest.run_id is not None else None
    return reported[0] if reported is not None else None


def _percent(share: str | None) -> float | None:
    """ "40.0%" -> 40.0; None or "n/a" -> None."""
    try:
        return float(str(share).rstrip("%"))
    except ValueError:
        return None


def coverage_svg(tables: list[dict[str, Any]]) -> str:
    """One bar per table: the share of its ranges repaired within gc_grace, as the latest report gave it. Names and
    shares are element text only, escaped as they are written (`xml_text`)."""
    width, row = 640, 22
    height = 40 + row * max(1, len(tables))
    parts = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' font-family='Helvetica, Arial, "
        "sans-serif' font-size='12'>",
        "<text x='10' y='20' font-weight='bold'>Repaired within gc_grace, per table (latest report)</text>",
    ]
    if not tables:
        parts.append("<text x='10' y='45'>no table to repair</text>")
    for i, t in enumerate(tables):
        y = 32 + i * row
        percent = _percent(t["repaired"])
        label = t["repaired"] if t["repaired"] is not None else "not reported yet"
        colour = "#bbb" if percent is None else "#2b7a2b" if percent >= 100 else "#b9770e" if percent >= 50 \
            else "#c0392b"  # fmt: skip
        fill = 0 if percent is None else max(0.0, min(percent, 100.0)) * 3
        parts.append(
            f"<g class='table'><title>{xml_text(t['table'])}: {xml_text(label)}</title>"
            f"<text x='10' y='{y + 14}'>{xml_text(t['table'])}</text>"
            f"<rect x='250' y='{y + 2}' width='300' height='14' fill='#eee' stroke='#bbb'/>"
            f"<rect class='bar' x='250' y='{y + 2}' width='{fill:.1f}' height='14' fill='{colour}'/>"
            f"<text x='{560}' y='{y + 14}'>{xml_text(label)}</text></g>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _current_run(run: dict[str, Any] | None, progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """The latest nightly run (Airflow's) with the progress its repair task last stored: segments done, failed
    and postponed of the total, sessions running per node, the ETA the worker estimated."""
    if run is None or "error" in run:
        return run
    running = run["state"] in ("running", "queued")
    current: dict[str, Any] = {"run_id": run["run_id"], "state": run["state"], "start": run["start"], "end": run["end"],
                               "progress": None}  # fmt: skip
    if not progress:
        return current
    current["progress"] = progress_figures(progress, running)
    return current


# -- cluster ---------------------------------------------------------------------------------------------


def cluster_view(source: Source) -> tuple[dict[str, Any], str]:
    connection = source.connection()
    nodes = source.nodes()
    ring = source.ring()
    schema_versions = sorted({n.schema_version for n in nodes if n.schema_version})
    data = {
        "connection": {"conn_id": connection.conn_id, "conn_type": connection.conn_type,
                       "target": connection.target, "login_set": connection.login_set, "ssl": connection.ssl,
                       "local_dc": connection.local_dc, "protocol_version": connection.protocol_version},
        "nodes": [n.__dict__ | {"load": "-" if n.load_mib is None else f"{n.load_mib:.1f} MiB"} for n in nodes],
        "schema_agreement": len(schema_versions) <= 1,
        "datacenters": {dc: len(members) for dc, members in ring.datacenters().items()},
        "tokens": len(ring.sorted_tokens),
    }  # fmt: skip
    title = f"{len(ring.nodes)} nodes, {len(ring.sorted_tokens)} tokens: primary ranges by owner"
    return data, render_ring_svg(ring, title=title)
