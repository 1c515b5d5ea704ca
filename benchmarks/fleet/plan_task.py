"""The nightly plan task's CPU at fleet size without Airflow (issue 40): `plan_night` as `PlanRepairOperator` calls it.

The same call as the operator's (`plan_night` over the ops store and `ClusterAdapter`, the shipped configuration,
`PLAN_CHUNK_ROWS`), on the fleet simulator's ring, catalog, nodetool and in-memory ops store, in a child process of
its own per tree, so the figure is the plan's alone (no Airflow start, no metadata database; the Airflow figure is
`airflow_night.py --plan-only`, which wraps this same call in a task). Two nights:

The cluster holds the keyspaces a real one plans with the default selection: the user keyspaces and
system_auth, system_distributed and ringward_ops (`FleetSpec.system_keyspaces`; `--no-system-keyspaces`: the user
keyspaces alone, as before issue 40, and as trees from before it can only run).

- first: no history (every segment never repaired: all of it backlog);
- steady: every planned segment recorded DONE `--seed-hours` (25) before the night (as `airflow_night.seed_history`),
  so every segment is due again and its record is read; with `--unseeded N`, N segments spread over the ring are
  left without a record (a backlog: `backlog_first` holds back the merely-due segments on their nodes).

Each night prints the plan task's `planning_cpu_seconds`, the child's process CPU and wall time, and the plan's
digest: sha256 over every stored plan chunk of every type in order, with the due / not due / held counts. Two
trees (`--baseline REV`, exported with `git archive`, against this checkout) must print the same digest: the same
segments in the same order. `--profile N` prints the N costliest functions of the plan (cProfile, cumulative and
own time) of this checkout.

Run: nice -n 19 .venv/bin/python benchmarks/fleet/plan_task.py [--medium] [--keyspaces 10] [--nights first,steady]
     [--baseline REV] [--unseeded N] [--profile 30] [--no-system-keyspaces]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]

CHILD = """
import cProfile, dataclasses, hashlib, io, json, logging, pstats, sys, time
root, size, keyspaces, night, seed_hours, unseeded, profile, system = sys.argv[1:9]
sys.path[:0] = [root + "/include", root + "/plugins", root + "/tools/fleetsim"]
from ringward.repair import load_config
from ringward.repair._night import plan_night
from ringward_airflow.repair_ports import ClusterAdapter
try:  # trees before the storage ports were folded (issue 37) wrap the store in StoreAdapter, as their operator did
    from ringward_airflow.repair_ports import StoreAdapter as night_store
except ImportError:  # the operator hands the ops store to the night as it is
    night_store = lambda store: store
from ringward_cassandra.ops.layout import PLAN_CHUNK_ROWS
from ringward_fleetsim import FleetSpec
from ringward_fleetsim.runtime import SimulatedCassandra
from ringward_fleetsim.simulator import Simulator

