"""Planning CPU of one nightly repair at fleet size (issue 23), old against new, in one run.

Synthetic ring: N nodes x V random vnode tokens, 3 DCs x 3 racks, 10 keyspaces x 20 tables, all
`NetworkTopologyStrategy {dc1: 3, dc2: 3, dc3: 3}`, the shipped `default_config.yaml`. The night's
planning, timed step by step with `time.process_time()`:

  select_units -> replica map per keyspace -> plan_segments -> group_segments(ranges_per_command)
  -> due_segments over every planned segment, with a history record for every one (half of them due)

The history (one `SegmentRecord` per segment, as the ops store would return it) is built before the clock
starts, its ids from the id function, so a segment's own id is still unknown when `due_segments` runs.

Each (implementation, fleet size) pair runs in its own child process, so the two never share a cache or a
heap. "old" is the tree at `--baseline` (default: the commit this work branched from), exported with
`git archive`; "new" is this checkout. The old tree gets only the API it had (no replica-map cache).

Run: uv run python benchmarks/fleet_planning.py [--sizes 1000x256,100x16] [--baseline e755bac] [--no-baseline]

Before the change (e755bac, 1000 x 256, one keyspace, CPU): replica_map ~1.6 s, plan_segments ~2.4 s,
group_segments ~2.3 s.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "e755bac"  # main before the fleet planning work
KEYSPACES = 10
TABLES = 20
SEED = 7
NOW = datetime(2026, 11, 25, 1, 0, tzinfo=UTC)
STEPS = ("select_units", "replica_map", "plan_segments", "group_segments", "due_segments")


def synthetic_nodes(nodes: int, vnodes: int, seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    used: set[int] = set()
    listing = []
    for n in range(nodes):
        tokens: list[int] = []
        while len(tokens) < vnodes:
            token = rng.randrange(-(2**63) + 1, 2**63)
            if token not in used:
                used.add(token)
                tokens.append(token)
        listing.append(
            {"address": f"10.{n // 250}.{n % 250}.1", "datacenter": f"dc{n % 3 + 1}",
             "rack": f"rack{(n // 3) % 3 + 1}", "tokens": tuple(tokens)}
        )  # fmt: skip
    return listing


def night(nodes: int, vnodes: int, new: bool) -> dict[str, Any]:
    """Plan one night in this process (the tree on sys.path decides old or new); CPU seconds per step."""
    from ringward.placement import replica_map
    from ringward.repair import SegmentRecord, due_segments, group_segments, load_config, plan_segments, select_units
    from ringward.repair._segments import _segment_id
    from ringward.replication import Replication
    from ringward.ring import Node, Ring

    ring = Ring.of(Node(**node) for node in synthetic_nodes(nodes, vnodes, SEED))
    config = load_config()
    schema = {f"ks{k:02d}": [f"t{t:02d}" for t in range(TABLES)] for k in range(KEYSPACES)}
    replication = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3, "dc3": 3})
    spent = dict.fromkeys(STEPS, 0.0)

    def timed(step: str, call: Callable[[], Any]) -> Any:
        start = time.process_time()
        result = call()
        spent[step] += time.process_time() - start
        return result

    units = timed("select_units", lambda: select_units(schema, config))
    if new:
        from ringward.repair import ReplicaMapCache

        cache = ReplicaMapCache(ring)
    segments = []
    commands = 0
    for unit in units:
        if new:
            entries = timed("replica_map", lambda: cache.entries(replication))
        else:
            entries = timed("replica_map", lambda: replica_map(ring, replication).entries())
        plan = timed("plan_segments", lambda: plan_segments(ring, entries, unit, config))  # noqa: B023
        commands += len(timed("group_segments", lambda: group_segments(plan.segments, config.ranges_per_command)))  # noqa: B023
        segments.extend(plan.segments)
    # The history: every segment repaired once, between 0 and 48 hours ago (about half are due again).
    rng = random.Random(SEED)
    records = {}
    for segment in segments:
        segment_id = _segment_id(segment.keyspace, segment.tables, segment.range)
        last = NOW - timedelta(seconds=rng.randrange(48 * 3600))
        records[segment_id] = SegmentRecord(segment_id, last_success=last, last_full_success=last)
    due = timed("due_segments", lambda: due_segments(segments, records, NOW, config.min_repair_interval))
    return {"steps": spent, "total": sum(spent.values()), "units": len(units), "segments": len(segments),
            "commands": commands, "due": len(due), "first_due": due[0].segment_id if due else None,
            "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}  # fmt: skip


def child(tree: Path, nodes: int, vnodes: int, new: bool) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", str(tree), f"--sizes={nodes}x{vnodes}"]
    if new:
        command.append("--new")
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}{result.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return figures


def export_tree(ref: str, into: Path) -> Path:
    archive = into / "baseline.tar"
    with archive.open("wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref, "include"], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def report(label: str, figures: dict[str, Any]) -> None:
    steps = "  ".join(f"{step} {figures['steps'][step]:6.2f} s" for step in STEPS)
    print(f"  {label:<4} {steps}  total {figures['total']:6.2f} s  (peak RSS {figures['peak_mib']:,.0f} MiB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000x256,100x16", help="nodes x vnodes, comma separated")
    parser.add_argument("--baseline", default=BASELINE, help="git ref of the old implementation")
    parser.add_argument("--no-baseline", action="store_true", help="time the new implementation only")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--new", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [tuple(int(x) for x in size.split("x")) for size in args.sizes.split(",")]
    if args.child is not None:
        sys.path[:0] = [str(args.child / "include")]
        print(json.dumps(night(*sizes[0], new=args.new)))
        return
    with tempfile.TemporaryDirectory() as scratch:
        old_tree = None if args.no_baseline else export_tree(args.baseline, Path(scratch))
        for nodes, vnodes in sizes:
            print(f"{nodes} nodes x {vnodes} vnodes x 3 DCs, NTS 3/3/3, {KEYSPACES} keyspaces x {TABLES} tables "
                  f"(CPU seconds, time.process_time)")  # fmt: skip
            new = child(ROOT, nodes, vnodes, new=True)
            print(f"  {new['units']} units, {new['segments']:,} segments, {new['commands']:,} commands, "
                  f"{new['due']:,} due")  # fmt: skip
            report("new", new)
            if old_tree is not None:
                old = child(old_tree, nodes, vnodes, new=False)
                same = all(old[k] == new[k] for k in ("units", "segments", "commands", "due", "first_due"))
                report("old", old)
                print(f"  old / new: {old['total'] / new['total']:.1f}x  (same plan: {'yes' if same else 'NO'})")


if __name__ == "__main__":
    main()
