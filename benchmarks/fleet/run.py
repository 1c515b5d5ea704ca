"""Fleet benchmark (issue 23): CEP-37 AutoRepair, Reaper and ringward's nightly repair side by side, in one
process, on one simulated cluster spec, with the same duration model and faults (tools/fleetsim).

Default: 1000 nodes x 256 vnodes x 3 DCs (NTS 3/3/3), 10 keyspaces x 20 tables, one node down for 6 h from
t = 1 h. `--medium`: 100 nodes x 16 vnodes with tables a tenth the size (the same data per node);
`--small`: the local seed cluster (3 nodes, num_tokens 4, the autorepair benchmark's keyspaces).

Prints per scheduler: simulated time until every (table, range) was repaired once, sessions, busiest node,
whether every table was covered within its gc_grace, the simulation's CPU time; the ratios ringward/CEP-37
and ringward/Reaper; ringward's planning CPU seconds.

Two ringward rows, both on the plan task's own plan (`plan_cluster`: outlier tables in units of their own):
`ringward` is the pure executor in this process; `dag` is the real `nightly_subrange_repair` DAG through
Airflow (`airflow_night.py` in a child process with a throwaway Airflow home), as operators run it.
The `dag` row adds what issue 23 asks of the real DAG: task instances, largest XCom, ops rows and largest
partition, the plan task's CPU. Its coverage is the repair task's simulated time, counted only when the report
finds every table fully repaired (a table left for the next night is "not covered").

Run: uv run python benchmarks/fleet/run.py [--medium | --small | --spec FILE] [--keyspaces N] [--no-fault]
     [--only cep37,reaper,ringward,dag] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins"), str(ROOT / "tools" / "fleetsim")]

from ringward.repair import load_config  # noqa: E402
from ringward_fleetsim import Faults, FleetSpec, NodeDown, SchedulerResult, run_cep37, run_reaper  # noqa: E402
from ringward_fleetsim.ringward_run import run_ringward  # noqa: E402

HOUR = 3600.0


def build_spec(args: argparse.Namespace) -> FleetSpec:
    if args.spec:
        return FleetSpec.load(args.spec)
    if args.small:
        spec = FleetSpec.small()
    elif args.medium:
        spec = FleetSpec.fleet(nodes=100, vnodes=16, table_bytes_median=FleetSpec().table_bytes_median // 10)
    else:
        spec = FleetSpec.fleet()
    if args.keyspaces is not None:
        spec = dataclasses.replace(spec, keyspaces=args.keyspaces, keyspace_names=())
    if args.no_fault:
        return spec
    victim = spec.initial_nodes()[0].address
    return dataclasses.replace(spec, faults=Faults(down=(NodeDown(victim, 1 * HOUR, 7 * HOUR),)))


def run_dag(spec: FleetSpec) -> tuple[SchedulerResult, dict[str, Any]]:
    """One night of the real DAG on `spec` through Airflow, in a child process with an Airflow home of its own;
    the result in the anchors' shape, and the night's Airflow figures."""
    from ringward_cli.airflow_env import ensure_airflow_db

    with tempfile.TemporaryDirectory(prefix="ringward-fleet-dag-") as scratch:
        home = Path(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_")}
        env.update({"AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                    "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{home}/airflow.db",
                    "AIRFLOW__CORE__DAGS_FOLDER": str(ROOT / "dags"),
                    "AIRFLOW__CORE__PLUGINS_FOLDER": str(ROOT / "plugins")})  # fmt: skip
        ensure_airflow_db(env)
        spec.dump(home / "spec.json")
        subprocess.run(
            [sys.executable, str(ROOT / "benchmarks" / "fleet" / "airflow_night.py"), "--spec", str(home / "spec.json"),
             "--json", str(home / "night.json")],
            env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        night: dict[str, Any] = json.loads((home / "night.json").read_text())
    covered = night["tables"] > 0 and night["tables_fully_repaired"] == night["tables"]
    coverage = night["simulated_seconds"] if covered else None
    written, read = (sum(night["ops_store"][key].values()) for key in ("rows_written", "rows_read"))
    result = SchedulerResult(
        "ringward DAG", coverage_seconds=coverage, sessions=night["repair_sessions"],
        failed_sessions=(night["repair_counts"] or {}).get("FAILED", 0),
        node_session_seconds=night["node_session_seconds"],
        # Every table was fully repaired by the end of the night: covered by then at the latest.
        table_covered={t.qualified: coverage for t in spec.table_specs()} if coverage is not None else {},
        uncovered_ranges=0 if covered else -1, wall_seconds=night["process_cpu_seconds"],  # its child's CPU
        planning_cpu_seconds=night["planning_cpu_seconds"] or 0.0,
    )  # fmt: skip
    result.notes.append(
        f"{night['task_instances']} task instances {night['task_states']}; largest XCom "
        f"{night['largest_xcom_bytes']:,} B {night['largest_xcom']}; ops rows written/read {written:,}/{read:,}; "
        f"largest ops partition {night['ops_store']['largest_partition']}; plan task CPU "
        f"{night['planning_cpu_seconds']} s; {night['due']:,} segments due in {night['plan_chunks']} plan chunks, "
        f"repaired {night['repair_counts']}; {night['tables_fully_repaired']}/{night['tables']} tables fully "
        f"repaired; process CPU {night['process_cpu_seconds']} s, {night['wall_seconds']} s wall"
    )
    return result, night


def hours(seconds: float | None) -> str:
    return "not covered" if seconds is None else f"{seconds / HOUR:,.2f} h"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--medium", action="store_true", help="100 nodes x 16 vnodes")
    size.add_argument("--small", action="store_true", help="the local seed cluster")
    size.add_argument("--spec", help="a FleetSpec JSON file")
    parser.add_argument("--no-fault", action="store_true", help="no node down")
    parser.add_argument("--keyspaces", type=int, help="this many keyspaces instead of the spec's")
    parser.add_argument("--only", default="cep37,reaper,ringward")
    parser.add_argument("--config", help="ringward repair configuration YAML (default: the shipped one)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    spec = build_spec(args)
    chosen = set(args.only.split(","))
    print(f"spec: {spec.describe()}; faults: {spec.faults}")
    results: dict[str, SchedulerResult] = {}
    started = time.monotonic()
    if "cep37" in chosen:
        results["cep37"] = run_cep37(spec)
        print(f"  CEP-37 simulated in {results['cep37'].wall_seconds:.1f} s CPU", flush=True)
    if "reaper" in chosen:
        results["reaper"] = run_reaper(spec)
        print(f"  Reaper simulated in {results['reaper'].wall_seconds:.1f} s CPU", flush=True)
    if "ringward" in chosen:
        config = load_config(args.config) if args.config else load_config()
        results["ringward"] = run_ringward(spec, config)
        print(f"  ringward simulated in {results['ringward'].wall_seconds:.1f} s CPU", flush=True)
    night: dict[str, Any] | None = None
    if "dag" in chosen:
        results["dag"], night = run_dag(spec)
        print(
            f"  the real DAG ran through Airflow in {results['dag'].wall_seconds:.1f} s CPU",
            flush=True,
        )
    gc_grace = {t.qualified: t.gc_grace for t in spec.table_specs()}
    print()
    print(f"{'scheduler':<12} {'coverage':>14} {'sessions':>11} {'failed':>8} {'busiest node':>24} "
          f"{'gc_grace ok':>11} {'sim CPU':>9}")  # fmt: skip
    for result in results.values():
        node, busy = result.busiest_node()
        print(f"{result.name:<12} {hours(result.coverage_seconds):>14} {result.sessions:>11,} "
              f"{result.failed_sessions:>8,} {f'{node} {busy / HOUR:,.1f} h':>24} "
              f"{result.covered_within_gc_grace(gc_grace)!s:>11} {result.wall_seconds:>8.1f}s")  # fmt: skip
    for result in results.values():
        for note in result.notes:
            print(f"  {result.name}: {note}")
    for mine in ("ringward", "dag"):
        ours = results.get(mine)
        if ours is None or ours.coverage_seconds is None:
            continue
        for key in ("cep37", "reaper"):
            other = results.get(key)
            if other is not None and other.coverage_seconds:
                print(f"{ours.name} / {other.name}: {ours.coverage_seconds / other.coverage_seconds:.3f}")
        print(f"{ours.name} planning CPU: {ours.planning_cpu_seconds:.1f} s")
    print(f"total wall time: {time.monotonic() - started:.0f} s")
    if args.json:
        payload = {
            "spec": json.loads(spec.to_json()),
            "results": {
                key: {
                    "coverage_seconds": r.coverage_seconds,
                    "sessions": r.sessions,
                    "failed_sessions": r.failed_sessions,
                    "busiest_node_seconds": r.busiest_node()[1],
                    "covered_within_gc_grace": r.covered_within_gc_grace(gc_grace),
                    "simulation_cpu_seconds": r.wall_seconds,
                    "planning_cpu_seconds": r.planning_cpu_seconds,
                    "notes": r.notes,
                }
                for key, r in results.items()
            },
            "dag_night": night,
        }
        Path(args.json).write_text(json.dumps(payload, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
