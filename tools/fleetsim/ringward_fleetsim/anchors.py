"""The two anchors, as their documentation describes their scheduling, as discrete-event schedulers over
the simulated cluster (same spec, duration model and faults as ringward).

Both plan on the ring at t = 0 (a node joining later is not in their targets) and count coverage per
(table, ring range): a range of a table is covered once every piece of it was repaired successfully.
"""

from __future__ import annotations

import heapq
import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ringward.placement import replica_map

from ringward_fleetsim.cluster import DurationModel, SimCluster
from ringward_fleetsim.spec import FleetSpec

__all__ = ["SchedulerResult", "run_cep37", "run_reaper"]

DAY = 86400.0


@dataclass
class SchedulerResult:
    """`coverage_seconds`: simulated time until every (table, range) was repaired at least once (None: not
    within `max_time`). `table_covered`: per "ks.table", when its last range was covered."""

    name: str
    coverage_seconds: float | None
    sessions: int
    failed_sessions: int
    node_session_seconds: dict[str, float]
    table_covered: dict[str, float]
    uncovered_ranges: int
    wall_seconds: float  # CPU seconds the simulation took
    planning_cpu_seconds: float | None = None
    notes: list[str] = field(default_factory=list)

    def covered_within_gc_grace(self, gc_grace: dict[str, int]) -> bool:
        return all(name in self.table_covered and self.table_covered[name] <= g for name, g in gc_grace.items())

    def busiest_node(self) -> tuple[str, float]:
        address = max(self.node_session_seconds, key=self.node_session_seconds.__getitem__)
        return address, self.node_session_seconds[address]


class _Coverage:
    """Per (table, ring range): covered yet? Units are "ks.table" names."""

    def __init__(self, tables: list[str], ranges: int, unrepairable: Sequence[int]) -> None:
        self.tables = tables
        self.ranges = ranges
        self.covered = [bytearray(ranges) for _ in tables]
        self.counts = [0] * len(tables)
        self.done_at: dict[str, float] = {}
        self.remaining = len(tables) * ranges
        for unit in range(len(tables)):
            for r in unrepairable:
                self.mark(unit, r, 0.0)

    def mark(self, unit: int, r: int, t: float) -> None:
        row = self.covered[unit]
        if not row[r]:
            row[r] = 1
            self.counts[unit] += 1
            self.remaining -= 1
            if self.counts[unit] == self.ranges:
                self.done_at[self.tables[unit]] = t


def _placement(cluster: SimCluster) -> dict[str, list[tuple[int, ...]]]:
    """Replica ids per ring range (ring order), per keyspace."""
    ring = cluster.initial_ring
    out: dict[str, list[tuple[int, ...]]] = {}
    by_setting: dict[str, list[tuple[int, ...]]] = {}
    ids = cluster.ids
    for keyspace in sorted(cluster.catalog.tables()):
        replication = cluster.catalog.replication(keyspace)
        key = repr(sorted(replication.factors.items())) + replication.strategy
        if key not in by_setting:
            by_setting[key] = [tuple(ids[a] for a in reps) for reps in replica_map(ring, replication).replicas]
        out[keyspace] = by_setting[key]
    return out


def _result(name: str, cluster: SimCluster, coverage: _Coverage, t: float, wall: float) -> SchedulerResult:
    return SchedulerResult(
        name=name,
        coverage_seconds=t if coverage.remaining == 0 else None,
        sessions=cluster.stats.sessions,
        failed_sessions=cluster.stats.failed,
        node_session_seconds=dict(zip(cluster.addresses, cluster.stats.node_seconds, strict=True)),
        table_covered=dict(coverage.done_at),
        uncovered_ranges=coverage.remaining,
        wall_seconds=wall,
    )


# ---------------------------------------------------------------------------------------------------------
# CEP-37 AutoRepair (full repair)
# ---------------------------------------------------------------------------------------------------------

_END, _START, _TICK, _WAKE, _DOWN, _UP = 0, 1, 2, 3, 4, 5


