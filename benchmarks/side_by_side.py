"""ringward's nightly repair against the real CEP-37 AutoRepair on the largest cluster this machine holds (issue 40).

The cluster: 6 Cassandra 5.0.9 nodes in 2 datacenters (dc1: 127.0.0.2-4, dc2: 127.0.0.5-7, one rack per node),
`num_tokens` 16 (balanced seeded tokens, so the simulator sees the same ring), 3 keyspaces x 2 tables under NTS
{dc1: 2, dc2: 2}, rows of 4 KiB random bytes loaded at CL ALL until every node holds `--gib-per-node` of them
(default 1 GiB on the node replicating the least, 58 % of the ring: 1.7 GiB before replication).

Before each contender, hints are switched off and 127.0.0.3 is stopped while `--drift` of the rows (a fresh set
each time) are written at CL ONE, then it is started and every node flushed: every contender finds the same
amount of missed writes. Each is timed until every range of every table was repaired once. In turn:

1. `nodetool repair -full -pr KS` on every node, keyspace by keyspace (the operator's reference).
2. ringward's nightly repair, shipped configuration (selecting the benchmark keyspaces), as its schedule runs it
   in a running Airflow (api-server, scheduler, dag-processor, triggerer; LocalExecutor): unpause -> the
   scheduled run's success, and the run's own start -> end as Airflow records it.
3. AutoRepair's full repair at 5.0.9's shipped defaults (`tests/fixtures/autorepair/`): check every 5 min, a
   5 s floor per task, parallel_repair_count 3 / percentage 3, no two mutual replicas at once. Two settings
   differ, both so that a turn can start at all on a cluster it has no history of: `min_repair_interval` 1 s and
   `force_repair_new_node` true (shipped: 24 h and false, which record a new node as just repaired and hold its
   first turn off for a day), i.e. the state of a cluster last repaired more than a day ago. Switched on with
   `nodetool setautorepairconfig -t full enabled true` on every node -> every node's turn recorded finished in
   system_distributed.auto_repair_history.
4. AutoRepair at ringward's budget: every node restarted with ringward's concurrency (parallel_repair_count /
   parallel_repair_percentage from ringward's shipped configuration), `allow_parallel_replica_repair` true,
   no task floor (ringward's intensity 1.0: no pause), and checks every 5 s instead of 5 min.

AutoRepair also repairs system_auth, system_distributed, system_traces and ringward_ops (small here); ringward
and -pr repair the benchmark keyspaces only.

Beside the real rows, the calibrated simulator's prediction for the same ring, tables and sizes
(tools/fleetsim: ringward's pure executor on the plan task's plan, the CEP-37 model at shipped defaults and at
equal budget with the same 5 s checks, the lower bound), each with its error against the real row; the
simulator is trusted for this cluster only where it is within +-25 %.

Run: uv run python benchmarks/side_by_side.py [--gib-per-node 1.0] [--drift 0.01] [--json OUT]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import random
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [
    str(ROOT / "include"),
    str(ROOT / "plugins"),
    str(ROOT / "tests" / "integration"),
    str(ROOT / "tools" / "fleetsim"),
    str(ROOT / "benchmarks"),
]

from airflow_stack import critical_path, start_stack  # noqa: E402
from autorepair import scheduled_run  # noqa: E402
from cluster_workload import Workload, autorepair  # noqa: E402
from ringward.placement import replica_map  # noqa: E402
from ringward.repair import load_config  # noqa: E402
from ringward.replication import Replication  # noqa: E402
from ringward.ring import Node, Ring  # noqa: E402
from ringward_cassandra.cql import connect  # noqa: E402
from ringward_cassandra.localcluster import LocalCluster  # noqa: E402
from ringward_cassandra.nodetool import NodetoolClient  # noqa: E402
from ringward_cassandra.ops_store import OpsStore  # noqa: E402
from ringward_fleetsim import DurationModel, FleetSpec, lower_bound, run_cep37  # noqa: E402
from ringward_fleetsim.ringward_run import run_ringward  # noqa: E402

DCS = {"dc1": ["127.0.0.2", "127.0.0.3", "127.0.0.4"], "dc2": ["127.0.0.5", "127.0.0.6", "127.0.0.7"]}
NODES = [address for addresses in DCS.values() for address in addresses]
DOWN = "127.0.0.3"
RF_PER_DC = 2
REPLICATION = {dc: RF_PER_DC for dc in DCS}
NUM_TOKENS = 16
KEYSPACES = ["sbs_a", "sbs_b", "sbs_c"]
TABLES = ["t1", "t2"]
ROW_BYTES = 4096
NIGHTLY = "nightly_subrange_repair"
HEAP_MB = 1024
SEED = 40
WORKLOAD = Workload(
    NODES, DOWN, KEYSPACES, TABLES, REPLICATION, ROW_BYTES, batch=5_000, concurrency=64, heap_mb=HEAP_MB
)


def tokens() -> dict[str, tuple[int, ...]]:
    """16 tokens per node, seeded: the ring cut into 16 rounds of 6 equal slots, each round's slots given to the
    6 nodes in a shuffled order. Every node owns 1/6 of the ring as primary (as Cassandra's token allocator
    balances a 16-token ring) and the nodes follow each other in varied orders (varied replica sets)."""
    rng = random.Random(SEED)
    slots = NUM_TOKENS * len(NODES)
    width = 2**64 // slots
    found: dict[str, list[int]] = {address: [] for address in NODES}
    for round_ in range(NUM_TOKENS):
        order = list(NODES)
        rng.shuffle(order)
        for i, address in enumerate(order):
            found[address].append(-(2**63) + (round_ * len(NODES) + i + 1) * width)
    return {address: tuple(mine) for address, mine in found.items()}


def ring_nodes() -> list[tuple[str, str, str, tuple[int, ...]]]:
    """(address, datacenter, rack, tokens) of every node: the one list the topology file, the replicated shares
    and the simulator's ring are made from (a rack per node)."""
    ring = tokens()
    return [(a, dc, f"rack{i + 1}", ring[a]) for dc, addresses in DCS.items() for i, a in enumerate(addresses)]