spec = (FleetSpec.fleet(nodes=100, vnodes=16, table_bytes_median=FleetSpec().table_bytes_median // 10)
        if size == "medium" else FleetSpec.fleet())
spec = dataclasses.replace(spec, keyspaces=int(keyspaces), keyspace_names=())
if system == "yes":
    if "system_keyspaces" not in {f.name for f in dataclasses.fields(spec)}:
        sys.exit(f"{root}: this tree's fleet simulator has no system keyspaces; pass --no-system-keyspaces, or "
                 "a --baseline from after they were added")
    spec = dataclasses.replace(spec, system_keyspaces=True)
simulator = Simulator(spec)
store = simulator.ops_store()
seeded = 0
if night == "steady":  # airflow_night.seed_history, leaving `unseeded` segments spread over the ring unrecorded
    from datetime import timedelta
    from ringward.repair import RecordUpdate, SegmentRecord, SegmentState
    from ringward_cassandra.cluster_repairs import plan_cluster
    planned = plan_cluster(simulator.catalog(), simulator.ring(), load_config()).segments
    left = int(unseeded)
    gone = {s.segment_id for s in planned[:: max(1, len(planned) // left)][:left]} if left else set()
    finished = simulator.clock.now() - timedelta(hours=float(seed_hours))
    updates = [RecordUpdate(s, SegmentRecord(s.segment_id, SegmentState.DONE, last_success=finished,
                                             last_full_success=finished, attempts=1, duration=2.0, run_id="seeded"),
                            finished - timedelta(seconds=2), finished) for s in planned if s.segment_id not in gone]
    store.record_repairs(updates)
    store.reset_stats()
    seeded = len(updates)
    del planned, updates
logging.basicConfig(level=logging.WARNING)
log = logging.getLogger("plan")
profiler = cProfile.Profile() if int(profile) else None
started_wall, started_cpu = time.monotonic(), time.process_time()
if profiler is not None:
    profiler.enable()
plan = plan_night(load_config(), run_id="bench", store=night_store(store),
                  cluster=ClusterAdapter(SimulatedCassandra(simulator)), nodetool=simulator.nodetool(), log=log,
                  chunk_rows=PLAN_CHUNK_ROWS, cpu_seconds=time.process_time)
if profiler is not None:
    profiler.disable()
wall, cpu = time.monotonic() - started_wall, time.process_time() - started_cpu
digest = hashlib.sha256()
for kind, entry in plan.types.items():
    digest.update(kind.encode() + b"\\0")
    for chunk in range(entry.chunks):
        for line in store.run_plan_chunk(entry.plan_id, chunk):
            digest.update(line.encode() + b"\\n")
profiled = ""
if profiler is not None:
    out = io.StringIO()
    stats = pstats.Stats(profiler, stream=out)
    stats.sort_stats("cumulative").print_stats(int(profile))
    stats.sort_stats("tottime").print_stats(int(profile))
    profiled = out.getvalue()
print(json.dumps({"planning_cpu": plan.planning_cpu_seconds, "process_cpu": cpu, "wall": wall,
                  "segments": plan.segments, "due": plan.due, "not_due": plan.not_due, "chunks": plan.chunks,
                  "exhausted": plan.exhausted, "seeded": seeded, "digest": digest.hexdigest(),
                  "profile": profiled}))
"""


def run(
    tree: Path, size: str, keyspaces: int, night: str, seed_hours: float, unseeded: int, profile: int, system: bool
) -> Any:
    command = [sys.executable, "-c", CHILD, str(tree), size, str(keyspaces), night, str(seed_hours), str(unseeded),
               str(profile), "yes" if system else "no"]  # fmt: skip
    answer = subprocess.run(command, capture_output=True, text=True, check=False)
    if answer.returncode != 0:
        raise RuntimeError(f"the {night} night in {tree} failed:\n{answer.stderr[-4000:]}")
    return json.loads(answer.stdout.strip().splitlines()[-1])


def export(ref: str, into: Path) -> Path:
    archive = into / "old.tar"
    subprocess.run(["git", "archive", "-o", str(archive), ref], cwd=ROOT, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "old", filter="data")
    return into / "old"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--medium", action="store_true", help="100 nodes x 16 vnodes instead of 1000 x 256")
    parser.add_argument("--keyspaces", type=int, default=10, help="user keyspaces (ks00, ks01, ...) x 20 tables")
    parser.add_argument(
        "--no-system-keyspaces",
        action="store_true",
        help="leave out system_auth, system_distributed and ringward_ops (before issue 40's step 1)",
    )
    parser.add_argument("--nights", default="first,steady", help="first, steady or both (comma separated)")
    parser.add_argument("--seed-hours", type=float, default=25.0, help="the steady night's records' age")
    parser.add_argument("--unseeded", type=int, default=0, help="segments left without a record on the steady night")
    parser.add_argument("--baseline", help="git ref of the old tree to run beside this checkout (same digest?)")
    parser.add_argument("--profile", type=int, default=0, help="print this many top functions of this checkout")
    args = parser.parse_args()
    size = "medium" if args.medium else "full"
    system = not args.no_system_keyspaces
    print(f"fleet: {size}, {args.keyspaces} keyspaces x 20 tables"
          f"{' + system_auth, system_distributed, ringward_ops' if system else ''}, shipped config; "
          "CPU seconds (time.process_time)")  # fmt: skip
    same = True
    with tempfile.TemporaryDirectory() as scratch:
        old_tree = export(args.baseline, Path(scratch)) if args.baseline else None
        for night in args.nights.split(","):
            trees = [("new", ROOT)] + ([(f"old {args.baseline}", old_tree)] if old_tree else [])
            digests = set()
            for label, tree in trees:
                started = time.monotonic()
                figures = run(tree, size, args.keyspaces, night, args.seed_hours, args.unseeded,
                              args.profile if label == "new" else 0, system)  # fmt: skip
                digests.add(figures["digest"])
                child_wall = time.monotonic() - started
                print(f"{night:>6} {label:<12} plan CPU {figures['planning_cpu']:6.1f} s  "
                      f"(process {figures['process_cpu']:6.1f} s, plan wall {figures['wall']:6.1f} s, "
                      f"child wall {child_wall:6.1f} s)  segments {figures['segments']:,} due {figures['due']:,} "
                      f"not due {figures['not_due']:,} chunks {figures['chunks']} seeded {figures['seeded']:,}  "
                      f"digest {figures['digest'][:16]}")  # fmt: skip
                if figures["profile"]:
                    print(figures["profile"])
            if len(digests) > 1:
                same = False
                print(f"{night:>6} DIGESTS DIFFER: the trees planned different segments or orders")
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
