"""One night of the real `nightly_subrange_repair` DAG, through Airflow (`dag.test()`), on a simulated fleet.

The DAG file is the shipped one, and so are its operators. This process puts the simulator under them
(`use_runtime(SimulatedRuntime(...))` around `dag.test()`, which runs the tasks in this process): they get the
simulator's ring, catalog, nodetool (sessions in virtual time), clock and in-memory ops store instead of their
connections'. Nothing outside this process can do that: no connection or setting selects the simulator. Airflow
runs the tasks, records the task instances and XComs in its metadata database, exactly as on a real cluster.

Prints (or writes with --json) what issue 23 asks of a night at fleet size: Airflow task instances, the largest
XCom, ops-store rows written/read and the largest partition, the plan task's CPU seconds, the simulated time
until every due segment was repaired, and whether every table is covered within its gc_grace.

With --nights N the DAG runs N nights one after another in this process, on one simulator (its ring, virtual
clock and ops store carry over): the second night sees the first night's history. The figures are then a list.
With --seed-history HOURS the ops store first holds a repaired record of every segment the shipped
configuration plans, finished HOURS before the night: the history a steady-state night reads, without
running the nights before it (at fleet size a night's repair is hours of CPU here). Its writes are not
counted in the figures.

Run: uv run python benchmarks/fleet/airflow_night.py --spec SPEC.json [--json out.json] [--nights N]
(AIRFLOW_HOME must hold a migrated metadata database; `make test` and the benchmark driver set one up.)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
for folder in ("include", "plugins", "tools/fleetsim"):
    if str(ROOT / folder) not in sys.path:
        sys.path.insert(0, str(ROOT / folder))

DAG_ID = "nightly_subrange_repair"


def run_nights(
    spec: Path,
    conf: dict[str, Any] | None = None,
    nights: int = 1,
    plan_only: bool = False,
    seed_hours: float | None = None,
) -> list[dict[str, Any]]:
    """`nights` nights on the fleet of `spec`, one after another in this process (one simulator); with
    `seed_hours`, after `seed_history`."""
    if seed_hours is not None:
        from ringward_fleetsim import simulator_for

        seed_history(simulator_for(str(spec)), seed_hours)
    return [run_night(spec, conf, night, plan_only) for night in range(nights)]


def seed_history(simulator: Any, hours_ago: float) -> int:
    """Record every segment the shipped configuration plans on the simulator's ring as repaired (DONE, full)
    `hours_ago` before its clock's now, in run "seeded"; the store's counters restart after. Segments seeded."""
    from ringward.repair import RecordUpdate, SegmentRecord, SegmentState, load_config
    from ringward_cassandra.cluster_repairs import plan_cluster

    plan = plan_cluster(simulator.catalog(), simulator.ring(), load_config())
    finished = simulator.clock.now() - timedelta(hours=hours_ago)
    started = finished - timedelta(seconds=2)
    store = simulator.ops_store()

    def repaired(segment: Any) -> Any:
        record = SegmentRecord(segment.segment_id, SegmentState.DONE, last_success=finished,
                               last_full_success=finished, attempts=1, duration=2.0, run_id="seeded")  # fmt: skip
        return RecordUpdate(segment, record, started, finished)

    updates = [repaired(segment) for segment in plan.segments]
    store.record_repairs(updates)
    store.reset_stats()
    return len(updates)


def run_night(
    spec: Path, conf: dict[str, Any] | None = None, night: int = 0, plan_only: bool = False
) -> dict[str, Any]:
    """Run one night on the fleet of `spec` in this process; the figures of the run. `night`: how many
    nights ran before this one in this process (each gets a logical date of its own). `plan_only`: the plan
    task runs, the repair and report tasks are marked success without running (dag.test's
    mark_success_pattern): the plan task's figures at a size whose repair would take hours here."""
    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    from airflow.dag_processing.dagbag import DagBag
    from ringward_airflow.repair_runtime import use_runtime
    from ringward_fleetsim import simulator_for
    from ringward_fleetsim.runtime import SimulatedRuntime

    dag = DagBag(dag_folder=str(ROOT / "dags" / f"{DAG_ID}.py")).dags[DAG_ID]
    simulator = simulator_for(str(spec))
    started_wall, started_cpu = time.monotonic(), time.process_time()
    logical_date = datetime.now(UTC) + timedelta(seconds=night)
    skipped = "^(repair|report)$" if plan_only else None
    with use_runtime(SimulatedRuntime(simulator)):  # the tasks run in this process, on the simulator
        dag_run = dag.test(logical_date=logical_date, run_conf=conf or {}, mark_success_pattern=skipped)
    wall, cpu = time.monotonic() - started_wall, time.process_time() - started_cpu
    tasks, xcoms = _airflow_records(dag_run.run_id)
    summary = xcoms.get(("plan", "summary"), {}).get("value") or {}
    repaired = xcoms.get(("repair", "return_value"), {}).get("value") or {}
    report = xcoms.get(("report", "return_value"), {}).get("value") or {}
    store = simulator.ops_store()
    ops_figures = store.stats()  # before this function's own reads of the history below
    return {
        "spec": simulator.spec.describe(),
        "run_id": dag_run.run_id,
        "state": str(dag_run.state),
        "task_instances": len(tasks),
        "task_states": tasks,
        "largest_xcom_bytes": max((x["bytes"] for x in xcoms.values()), default=0),
        "largest_xcom": max(xcoms, key=lambda k: xcoms[k]["bytes"], default=None),
        "planning_cpu_seconds": summary.get("planning_cpu_seconds"),
        "segments": summary.get("segments"),
        "due": summary.get("due"),
        "plan_chunks": summary.get("chunks"),
        "repair_counts": repaired.get("counts"),
        "replans": repaired.get("replans"),
        "simulated_seconds": repaired.get("run_seconds"),  # the repair task's run on the virtual clock
        "run_state": report.get("state"),
        "repair_types": [
            entry[0] for entry in (xcoms.get(("plan", "return_value"), {}).get("value") or {}).get("types", [])
        ],
        "plan_types": {
            kind: {k: v for k, v in entry.items() if k != "plan_id"}
            for kind, entry in (summary.get("types") or {}).items()
        },
        "repair_counts_by_type": repaired.get("types"),
        "report_types": {
            kind: {
                "state": entry.get("state"),
                "metrics": entry.get("metrics"),
                "out_of_sync_findings": entry.get("out_of_sync_findings"),
            }
            for kind, entry in (report.get("types") or {}).items()
        },
        "history_of_run": history_of_run(store, dag_run.run_id),
        "preview_findings": preview_findings(store, dag_run.run_id),
        "metrics": report.get("metrics"),
        "tables": len(report.get("tables") or {}),
        "tables_fully_repaired": sum(1 for v in (report.get("tables") or {}).values() if v == "100.0%"),
        "ops_store": ops_figures,
        # The simulator's own counters, cumulative over the nights this process ran on it.
        "repair_sessions": simulator.cluster.stats.sessions,
        "node_session_seconds": dict(
            zip(simulator.cluster.addresses, simulator.cluster.stats.node_seconds, strict=True)
        ),
        "sessions": sessions_of(store.repair_history()) if len(simulator.ring().nodes) <= 12 else None,
        "wall_seconds": round(wall, 1),
        "process_cpu_seconds": round(cpu, 1),
    }


