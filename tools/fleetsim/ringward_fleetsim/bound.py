"""The lower bound: a time no scheduler can beat on a spec under the simulator's DurationModel.

    bound = max(work bound, session bound)

Work bound. Every scheduler must repair every (table, ring range) with at least two replicas, and each
replica of a range reads (validates) its whole copy of the range's data and streams the mismatched share:
node n carries at least W_n = D_n x (1 / validation_rate + mismatch_share / stream_rate) seconds of work, D_n
being the data of every repairable range n replicates (all tables). Processor sharing gives a node in k
sessions 1/k of its rates each, so a node never does more than one second of that work per second, and does
none while it is down. The node's bound is the first T at which its up-time in [0, T) reaches W_n: W_n without
a fault; with n down over [t1, t2) it is W_n when W_n <= t1, else t2 + (W_n - t1) (its work left at t1 cannot
start before it returns). The work bound is the largest node bound. (Parallel validation is assumed:
DC-aware or sequential validation only lengthens a session.)

Where it holds exactly: for every scheduler that keeps a node in one session at a time (ringward, the
equal-budget Reaper model) and under true processor sharing. `SimCluster` approximates processor sharing by
fixing a session's k when it starts, so sessions stacked on one node at different k can together exceed the
node's rate (a long session at k = 1 plus a stream of short ones at k = 2 do 1.5 s of work a second): a
scheduler without node locks (the CEP-37 models) or with per-run locks (the shipped Reaper model: a node in
up to `maxParallelRepairs` runs' segments) could in principle finish under the bound in the simulator. No row
of the benchmarks does; the tests check it on small specs.

Session bound. A repair session has one replica set, and a command repairs one keyspace: covering a keyspace
takes at least one session per distinct replica set of its repairable ranges. Each session costs at least
`session_overhead`, one table's and one range's overhead, and the cheaper of `command_overhead` and
`in_process_overhead` (a command started in-process pays the latter), and the overheads are latency that
overlaps only across concurrent sessions: fewest sessions x that least cost / `max_sessions`, the most sessions
the compared configurations run at once (default: ringward's shipped `allowed_parallelism` on the ring, which the
equal-budget rows share; a scheduler with more concurrency is not bounded by this term).
"""

from __future__ import annotations

from dataclasses import dataclass

from ringward.repair import RepairConfig, allowed_parallelism, load_config

from ringward_fleetsim.anchors import _placement
from ringward_fleetsim.cluster import DurationModel, SimCluster
from ringward_fleetsim.spec import FleetSpec

__all__ = ["LowerBound", "lower_bound"]


@dataclass(frozen=True)
class LowerBound:
    seconds: float  # max(work_seconds, session_seconds)
    work_seconds: float  # the busiest node's own work, its down time included
    busiest_node: str
    session_seconds: float
    fewest_sessions: int
    max_sessions: int


def _ready_after(work: float, windows: list[tuple[float, float]]) -> float:
    """The first T with `work` seconds of up-time in [0, T), the node down over `windows`."""
    t = 0.0
    remaining = work
    for start, end in sorted(windows):
        if end <= t:
            continue
        start = max(start, t)
        if remaining <= start - t:
            break
        remaining -= start - t
        t = end
    return t + remaining


def lower_bound(
    spec: FleetSpec,
    model: DurationModel | None = None,
    *,
    max_sessions: int | None = None,
    budget: RepairConfig | None = None,
    cluster: SimCluster | None = None,
) -> LowerBound:
    """The bound for `spec` under `model` (see the module's docstring). `max_sessions` default: ringward's
    `allowed_parallelism(budget, nodes)` with `budget` the shipped configuration."""
    cluster = cluster or SimCluster(spec, model, record=False)
    model = cluster.model
    ring = cluster.initial_ring
    widths = [r.width() for r in ring.ranges()]
    placement = _placement(cluster)
    data = [0.0] * len(cluster.addresses)
    fewest = 0
    for keyspace, replicas in placement.items():
        per_token = cluster.bytes_per_token(keyspace)
        sets = set()
        for r, reps in enumerate(replicas):
            if len(reps) < 2:
                continue
            sets.add(frozenset(reps))
            nbytes = widths[r] * per_token
            for n in reps:
                data[n] += nbytes
        fewest += len(sets)
    windows: dict[int, list[tuple[float, float]]] = {}
    for down in spec.faults.down:
        windows.setdefault(cluster.ids[down.address], []).append((down.start, down.end))
    node_bounds = [_ready_after(d * model.seconds_per_byte, windows.get(n, [])) for n, d in enumerate(data)]
    busiest = max(range(len(node_bounds)), key=node_bounds.__getitem__) if node_bounds else 0
    work = node_bounds[busiest] if node_bounds else 0.0
    if max_sessions is None:
        max_sessions = allowed_parallelism(budget if budget is not None else load_config(), len(ring.nodes))
    # The least any session costs beyond its data: the cheaper of a command's and an in-process start, its session,
    # and one table over one range (every session has at least one of each).
    least = min(model.command_overhead, model.in_process_overhead) + model.fixed(sessions=1, tables=1, ranges=1)
    sessions = fewest * least / max(1, max_sessions)
    return LowerBound(max(work, sessions), work, cluster.addresses[busiest], sessions, fewest, max_sessions)
