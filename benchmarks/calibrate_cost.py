"""The fleet simulator's cost terms fitted on real repair sessions, with their error (issue 40).

The simulator (tools/fleetsim/ringward_fleetsim/cluster.py, `DurationModel`) prices one repair command as

    command_overhead + sessions x session_overhead + bytes_per_replica x seconds_per_byte

(alone on its nodes: k = 1; `seconds_per_byte` = 1 / validation_rate + mismatch_share / stream_rate). Its
shipped terms (1.5 s, 0.5 s, 64 MiB/s validation, 1 % mismatch at 24 MiB/s) were assumed, not measured. This
benchmark measures real commands on the local seed cluster (3 nodes of Cassandra 5.0, dc1 over two racks),
through ringward's own nodetool client (the resident JMX client the nightly repair uses), and fits the three
terms by least squares:

- a keyspace NTS dc1: 2 (rack-aware: every range on 127.0.0.4 and one of .2/.3: two replica sets), one table of
  1 KiB random rows, loaded at CL ALL in steps (`--megabytes`), flushed; the bytes of one replica's copy of a
  token span = the live bytes of 127.0.0.4 (which holds every range) x the span's share of the ring;
- per step, commands of `--fractions` of the ring, as one session (a span in one replica set) or as two (half in
  each replica set), coordinated by 127.0.0.4, `--repeats` times each, in a shuffled order;
- the data is in sync (written at ALL): the streaming term is not exercised here, and `mismatch_share` /
  `stream_rate` keep their assumed values (said in the output).

Prints every measured command beside the fitted and the shipped model's prediction, the fitted terms, and the
error: RMS and largest relative error of the fit, and of a leave-one-step-out fit (the terms fitted without one
data size, predicting it). Writes the figures to tools/fleetsim/ringward_fleetsim/calibration.json (date,
commit, machine), which `DurationModel.calibrated_three_terms()` reads (`run.py --cost calibrated3`). The refit
with per-table, per-range, streaming and in-process terms, which `DurationModel.calibrated()` reads, is
benchmarks/calibrate_terms.py.

Run: uv run python benchmarks/calibrate_cost.py [--megabytes 24,64,128] [--fractions 0.04,0.12,0.3] [--repeats 2]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "include"), str(ROOT / "plugins"), str(ROOT / "tools" / "fleetsim")]

from cassandra import ConsistencyLevel  # noqa: E402
from cassandra.concurrent import execute_concurrent_with_args  # noqa: E402
from ringward.placement import replica_map  # noqa: E402
from ringward.replication import Replication  # noqa: E402
from ringward.ring import TokenRange  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.ring_reader import ring_from_cluster  # noqa: E402
from ringward_fleetsim.calibration import CALIBRATION_FILE, Measured, Terms, errors, fit, held_out_errors  # noqa: E402
from ringward_fleetsim.cluster import DurationModel  # noqa: E402

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
COORDINATOR = "127.0.0.4"  # rack2's only node: a replica of every range under NTS dc1: 2
KEYSPACE, TABLE = "calib", "t"
ROW_BYTES = 1024
RING = 2**64
MIN_TOKEN = -(2**63)


def load(session: object, first: int, stop: int) -> None:
    insert = session.prepare(f"INSERT INTO {KEYSPACE}.{TABLE} (k, v) VALUES (?, ?)")  # type: ignore[attr-defined]
    insert.consistency_level = ConsistencyLevel.ALL
    for start in range(first, stop, 20_000):
        batch = [(i, os.urandom(ROW_BYTES)) for i in range(start, min(stop, start + 20_000))]
        for ok, result in execute_concurrent_with_args(session, insert, batch, concurrency=64):
            if not ok:
                raise RuntimeError(result)


def live_bytes(cluster: LocalCluster, node: str) -> int:
    out = cluster.nodetool(node, ["tablestats", f"{KEYSPACE}.{TABLE}"]).stdout
    for line in out.splitlines():
        if "Space used (live):" in line:
            return int(line.split(":", 1)[1].strip())
    raise RuntimeError(f"no live space in tablestats of {node}:\n{out}")


def ranges_by_replica_set(session: object) -> list[list[TokenRange]]:
    """The keyspace's ranges grouped by replica set (two sets on the seed ring), widest first in each."""
    ring = ring_from_cluster(session)
    replicas = replica_map(ring, Replication.parse({"class": "NetworkTopologyStrategy", "dc1": "2"}))
    groups: dict[tuple[str, ...], list[TokenRange]] = {}
    for token_range, owners in zip(replicas.ranges, replicas.replicas, strict=True):
        groups.setdefault(tuple(sorted(owners)), []).append(token_range)
    if len(groups) < 2:
        raise RuntimeError(f"expected two replica sets on the seed ring, found {sorted(groups)}")
    return [sorted(groups[key], key=_width, reverse=True) for key in sorted(groups)][:2]


def _width(token_range: TokenRange) -> int:
    return (token_range.end - token_range.start) % RING or RING


def spans(ranges: list[TokenRange], width: int) -> list[TokenRange]:
    """`width` tokens taken from `ranges` (one replica set: one session), whole ranges first, then the first
    tokens of the next one."""
    taken: list[TokenRange] = []
    left = width
    for token_range in ranges:
        if left <= 0:
            break
        if _width(token_range) <= left:
            taken.append(token_range)
            left -= _width(token_range)
        else:
            end = (token_range.start - MIN_TOKEN + left) % RING + MIN_TOKEN
            taken.append(TokenRange(token_range.start, end))
            left = 0
    if left > 0:
        raise ValueError(f"the replica set holds fewer than {width} tokens: lower --fractions")
    return taken