def history_of_run(store: Any, run_id: str) -> dict[str, dict[str, int]]:
    """Per repair type, the states of the history records the run wrote (each type keeps its own history)."""
    from ringward.repair import REPAIR_TYPES

    figures: dict[str, dict[str, int]] = {}
    for kind in REPAIR_TYPES:
        rows = store.repair_history() if kind == "full" else store.repair_history(repair_type=kind)
        states: dict[str, int] = {}
        for row in rows:
            if row.record.run_id == run_id:
                states[row.record.state.value] = states.get(row.record.state.value, 0) + 1
        figures[kind] = states
    return figures


def preview_findings(store: Any, run_id: str) -> dict[str, int]:
    """Per "keyspace.table", how many findings the run's preview kept (ranges found out of sync)."""
    found: dict[str, int] = {}
    for finding in store.preview_findings():
        if finding.run_id == run_id:
            name = f"{finding.keyspace}.{finding.table}"
            found[name] = found.get(name, 0) + 1
    return found


def sessions_of(rows: Any) -> list[list[Any]]:
    """The repair sessions a history shows: the segments that started together on one coordinator, as
    [keyspace, [tables], coordinator, [[start, end], ...]], sorted (to compare two clusters' nights)."""
    sessions: dict[tuple[Any, ...], list[list[int]]] = {}
    for row in rows:
        key = (row.keyspace, tuple(row.tables), row.coordinator, row.started_at.isoformat() if row.started_at else "")
        sessions.setdefault(key, []).append([row.range.start, row.range.end])
    return sorted([k[0], list(k[1]), k[2], sorted(ranges)] for k, ranges in sessions.items())


