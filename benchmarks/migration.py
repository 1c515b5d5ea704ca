"""Repair stage of a migration: ringward (affected ranges only) against the naive procedure, side by side.

The same data is loaded into two keyspaces (SimpleStrategy RF 2) on the embedded seed cluster; both get the
same change (-> NetworkTopologyStrategy dc1: 2).
- naive:    ALTER, then `nodetool repair -full KS` on every node in turn (cleanup everywhere, timed apart).
- ringward: ALTER, then full repair of exactly the affected ranges on a new replica, one command per set
            of participants (Cassandra runs it as one session), node-disjoint waves of 2 (what
            MigrationRepairOperator runs).
Target: ringward <= (share of affected ranges + 0.2) x naive.

Run: uv run python benchmarks/migration.py [--megabytes 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins")]

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from ringward.migration import migration_steps, repair_segments, repair_waves  # noqa: E402
from ringward.plan import build_plan  # noqa: E402
from ringward.replication import Replication  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.nodetool import NodetoolClient  # noqa: E402
from ringward_cassandra.ring_reader import ring_from_cluster  # noqa: E402

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
TARGET = {"class": "NetworkTopologyStrategy", "dc1": 2}
ROW_BYTES = 2048


def load(megabytes: int) -> int:
    rows = megabytes * 1024 * 1024 // ROW_BYTES
    payload = os.urandom(ROW_BYTES)
    with connect(NODES) as session:
        for keyspace in ("bench_naive", "bench_ringward"):
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
            session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = "
                            "{'class': 'SimpleStrategy', 'replication_factor': 2}")  # fmt: skip
            session.execute(f"CREATE TABLE {keyspace}.blobs (pk int, ck int, payload blob, PRIMARY KEY (pk, ck))")
        for keyspace in ("bench_naive", "bench_ringward"):
            insert = session.prepare(f"INSERT INTO {keyspace}.blobs (pk, ck, payload) VALUES (?, ?, ?)")
            insert.consistency_level = ConsistencyLevel.ALL
            started = time.monotonic()
            for first in range(0, rows, 20_000):
                batch = [(i // 100, i % 100, payload) for i in range(first, min(rows, first + 20_000))]
                for ok, result in execute_concurrent_with_args(session, insert, batch, concurrency=96):
                    if not ok:
                        raise RuntimeError(result)
            print(f"loaded {rows} rows ({megabytes} MB) into {keyspace} in {time.monotonic() - started:.0f}s")
    return rows


def alter(keyspace: str) -> None:
    with connect(NODES) as session:
        session.execute(f"ALTER KEYSPACE {keyspace} WITH replication = {Replication.parse(TARGET).to_cql()}")
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=60)


def naive(nodetool: NodetoolClient, cluster: LocalCluster) -> tuple[float, float]:
    alter("bench_naive")
    started = time.monotonic()
    for node in NODES:
        nodetool.checked(node, ["repair", "-full", "bench_naive"], timeout=7200)
    repair_seconds = time.monotonic() - started
    started = time.monotonic()
    for node in NODES:
        nodetool.cleanup(node, "bench_naive")
    return repair_seconds, time.monotonic() - started


def ringward(nodetool: NodetoolClient) -> tuple[float, float, float]:
    with connect(NODES) as session:
        ring = ring_from_cluster(session)
    plan = build_plan(ring, Replication.simple(2), TARGET, keyspace="bench_ringward")
    step = migration_steps(plan)[0]
    segments = repair_segments(ring, step, "bench_ringward", "post")
    share_count = len(plan.affected) / plan.total_ranges
    share_width = sum(c.range.width() for c in plan.affected) / 2**64
    alter("bench_ringward")
    started = time.monotonic()
    for wave in repair_waves(segments, parallelism=2):
        with ThreadPoolExecutor(max_workers=len(wave)) as pool:
            outcomes = list(
                pool.map(lambda c: nodetool.repair(c.coordinator, c.keyspace, c.ranges, timeout=7200), wave)
            )
        failed = [o for o in outcomes if not o.succeeded]
        if failed:
            raise RuntimeError(failed[0].output)
    return time.monotonic() - started, share_count, share_width


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=300, help="data per keyspace before replication")
    args = parser.parse_args()
    cluster = LocalCluster()
    cluster.down(purge=True)
    try:
        cluster.up("seed", heap_mb=1024)
        nodetool = cluster.nodetool_client()  # what the migration's tasks use: one resident JVM
        processes = dataclasses.replace(nodetool, java_classpath=None)  # what an operator runs: nodetool
        load(args.megabytes)
        for node in NODES:
            processes.flush(node, "bench_naive")
            processes.flush(node, "bench_ringward")
        naive_repair, naive_cleanup = naive(processes, cluster)
        try:
            ringward_repair, share_count, share_width = ringward(nodetool)
        finally:
            nodetool.close()
        target = (share_width + 0.2) * naive_repair
        print(f"\ndata: {args.megabytes} MB per keyspace, RF 2 -> NTS dc1: 2 on the seed ring")
        print(f"affected ranges: {share_count:.0%} by count, {share_width:.1%} of the token space")
        print(
            f"naive repair (nodetool repair -full on every node): {naive_repair:8.1f}s  (+ cleanup everywhere "
            f"{naive_cleanup:.1f}s)"
        )
        print(f"ringward repair (affected ranges only):              {ringward_repair:8.1f}s")
        print(
            f"ratio ringward / naive: {ringward_repair / naive_repair:.2f}  target <= {share_width + 0.2:.2f} "
            f"({'met' if ringward_repair <= target else 'NOT met'})"
        )
    finally:
        cluster.down(purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
