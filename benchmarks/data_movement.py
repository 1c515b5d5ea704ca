"""Migration data movement against the streaming floor, with replicas out of sync (issue 18, item 1).

The same data goes into four keyspaces (SimpleStrategy RF 2) on the embedded seed cluster; hints are off
and 127.0.0.3 is down while a further share of rows is written at CL ONE, so the replicas are out of sync
the way a real cluster drifts. Each keyspace then gets the same change (-> NetworkTopologyStrategy dc1: 2)
by one procedure, timed from the ALTER to "verified in sync":

- naive:     ALTER, `nodetool repair -full KS` on every node in turn (no pre-repair: it can lose rows).
- floor:     ALTER, then on each gaining node `nodetool rebuild -ks KS -ts RANGES -s SOURCE` of exactly
             the ranges it gains, from a kept replica: each gained range streamed once, nothing validated.
             Not a safe procedure (it copies one replica's view and proves nothing); the floor.
- repair:    ringward today: pre-repair of the affected ranges among the old replicas (before the ALTER,
             timed apart), ALTER, full repair of the affected ranges among the new replicas (the commands
             MigrationRepairOperator sends, node-disjoint waves of 2), then the preview repair that proves sync.
- stream:    the candidate: the same pre-repair, ALTER, then the floor's rebuild from a kept replica (in
             sync since the pre-repair) and the same preview repair; ranges the preview finds out of sync
             are repaired and previewed again.

Every keyspace is checked afterwards: the preview repair of the affected ranges is in sync among the new
replicas and a CL ALL count finds every row written (the naive procedure is reported, not failed, when it
lost rows). Targets: movement <= 1.5x the floor and <= 0.25x naive.

Run: uv run python benchmarks/data_movement.py [--megabytes 300] [--drift 0.05]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
import time
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins")]

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from cassandra.query import SimpleStatement  # noqa: E402
from ringward.migration import migration_steps, repair_segments, repair_waves  # noqa: E402
from ringward.plan import build_plan  # noqa: E402
from ringward.repair import Segment, group_segments  # noqa: E402
from ringward.replication import Replication  # noqa: E402
from ringward.ring import Ring, TokenRange  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.nodetool import NodetoolClient  # noqa: E402
from ringward_cassandra.ring_reader import ring_from_cluster  # noqa: E402

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
DOWN = "127.0.0.3"
SOURCE = Replication.simple(2)
TARGET = {"class": "NetworkTopologyStrategy", "dc1": 2}
ROW_BYTES = 2048
KEYSPACES = {"naive": "dm_naive", "floor": "dm_floor", "repair": "dm_repair", "stream": "dm_stream"}


def insert_rows(session, keyspace: str, rows: range, consistency: int) -> None:  # type: ignore[no-untyped-def]
    insert = session.prepare(f"INSERT INTO {keyspace}.blobs (pk, ck, payload) VALUES (?, ?, ?)")
    insert.consistency_level = consistency
    for first in range(rows.start, rows.stop, 20_000):
        # A fresh random payload per row: one payload repeated compresses ~8x on disk and the "300 MB" shrinks.
        batch = [(i // 100, i % 100, os.urandom(ROW_BYTES)) for i in range(first, min(rows.stop, first + 20_000))]
        for ok, result in execute_concurrent_with_args(session, insert, batch, concurrency=96):
            if not ok:
                raise RuntimeError(result)


def load(cluster: LocalCluster, nodetool: NodetoolClient, megabytes: int, drift: float) -> int:
    rows = megabytes * 1024 * 1024 // ROW_BYTES
    extra = int(rows * drift)
    with connect(NODES) as session:
        for keyspace in KEYSPACES.values():
            session.execute(f"DROP KEYSPACE IF EXISTS {keyspace}")
            session.execute(f"CREATE KEYSPACE {keyspace} WITH replication = {SOURCE.to_cql()}")
            session.execute(f"CREATE TABLE {keyspace}.blobs (pk int, ck int, payload blob, PRIMARY KEY (pk, ck))")
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=120)
        for keyspace in KEYSPACES.values():
            started = time.monotonic()
            insert_rows(session, keyspace, range(rows), ConsistencyLevel.ALL)
            print(f"loaded {rows} rows ({megabytes} MB) into {keyspace} in {time.monotonic() - started:.0f}s")
    for node in NODES:
        nodetool.checked(node, ["disablehandoff"])  # hints off: what the down node misses stays missed
    cluster.stop(DOWN)
    with connect([n for n in NODES if n != DOWN]) as session:
        for keyspace in KEYSPACES.values():
            insert_rows(session, keyspace, range(rows, rows + extra), ConsistencyLevel.ONE)
    cluster.start(DOWN, heap_mb=1024)
    print(f"{extra} more rows per keyspace ({drift:.0%}) written at CL ONE while {DOWN} was down, hints off")
    for node in NODES:
        for keyspace in KEYSPACES.values():
            nodetool.flush(node, keyspace)
    return rows + extra


def alter(keyspace: str) -> None:
    with connect(NODES) as session:
        session.execute(f"ALTER KEYSPACE {keyspace} WITH replication = {Replication.parse(TARGET).to_cql()}")
        session.cluster.control_connection.wait_for_schema_agreement(wait_time=60)


def run_waves(nodetool: NodetoolClient, segments: list[Segment]) -> None:
    for wave in repair_waves(segments, parallelism=2):
        with ThreadPoolExecutor(max_workers=len(wave)) as pool:
            outcomes = list(
                pool.map(lambda c: nodetool.repair(c.coordinator, c.keyspace, c.ranges, timeout=7200), wave)
            )
        failed = [o for o in outcomes if not o.succeeded]
        if failed:
            raise RuntimeError(failed[0].output)


def preview(nodetool: NodetoolClient, segments: list[Segment]) -> list[Segment]:
    """The preview stage's commands; returns the segments of commands that were not in sync."""
    out_of_sync: list[Segment] = []
    for command in group_segments(segments, 64):
        outcome = nodetool.repair(command.coordinator, command.keyspace, command.ranges, preview=True)
        if not outcome.succeeded or not outcome.in_sync:
            out_of_sync += [s for s in segments if s.range in set(command.ranges)]
    return out_of_sync


