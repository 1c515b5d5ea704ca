"""Spark verification cost: one application per stage against the per-table applications, side by side.

The seed ring, SimpleStrategy RF 2 -> NTS dc1: 2 (the seed change), on two keyspaces:
- small: `--small-tables` tables of 50 rows each.
- big:   `--megabytes` MB (rows of 2 KiB, before replication) over `--big-tables` tables, flushed.
For each keyspace, in order: the baseline stage the old way (one range-counts application per table) and the new
way (one stage application), the ALTER and a full repair, then the verify stage the old way (per table: one
pinned application per new replica, a CL ALL reference, a connector count) and the new way (one application:
pinned counts for every table and replica, then each table's whole ring at CL ALL in one pass). Both ways must
reach the same verdicts, range by range, and the same whole-table row counts.
On the big keyspace, the reference: a plain connector count (the DataFrame count(), which the connector pushes
down as CQL count(*) per token range, as cassandraCount() does) of the same tables in one application, at the
connector's default consistency (LOCAL_ONE) and at ALL.
Targets (issue 18 §2): the verify stage <= 15 s on the small keyspace; on the big one, the verify stage
<= 1.5x the plain count.

Run (it starts and stops the local cluster, so under the shared lock):
    flock /tmp/ringward-cluster.lock uv run python benchmarks/spark_verification.py [--megabytes 300]
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins")]

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from ringward.migration import migration_steps, verify_targets  # noqa: E402
from ringward.plan import build_plan  # noqa: E402
from ringward.replication import Replication  # noqa: E402
from ringward.ring import TokenRange  # noqa: E402
from ringward.verification import VerificationReport, verify  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.localcluster.spark_jars import local_jars_environment  # noqa: E402
from ringward_cassandra.ring_reader import ring_from_cluster  # noqa: E402
from ringward_spark.counts import baseline_from_result, scan_counts_from_result, stage_scans  # noqa: E402
from ringward_spark.stages import BASELINE, baseline_phases, verify_phases, verify_tables  # noqa: E402
from ringward_spark.submit import (  # noqa: E402
    count_job_args,
    range_counts_job_args,
    run_job,
    stage_job_args,
    stage_plan,
)

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
SOURCE = Replication.simple(2)
TARGET = {"class": "NetworkTopologyStrategy", "dc1": 2}
ROW_BYTES = 2048
MASTER = "local[2]"

Verdicts = dict[str, tuple[frozenset[tuple[TokenRange, str, int, int]], int]]


def timed(action: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    outcome = action()
    return time.monotonic() - started, outcome


def load(keyspace: str, tables: Sequence[str], rows_per_table: int) -> None:
    with connect(NODES) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
        session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {SOURCE.to_cql()}")
        for table in tables:
            session.execute(f"CREATE TABLE {keyspace}.{table} (pk int, ck int, payload blob, PRIMARY KEY (pk, ck))")
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=60)
        for table in tables:
            insert = session.prepare(f"INSERT INTO {keyspace}.{table} (pk, ck, payload) VALUES (?, ?, ?)")
            insert.consistency_level = ConsistencyLevel.ALL
            for first in range(0, rows_per_table, 20_000):
                # a fresh random payload per row: one repeated payload compresses away on disk
                batch = [
                    (i // 100, i % 100, os.urandom(ROW_BYTES))
                    for i in range(first, min(rows_per_table, first + 20_000))
                ]
                for ok, result in execute_concurrent_with_args(session, insert, batch, concurrency=96):
                    if not ok:
                        raise RuntimeError(result)


def affected(keyspace: str) -> tuple[list[TokenRange], dict[str, list[TokenRange]]]:
    """The step's affected ranges and what each new replica gains, as the Spark operators compute them."""
    with connect(NODES) as session:
        ring = ring_from_cluster(session)
    step = migration_steps(build_plan(ring, SOURCE, TARGET, keyspace=keyspace))[0]
    gained: dict[str, list[TokenRange]] = {}
    targets = verify_targets(ring, step)
    for target in targets:
        gained.setdefault(target.replica, []).append(target.range)
    return sorted({t.range for t in targets}), gained


