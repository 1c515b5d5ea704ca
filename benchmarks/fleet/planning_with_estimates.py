"""Planning CPU of one night with the shipped size splitter on the simulated fleet (issue 23), old against new.

`ringward_fleetsim.ringward_run.plan_ringward` plans every unit of the fleet spec as the plan task does, with
the size estimates the simulated cluster serves. Since 2026-11-27 it calls the plan task's own `plan_cluster`
(outlier tables in units of their own) and its CPU includes the simulated catalog's reads; before, it planned
one unit per keyspace and counted ringward's code only (units, replica maps, segments, the size index).
Each tree runs in its own child process: "old" is the tree at `--baseline` exported with `git archive` (its
catalog serves one `system.size_estimates` row per table and ring range: 5.1 M per keyspace at 1000 x 256 x 20
tables), "new" is this checkout (one row per table and node, as the nodes sum them).

Run: uv run python benchmarks/fleet/planning_with_estimates.py [--medium] [--keyspaces N] [--baseline REV]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BASELINE = "e175771"  # main before node-summed size estimates

CHILD = """
import json, sys, time, dataclasses
root = sys.argv[1]
sys.path[:0] = [root + "/include", root + "/plugins", root + "/tools/fleetsim"]  # older trees: plugins/
from ringward.repair import load_config
from ringward_fleetsim import FleetSpec
from ringward_fleetsim.cluster import SimCluster
from ringward_fleetsim.ringward_run import plan_ringward
medium, keyspaces = sys.argv[2] == "medium", int(sys.argv[3])
spec = (FleetSpec.fleet(nodes=100, vnodes=16, table_bytes_median=FleetSpec().table_bytes_median // 10)
        if medium else FleetSpec.fleet())
spec = dataclasses.replace(spec, keyspaces=keyspaces, keyspace_names=())
started = time.process_time()
plan = plan_ringward(SimCluster(spec, None, record=False), load_config(None))
print(json.dumps({"planning_cpu": plan.planning_cpu_seconds, "process_cpu": time.process_time() - started,
                  "segments": len(plan.segments),
                  "estimated_bytes": sum(s.estimated_bytes or 0 for s in plan.segments)}))
"""


def run(tree: Path, size: str, keyspaces: int) -> dict[str, float]:
    answer = subprocess.run(
        [sys.executable, "-c", CHILD, str(tree), size, str(keyspaces)], capture_output=True, text=True, check=True
    )
    return json.loads(answer.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--medium", action="store_true", help="100 nodes x 16 vnodes instead of 1000 x 256")
    parser.add_argument("--keyspaces", type=int, default=10)
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the new tree (default: this checkout)")
    args = parser.parse_args()
    size = "medium" if args.medium else "full"
    with tempfile.TemporaryDirectory() as scratch:
        archive = Path(scratch) / "old.tar"
        subprocess.run(["git", "archive", "-o", str(archive), args.baseline], cwd=ROOT, check=True)
        old_tree = Path(scratch) / "old"
        with tarfile.open(archive) as tar:
            tar.extractall(old_tree, filter="data")
        old = run(old_tree, size, args.keyspaces)
    new = run(args.tree, size, args.keyspaces)
    print(f"fleet: {size}, {args.keyspaces} keyspaces x 20 tables, shipped config (size splitter)")
    print(f"{'':34}{'old (' + args.baseline + ')':>18}{'new':>14}{'new/old':>10}")
    for key, label in (("planning_cpu", "planning CPU (s)"), ("process_cpu", "process CPU incl. catalog (s)")):
        print(f"{label:34}{old[key]:>18.1f}{new[key]:>14.1f}{new[key] / old[key]:>10.3f}")
    print(f"{'segments':34}{old['segments']:>18,.0f}{new['segments']:>14,.0f}")
    print(f"{'estimated bytes (sum)':34}{old['estimated_bytes']:>22,.0f}{new['estimated_bytes']:>22,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