def rebuild(nodetool: NodetoolClient, keyspace: str, post: list[Segment], kept_of: dict[TokenRange, str]) -> None:
    """On each gaining node, one rebuild of exactly the ranges it gains, each from one kept replica."""
    by_node: dict[tuple[str, str], list[TokenRange]] = defaultdict(list)
    for segment in post:
        gained = segment.replicas[0]  # post segments list the gained replica first
        by_node[(gained, kept_of[segment.range])].append(segment.range)
    for (node, source), ranges in sorted(by_node.items()):
        tokens = ",".join(f"({r.start},{r.end}]" for r in ranges)
        nodetool.checked(node, ["rebuild", "-ks", keyspace, "-ts", tokens, "-s", source], timeout=7200)


def count_all(keyspace: str) -> int:
    with connect(NODES) as session:
        statement = SimpleStatement(f"SELECT count(*) FROM {keyspace}.blobs", consistency_level=ConsistencyLevel.ALL)
        return int(session.execute(statement, timeout=600).one()[0])


@dataclasses.dataclass
class Result:
    name: str
    pre_repair: float = 0.0
    movement: float = 0.0
    preview_rounds: int = 0
    rows: int = 0
    in_sync: bool = False


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", type=int, default=300, help="data per keyspace before replication")
    parser.add_argument("--drift", type=float, default=0.05, help="share of rows written while a replica is down")
    args = parser.parse_args()
    cluster = LocalCluster()
    cluster.down(purge=True)
    results: list[Result] = []
    try:
        cluster.up("seed", heap_mb=1024)
        nodetool = cluster.nodetool_client()  # what the migration's tasks use: one resident JVM
        processes = dataclasses.replace(nodetool, java_classpath=None)  # what an operator runs: nodetool
        expected = load(cluster, nodetool, args.megabytes, args.drift)
        with connect(NODES) as session:
            ring: Ring = ring_from_cluster(session)
        plan = build_plan(ring, SOURCE, TARGET, keyspace="dm")
        step = migration_steps(plan)[0]
        before, after = step.placements(ring)

        def segments(keyspace: str, phase: str) -> list[Segment]:
            return repair_segments(ring, step, keyspace, phase)  # type: ignore[arg-type]

        def kept_of(keyspace: str) -> dict[TokenRange, str]:
            kept = {}
            for segment in segments(keyspace, "post"):
                old = before.for_token(segment.range.end)
                kept[segment.range] = next(n for n in after.for_token(segment.range.end) if n in old)
            return kept

        # naive
        result = Result("naive")
        alter(KEYSPACES["naive"])
        started = time.monotonic()
        for node in NODES:
            processes.checked(node, ["repair", "-full", KEYSPACES["naive"]], timeout=7200)
        result.movement = time.monotonic() - started
        results.append(result)

        # floor
        result = Result("floor")
        keyspace = KEYSPACES["floor"]
        alter(keyspace)
        started = time.monotonic()
        rebuild(nodetool, keyspace, segments(keyspace, "post"), kept_of(keyspace))
        result.movement = time.monotonic() - started
        results.append(result)

        for name in ("repair", "stream"):
            result = Result(name)
            keyspace = KEYSPACES[name]
            started = time.monotonic()
            run_waves(nodetool, segments(keyspace, "pre"))
            result.pre_repair = time.monotonic() - started
            alter(keyspace)
            post = segments(keyspace, "post")
            started = time.monotonic()
            if name == "repair":
                run_waves(nodetool, post)
            else:
                rebuild(nodetool, keyspace, post, kept_of(keyspace))
            todo = preview(nodetool, post)
            result.preview_rounds = 1
            while todo and result.preview_rounds < 3:
                run_waves(nodetool, todo)
                todo = preview(nodetool, todo)
                result.preview_rounds += 1
            result.movement = time.monotonic() - started
            results.append(result)

        for result in results:
            keyspace = KEYSPACES[result.name]
            result.in_sync = not preview(nodetool, segments(keyspace, "post"))
            result.rows = count_all(keyspace)
        nodetool.close()

        share = sum(r.range.width() for r in segments("dm", "post")) / 2**64
        floor = next(r.movement for r in results if r.name == "floor")
        naive = next(r.movement for r in results if r.name == "naive")
        print(f"\ndata: {args.megabytes} MB per keyspace (+{args.drift:.0%} written with {DOWN} down), "
              f"RF 2 -> NTS dc1: 2 on the seed ring, {share:.1%} of the token space gains a replica")  # fmt: skip
        print(f"{'procedure':<10} {'pre-repair':>10} {'movement':>9} {'/floor':>7} {'/naive':>7} {'previews':>8} "
              f"{'rows (expected ' + str(expected) + ')':>26} in sync")  # fmt: skip
        for r in results:
            print(f"{r.name:<10} {r.pre_repair:9.1f}s {r.movement:8.1f}s {r.movement / floor:7.2f} "
                  f"{r.movement / naive:7.2f} {r.preview_rounds:8d} {r.rows:>26} {r.in_sync}")  # fmt: skip
        for name in ("repair", "stream"):
            r = next(x for x in results if x.name == name)
            met = r.movement <= 1.5 * floor and r.movement <= 0.25 * naive
            print(f"{name}: <= 1.5x floor and <= 0.25x naive: {'met' if met else 'NOT met'}"
                  f"{'' if r.rows == expected and r.in_sync else '  (LOST ROWS or out of sync)'}")  # fmt: skip
    finally:
        cluster.down(purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