def alter_and_repair(cluster: LocalCluster, keyspace: str) -> None:
    with connect(NODES) as session:
        session.execute(f"ALTER KEYSPACE {keyspace} WITH replication = {Replication.parse(TARGET).to_cql()}")
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=60)
    for node in NODES:
        repaired = cluster.nodetool(node, ["repair", "-full", "-pr", keyspace])
        if repaired.returncode != 0:
            raise RuntimeError(repaired.stdout + repaired.stderr)


# -- the old way: what SparkBaselineOperator / SparkVerifyOperator ran before, one application per count --
def old_baseline(keyspace: str, tables: Sequence[str], ranges: Sequence[TokenRange]) -> dict[str, Any]:
    return {t: run_job(range_counts_job_args(NODES, keyspace, t, ranges), master=MASTER) for t in tables}


def old_verify(
    keyspace: str, tables: Sequence[str], ranges: Sequence[TokenRange], gained: dict[str, list[TokenRange]],
    baselines: dict[str, Any], cutoff: int,
) -> Verdicts:  # fmt: skip
    verdicts: Verdicts = {}
    for table in tables:
        replicas = [
            scan_counts_from_result(run_job(range_counts_job_args(
                NODES, keyspace, table, replica_ranges, consistency="ONE", pinned_host=replica, cutoff_us=cutoff,
            ), master=MASTER))
            for replica, replica_ranges in sorted(gained.items())
        ]  # fmt: skip
        reference = scan_counts_from_result(
            run_job(range_counts_job_args(NODES, keyspace, table, ranges, cutoff_us=cutoff), master=MASTER)
        )
        report = verify(baseline_from_result(baselines[table], cutoff), reference, replicas)
        whole = run_job(count_job_args(NODES[:1], keyspace, table, consistency="ALL"), master=MASTER)
        verdicts[table] = (_checks(report), int(whole["rows"]))
    return verdicts


# -- the new way: one stage application each --
def new_baseline(keyspace: str, tables: Sequence[str], ranges: Sequence[TokenRange]) -> dict[str, Any]:
    result = run_job(stage_job_args(NODES, keyspace), master=MASTER, plan=stage_plan(baseline_phases(tables, ranges)))
    return {scan["table"]: scan for scan in stage_scans(result, BASELINE)}


def new_verify(
    keyspace: str, tables: Sequence[str], ranges: Sequence[TokenRange], gained: dict[str, list[TokenRange]],
    baselines: dict[str, Any], cutoff: int,
) -> tuple[Verdicts, dict[str, Any]]:  # fmt: skip
    plan = stage_plan(verify_phases(tables, ranges, gained, cutoff))
    result = run_job(stage_job_args(NODES, keyspace), master=MASTER, plan=plan)
    verified = verify_tables(result, ranges, baselines, cutoff)
    return {v.table: (_checks(v.report), v.whole_table_rows) for v in verified}, result


def _checks(report: VerificationReport) -> frozenset[tuple[TokenRange, str, int, int]]:
    if not report.ok:
        raise RuntimeError(report.summary())
    return frozenset((c.token_range, c.replica, c.replica_rows, c.reference_rows) for c in report.checks)


def _rows(baselines: dict[str, Any]) -> dict[str, list[tuple[int, int, int]]]:
    return {t: [(e["start"], e["end"], e["rows"]) for e in scan["ranges"]] for t, scan in sorted(baselines.items())}


