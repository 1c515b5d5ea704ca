"""What each page shows, as plain data (the JSON endpoints return it; `pages.py` renders it as HTML).

Built with ringward's own code from what ringward stores: the migration's plan is rebuilt from the ring and
settings its precheck stored in ringward_ops (so any API server draws it), progress comes from the journal,
repair coverage from repair_history, the ring from the live cluster.
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from ringward.errors import RingwardError
from ringward.migration import migration_steps, repair_segments
from ringward.migration_record import MigrationRecord
from ringward.plan import MigrationPlan, build_plan
from ringward.repair import (
    Exclusion,
    SegmentState,
    coverage_entries,
    format_duration,
    load_config,
    repair_scope,
    status_config,
)
from ringward.ring_picture import render_ring_svg
from ringward.ring_sources import ring_from_json
from ringward.svg import render_placement_svg, render_repair_svg
from ringward_cassandra.cluster_repairs import status_records, table_statuses
from ringward_cassandra.ops_store import REPAIR_SWITCH, MigrationRow, OpsStore

from ringward_airflow.ui.source import Source

__all__ = [
    "MIGRATION_DAGS",
    "REPAIR_DAG",
    "RunAccess",
    "StoredStateError",
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


def _seconds(value: float | None) -> str:
    return "-" if value is None else format_duration(value)


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
            "altered": step.index <= altered, "stages": stages,
            "verification": _verification(xcoms, step.index),
        })  # fmt: skip
    changes = plan.ranges
    data = {
        "dag_id": dag_id, "run_id": run_id, "found": True, "run": run,
        "migration_id": found.migration_id, "keyspace": plan.keyspace, "state": state,
        "updated_at": _iso(found.updated_at), "started_at": record.get("started_at"),
        "old": plan.old.to_cql(), "new": plan.new.to_cql(), "safe": plan.safe,
        "rollback_of": record.get("rollback_of"),
        "stored_steps": [str(s) for s in record.get("steps", [])],
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
    return data, render_placement_svg(plan)


def _altered_steps(state: str, count: int) -> int:
    if state.startswith("altered:"):
        return int(state.split(":", 1)[1])
    return count if state in ("cleaned", "done") else 0


def _dag_run(source: Source, dag_id: str, run_id: str | None) -> dict[str, Any] | None:
    try:
        run = source.dag_run(dag_id, run_id)
    except Exception as error:  # the metadata database is Airflow's; its absence must not hide ringward's data
        return {"error": f"Airflow's metadata database could not be read: {error}"}
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
    """(the configuration to plan segments with, a note when the last run's could not be used).

    A configuration file that cannot be read raises its ConfigurationError (the page says which and why)."""
    base = load_config(os.environ.get(CONFIG_PATH_ENV) or None)
    last = runs[0] if runs else None
    chosen = status_config(base, last.config if last else None, last.run_id if last else None)
    return chosen.config, chosen.note


def _scope(source: Source, config: Any, plan: Any, runs: list[Any]) -> tuple[set[tuple[str, str]], list[Exclusion]]:
    """The keyspace.table pairs the nightly repair covers (the configuration's selection, narrowed to what
    the recent runs selected) and what it leaves out, with the reason; selected tables without a segment (every
    range has one replica) are left out too, with the planner's reason."""
    covered, excluded = repair_scope(source.schema(), config, [(run.run_id, run.config) for run in runs])
    planned = set(plan.tables())
    skipped: dict[str, str] = {}
    for item in plan.skipped_ranges:
        skipped.setdefault(item.keyspace, item.reason)
    for keyspace, reason in sorted(plan.excluded_keyspaces.items()):
        excluded.append(Exclusion(keyspace, None, f"skipped: {reason}"))
    unplanned = [pair for pair in covered if pair not in planned and pair[0] not in plan.excluded_keyspaces]
    for keyspace in sorted({ks for ks, _ in unplanned}):
        tables = [t for ks, t in unplanned if ks == keyspace]
        why = f"no segment to repair: {skipped.get(keyspace, 'no range needs a session')}"
        if len(tables) == 1:
            excluded.append(Exclusion(keyspace, tables[0], why))
        else:
            excluded.append(Exclusion(keyspace, None, f"{len(tables)} tables, {why}"))
    return set(covered) & planned, excluded


def repair_view(source: Source, table: str | None = None, failing_only: bool = False) -> tuple[dict[str, Any], str]:
    """(the page's data, the ring coloured by repair age of `table`, default the least covered)."""
    now = datetime.now(UTC)
    store = source.ops()
    runs = _stored("repair_runs", store.repair_runs) if store else []
    history = _stored("repair_history", store.repair_history) if store else []
    events = _stored("repair_switch", lambda: store.switch_events(REPAIR_SWITCH)) if store else []
    config, config_note = _repair_config(runs)
    plan = source.repair_plan(config)
    covered, excluded = _scope(source, config, plan, runs)
    records = status_records(plan, history)  # repairs under any splitter count
    statuses = [s for s in table_statuses(plan, records, now, config.gc_grace_alarm)
                if (s.keyspace, s.table) in covered]  # fmt: skip
    tables = [
        {"table": f"{s.keyspace}.{s.table}", "repaired": s.repaired_percent, "repaired_share": s.repaired_share,
         "oldest": "never" if s.never_repaired else (_seconds(s.oldest_age.total_seconds()) if s.oldest_age else "-"),
         "oldest_success": _iso(s.oldest_success), "deadline": _iso(s.deadline),
         "never_repaired": s.never_repaired, "failing": s.failing_segments, "health": s.health}
        for s in statuses
    ]  # fmt: skip
    chosen = _chosen(statuses, table)
    svg = "<svg xmlns='http://www.w3.org/2000/svg' width='400' height='40'><text x='10' y='25'>no table to repair"
    svg += "</text></svg>"
    if chosen is not None:
        mine = [s for s in plan.segments if s.keyspace == chosen.keyspace and
                (not s.tables or chosen.table in s.tables)]  # fmt: skip
        entries = coverage_entries(mine, records, chosen.gc_grace_seconds, now)
        title = f"{chosen.keyspace}.{chosen.table}: {chosen.repaired_percent} repaired within gc_grace"
        svg = render_repair_svg(entries, title=title)
    run = _dag_run(source, REPAIR_DAG, None)
    current = _current_run(run, history, now)
    segments = [
        {"keyspace": r.keyspace, "tables": list(r.tables), "range": [r.range.start, r.range.end],
         "state": r.record.state.value, "replicas": list(r.replicas), "coordinator": r.coordinator,
         "seconds": r.record.duration, "attempts": r.record.attempts, "last_error": r.record.last_error,
         "run_id": r.record.run_id, "started_at": _iso(r.started_at), "finished_at": _iso(r.finished_at),
         "last_full_success": _iso(r.record.last_full_success)}
        for r in sorted(history, key=lambda r: (r.keyspace, r.tables, r.range.start))
        if not failing_only or r.record.state is SegmentState.FAILED
    ]  # fmt: skip
    paused = bool(events and events[0].paused)
    data = {
        "ops_keyspace": store is not None,
        "tables": tables, "coverage_table": f"{chosen.keyspace}.{chosen.table}" if chosen else None,
        "current_run": current, "segments": segments, "failing_only": failing_only,
        "failing_total": sum(1 for r in history if r.record.state is SegmentState.FAILED),
        "switch": {"paused": paused, "events": [
            {"paused": e.paused, "changed_at": _iso(e.changed_at), "changed_by": e.changed_by, "reason": e.reason}
            for e in events]},
        "config_enabled": config.enabled, "config_note": config_note,
        "excluded": [{"name": e.name, "keyspace": e.keyspace, "table": e.table, "reason": e.reason}
                     for e in excluded],
        "runs": [{"run_id": r.run_id, "state": r.state, "updated_at": _iso(r.updated_at),
                  "tables": r.summary.get("tables", {})} for r in runs[:10]],
    }  # fmt: skip
    return data, svg


def _chosen(statuses: list[Any], table: str | None) -> Any:
    if not statuses:
        return None
    if table:
        for status in statuses:
            if f"{status.keyspace}.{status.table}" == table:
                return status
    return min(statuses, key=lambda s: s.repaired_share if s.repaired_share is not None else 2.0)


_FINISHED = {SegmentState.DONE.value, SegmentState.FAILED.value}


def _current_run(run: dict[str, Any] | None, history: list[Any], now: datetime) -> dict[str, Any] | None:
    """The latest nightly run: segments finished of those its plan found due, and an ETA at the pace so far."""
    if run is None or "error" in run:
        return run
    plan = (run.get("xcoms") or {}).get("plan:summary") or {}
    mine = [r for r in history if r.record.run_id == run["run_id"]]
    states = Counter(r.record.state.value for r in mine)
    due = int(plan.get("due", 0))
    finished = sum(n for state, n in states.items() if state in _FINISHED)
    total = max(due, finished)
    starts = [r.started_at for r in mine if r.started_at]
    elapsed = (now - min(starts)).total_seconds() if starts else None
    running = run["state"] in ("running", "queued")
    eta = None
    if running and finished and elapsed and total > finished:
        eta = elapsed / finished * (total - finished)
    return {
        "run_id": run["run_id"], "state": run["state"], "start": run["start"], "end": run["end"],
        "due": due, "total": total, "finished": finished, "counts": dict(states),
        "percent": round(100.0 * finished / total, 1) if total else 100.0,
        "elapsed_seconds": elapsed, "eta_seconds": eta, "eta": _seconds(eta) if running else "-",
        "planned_segments": plan.get("segments"), "batches": plan.get("batches"),
    }  # fmt: skip


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