@dataclass(slots=True)
class _Turn:
    items: Iterator[tuple[tuple[int, ...], int, float, tuple[int, ...], float, bool, int]]
    item: tuple[tuple[int, ...], int, float, tuple[int, ...], float, bool, int] | None = None
    attempts: int = 0
    table: int = -1
    table_start: float = 0.0
    range_failed: bool = False
    start: float = 0.0
    end: float = 0.0
    ok: bool = True


def run_cep37(
    spec: FleetSpec,
    model: DurationModel | None = None,
    *,
    parallel_repair_count: int = 3,
    parallel_repair_percentage: float = 3.0,
    repair_check_interval: float = 300.0,
    number_of_subranges: int = 16,
    repair_by_keyspace: bool = False,
    max_retries: int = 3,
    retry_backoff: float = 60.0,
    table_max_repair_time: float = 6 * 3600.0,
    min_repair_interval: float = DAY,
    max_time: float = 365 * DAY,
    cluster: SimCluster | None = None,
) -> SchedulerResult:
    """CEP-37 AutoRepair's full repair as its design describes it.

    - Nodes take turns, oldest last finish first (never repaired first, then host order); at most
      max(parallel_repair_count, ceil(percentage% of nodes)) nodes are in their turn at once. A node whose
      turn comes starts at its next scheduler check (every `repair_check_interval`, each node at its own
      seeded phase); a down node at the head of the queue keeps its slot until it is back.
    - In its turn a node repairs its primary ranges (-pr), keyspace by keyspace, table by table
      (`repair_by_keyspace` False) or all tables of a keyspace per session (True), one session at a time.
    - Splitter (DefaultAutoRepairTokenSplitter / FixedSplitTokenRangeSplitter): `number_of_subranges` per
      node, divided over the ranges it repairs, at least one per range: with 256 vnodes one session per
      vnode range; with 4 vnodes, 4 equal subranges per range.
    - A failed session is retried `max_retries` times `retry_backoff` apart, then its range is left
      unrepaired in this turn. A table taking longer than `table_max_repair_time` on a node is skipped for
      the rest of the turn. The next turn of a node starts no sooner than `min_repair_interval` after
      its last finish. No cross-node lock: concurrent turns share replicas (processor sharing).
    """
    started_wall = time.process_time()
    cluster = cluster or SimCluster(spec, model, record=False)
    ring = cluster.initial_ring
    ranges = ring.ranges()
    widths = [r.width() for r in ranges]
    placement = _placement(cluster)
    schema = cluster.catalog.tables()
    keyspaces = sorted(schema)
    tables = [f"{ks}.{t}" for ks in keyspaces for t in sorted(schema[ks])]
    unit_of = {name: i for i, name in enumerate(tables)}
    unrepairable = [i for i, reps in enumerate(placement[keyspaces[0]]) if len(reps) < 2] if keyspaces else []
    coverage = _Coverage(tables, len(ranges), unrepairable)
    node_count = len(ring.nodes)
    parallel = max(1, parallel_repair_count, math.ceil(parallel_repair_percentage * node_count / 100))
    primary: list[list[int]] = [[] for _ in cluster.addresses]
    for index, token_range in enumerate(ranges):
        primary[cluster.ids[ring.token_owner[token_range.end].address]].append(index)

    def work(node: int) -> Iterator[tuple[tuple[int, ...], int, float, tuple[int, ...], float, bool, int]]:
        mine = primary[node]
        pieces = max(1, math.ceil(number_of_subranges / len(mine))) if mine else 1
        for keyspace in keyspaces:
            reps = placement[keyspace]
            names = sorted(schema[keyspace])
            groups = [tuple(names)] if repair_by_keyspace else [(n,) for n in names]
            for group in groups:
                units = tuple(unit_of[f"{keyspace}.{n}"] for n in group)
                per_token = cluster.bytes_per_token(keyspace, group)
                table_key = units[0]
                for r in mine:
                    if len(reps[r]) < 2:
                        continue
                    width = widths[r] / pieces
                    for piece in range(pieces):
                        yield units, r, width, reps[r], per_token, piece == pieces - 1, table_key

    rng_phase = random.Random(f"{spec.seed}:cep37-phase")
    phase = [rng_phase.uniform(0, repair_check_interval) for _ in cluster.addresses]
    events: list[tuple[float, int, int, int]] = []
    seq = 0
    turns: dict[int, _Turn] = {}
    idle = [(-math.inf, n, n) for n in range(node_count)]  # (last finish, order, node)
    heapq.heapify(idle)
    in_turn = 0
    wake_at = math.inf
    t = 0.0

    def push(when: float, kind: int, node: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (when, seq, kind, node))

    def next_tick(node: int, when: float) -> float:
        if repair_check_interval <= 0:
            return when
        p = phase[node]
        return float(p + max(0, math.ceil((when - p) / repair_check_interval)) * repair_check_interval)

    def fill(now: float) -> None:
        nonlocal in_turn, wake_at
        while in_turn < parallel and idle:
            last, _, node = idle[0]
            if last + min_repair_interval > now:
                if last + min_repair_interval < wake_at:
                    wake_at = last + min_repair_interval
                    push(wake_at, _WAKE, -1)
                return
            heapq.heappop(idle)
            in_turn += 1
            push(next_tick(node, now), _TICK, node)

    def start(node: int, turn: _Turn, now: float) -> bool:
        """Start the turn's next session; False when the turn is over."""
        while True:
            if turn.item is None:
                turn.item = next(turn.items, None)
                turn.attempts = 0
                if turn.item is None:
                    return False
            _, _, width, reps, per_token, _, table_key = turn.item
            if table_key != turn.table:
                turn.table, turn.table_start = table_key, now
                turn.range_failed = False
            elif now - turn.table_start > table_max_repair_time:
                turn.item = None  # table_max_repair_time: skip the rest of the table
                continue
            end, ok = cluster.begin(reps, width * per_token, now)
            turn.start, turn.end, turn.ok = now, end, ok
            push(end, _END, node)
            return True

    def finish_turn(node: int, now: float) -> None:
        nonlocal in_turn
        del turns[node]
        in_turn -= 1
        heapq.heappush(idle, (now, node, node))
        fill(now)

    fill(0.0)
    while events and coverage.remaining and t <= max_time:
        t, _, kind, node = heapq.heappop(events)
        if kind == _END:
            turn = turns[node]
            assert turn.item is not None
            units, r, _, reps, _, last, _ = turn.item
            cluster.end(reps, turn.start, turn.end, turn.ok)
            if cluster.record:
                keyspace = tables[units[0]].split(".", 1)[0]
                names = [tables[u].split(".", 1)[1] for u in units]
                cluster.note(reps, turn.start, turn.end, keyspace, names, (ranges[r],), turn.ok)
            if turn.ok:
                if last and not turn.range_failed:
                    for unit in units:
                        coverage.mark(unit, r, t)
                if last:
                    turn.range_failed = False
                turn.item = None
            else:
                turn.attempts += 1
                if turn.attempts <= max_retries:
                    push(t + retry_backoff, _START, node)
                    continue
                turn.range_failed = not last
                turn.item = None
            if not start(node, turns[node], t):
                finish_turn(node, t)
        elif kind == _START:
            if not start(node, turns[node], t):
                finish_turn(node, t)
        elif kind == _TICK:
            if not cluster.is_up(node, t):
                push(next_tick(node, cluster.up_again(node, t)), _TICK, node)
                continue
            turns[node] = _Turn(work(node))
            if not start(node, turns[node], t):
                finish_turn(node, t)
        else:
            wake_at = math.inf
            fill(t)
    result = _result("CEP-37", cluster, coverage, t, time.process_time() - started_wall)
    result.notes.append(
        f"parallel turns {parallel}, subranges/range "
        f"{max(1, math.ceil(number_of_subranges / max(1, len(primary[0]))))}, repair_by_keyspace {repair_by_keyspace}"
    )
    return result