def replicated_shares() -> dict[str, float]:
    """The share of the ring each node replicates under NTS {dc1: 2, dc2: 2} on `tokens()` (0.58-0.73)."""
    ring = Ring.of(Node(*node) for node in ring_nodes())
    shares = dict.fromkeys(NODES, 0.0)
    for token_range, replicas in replica_map(ring, Replication("NetworkTopologyStrategy", REPLICATION)).items():
        for address in replicas:
            shares[address] += token_range.width() / 2**64
    return shares


def auto_repair_settings(equal_budget: bool) -> dict[str, Any]:
    """cassandra.yaml `auto_repair`: full repair off until its row switches it on; shipped defaults but the two
    a first turn needs (module docstring), or ringward's budget."""
    full: dict[str, Any] = {"enabled": False, "min_repair_interval": "1s", "force_repair_new_node": True}
    scheduler: dict[str, Any] = {}
    if equal_budget:
        config = load_config()
        full.update(
            parallel_repair_count=config.parallel_repair_count,
            parallel_repair_percentage=round(config.parallel_repair_percentage),  # AutoRepair reads an integer
            allow_parallel_replica_repair=True,
            initial_scheduler_delay="5s",
        )
        scheduler.update(repair_check_interval="5s", repair_task_min_duration="0s")
    return {**scheduler, "repair_type_overrides": {"full": full}}


def write_topology(path: Path, equal_budget: bool) -> None:
    nodes = [{"address": a, "datacenter": dc, "rack": rack, "tokens": list(mine)} for a, dc, rack, mine in ring_nodes()]
    path.write_text(
        json.dumps(
            {
                "name": "side-by-side",
                "description": "6 nodes in 2 DCs, num_tokens 16, AutoRepair on (benchmarks/side_by_side.py).",
                "auto_repair": ["full"],
                "auto_repair_settings": auto_repair_settings(equal_budget),
                "nodes": nodes,
            }
        )
    )


class Progress:
    """One line per step with elapsed time and an ETA from the share done."""

    def __init__(self, what: str, total: int) -> None:
        self.what, self.total, self.started, self.last = what, total, time.monotonic(), 0.0

    def __call__(self, done: int) -> None:
        now = time.monotonic()
        if now - self.last < 15 and done < self.total:
            return
        self.last = now
        spent = now - self.started
        eta = spent / done * (self.total - done) if done else float("nan")
        print(f"  {self.what}: {done:,}/{self.total:,} ({spent:.0f} s, ETA {eta:.0f} s)", flush=True)


def data_per_node(cluster: LocalCluster) -> dict[str, int]:
    """Bytes on disk of the benchmark keyspaces, per node (live SSTables and whatever compaction left)."""
    found: dict[str, int] = {}
    for node in cluster.topology().nodes:
        base = cluster.root / node.name / "data" / "data"
        found[node.address] = sum(
            f.stat().st_size
            for ks in KEYSPACES
            for f in (base / ks).rglob("*")
            if f.is_file() and "snapshots" not in f.parts
        )
    return found


