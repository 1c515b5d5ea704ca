"""Replica-map speed: ringward against the python driver's NetworkTopologyStrategy.

Builds a synthetic ring (1,000 nodes x 256 random tokens, 3 DCs x 3 racks), writes it as JSON, then
times, in one run:
  (a) ringward: read the JSON, both replica maps, the diff and per-node totals for
      {dc1:3, dc2:3, dc3:3} -> {dc1:3, dc2:3, dc3:2}: `ringward plan --format summary` end to end;
  (b) cassandra-driver: `NetworkTopologyStrategy(...).make_token_replica_map` for both settings,
      on Host objects built from the same JSON (JSON reading not timed: the driver gets a head start);
  (c) ringward plans that need the staged-route search, end to end (target: <= 3 s each):
      a staged route ({dc1:3, dc2:3, dc3:1} -> {dc1:3, dc2:3, dc3:3}, two ALTERs) and a refused one
      (SimpleStrategy RF 1 -> {dc1:2, dc2:3, dc3:0}: no route keeps QUORUM overlap; the refusal searches
      the fixes it offers).

Run: uv run python benchmarks/placement.py [--nodes 1000] [--vnodes 256] [--seed 7]
"""

from __future__ import annotations

import argparse
import json
import random
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

OLD = {"dc1": 3, "dc2": 3, "dc3": 3}
NEW = {"dc1": 3, "dc2": 3, "dc3": 2}
_NTS = "NetworkTopologyStrategy"
ROUTE_CASES = {
    "staged": ({"class": _NTS, "dc1": 3, "dc2": 3, "dc3": 1}, {"class": _NTS, "dc1": 3, "dc2": 3, "dc3": 3}),
    "refused": ({"class": "SimpleStrategy", "replication_factor": 1}, {"class": _NTS, "dc1": 2, "dc2": 3, "dc3": 0}),
}


def synthetic_ring(nodes: int, vnodes: int, seed: int) -> dict[str, list[dict[str, object]]]:
    rng = random.Random(seed)
    used: set[int] = set()
    listing: list[dict[str, object]] = []
    for n in range(nodes):
        tokens: list[int] = []
        while len(tokens) < vnodes:
            token = rng.randrange(-(2**63) + 1, 2**63)
            if token not in used:
                used.add(token)
                tokens.append(token)
        listing.append(
            {
                "address": f"10.{n // 250}.{n % 250}.1",
                "datacenter": f"dc{n % 3 + 1}",
                "rack": f"rack{(n // 3) % 3 + 1}",
                "tokens": tokens,
            }
        )
    return {"nodes": listing}


def ringward_side(
    path: Path, old: dict[str, object] | None = None, new: dict[str, object] | None = None
) -> tuple[float, float, int, str]:
    """`ringward plan --format summary` end to end, as a user runs it (interpreter start-up, ring load, both
    placements, diff, safety analysis, staged route, summary). Returns wall s, CPU s, affected ranges and
    the verdict (SAFE with the number of ALTERs, or REFUSED)."""
    old = old or {"class": "NetworkTopologyStrategy", **OLD}
    new = new or {"class": "NetworkTopologyStrategy", **NEW}
    command = [str(Path(sys.executable).with_name("ringward")), "plan", "--ring", str(path),
               "--from", json.dumps(old), "--to", json.dumps(new), "--format", "summary"]  # fmt: skip
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - wall
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    match = re.search(r"affected (\d+)", result.stdout)
    if result.returncode not in (0, 3) or not match:
        raise RuntimeError(f"ringward plan failed: {result.stdout[-2000:]}{result.stderr[-2000:]}")
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    steps = re.search(r"staged route, (\d+) steps", result.stdout)
    verdict = "REFUSED" if result.returncode == 3 else f"SAFE, {steps.group(1) if steps else 1} ALTER(s)"
    return wall, cpu, int(match.group(1)), verdict


def driver_side(path: Path) -> Callable[[], int]:
    """Host objects from the JSON (untimed); the returned callable builds both maps (timed)."""
    from cassandra.metadata import Murmur3Token, NetworkTopologyStrategy
    from cassandra.policies import SimpleConvictionPolicy
    from cassandra.pool import Host

    data = json.loads(path.read_text())
    owner: dict[Murmur3Token, Host] = {}
    for node in data["nodes"]:
        host = Host(node["address"], SimpleConvictionPolicy)
        host.set_location_info(node["datacenter"], node["rack"])
        for token in node["tokens"]:
            owner[Murmur3Token(token)] = host
    ring = sorted(owner)

    def build_both() -> int:
        before = NetworkTopologyStrategy({k: str(v) for k, v in OLD.items()}).make_token_replica_map(owner, ring)
        after = NetworkTopologyStrategy({k: str(v) for k, v in NEW.items()}).make_token_replica_map(owner, ring)
        return sum(1 for token in ring if set(before[token]) != set(after[token]))

    return build_both


def _timed(action: Callable[[], int]) -> tuple[float, float, int]:
    """Wall and CPU seconds: CPU time is the fairer number on a busy shared machine."""
    wall, cpu = time.perf_counter(), time.process_time()
    result = action()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--vnodes", type=int, default=256)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "ring.json"
        path.write_text(json.dumps(synthetic_ring(args.nodes, args.vnodes, args.seed)))
        ours = ringward_side(path)
        theirs = _timed(driver_side(path))
        routes = {name: ringward_side(path, old, new) for name, (old, new) in ROUTE_CASES.items()}
    print(f"ring: {args.nodes} nodes x {args.vnodes} tokens, 3 DCs x 3 racks, {OLD} -> {NEW}")
    print(f"{'':10} {'wall s':>8} {'cpu s':>8} {'affected ranges':>16}")
    for name, (wall, cpu, affected) in (("ringward", ours[:3]), ("driver", theirs)):
        print(f"{name:10} {wall:8.2f} {cpu:8.2f} {affected:16}")
    print(f"ratio driver/ringward: wall {theirs[0] / ours[0]:.1f}x, cpu {theirs[1] / ours[1]:.1f}x")
    print("plans that search a staged route (ringward plan --format summary, target <= 3 s):")
    for name, (wall, cpu, affected, verdict) in routes.items():
        old, new = ROUTE_CASES[name]
        print(f"  {name:8} {wall:6.2f} s wall {cpu:6.2f} s cpu  {affected} affected  {verdict}  {old} -> {new}")


if __name__ == "__main__":
    main()