def shipped_terms() -> Terms:
    model = DurationModel()
    return Terms(model.command_overhead, model.session_overhead, model.seconds_per_byte)


def machine() -> str:
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                   if line.startswith("model name"))  # fmt: skip
    except (OSError, StopIteration):
        cpu = platform.processor() or "unknown CPU"
    return f"{os.cpu_count()} cores, {cpu}, {platform.system()} {platform.release()}"


def commit() -> str:
    result = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return result.stdout.strip() or "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--megabytes", default="24,64,128", help="data sizes (MB of rows) measured in turn")
    parser.add_argument("--fractions", default="0.04,0.12,0.3", help="shares of the ring one command repairs")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--no-write", action="store_true", help="print only; leave calibration.json as it is")
    args = parser.parse_args()
    steps = sorted(int(x) for x in args.megabytes.split(","))
    fractions = [float(x) for x in args.fractions.split(",")]
    cluster = LocalCluster()
    cluster.down(purge=True)
    points: list[Measured] = []
    rng = random.Random(40)
    try:
        cluster.up("seed")
        nodetool = cluster.nodetool_client()
        with connect(NODES) as session:
            session.execute(f"CREATE KEYSPACE {KEYSPACE} WITH replication = "
                            "{'class': 'NetworkTopologyStrategy', 'dc1': 2}")  # fmt: skip
            session.execute(f"CREATE TABLE {KEYSPACE}.{TABLE} (k int PRIMARY KEY, v blob)")
            session.cluster.control_connection.wait_for_schema_agreement(wait_time=120)
            sets = ranges_by_replica_set(session)
            loaded = 0
            for step in steps:
                rows = step * 1024 * 1024 // ROW_BYTES
                started = time.monotonic()
                load(session, loaded, rows)
                loaded = rows
                for node in NODES:
                    nodetool.flush(node, KEYSPACE)
                copy = live_bytes(cluster, COORDINATOR)
                print(f"step {step} MB: {rows} rows loaded in {time.monotonic() - started:.0f}s; "
                      f"one replica's copy {copy / 2**20:.1f} MiB")  # fmt: skip
                plans = [(f, n) for f in fractions for n in (1, 2) for _ in range(args.repeats)]
                rng.shuffle(plans)
                for fraction, sessions in plans:
                    width = int(RING * fraction)
                    if sessions == 1:
                        ranges = spans(sets[0], width)
                    else:
                        ranges = spans(sets[0], width // 2) + spans(sets[1], width - width // 2)
                    outcome = nodetool.repair(COORDINATOR, KEYSPACE, ranges, tables=[TABLE])
                    if not outcome.succeeded:
                        raise RuntimeError(f"repair failed: {outcome.output}")
                    points.append(Measured(str(step), sessions, copy * fraction, outcome.seconds))
                    print(f"  {fraction:5.2f} of the ring, {sessions} session(s): {outcome.seconds:6.2f}s")
        nodetool.close()
    finally:
        cluster.down(purge=True)

    fitted = fit(points)
    shipped = shipped_terms()
    fit_error = errors(points, [fitted.predict(p.sessions, p.bytes_per_replica) for p in points])
    shipped_error = errors(points, [shipped.predict(p.sessions, p.bytes_per_replica) for p in points])
    loo_error = held_out_errors(points)
    print(f"\n{'size':>5} {'sess':>4} {'MiB':>7} {'measured':>9} {'fitted':>8} {'shipped':>8}")
    for p in points:
        print(f"{p.group:>5} {p.sessions:>4} {p.bytes_per_replica / 2**20:>7.1f} {p.seconds:>9.2f} "
              f"{fitted.predict(p.sessions, p.bytes_per_replica):>8.2f} "
              f"{shipped.predict(p.sessions, p.bytes_per_replica):>8.2f}")  # fmt: skip
    for name, terms in (("fitted", fitted), ("shipped", shipped)):
        rate = f"{1 / terms.seconds_per_byte / 2**20:.1f} MiB/s" if terms.seconds_per_byte > 0 else "not positive"
        print(f"{name + ':':<9}command_overhead {terms.command_overhead:.3f} s, session_overhead "
              f"{terms.session_overhead:.3f} s, seconds_per_byte {terms.seconds_per_byte:.3e} (= {rate})")  # fmt: skip
    for name, figures in (("fit", fit_error), ("leave-one-size-out", loo_error), ("shipped terms", shipped_error)):
        print(f"error of {name:<20}: RMS {figures['rms_relative']:.1%}, median {figures['median_relative']:.1%}, "
              f"max {figures['max_relative']:.1%} (relative, over {len(points)} commands)")  # fmt: skip
    print("not fitted: the streaming term (the data was in sync); mismatch_share and stream_rate keep their "
          "assumed values.")  # fmt: skip
    if not args.no_write:
        CALIBRATION_FILE.write_text(json.dumps({
            "date": datetime.now(UTC).strftime("%Y-%m-%d"), "commit": commit(), "machine": machine(),
            "cluster": "local seed cluster, Cassandra 5.0, 3 nodes, NTS dc1: 2, coordinator 127.0.0.4",
            "terms": fitted.__dict__,
            "error": {"fit": fit_error, "leave_one_size_out": loo_error, "shipped_terms": shipped_error},
            "not_fitted": ["mismatch_share", "stream_rate"],
            "points": [p.__dict__ for p in points],
        }, indent=1) + "\n")  # fmt: skip
        print(f"written: {CALIBRATION_FILE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