_LOG_TIME = re.compile(r"^\w+\s+\[[^\]]+\] (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
_STARTED = re.compile(r"Starting repair command #\d+ \(([0-9a-f-]+)\), repairing keyspace (\w+)")
_FINISHED = re.compile(r"\[repair #([0-9a-f-]+)\]Repair command #\d+ finished")
_SKIPPED = re.compile(r"Repair ([0-9a-f-]+) skipped: Nothing to repair")
_SOAKED = re.compile(r"Soaking for (\d+) ms after repair")


def autorepair_tasks(log_dirs: Sequence[Path], since: datetime, until: datetime) -> dict[str, dict[str, float]]:
    """What AutoRepair's turns did between `since` and `until`, from the nodes' system.log files: per keyspace,
    the repair commands it started, how many of them had nothing to repair (a keyspace with one replica), their
    seconds from start to finish, and the seconds it then slept to make each task last `repair_task_min_duration`
    (summed over the nodes)."""
    found: dict[str, dict[str, float]] = {}
    for directory in log_dirs:
        started: dict[str, tuple[str, datetime]] = {}
        last_keyspace = ""
        for path in sorted(directory.glob("system.log*"), reverse=True):  # system.log.1 (older) first
            for line in path.read_text(errors="replace").splitlines():
                stamp = _LOG_TIME.match(line)
                if stamp is None:
                    continue
                at = datetime.strptime(stamp.group(1), "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC)
                if not since <= at <= until:
                    continue
                if match := _STARTED.search(line):
                    last_keyspace = match.group(2)
                    started[match.group(1)] = (last_keyspace, at)
                    row = found.setdefault(
                        last_keyspace, dict.fromkeys(("tasks", "nothing", "repair_s", "soak_s"), 0.0)
                    )
                    row["tasks"] += 1
                elif (match := _FINISHED.search(line)) and match.group(1) in started:
                    keyspace, began = started.pop(match.group(1))
                    found[keyspace]["repair_s"] += (at - began).total_seconds()
                elif (match := _SKIPPED.search(line)) and match.group(1) in started:
                    found[started[match.group(1)][0]]["nothing"] += 1
                elif (match := _SOAKED.search(line)) and last_keyspace:
                    found[last_keyspace]["soak_s"] += int(match.group(1)) / 1000
    return found


def ringward_night(topology: Path, cluster: LocalCluster, nodetool: NodetoolClient, rows: range) -> dict[str, Any]:
    """The scheduled nightly run in a running Airflow: unpause -> success, and Airflow's own start -> end."""
    found: dict[str, Any] = {}
    for stack in start_stack(nightly_keyspaces=KEYSPACES, topology=str(topology)):
        WORKLOAD.drift(cluster, nodetool, rows)
        started = time.monotonic()
        stack.set_paused(NIGHTLY, False)
        run_id = scheduled_run(stack)
        run = stack.wait_for_state(NIGHTLY, run_id, {"success", "failed"}, timeout=4 * 3600)
        found["unpause_to_success"] = time.monotonic() - started
        stack.set_paused(NIGHTLY, True)
        if run["state"] != "success":
            print(stack.describe(NIGHTLY, run_id))
            raise RuntimeError(f"ringward's nightly run {run_id} ended {run['state']}")
        recorded = datetime.fromisoformat(run["end_date"]) - datetime.fromisoformat(run["start_date"])
        found["run_start_to_end"] = recorded.total_seconds()
        work, gaps, path = critical_path(stack.task_instances(NIGHTLY, run_id))
        found["critical_path"] = {"running": work, "gaps": gaps, "tasks": path}
    return found


def prediction(table_bytes: int, partitions: int) -> dict[str, Any]:
    """The calibrated simulator on this ring and these tables (no fault: the drift is in the streamed share)."""
    spec = FleetSpec(
        nodes=len(NODES), vnodes=NUM_TOKENS, dcs=len(DCS), racks_per_dc=3, keyspaces=len(KEYSPACES),
        tables_per_keyspace=len(TABLES), rf_per_dc=RF_PER_DC, seed=SEED, table_bytes_median=table_bytes,
        table_bytes_sigma=0.0, outliers=0, mean_partition_bytes=max(1, table_bytes // max(1, partitions)),
        keyspace_names=tuple(KEYSPACES), table_names=tuple(TABLES),
        explicit_nodes=tuple(ring_nodes()),
    )  # fmt: skip
    model = DurationModel.calibrated()
    # AutoRepair repairs every replicated keyspace, Cassandra's and ringward_ops too (ringward's run selects the
    # benchmark keyspaces). Under the 5 s floor of the shipped defaults every one of their tasks costs 5 s
    # whatever its size, so the shipped row is also predicted with them (`system_keyspaces`: system_auth,
    # system_distributed, ringward_ops at NTS 2 per DC; their sizes are a fleet's, 0.1-40 MiB a range here,
    # which the floor hides). Without the floor their sizes would count, and a fleet's are not these nodes'.
    with_system = dataclasses.replace(spec, system_keyspaces=True)
    runs: dict[str, Callable[[], Any]] = {
        "ringward": lambda: run_ringward(spec, load_config(), model),
        "autorepair_shipped": lambda: run_cep37(with_system, model),
        "autorepair_shipped_user_keyspaces_only": lambda: run_cep37(spec, model),
        "autorepair_equal_budget": lambda: run_cep37(spec, model, equal_budget=True, repair_check_interval=5.0),
    }
    found: dict[str, Any] = {"model": dataclasses.asdict(model), "spec": json.loads(spec.to_json())}
    for name, run in runs.items():
        result = run()
        found[name] = {"seconds": result.coverage_seconds, "sessions": result.sessions}
    found["lower_bound"] = lower_bound(spec, model).seconds
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gib-per-node", type=float, default=1.0, help="benchmark data each node holds")
    parser.add_argument("--drift", type=float, default=0.01, help="share of rows written while a replica is down")
    parser.add_argument("--timeout", type=float, default=3 * 3600, help="seconds AutoRepair may take per row")
    parser.add_argument("--skip", default="", help="rows to leave out: pr,ringward,shipped,equal")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    skip = set(filter(None, args.skip.split(",")))
    share = min(replicated_shares().values())  # the node replicating the least still holds --gib-per-node
    rows = math.ceil(args.gib_per_node * 2**30 / share / (len(KEYSPACES) * len(TABLES)) / ROW_BYTES)
    extra = max(1, int(rows * args.drift))
    cluster = LocalCluster()
    cluster.down(purge=True)
    scratch = Path(tempfile.mkdtemp(prefix="ringward-sbs-"))  # kept for the run: a restarting node reads it
    topology = scratch / "side-by-side.json"
    results: dict[str, Any] = {
        "rows_per_table": rows,
        "drift_rows_per_table": extra,
        "started": datetime.now(UTC).isoformat(),
    }
    timed: dict[str, float] = {}

    def record(name: str, seconds: float) -> None:
        timed[name] = seconds
        print(f"ROW {name}: {seconds:.1f} s", flush=True)
        if args.json:  # kept as it grows: a later row that fails leaves the earlier ones
            Path(args.json).write_text(json.dumps({**results, "timed": timed}, indent=1, default=str))

    def autorepair_row(name: str) -> None:
        since = datetime.now(UTC)
        seconds = autorepair(nodetool, NODES, args.timeout)
        logs = [cluster.root / node.name / "logs" for node in cluster.topology().nodes]
        results.setdefault("autorepair_tasks", {})[name] = autorepair_tasks(logs, since, datetime.now(UTC))
        record(name, seconds)

    try:
        write_topology(topology, equal_budget=False)
        cluster.up(str(topology), heap_mb=HEAP_MB, timeout=900)
        nodetool = dataclasses.replace(cluster.nodetool_client(), java_classpath=None)  # what an operator runs
        started = time.monotonic()
        WORKLOAD.load(rows, Progress("rows loaded at CL ALL", rows * len(KEYSPACES) * len(TABLES)))
        WORKLOAD.flush(nodetool)
        results["load_seconds"] = time.monotonic() - started
        results["bytes_per_node"] = data_per_node(cluster)
        print(f"loaded in {results['load_seconds']:.0f} s; bytes per node: {results['bytes_per_node']}", flush=True)
        with connect(NODES) as session:  # ringward's own keyspace, before any timing (the first run ever makes it)
            OpsStore(session).ensure_schema([(dc, len(addresses)) for dc, addresses in DCS.items()])
        batch = 1
        if "pr" not in skip:
            WORKLOAD.drift(cluster, nodetool, range(rows * batch, rows * batch + extra))
            batch += 1
            record("nodetool repair -full -pr, node by node", WORKLOAD.primary_range_repairs(nodetool))
        if "ringward" not in skip:
            night = ringward_night(topology, cluster, nodetool, range(rows * batch, rows * batch + extra))
            batch += 1
            results["ringward_night"] = night
            record("ringward nightly (scheduler, shipped config)", night["unpause_to_success"])
            record("ringward nightly, run start -> end (Airflow)", night["run_start_to_end"])
        if "shipped" not in skip:
            WORKLOAD.drift(cluster, nodetool, range(rows * batch, rows * batch + extra))
            batch += 1
            autorepair_row("AutoRepair full, 5.0.9 shipped defaults")
        if "equal" not in skip:
            write_topology(topology, equal_budget=True)  # every node restarted with ringward's budget
            for node in NODES:
                cluster.stop(node)
                cluster.start(node, heap_mb=HEAP_MB, timeout=600)
            WORKLOAD.drift(cluster, nodetool, range(rows * batch, rows * batch + extra))
            batch += 1
            autorepair_row("AutoRepair full, ringward's budget, 5 s checks")
        # one replica's copy of a table, from what the nodes hold (each node: its replicated share of every table)
        held = sum(results["bytes_per_node"].values()) / sum(replicated_shares().values())
        table_bytes = int(held / (len(KEYSPACES) * len(TABLES)))
        results["prediction"] = prediction(table_bytes, rows)
        results["timed"] = timed
    finally:
        cluster.down(purge=True)
        shutil.rmtree(scratch, ignore_errors=True)
    report(results)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return 0


def report(results: dict[str, Any]) -> None:
    timed: dict[str, float] = results["timed"]
    predicted = results["prediction"]
    per_node = results["bytes_per_node"]
    print(
        f"\n{len(NODES)} nodes in {len(DCS)} DCs, num_tokens {NUM_TOKENS}, {len(KEYSPACES)} keyspaces x {len(TABLES)} "
        f"tables, NTS {RF_PER_DC}/DC, {results['rows_per_table']:,} rows of {ROW_BYTES} B per table; on disk per node "
        f"{min(per_node.values()) / 2**30:.2f}-{max(per_node.values()) / 2**30:.2f} GiB; "
        f"{results['drift_rows_per_table']:,} rows per table written with {DOWN} down before each row"
    )
    model_of = {
        "ringward nightly (scheduler, shipped config)": "ringward",
        "AutoRepair full, 5.0.9 shipped defaults": "autorepair_shipped",
        "AutoRepair full, ringward's budget, 5 s checks": "autorepair_equal_budget",
    }
    bound = predicted["lower_bound"]
    print(f"{'row':<50} {'real':>9} {'simulated':>10} {'sim. error':>10}")
    for name, seconds in timed.items():
        key = model_of.get(name)
        simulated = predicted[key]["seconds"] if key else None
        if simulated:
            error = (simulated - seconds) / seconds
            trusted = "trusted" if abs(error) <= 0.25 else "NOT trusted"
            print(f"{name:<50} {seconds:8.1f}s {simulated:9.1f}s {error:+9.1%} ({trusted})")
        else:
            print(f"{name:<50} {seconds:8.1f}s")
    only_user = predicted.get("autorepair_shipped_user_keyspaces_only")
    if only_user and "AutoRepair full, 5.0.9 shipped defaults" in timed:
        print(f"(the shipped AutoRepair model on the benchmark keyspaces alone: {only_user['seconds']:.1f} s)")
    print(f"lower bound (calibrated model): {bound:.1f} s")
    ours = timed.get("ringward nightly (scheduler, shipped config)")
    for name in ("AutoRepair full, 5.0.9 shipped defaults", "AutoRepair full, ringward's budget, 5 s checks",
                 "nodetool repair -full -pr, node by node"):  # fmt: skip
        if ours and name in timed:
            print(f"ringward / {name}: {ours / timed[name]:.2f}")
    if ours:
        print(f"ringward's efficiency against the bound: {bound / ours:.2f}")
    for name, keyspaces in results.get("autorepair_tasks", {}).items():
        print(f"{name}: repair commands per keyspace (all nodes), seconds repairing and seconds of task floor")
        for keyspace, row in sorted(keyspaces.items()):
            print(f"  {keyspace:<20} {row['tasks']:4.0f} commands ({row['nothing']:3.0f} with nothing to repair) "
                  f"{row['repair_s']:7.1f} s repairing {row['soak_s']:7.1f} s floor")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
