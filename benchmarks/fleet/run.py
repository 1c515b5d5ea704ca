"""Fleet benchmark (issues 23, 40): ringward's nightly repair beside models of CEP-37 AutoRepair and Reaper (their
rules, cited to their sources in tools/fleetsim/ringward_fleetsim/anchors.py: models, not the tools), in one
process, on one simulated cluster spec, with the same duration model and faults (tools/fleetsim), and the lower
bound no scheduler beats under that model (ringward_fleetsim/bound.py).

Rows (`--only` keys): `cep37` / `reaper`: the peer's rules with its shipped defaults (CEP-37 as Cassandra 5.0.9
ships it, Reaper 4.2.x with its packaged cassandra-reaper.yaml); `cep37_eq` / `reaper_eq`: the same rules with
ringward's shipped concurrency and intensity (equal budget; what that sets: `run_cep37` / `run_reaper`);
`ringward`; `dag`; `bound` (a row of its own; the bound and each row's efficiency = bound / row time are printed
beside every row anyway).

Default: 1000 nodes x 256 vnodes x 3 DCs (NTS 3/3/3), 10 keyspaces x 20 tables, one node down for 6 h from
t = 1 h. `--medium`: 100 nodes x 16 vnodes with tables a tenth the size (the same data per node);
`--small`: the local seed cluster (3 nodes, num_tokens 4, the autorepair benchmark's keyspaces).

Prints per scheduler: simulated time until every (table, range) was repaired once, the lower bound and the
row's efficiency, sessions, busiest node, whether every table was covered within its gc_grace, the simulation's
CPU time; the ratios ringward / each peer row; ringward's planning CPU seconds. A peer row whose simulated time
passes `--max-hours` is stopped and shown as "> X h (stopped)".

Two ringward rows, both on the plan task's own plan (`plan_cluster`: outlier tables in units of their own):
`ringward` is the pure executor in this process; `dag` is the real `nightly_subrange_repair` DAG through
Airflow (`airflow_night.py` in a child process with a throwaway Airflow home), as operators run it.
The `dag` row adds what issue 23 asks of the real DAG: task instances, largest XCom, ops rows and largest
partition, the plan task's CPU. Its coverage is the repair task's simulated time, counted only when the report
finds every table fully repaired (a table left for the next night is "not covered").

Run: uv run python benchmarks/fleet/run.py [--medium | --small | --spec FILE] [--keyspaces N] [--no-fault]
     [--only cep37,cep37_eq,reaper,reaper_eq,ringward,dag,bound] [--max-hours H] [--json OUT]
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins"), str(ROOT / "tools" / "fleetsim")]

from ringward.repair import load_config  # noqa: E402
from ringward_fleetsim import (  # noqa: E402
    DurationModel,
    Faults,
    FleetSpec,
    LowerBound,
    NodeDown,
    SchedulerResult,
    lower_bound,
    run_cep37,
    run_reaper,
)
from ringward_fleetsim.ringward_run import run_ringward  # noqa: E402

HOUR = 3600.0
LABELS = {
    "cep37": "modelled (rules of CEP-37 5.0.9, shipped defaults)",
    "cep37_eq": "modelled (rules of CEP-37 5.0.9, equal budget)",
    "reaper": "modelled (rules of Reaper 4.2.x, shipped defaults)",
    "reaper_eq": "modelled (rules of Reaper 4.2.x, equal budget)",
    "ringward": "ringward (pure executor)",
    "dag": "ringward DAG (through Airflow)",
}
PEERS = ("cep37", "cep37_eq", "reaper", "reaper_eq")
KEYS = (*LABELS, "bound")


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


def cost_model(choice: str) -> DurationModel:
    """`assumed` | `calibrated` (the refit, benchmarks/calibrate_terms.py) | `calibrated3` (the first three-term fit,
    benchmarks/calibrate_cost.py), then `,xF` for every cost F times as large or `,fF` for the fixed terms alone
    (command, session, per-table, per-range, in-process overheads; the rates as they are): the sensitivity rows."""
    name, _, scale = choice.partition(",")
    if name not in ("assumed", "calibrated", "calibrated3") or (scale and scale[:1] not in ("x", "f")):
        raise SystemExit(
            f"--cost {choice!r}: expected assumed, calibrated or calibrated3, optionally ,xF or ,fF "
            "(e.g. calibrated,x0.5, calibrated,f3)"
        )
    models = {"assumed": DurationModel, "calibrated": DurationModel.calibrated,
              "calibrated3": DurationModel.calibrated_three_terms}  # fmt: skip
    model = models[name]()
    if not scale:
        return model
    return model.scaled(float(scale[1:])) if scale[0] == "x" else model.scaled_fixed(float(scale[1:]))


def hours(seconds: float | None, stopped_at: float | None = None) -> str:
    if seconds is None:
        return "not covered" if stopped_at is None else f"> {stopped_at / HOUR:,.0f} h (stopped)"
    return f"{seconds / HOUR:,.2f} h"


def efficiency(bound: LowerBound, result: SchedulerResult) -> str:
    return "-" if not result.coverage_seconds else f"{bound.seconds / result.coverage_seconds:.3f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--medium", action="store_true", help="100 nodes x 16 vnodes")
    size.add_argument("--small", action="store_true", help="the local seed cluster")
    size.add_argument("--spec", help="a FleetSpec JSON file")
    parser.add_argument("--no-fault", action="store_true", help="no node down")
    parser.add_argument("--keyspaces", type=int, help="this many keyspaces instead of the spec's")
    parser.add_argument("--only", default="cep37,cep37_eq,reaper,reaper_eq,ringward,bound")
    parser.add_argument("--max-hours", type=float, default=24 * 365.0,
                        help="stop a peer's simulation at this simulated time (reported as > H h)")  # fmt: skip
    parser.add_argument("--config", help="ringward repair configuration YAML (default: the shipped one)")
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--cost", default="assumed",
                        help="the duration model: `assumed` (DurationModel's defaults), `calibrated` (fitted on real "
                             "sessions by benchmarks/calibrate_terms.py) or `calibrated3` (the first fit, "
                             "benchmarks/calibrate_cost.py), optionally `xF` scaled (e.g. calibrated,x3) or `fF` "
                             "(the fixed terms alone, e.g. calibrated,f3): "
                             "every row runs on the same model")  # fmt: skip
    args = parser.parse_args()
    spec = build_spec(args)
    chosen = set(args.only.split(","))
    unknown = chosen - set(KEYS)
    if unknown:
        parser.error(f"--only: unknown {', '.join(sorted(unknown))}; choose from {', '.join(KEYS)}")
    if "dag" in chosen and args.cost != "assumed":
        parser.error("--only dag runs the DAG's simulator on the assumed cost model: leave dag out with --cost")
    model = cost_model(args.cost)
    print(f"spec: {spec.describe()}; faults: {spec.faults}; cost model: {args.cost} {model}")
    results: dict[str, SchedulerResult] = {}
    started = time.monotonic()
    max_time = args.max_hours * HOUR
    config = load_config(args.config) if args.config else load_config()
    bound = lower_bound(spec, model, budget=config)
    peers: dict[str, Callable[[], SchedulerResult]] = {
        "cep37": lambda: run_cep37(spec, model, max_time=max_time),
        "cep37_eq": lambda: run_cep37(spec, model, equal_budget=True, budget=config, max_time=max_time),
        "reaper": lambda: run_reaper(spec, model, max_time=max_time),
        "reaper_eq": lambda: run_reaper(spec, model, equal_budget=True, budget=config, max_time=max_time),
    }
    for key, run in peers.items():
        if key in chosen:
            results[key] = run()
            results[key].name = LABELS[key]
            print(f"  {LABELS[key]} simulated in {results[key].wall_seconds:.1f} s CPU", flush=True)
    if "ringward" in chosen:
        results["ringward"] = run_ringward(spec, config, model)
        results["ringward"].name = LABELS["ringward"]
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
    width = max((len(r.name) for r in results.values()), default=10)
    print(f"{'scheduler':<{width}} {'coverage':>18} {'bound':>9} {'efficiency':>10} {'sessions':>11} {'failed':>8} "
          f"{'busiest node':>24} {'gc_grace ok':>11} {'sim CPU':>9}")  # fmt: skip
    for key, result in results.items():
        node, busy = result.busiest_node()
        stopped = max_time if key in PEERS else None
        print(f"{result.name:<{width}} {hours(result.coverage_seconds, stopped):>18} {bound.seconds / HOUR:>7.2f} h "
              f"{efficiency(bound, result):>10} {result.sessions:>11,} {result.failed_sessions:>8,} "
              f"{f'{node} {busy / HOUR:,.1f} h':>24} {result.covered_within_gc_grace(gc_grace)!s:>11} "
              f"{result.wall_seconds:>8.1f}s")  # fmt: skip
    if "bound" in chosen:
        print(f"{'lower bound':<{width}} {hours(bound.seconds):>18} {bound.seconds / HOUR:>7.2f} h {1:>10.3f}  "
              f"work {bound.work_seconds / HOUR:.2f} h (node {bound.busiest_node}), sessions "
              f"{bound.fewest_sessions:,} x the least session cost / {bound.max_sessions} = "
              f"{bound.session_seconds / HOUR:.2f} h")  # fmt: skip
    for result in results.values():
        for note in result.notes:
            print(f"  {result.name}: {note}")
    for mine in ("ringward", "dag"):
        ours = results.get(mine)
        if ours is None or ours.coverage_seconds is None:
            continue
        for key in PEERS:
            other = results.get(key)
            if other is not None and other.coverage_seconds:
                print(f"{ours.name} / {other.name}: {ours.coverage_seconds / other.coverage_seconds:.3f}")
        print(f"{ours.name} planning CPU: {ours.planning_cpu_seconds:.1f} s")
    print(f"total wall time: {time.monotonic() - started:.0f} s")
    if args.json:
        payload = {
            "spec": json.loads(spec.to_json()),
            "lower_bound": dataclasses.asdict(bound),
            "max_hours": args.max_hours,
            "results": {
                key: {
                    "label": r.name,
                    "coverage_seconds": r.coverage_seconds,
                    "efficiency": bound.seconds / r.coverage_seconds if r.coverage_seconds else None,
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
