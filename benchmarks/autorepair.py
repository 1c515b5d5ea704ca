"""Nightly repair against Cassandra's own CEP-37 AutoRepair, on one cluster and the same data (issue 18, item 3).

The seed cluster (3 nodes, dc1 over two racks) starts with AutoRepair scheduling on but its full repair
switched off, so it repairs nothing until its turn. Several keyspaces (NTS dc1: 2) x tables are loaded at
CL ALL; before each contender, hints are off and 127.0.0.3 is down while a share of new rows is written at
CL ONE, so every contender finds the replicas out of sync by the same amount. Contenders, in turn:

- `nodetool repair -full -pr KS` on every node in turn, for every keyspace (the operator's reference).
- ringward's nightly repair with its shipped defaults (the configuration selecting the benchmark keyspaces), as
  its schedule runs it in a running Airflow (api-server, scheduler, dag-processor, triggerer): the DAG is
  unpaused and the scheduler starts the scheduled run it missed; unpause -> run success, and the run's own
  start -> end as Airflow records it.
- AutoRepair, configured for speed (check interval 5 s, initial delay 5 s, everything else its defaults):
  full repair switched on with `nodetool setautorepairconfig` on every node -> every node's full-repair
  turn recorded finished in system_distributed.auto_repair_history.

Each is "time until every range of every table is repaired". Targets: ringward <= 0.8x AutoRepair and
<= 1.0x the -pr reference. AutoRepair also repairs the system_distributed/system_auth/system_traces
keyspaces (small here); ringward and -pr repair the benchmark keyspaces only.

Run: uv run python benchmarks/autorepair.py [--megabytes 60] [--drift 0.05]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins"), str(ROOT / "tests" / "integration")]

from airflow_stack import AirflowStack, critical_path, start_stack  # noqa: E402
from cluster_workload import Workload, autorepair  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.localcluster.topology import PRESETS_DIR  # noqa: E402
from ringward_cassandra.ops_store import OpsStore  # noqa: E402

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
DOWN = "127.0.0.3"
KEYSPACES = ["ar_a", "ar_b", "ar_c"]
TABLES = ["t1", "t2"]
ROW_BYTES = 1024
NIGHTLY = "nightly_subrange_repair"
WORKLOAD = Workload(NODES, DOWN, KEYSPACES, TABLES, {"dc1": 2}, ROW_BYTES)


def topology_file(directory: Path) -> Path:
    """The seed ring, with AutoRepair scheduling on (JVM flag and yaml) and its full repair off until asked."""
    seed = json.loads((PRESETS_DIR / "seed.json").read_text())
    seed.update(
        name="seed-autorepair",
        auto_repair=["full"],
        auto_repair_settings={
            "repair_check_interval": "5s",
            # A node AutoRepair has no history of is recorded as just repaired (force_repair_new_node: false),
            # and min_repair_interval (24 h) would then hold its first turn off for a day: both changed.
            "repair_type_overrides": {
                "full": {
                    "enabled": False,
                    "initial_scheduler_delay": "5s",
                    "min_repair_interval": "1s",
                    "force_repair_new_node": True,
                }
            },
        },
    )
    path = directory / "seed-autorepair.json"
    path.write_text(json.dumps(seed))
    return path


def scheduled_run(stack: AirflowStack) -> str:
    """The run id of the scheduled run the scheduler starts after the first unpause."""
    found: list[str] = []

    def listed() -> bool:
        runs = stack.runs(NIGHTLY)
        found[:] = [run["dag_run_id"] for run in runs if run["run_type"] == "scheduled"]
        return bool(found)

    stack.wait_until(listed, 120, "the nightly DAG's scheduled run")
    return found[0]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=60, help="data per table before replication")
    parser.add_argument("--drift", type=float, default=0.05, help="share of rows written while a replica is down")
    parser.add_argument("--task-logs", action="store_true", help="print ringward's task logs (where the time goes)")
    args = parser.parse_args()
    rows = args.megabytes * 1024 * 1024 // ROW_BYTES
    extra = int(rows * args.drift)
    cluster = LocalCluster()
    cluster.down(purge=True)
    topologies = tempfile.TemporaryDirectory()  # kept for the run: restarting a node reads it again
    try:
        cluster.up(str(topology_file(Path(topologies.name))), heap_mb=1024)
        nodetool = dataclasses.replace(cluster.nodetool_client(), java_classpath=None)  # what an operator runs
        WORKLOAD.load(rows)
        # ringward's own keyspace (ringward_ops) is created by the first run ever on a cluster (~15 s of DDL and
        # schema agreement); every nightly run after it finds it. Created here, before any timing.
        with connect(NODES) as session:
            OpsStore(session).ensure_schema([("dc1", len(NODES))])
        results: dict[str, float] = {}
        WORKLOAD.drift(cluster, nodetool, range(rows, rows + extra))
        results["nodetool repair -full -pr, node by node"] = WORKLOAD.primary_range_repairs(nodetool)
        # The nightly run as a deployment has it: the scheduled run, with the shipped configuration selecting
        # the benchmark keyspaces (what -pr repairs). Unpausing the DAG makes the scheduler start the scheduled
        # run it missed (the latest); timed from the unpause to that run's success, and as Airflow records it.
        for stack in start_stack(nightly_keyspaces=KEYSPACES):
            WORKLOAD.drift(cluster, nodetool, range(rows + extra, rows + 2 * extra))
            started = time.monotonic()
            stack.set_paused(NIGHTLY, False)
            run_id = scheduled_run(stack)
            run = stack.wait_for_state(NIGHTLY, run_id, {"success", "failed"}, timeout=7200)
            results["ringward nightly (scheduler, defaults)"] = time.monotonic() - started
            stack.set_paused(NIGHTLY, True)
            if run["state"] != "success":
                print(stack.describe(NIGHTLY, run_id))
                return 1
            recorded = datetime.fromisoformat(run["end_date"]) - datetime.fromisoformat(run["start_date"])
            results["ringward nightly, run start -> end (Airflow)"] = recorded.total_seconds()
            work, gaps, path = critical_path(stack.task_instances(NIGHTLY, run_id))
            breakdown = [f"critical path: tasks running {work:.1f}s + gaps between them {gaps:.1f}s"]
            breakdown += [f"  {task:<10} gap {gap:5.1f}s  run {seconds:6.1f}s" for task, gap, seconds in path]
            if args.task_logs:
                for task, *_ in path:
                    print(f"--- {task} ---\n{stack.log(NIGHTLY, run_id, task, 1, timestamps=True)}")
        WORKLOAD.drift(cluster, nodetool, range(rows + 2 * extra, rows + 3 * extra))
        results["AutoRepair (full, check 5 s)"] = autorepair(nodetool, NODES, timeout=3600)
        reference = results["nodetool repair -full -pr, node by node"]
        auto = results["AutoRepair (full, check 5 s)"]
        ours = results["ringward nightly (scheduler, defaults)"]
        print(f"\n{len(KEYSPACES)} keyspaces x {len(TABLES)} tables x {rows} rows ({args.megabytes} MB per table), "
              f"NTS dc1: 2 on the seed ring, {extra} rows per table written with {DOWN} down before each")  # fmt: skip
        for name, seconds in results.items():
            print(f"  {name:<42} {seconds:8.1f}s")
        print("ringward's scheduled run, " + "\n".join(breakdown))
        print(f"ringward / AutoRepair: {ours / auto:.2f} (target <= 0.8: {'met' if ours <= 0.8 * auto else 'NOT met'})")
        print(f"ringward / -pr:        {ours / reference:.2f} (target <= 1.0: "
              f"{'met' if ours <= reference else 'NOT met'})")  # fmt: skip
        recorded = results["ringward nightly, run start -> end (Airflow)"]
        print(
            f"ringward's run as Airflow records it: {recorded / reference:.2f}x -pr, {recorded / auto:.2f}x AutoRepair"
        )
    finally:
        cluster.down(purge=True)
        topologies.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
