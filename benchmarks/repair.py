"""Nightly repair: the DAG's wall time against bare nodetool, side by side in one run.

On the embedded two-DC cluster (5 nodes; keyspaces with dc1: 1, dc2: 1 so two segments can run on disjoint
node pairs), with data in several tables:
  (a) orchestration overhead: `ringward airflow dags test nightly_subrange_repair` (parallelism 1) against
      the sum of the same segments run as bare `nodetool repair -full -st -et KS TABLE…` calls;
      target <= 1.15x.
  (b) with parallelism allowed (2): the DAG's wall time against `nodetool repair -full -pr KS` run on each
      node in turn; target < 1x.

The baselines run `nodetool` as an operator does, one process per command. The DAG is timed three ways:
the `airflow dags test` command end to end (Airflow's own start-up and DAG parsing included), the DAG run
as Airflow records it (dag_run start to end), and the sum of its task instances' recorded durations.

Run: uv run python benchmarks/repair.py [--rows 20000] [--subranges 2]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins")]

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from ringward.repair import apply_overrides, load_config  # noqa: E402
from ringward_cassandra.cluster_repairs import plan_cluster  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.nodetool import NodetoolClient  # noqa: E402
from ringward_cassandra.ring_reader import ring_from_cluster  # noqa: E402
from ringward_cli.airflow_env import (  # noqa: E402
    airflow_environment,
    ensure_airflow_db,
    fail_stale_test_runs,
    hold_dags_test_lock,
)

KEYSPACES = ["bench_a", "bench_b"]
TABLES = ["t1", "t2", "t3"]


def load(rows: int) -> None:
    payload = os.urandom(512)
    with connect(["127.0.0.2"]) as session:
        for keyspace in KEYSPACES:
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
            session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                            "{'class': 'NetworkTopologyStrategy', 'dc1': 1, 'dc2': 1}")  # fmt: skip
            for table in TABLES:
                session.execute(f"CREATE TABLE {keyspace}.{table} (pk int PRIMARY KEY, payload blob)")
                # Under load a node can miss the new table for a while: writes to it then fail INCOMPATIBLE_SCHEMA.
                if not session.cluster.control_connection.wait_for_schema_agreement(wait_time=120):
                    raise RuntimeError(f"nodes did not agree on the schema after creating {keyspace}.{table}")
                insert = session.prepare(f"INSERT INTO {keyspace}.{table} (pk, payload) VALUES (?, ?)")
                insert.consistency_level = ConsistencyLevel.ALL
                for ok, result in execute_concurrent_with_args(
                    session, insert, [(i, payload) for i in range(rows)], concurrency=96
                ):
                    if not ok:
                        raise RuntimeError(result)


def overrides(parallel: int, subranges: int) -> dict[str, object]:
    return {"keyspaces.include": KEYSPACES, "parallel_repair_count": parallel, "parallel_repair_percentage": 0,
            "splitter.subranges_per_range": subranges, "min_repair_interval": 0, "intensity": 1.0}  # fmt: skip


@dataclasses.dataclass(frozen=True)
class DagTiming:
    command: float  # `airflow dags test` end to end
    run: float  # dag_run start_date -> end_date, as Airflow records it
    tasks: float  # sum of the task instances' recorded durations

    def line(self) -> str:
        return f"dags test {self.command:6.1f}s, DAG run {self.run:6.1f}s, tasks {self.tasks:6.1f}s"


def run_dag(parallel: int, subranges: int) -> DagTiming:
    env = airflow_environment(ROOT)
    ensure_airflow_db(env)
    # A run may lower the parallelism caps, not raise them: the benchmark's caps go in a configuration file.
    settings = Path(env["AIRFLOW_HOME"]) / "benchmark-repair.yaml"
    settings.write_text(f"parallel_repair_count: {parallel}\nparallel_repair_percentage: 0\n")
    env["RINGWARD_REPAIR_CONFIG"] = str(settings)
    conf = {"config_overrides": overrides(parallel, subranges)}
    command = [str(Path(sys.executable).with_name("airflow")), "dags", "test", "nightly_subrange_repair",
               "--conf", json.dumps(conf)]  # fmt: skip
    fail_stale_test_runs(env)  # a benchmark killed mid-run left its run `running` in the project's home
    lock = hold_dags_test_lock(env)
    started = time.monotonic()
    try:
        result = subprocess.run(command, env=env, capture_output=True, text=True)
    finally:
        os.close(lock)
    seconds = time.monotonic() - started
    if "state=success" not in result.stdout + result.stderr:
        raise RuntimeError((result.stdout + result.stderr)[-4000:])
    run, tasks = recorded_seconds(Path(env["AIRFLOW_HOME"]) / "airflow.db")
    return DagTiming(seconds, run, tasks)


def recorded_seconds(database: Path) -> tuple[float, float]:
    """(dag run duration, sum of task durations) of the latest nightly_subrange_repair run in Airflow's DB."""
    with sqlite3.connect(database) as db:
        run_id, run_start, run_end = db.execute(
            "SELECT run_id, start_date, end_date FROM dag_run WHERE dag_id = 'nightly_subrange_repair' "
            "ORDER BY start_date DESC LIMIT 1"
        ).fetchone()
        tasks = db.execute(
            "SELECT start_date, end_date FROM task_instance WHERE dag_id = 'nightly_subrange_repair' AND run_id = ?",
            (run_id,),
        ).fetchall()

    def seconds(start: str, end: str) -> float:
        return (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds()

    return seconds(run_start, run_end), sum(seconds(start, end) for start, end in tasks)


def bare_segments(nodetool: NodetoolClient, subranges: int) -> tuple[float, int]:
    """The segments the DAG plans, run one after another as bare nodetool calls."""
    config = apply_overrides(load_config(), overrides(1, subranges))
    with connect(["127.0.0.2"]) as session:
        plan = plan_cluster(session, ring_from_cluster(session), config)
    started = time.monotonic()
    for segment in plan.segments:
        outcome = nodetool.repair(segment.coordinator, segment.keyspace, segment.range, tables=segment.tables)
        if not outcome.succeeded:
            raise RuntimeError(outcome.output)
    return time.monotonic() - started, len(plan.segments)


def primary_range_repairs(nodetool: NodetoolClient, nodes: list[str]) -> float:
    started = time.monotonic()
    for node in nodes:
        for keyspace in KEYSPACES:
            nodetool.checked(node, ["repair", "-full", "-pr", keyspace], timeout=7200)
    return time.monotonic() - started


def ratios(dag: DagTiming, baseline: float) -> str:
    return (f"dags test {dag.command / baseline:.2f}, DAG run {dag.run / baseline:.2f}, "
            f"tasks {dag.tasks / baseline:.2f}")  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000, help="rows per table")
    parser.add_argument("--subranges", type=int, default=2, help="segments per ring range")
    args = parser.parse_args()
    cluster = LocalCluster()
    cluster.down(purge=True)
    try:
        topology = cluster.up("two-dc")
        # The baselines are what an operator runs: one nodetool process per command (no resident JVM).
        nodetool = dataclasses.replace(cluster.nodetool_client(), java_classpath=None)
        load(args.rows)
        bare, segments = bare_segments(nodetool, args.subranges)
        dag_serial = run_dag(1, args.subranges)
        pr_first = primary_range_repairs(nodetool, topology.addresses)
        dag_parallel = run_dag(2, args.subranges)
        pr_second = primary_range_repairs(nodetool, topology.addresses)
        pr = min(pr_first, pr_second)  # the faster of the runs before and after the DAG's
        print(f"\n{len(KEYSPACES)} keyspaces x {len(TABLES)} tables x {args.rows} rows, dc1: 1, dc2: 1, "
              f"{segments} segments")  # fmt: skip
        print(f"(a) bare nodetool, segments in turn: {bare:7.1f}s")
        print(f"    DAG, parallelism 1: {dag_serial.line()}")
        print(f"    ratios: {ratios(dag_serial, bare)} (target <= 1.15)")
        print(f"(b) nodetool repair -full -pr, node by node: {pr:7.1f}s (faster of {pr_first:.1f}s, {pr_second:.1f}s)")
        print(f"    DAG, parallelism 2: {dag_parallel.line()}")
        print(f"    ratios: {ratios(dag_parallel, pr)} (target < 1)")
    finally:
        cluster.down(purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