# ---------------------------------------------------------------------------------------------------------
# Reaper
# ---------------------------------------------------------------------------------------------------------


def run_reaper(
    spec: FleetSpec,
    model: DurationModel | None = None,
    *,
    intensity: float = 0.9,
    concurrent_runs: bool = True,
    lookahead: int = 256,
    max_time: float = 365 * DAY,
    cluster: SimCluster | None = None,
) -> SchedulerResult:
    """Reaper as its documentation describes it.

    - One repair run per keyspace (repair unit = the keyspace with all its tables); segments = the vnode
      ranges, one range per session, never coalesced across replica sets; every range once (no -pr).
    - A node is in one segment at a time; after a segment, its replicas pause duration x (1/intensity - 1).
    - A run has at most min(segments, max(1, nodes / replicas per range)) segments running
      (RepairRunner.getPossibleParallelRepairsCount); runs of all keyspaces run at once
      (`concurrent_runs`) sharing the node locks, or one after another.
    - The runner starts, in segment order, the next segment whose replicas are all free and up: when nodes
      become free it looks at the pending segments of those nodes, at most `lookahead` per freed node
      (the real runner scans every pending segment on each tick; the bound keeps a 2.5 M-segment night
      tractable). Failed segments go back to the pending list, retried later in the run.
    """
    started_wall = time.process_time()
    cluster = cluster or SimCluster(spec, model, record=False)
    ring = cluster.initial_ring
    ranges = ring.ranges()
    widths = [r.width() for r in ranges]
    placement = _placement(cluster)
    schema = cluster.catalog.tables()
    keyspaces = sorted(schema)
    tables = [f"{ks}.{t}" for ks in keyspaces for t in sorted(schema[ks])]
    unit_of = {name: i for i, name in enumerate(tables)}
    n_nodes = len(cluster.addresses)
    seg_nodes: list[tuple[int, ...]] = []
    seg_bytes: list[float] = []
    seg_run: list[int] = []
    seg_range: list[int] = []
    run_units: list[tuple[int, ...]] = []
    unrepairable = []
    for run, keyspace in enumerate(keyspaces):
        per_token = cluster.bytes_per_token(keyspace)
        run_units.append(tuple(unit_of[f"{keyspace}.{t}"] for t in sorted(schema[keyspace])))
        for r, reps in enumerate(placement[keyspace]):
            if len(reps) < 2:
                unrepairable.append(r)
                continue
            seg_nodes.append(reps)
            seg_bytes.append(widths[r] * per_token)
            seg_run.append(run)
            seg_range.append(r)
    coverage = _Coverage(tables, len(ranges), sorted(set(unrepairable)))
    replicas_per_range = max((len(reps) for reps in seg_nodes), default=1)
    per_run_limit = max(1, len(ring.nodes) // replicas_per_range)
    state = bytearray(len(seg_nodes))  # 0 pending, 1 running, 2 done
    lists: list[list[int]] = [[] for _ in range(n_nodes)]
    for s, reps in enumerate(seg_nodes):
        for n in reps:
            lists[n].append(s)
    pointer = [0] * n_nodes
    masks = [sum(1 << n for n in reps) for reps in seg_nodes]
    blocked = 0  # bit n: node n is in a session, in its intensity pause, or down
    running = [0] * len(keyspaces)
    active_run = 0  # with concurrent_runs False, runs go one by one
    left_in_run = [0] * len(keyspaces)
    for run in seg_run:
        left_in_run[run] += 1
    events: list[tuple[float, int, int, int]] = []  # (time, seq, kind, payload)
    seq = 0
    starts: dict[int, tuple[float, float, bool]] = {}
    pause_factor = 1 / intensity - 1
    busy = bytearray(n_nodes)  # in a session or its pause
    settled = started_total = 0  # segments started since the last compaction of the lists; in all (less failures)
    down = bytearray(n_nodes)
    t = 0.0

    def push(when: float, kind: int, payload: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (when, seq, kind, payload))

    for window in spec.faults.down:
        node = cluster.ids[window.address]
        if window.start <= 0 < window.end:
            down[node] = 1
            blocked |= 1 << node
        else:
            push(window.start, _DOWN, node)
        push(window.end, _UP, node)

    def start(s: int, now: float) -> None:
        nonlocal blocked, settled, started_total
        settled += 1
        started_total += 1
        state[s] = 1
        running[seg_run[s]] += 1
        reps = seg_nodes[s]
        for n in reps:
            busy[n] = 1
        blocked |= masks[s]
        end, ok = cluster.begin(reps, seg_bytes[s], now)
        starts[s] = (now, end, ok)
        push(end, _END, s)

    def eligible(s: int) -> bool:
        run = seg_run[s]
        return running[run] < per_run_limit and (concurrent_runs or run == active_run)

    def scan(nodes: Sequence[int], now: float) -> None:
        nonlocal settled
        for n in nodes:
            if blocked >> n & 1:
                continue
            pending = lists[n]
            i = pointer[n]
            while i < len(pending) and state[pending[i]]:
                i += 1
            pointer[n] = i
            # The first of the next `lookahead` entries that is pending, has all its replicas free and its run a
            # free slot (the runner's first fit, bounded).
            chunk = pending[i : i + lookahead]
            found = next((s for s in chunk if not state[s] and not masks[s] & blocked and eligible(s)), None)
            if found is not None:
                start(found, now)
        if settled > pending_count():  # most list entries are started or done: drop them, once in a while
            for n in range(n_nodes):
                lists[n] = [s for s in lists[n][pointer[n] :] if not state[s]]
                pointer[n] = 0
            settled = 0

    def pending_count() -> int:
        return len(seg_nodes) - started_total

    def scan_all(now: float) -> None:
        for s in range(len(seg_nodes)):
            if not state[s] and not masks[s] & blocked and eligible(s):
                start(s, now)

    def release(nodes: Sequence[int]) -> None:
        nonlocal blocked
        for n in nodes:
            busy[n] = 0
            if not down[n]:
                blocked &= ~(1 << n)

    scan_all(0.0)
    while events and coverage.remaining and t <= max_time:
        t, _, kind, payload = heapq.heappop(events)
        if kind == _END:
            s = payload
            begun, end, ok = starts.pop(s)
            reps = seg_nodes[s]
            cluster.end(reps, begun, end, ok)
            run = seg_run[s]
            if cluster.record:
                cluster.note(reps, begun, end, keyspaces[run], (), (ranges[seg_range[s]],), ok)
            running[run] -= 1
            if ok:
                state[s] = 2
                for unit in run_units[run]:
                    coverage.mark(unit, seg_range[s], t)
                left_in_run[run] -= 1
                if not concurrent_runs and left_in_run[run] == 0:
                    while active_run < len(keyspaces) and left_in_run[active_run] == 0:
                        active_run += 1
                    push(t, _WAKE, -1)
            else:
                state[s] = 0
                started_total -= 1
                for n in reps:  # back in the pending lists, retried later in the run
                    lists[n].append(s)
            pause = (end - begun) * pause_factor
            if pause > 0:
                push(t + pause, _TICK, s)
            else:
                release(reps)
                scan(reps, t)
        elif kind == _TICK:
            release(seg_nodes[payload])
            scan(seg_nodes[payload], t)
        elif kind == _DOWN:
            down[payload] = 1
            blocked |= 1 << payload
        elif kind == _UP:
            down[payload] = 0
            if not busy[payload]:
                blocked &= ~(1 << payload)
                scan((payload,), t)
        else:
            scan_all(t)
    result = _result("Reaper", cluster, coverage, t, time.process_time() - started_wall)
    result.notes.append(
        f"segments {len(seg_nodes)}, per-run parallelism {per_run_limit}, intensity {intensity}, "
        f"concurrent runs {concurrent_runs}"
    )
    return result
