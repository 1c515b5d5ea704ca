"""Nightly repair: the DAG's wall time against bare nodetool, side by side in one run.

On the embedded two-DC cluster (5 nodes; keyspaces with dc1: 1, dc2: 1 so two segments can run on disjoint
node pairs), with data in several tables:
  (a) orchestration overhead: `ringward airflow dags test nightly_subrange_repair` (parallelism 1) against
      the sum of the same segments run as bare `nodetool repair -full -st -et KS TABLE…` calls;
      target <= 1.15x.
  (b) with parallelism allowed (2): the DAG's wall time against `nodetool repair -full -pr KS` run on each
      node in turn; target < 1x.

Run: uv run python benchmarks/repair.py [--rows 20000] [--subranges 2]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins")]

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from ringward.repair import apply_overrides, load_config  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.nodetool import NodetoolClient  # noqa: E402
from ringward_cassandra.repair_planning import plan_cluster  # noqa: E402
from ringward_cassandra.ring_source import ring_from_cluster  # noqa: E402
from ringward_cli.airflow_env import airflow_environment, ensure_airflow_db  # noqa: E402

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


def run_dag(parallel: int, subranges: int) -> float:
    env = airflow_environment(ROOT)
    ensure_airflow_db(env)
    conf = {"config_overrides": overrides(parallel, subranges)}
    command = [str(Path(sys.executable).with_name("airflow")), "dags", "test", "nightly_subrange_repair",
               "--conf", json.dumps(conf)]  # fmt: skip
    started = time.monotonic()
    result = subprocess.run(command, env=env, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if "state=success" not in result.stdout + result.stderr:
        raise RuntimeError((result.stdout + result.stderr)[-4000:])
    return seconds


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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=20_000, help="rows per table")
    parser.add_argument("--subranges", type=int, default=2, help="segments per ring range")
    args = parser.parse_args()
    cluster = LocalCluster()
    cluster.down(purge=True)
    try:
        topology = cluster.up("two-dc")
        nodetool = cluster.nodetool_client()
        load(args.rows)
        bare, segments = bare_segments(nodetool, args.subranges)
        dag_serial = run_dag(1, args.subranges)
        dag_parallel = run_dag(2, args.subranges)
        pr = primary_range_repairs(nodetool, topology.seeds)
        print(f"\n{len(KEYSPACES)} keyspaces x {len(TABLES)} tables x {args.rows} rows, dc1: 1, dc2: 1, "
              f"{segments} segments")  # fmt: skip
        print(
            f"(a) bare nodetool, segments in turn: {bare:7.1f}s   DAG, parallelism 1: {dag_serial:7.1f}s   "
            f"ratio {dag_serial / bare:.2f} (target <= 1.15)"
        )
        print(
            f"(b) nodetool repair -full -pr, node by node: {pr:7.1f}s   DAG, parallelism 2: {dag_parallel:7.1f}s   "
            f"ratio {dag_parallel / pr:.2f} (target < 1)"
        )
    finally:
        cluster.down(purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