def _airflow_records(run_id: str) -> tuple[dict[str, str], dict[tuple[str, str], dict[str, Any]]]:
    """Task instance states and XComs (with their stored size) of the run, from Airflow's database."""
    from airflow.models.taskinstance import TaskInstance
    from airflow.models.xcom import XComModel
    from airflow.utils.session import create_session

    with create_session() as session:
        tis = session.query(TaskInstance).filter(TaskInstance.dag_id == DAG_ID, TaskInstance.run_id == run_id).all()
        tasks = {f"{ti.task_id}[{ti.map_index}]" if ti.map_index >= 0 else ti.task_id: str(ti.state) for ti in tis}
        rows = session.query(XComModel).filter(XComModel.dag_id == DAG_ID, XComModel.run_id == run_id).all()
        xcoms = {
            (row.task_id, row.key): {"bytes": len(json.dumps(row.value, default=str)), "value": _loaded(row.value)}
            for row in rows
        }
    return tasks, xcoms


def _loaded(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--spec", type=Path, required=True, help="fleet spec JSON (ringward_fleetsim.FleetSpec)")
    parser.add_argument("--conf", default="{}", help="the DAG run's conf (JSON)")
    parser.add_argument("--json", type=Path, help="write the figures there as JSON")
    parser.add_argument("--nights", type=int, default=1, help="nights one after another (figures: a list)")
    parser.add_argument("--plan-only", action="store_true", help="run the plan task only (repair and report "
                        "are marked success without running)")  # fmt: skip
    parser.add_argument("--plan-chunk-rows", type=int, help="segments per stored plan chunk (default: the shipped "
                        "PLAN_CHUNK_ROWS), to give a small fleet's plan several windows")  # fmt: skip
    parser.add_argument("--window-chunks", type=int, help="plan chunks the repair task reads at a time (default: "
                        "the shipped RepairRunOperator.WINDOW_CHUNKS)")  # fmt: skip
    parser.add_argument("--seed-history", type=float, metavar="HOURS", help="first record every planned segment "
                        "as repaired HOURS ago (25: every segment due again, as on a steady-state night)")  # fmt: skip
    args = parser.parse_args()
    if args.plan_chunk_rows or args.window_chunks:  # the tasks run in this process: the operators see these
        from ringward_airflow import repair_operators

        if args.plan_chunk_rows:
            repair_operators.PLAN_CHUNK_ROWS = args.plan_chunk_rows
        if args.window_chunks:
            repair_operators.RepairRunOperator.WINDOW_CHUNKS = args.window_chunks
    nights = run_nights(args.spec, json.loads(args.conf), args.nights, args.plan_only, args.seed_history)
    figures: Any = nights[0] if args.nights == 1 else nights
    text = json.dumps(figures, indent=2, default=str)
    if args.json:
        args.json.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