def stages(cluster: LocalCluster, keyspace: str, tables: Sequence[str], old: bool) -> dict[str, float]:
    """Seconds of each stage, old and new way; raises if the two ways disagree."""
    ranges, gained = affected(keyspace)
    figures: dict[str, float] = {}
    cutoff = time.time_ns() // 1000
    if old:
        figures["old baseline"], old_counts = timed(lambda: old_baseline(keyspace, tables, ranges))
    figures["new baseline"], baselines = timed(lambda: new_baseline(keyspace, tables, ranges))
    if old and _rows(old_counts) != _rows(baselines):
        raise RuntimeError("The baseline counts of the two ways differ.")
    alter_and_repair(cluster, keyspace)
    if old:
        figures["old verify"], old_verdicts = timed(
            lambda: old_verify(keyspace, tables, ranges, gained, baselines, cutoff)
        )
    figures["new verify"], (new_verdicts, result) = timed(
        lambda: new_verify(keyspace, tables, ranges, gained, baselines, cutoff)
    )
    if old and old_verdicts != new_verdicts:
        raise RuntimeError(f"The verdicts of the two ways differ:\nold {old_verdicts}\nnew {new_verdicts}")
    phases = ", ".join(f"{p['name']} {p['seconds']:.1f}s ({p['pieces']} pieces)" for p in result["phases"])
    rows = {t: whole for t, (_, whole) in new_verdicts.items()}
    print(f"  {keyspace}: {len(ranges)} affected ranges, {len(gained)} gaining replicas, rows {rows}")
    print(f"  new verify application: {result['seconds']:.1f}s in the job ({phases})")
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=300, help="data of the big keyspace before replication")
    parser.add_argument("--small-tables", type=int, default=2)
    parser.add_argument("--big-tables", type=int, default=2)
    parser.add_argument("--old-big", action="store_true", help="also run the old way on the big keyspace")
    args = parser.parse_args()
    os.environ.update(local_jars_environment())
    small_tables = [f"t{i}" for i in range(args.small_tables)]
    big_tables = [f"blobs{i}" for i in range(args.big_tables)]
    big_rows = args.megabytes * 1024 * 1024 // ROW_BYTES // len(big_tables)
    cluster = LocalCluster()
    cluster.down(purge=True)
    try:
        cluster.up("seed", heap_mb=1024)
        load("bench_spark_small", small_tables, 50)
        seconds, _ = timed(lambda: load("bench_spark_big", big_tables, big_rows))
        print(f"loaded {big_rows * len(big_tables)} rows ({args.megabytes} MB) in {seconds:.0f}s")
        for node in NODES:
            cluster.nodetool(node, ["flush", "bench_spark_big"])
        print("small keyspace:")
        small = stages(cluster, "bench_spark_small", small_tables, old=True)
        print("big keyspace:")
        big = stages(cluster, "bench_spark_big", big_tables, old=args.old_big)
        count_one, counted = timed(
            lambda: run_job(
                count_job_args(NODES[:1], "bench_spark_big", big_tables, consistency="LOCAL_ONE"), master=MASTER
            )
        )
        count_all, counted_all = timed(
            lambda: run_job(count_job_args(NODES[:1], "bench_spark_big", big_tables, consistency="ALL"), master=MASTER)
        )
        if counted["rows"] != big_rows * len(big_tables) or counted_all["rows"] != counted["rows"]:
            raise RuntimeError(f"the plain counts are {counted['rows']} / {counted_all['rows']}")
    finally:
        cluster.down(purge=True)

    cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor())  # fmt: skip
    print(f"\n{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores ({cpu}), {MASTER}")
    print(f"small keyspace ({len(small_tables)} tables x 50 rows), seconds per stage (wall, spark-submit included):")
    for stage in ("baseline", "verify"):
        old, new = small[f"old {stage}"], small[f"new {stage}"]
        print(f"  {stage:8} old {old:6.1f}s  new {new:6.1f}s  ratio new/old {new / old:.2f}")
    print(f"  per step: old {small['old baseline'] + small['old verify']:.1f}s, "
          f"new {small['new baseline'] + small['new verify']:.1f}s")  # fmt: skip
    verdict = "met" if small["new verify"] <= 15 else "NOT met"
    print(f"  verify stage {small['new verify']:.1f}s, target <= 15 s: {verdict}")
    print(f"big keyspace ({args.megabytes} MB over {len(big_tables)} tables):")
    for stage in ("baseline", "verify"):
        old = big.get(f"old {stage}")
        line = f"  {stage:8} new {big[f'new {stage}']:6.1f}s"
        print(line + (f"  old {old:6.1f}s  ratio new/old {big[f'new {stage}'] / old:.2f}" if old else ""))
    print(f"  plain connector count, one application: LOCAL_ONE {count_one:.1f}s, ALL {count_all:.1f}s")
    ratio = big["new verify"] / count_one
    verdict = "met" if ratio <= 1.5 else "NOT met"
    print(f"  ratio verify stage / plain count (LOCAL_ONE): {ratio:.2f}  target <= 1.5: {verdict}")
    print(f"  ratio verify stage / count at ALL: {big['new verify'] / count_all:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
