"""End-to-end migration time through the running scheduler (issue 18, item 4).

The seed change (SimpleStrategy RF 2 -> NetworkTopologyStrategy dc1: 2) of a small keyspace on the embedded
seed cluster, triggered through Airflow's REST API exactly as the UI does (api-server, scheduler with
LocalExecutor, dag-processor and triggerer as separate processes), with `require_approval: false`; timed
from the trigger request to the run's success. Target: <= 60 s.

Where the time goes, from the task instances Airflow recorded: each task's run time and the gap before it
(scheduling, queueing, worker start-up), summed along the run's critical path; the reference is the same
tasks' run time alone (what the run would take with no orchestration at all), printed side by side.

Run: uv run python benchmarks/end_to_end.py [--rows 50] [--runs 2]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins"), str(ROOT / "tests" / "integration")]

from airflow_stack import at_time, critical_path, start_stack  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.seed_scenario import create_seed_keyspace  # noqa: E402

DAG = "keyspace_migration"
NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
TARGET_SECONDS = 60.0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=2, help="migrations in turn (the first pays cold start)")
    args = parser.parse_args()
    cluster = LocalCluster()
    cluster.down(purge=True)
    try:
        cluster.up("seed")
        for stack in start_stack():
            stack.set_paused(DAG, False)
            for run in range(1, args.runs + 1):
                keyspace = f"e2e_{run}"
                with connect(NODES) as session:
                    create_seed_keyspace(session, keyspace)
                conf = {
                    "keyspace": keyspace,
                    "replication": {"class": "NetworkTopologyStrategy", "dc1": 2},
                    "require_approval": False,
                }
                started = time.monotonic()
                run_id = stack.trigger(DAG, conf)
                state = stack.wait_for_state(DAG, run_id, {"success", "failed"}, timeout=900)
                wall = time.monotonic() - started
                if state["state"] != "success":
                    print(stack.describe(DAG, run_id))
                    return 1
                recorded = (at_time(state["end_date"]) - at_time(state["start_date"])).total_seconds()  # type: ignore[operator]
                work, gaps, path = critical_path(stack.task_instances(DAG, run_id))
                queued = (at_time(state["start_date"]) - at_time(state["queued_at"])).total_seconds()  # type: ignore[operator]
                print(f"\nrun {run} ({keyspace}): trigger -> success {wall:.1f}s (target <= {TARGET_SECONDS:.0f}s: "
                      f"{'met' if wall <= TARGET_SECONDS else 'NOT met'}); Airflow's run start -> end {recorded:.1f}s, "
                      f"queued -> running {queued:.1f}s")  # fmt: skip
                print(f"critical path: tasks running {work:.1f}s + gaps between them {gaps:.1f}s; "
                      f"wall / tasks alone = {wall / work:.2f}")  # fmt: skip
                for task, gap, seconds in path:
                    print(f"  {task:<32} gap {gap:5.1f}s  run {seconds:6.1f}s")
    finally:
        cluster.down(purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
