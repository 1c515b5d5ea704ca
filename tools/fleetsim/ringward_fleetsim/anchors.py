"""The two peers, CEP-37 AutoRepair and Reaper, modelled by the rules of their sources as discrete-event
schedulers over the simulated cluster (same spec, duration model and faults as ringward). Models, not the
tools: each rule cites the upstream file it follows; by default each runs with the tool's shipped defaults,
`equal_budget=True` gives it ringward's shipped concurrency and intensity.

Both plan on the ring at t = 0 (a node joining later is not in their targets) and count coverage per
(table, ring range): a range of a table is covered once every piece of it was repaired successfully.
"""

from __future__ import annotations

import bisect
import heapq
import math
import random
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from ringward.placement import replica_map
from ringward.repair import RepairConfig, load_config
from ringward.ring import TokenRange

from ringward_fleetsim.cluster import DurationModel, SimCluster
from ringward_fleetsim.spec import RING_TOKENS, FleetSpec

__all__ = ["CEP37_FIXTURE", "CEP37_SRC", "REAPER_SRC", "REAPER_YAML", "SchedulerResult", "run_cep37", "run_reaper"]

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
#
# Sources. The shipped defaults are those of a Cassandra 5.0.9 node's `nodetool getautorepairconfig`
# (CEP37_FIXTURE below, lines given as :N; only `enabled` was overridden). The rules are those of
# apache/cassandra src/java/org/apache/cassandra/repair/autorepair/ (CEP37_SRC), read at trunk commit 02b9c897
# (AutoRepairConfig.java) through the code index; methods are named because line numbers differ between the
# 5.0 branch and trunk.
# ---------------------------------------------------------------------------------------------------------

CEP37_SRC = "apache/cassandra src/java/org/apache/cassandra/repair/autorepair/"
CEP37_FIXTURE = "tests/fixtures/autorepair/getautorepairconfig-full-incremental.txt"
GiB = 2**30

_END, _START, _TICK, _WAKE, _DOWN, _UP = 0, 1, 2, 3, 4, 5

_Item = tuple[tuple[int, ...], int, float, tuple[int, ...], float, bool, int, float]


@dataclass(slots=True)
class _Turn:
    items: Iterator[_Item]
    item: _Item | None = None
    attempts: int = 0
    table: int | None = None  # the table (>= 0) or keyspace (< 0) key of the current item
    table_start: float = 0.0
    range_failed: bool = False
    start: float = 0.0
    end: float = 0.0
    ok: bool = True


def _budget(budget: RepairConfig | None) -> RepairConfig:
    """ringward's shipped configuration (include/ringward/repair/default_config.yaml) unless one is given."""
    return budget if budget is not None else load_config()


def run_cep37(
    spec: FleetSpec,
    model: DurationModel | None = None,
    *,
    equal_budget: bool = False,
    budget: RepairConfig | None = None,
    parallel_repair_count: int | None = None,
    parallel_repair_percentage: float | None = None,
    allow_parallel_replica_repair: bool | None = None,
    repair_task_min_duration: float | None = None,
    repair_check_interval: float = 300.0,
    repair_by_keyspace: bool = True,
    splitter: str = "repair_token_range",
    number_of_subranges: int = 16,
    max_tables_per_assignment: int = 64,
    bytes_per_assignment: float = 50 * GiB,
    partitions_per_assignment: int = 2**20,
    in_process: bool = True,
    max_retries: int = 3,
    retry_backoff: float = 30.0,
    table_max_repair_time: float = 6 * 3600.0,
    min_repair_interval: float = DAY,
    max_time: float = 365 * DAY,
    cluster: SimCluster | None = None,
) -> SchedulerResult:
    """The rules of CEP-37 AutoRepair's full repair (Cassandra 5.0.9), by default with its shipped defaults.

    Shipped defaults (each from the 5.0.9 capture, `CEP37_FIXTURE`):
    - `repair_check_interval` 5 m (:2): a node whose turn comes starts at its next scheduler check (each node at
      its own seeded phase) (AutoRepairConfig `repair_check_interval`: the time between the scheduler's checks).
    - `repair_task_min_duration` 5 s (:3): every repair task takes at least that long; AutoRepair.repairKeyspace
      calls `soakAfterRepair(jobStartTime, getRepairTaskMinDuration())` after awaiting each task, success or not.
    - `min_repair_interval` 24 h (:8): a node's next turn starts no sooner than that after its last finish
      (AutoRepair.tooSoonToRunRepair).
    - `repair_by_keyspace` true (:9; AutoRepairConfig.Options.getDefaultOptions `repair_by_keyspace = true`) and
      `RepairTokenRangeSplitter` (:25; AutoRepairConfig.DEFAULT_SPLITTER): per primary range, the keyspace's
      tables batched up to `max_tables_per_assignment` 64 (:28) while the batch stays within
      `bytes_per_assignment` 50 GiB (:26) and `partitions_per_assignment` 2^20 (:27); a table over a limit alone
      in its assignment, its range split evenly into as many subranges as the larger excess needs
      (RepairTokenRangeSplitter.getRepairAssignmentsForKeyspace; simplified: the splitter's estimates are the
      spec's exact sizes). One repair session per assignment.
    - `number_of_repair_threads` 1 (:10): one task at a time per node; AutoRepair.repairKeyspace awaits each
      task's RepairCoordinator before the next.
    - `table_max_repair_time` 6 h (:12): a table (x its tables for a keyspace assignment,
      AutoRepairUtils.keyspaceMaxRepairTimeExceeded) taking longer on a node is skipped for the rest of the turn.
    - `repair_primary_token_range_only` true (:14): a node repairs its primary ranges.
    - `parallel_repair_count` 3, `parallel_repair_percentage` 3 (:15-16): at most max(count, ceil(pct % of the
      nodes)) turns at once (AutoRepairUtils.getMaxNumberOfNodeRunAutoRepair: the larger wins).
    - `allow_parallel_replica_repair` false (:17; getDefaultOptions): a node takes its turn only when none of the
      nodes that replicate one of its ranges is in a turn (AutoRepairUtils.getMostEligibleHostToRepair: "the node
      with the oldest last repair finish time of which none of its replicas are currently under repair").
      Turns go oldest last finish first (never repaired first, then host order). A node that is down is not
      eligible while down (it runs no scheduler and marks no turn).
    - `repair_max_retries` 3, `repair_retry_backoff` 30 s (:23-24; Options fields `repair_max_retries = 3`,
      `repair_retry_backoff = "30s"`): a failed task is retried up to 3 times 30 s after its (floored) end, then
      its range stays unrepaired until the node's next turn.
    - `in_process`: AutoRepair submits the repair in the node's own process (AutoRepairState.getRepairRunnable ->
      a RepairCoordinator): no nodetool/JMX round trip, so the model's `in_process_overhead` (fitted on AutoRepair's
      own sessions; 0 on the assumed model) is charged instead of its `command_overhead`.
    - No cross-node lock when turns do run together: concurrent turns share replicas (processor sharing).

    `equal_budget=True`: the same concurrency and intensity as ringward's shipped configuration (`budget`,
    default include/ringward/repair/default_config.yaml): `parallel_repair_count`/`parallel_repair_percentage`
    set to ringward's (3 / 34 %: ringward's `allowed_parallelism`, 34 turns on 100 nodes),
    `allow_parallel_replica_repair` true (ringward runs mutual replicas at once; only its node locks, not a
    cluster-wide replica check, keep them apart) and no `repair_task_min_duration` floor (ringward's intensity 1.0:
    no pause after a session). Every other rule as shipped.

    The audit's earlier model (an early CEP-37 draft's defaults, `docs/benchmarks.md` before 2026-11-28) is
    `repair_by_keyspace=False, splitter="fixed", number_of_subranges=16, allow_parallel_replica_repair=True,
    repair_task_min_duration=0, in_process=False, retry_backoff=60`: `splitter="fixed"` is the draft's
    FixedSplitTokenRangeSplitter (`number_of_subranges` per node, divided over its ranges, at least one each).
    Explicit arguments win over `equal_budget`.
    """
    started_wall = time.process_time()
    if equal_budget:
        config = _budget(budget)
        count = config.parallel_repair_count if parallel_repair_count is None else parallel_repair_count
        percentage = (
            config.parallel_repair_percentage if parallel_repair_percentage is None else parallel_repair_percentage
        )
        replica_repair = True if allow_parallel_replica_repair is None else allow_parallel_replica_repair
        floor = 0.0 if repair_task_min_duration is None else repair_task_min_duration
    else:
        count = 3 if parallel_repair_count is None else parallel_repair_count  # fixture :15
        percentage = 3.0 if parallel_repair_percentage is None else parallel_repair_percentage  # fixture :16
        replica_repair = False if allow_parallel_replica_repair is None else allow_parallel_replica_repair  # :17
        floor = 5.0 if repair_task_min_duration is None else repair_task_min_duration  # fixture :3
    if splitter not in ("repair_token_range", "fixed"):
        raise ValueError(f"splitter {splitter!r}: use 'repair_token_range' (shipped) or 'fixed' (the early draft)")
    cluster = cluster or SimCluster(spec, model, record=False)
    overhead = cluster.model.in_process_overhead if in_process else None
    ring = cluster.initial_ring
    ranges = ring.ranges()
    widths = [r.width() for r in ranges]
    placement = _placement(cluster)
    schema = cluster.catalog.tables()
    keyspaces = sorted(schema)
    tables = [f"{ks}.{t}" for ks in keyspaces for t in sorted(schema[ks])]
    unit_of = {name: i for i, name in enumerate(tables)}
    sizes = {t.qualified: (t.bytes / RING_TOKENS, t.partitions / RING_TOKENS) for t in cluster.catalog.table_specs()}
    unrepairable = [i for i, reps in enumerate(placement[keyspaces[0]]) if len(reps) < 2] if keyspaces else []
    coverage = _Coverage(tables, len(ranges), unrepairable)
    node_count = len(ring.nodes)
    # AutoRepairUtils.getMaxNumberOfNodeRunAutoRepair: the larger of count and percentage of the group.
    parallel = max(1, count, math.ceil(percentage * node_count / 100))
    primary: list[list[int]] = [[] for _ in cluster.addresses]
    for index, token_range in enumerate(ranges):
        primary[cluster.ids[ring.token_owner[token_range.end].address]].append(index)
    # Nodes sharing a repairable range with each node (its replicas, over every keyspace's placement).
    neighbours = [0] * len(cluster.addresses)
    for reps_list in {id(v): v for v in placement.values()}.values():
        for reps in reps_list:
            if len(reps) < 2:
                continue
            mask = sum(1 << n for n in reps)
            for n in reps:
                neighbours[n] |= mask
    for n in range(len(neighbours)):
        neighbours[n] &= ~(1 << n)

    def pieces_for(nbytes: float, parts: float) -> int:
        return max(1, math.ceil(nbytes / bytes_per_assignment), math.ceil(parts / partitions_per_assignment))

    def batches(keyspace: str, width: int) -> Iterator[tuple[tuple[str, ...], int]]:
        """RepairTokenRangeSplitter: the keyspace's tables in one range, batched (by keyspace) or one by one."""
        batch: list[str] = []
        batch_bytes = batch_parts = 0.0
        for name in sorted(schema[keyspace]):
            per_byte, per_part = sizes[f"{keyspace}.{name}"]
            nbytes, parts = per_byte * width, per_part * width
            if nbytes > bytes_per_assignment or parts > partitions_per_assignment:
                yield (name,), pieces_for(nbytes, parts)  # too large to batch: alone, split
                continue
            fits = (
                repair_by_keyspace
                and batch
                and len(batch) < max_tables_per_assignment
                and batch_bytes + nbytes <= bytes_per_assignment
                and batch_parts + parts <= partitions_per_assignment
            )
            if batch and not fits:
                yield tuple(batch), 1
                batch, batch_bytes, batch_parts = [], 0.0, 0.0
            batch.append(name)
            batch_bytes += nbytes
            batch_parts += parts
        if batch:
            yield tuple(batch), 1

    def work(node: int) -> Iterator[_Item]:
        mine = primary[node]
        if splitter == "fixed":  # the early draft: table by table (or keyspace), number_of_subranges per node
            pieces = max(1, math.ceil(number_of_subranges / len(mine))) if mine else 1
            for keyspace in keyspaces:
                reps = placement[keyspace]
                names = sorted(schema[keyspace])
                groups = [tuple(names)] if repair_by_keyspace else [(n,) for n in names]
                for group in groups:
                    units = tuple(unit_of[f"{keyspace}.{n}"] for n in group)
                    per_token = cluster.bytes_per_token(keyspace, group)
                    limit = table_max_repair_time * len(group)
                    for r in mine:
                        if len(reps[r]) < 2:
                            continue
                        width = widths[r] / pieces
                        for piece in range(pieces):
                            yield units, r, width, reps[r], per_token, piece == pieces - 1, units[0], limit
            return
        for k_index, keyspace in enumerate(keyspaces):  # RepairTokenRangeSplitter: range by range, tables batched
            reps = placement[keyspace]
            for r in mine:
                if len(reps[r]) < 2:
                    continue
                for group, pieces in batches(keyspace, widths[r]):
                    units = tuple(unit_of[f"{keyspace}.{n}"] for n in group)
                    per_token = cluster.bytes_per_token(keyspace, group)
                    key = -1 - k_index if repair_by_keyspace else units[0]
                    limit = table_max_repair_time * (len(schema[keyspace]) if repair_by_keyspace else 1)
                    width = widths[r] / pieces
                    for piece in range(pieces):
                        yield units, r, width, reps[r], per_token, piece == pieces - 1, key, limit

    rng_phase = random.Random(f"{spec.seed}:cep37-phase")
    phase = [rng_phase.uniform(0, repair_check_interval) for _ in cluster.addresses]
    events: list[tuple[float, int, int, int]] = []
    seq = 0
    turns: dict[int, _Turn] = {}
    idle = [(-math.inf, n, n) for n in range(node_count)]  # (last finish, order, node), kept sorted
    in_turn = 0
    in_turn_mask = 0  # nodes in a turn (or about to start it at their next check)
    wake_at = math.inf
    t = 0.0
    peak_turns = 0

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
        nonlocal in_turn, in_turn_mask, wake_at, peak_turns
        while in_turn < parallel and idle:
            chosen = None
            for position, (_, _, node) in enumerate(idle):
                # getMostEligibleHostToRepair (allow_parallel_replica_repair false): the oldest finish with none of
                # its replicas in a turn, and up.
                blocked = neighbours[node] & in_turn_mask or (cluster.any_down and not cluster.is_up(node, now))
                if not replica_repair and blocked:
                    continue
                chosen = position
                break
            if chosen is None:
                return  # a finishing turn or a returning node calls fill again
            last, _, node = idle[chosen]
            if last + min_repair_interval > now:  # tooSoonToRunRepair
                if last + min_repair_interval < wake_at:
                    wake_at = last + min_repair_interval
                    push(wake_at, _WAKE, -1)
                return
            del idle[chosen]
            in_turn += 1
            peak_turns = max(peak_turns, in_turn)
            in_turn_mask |= 1 << node
            push(next_tick(node, now), _TICK, node)

    def start(node: int, turn: _Turn, now: float) -> bool:
        """Start the turn's next session; False when the turn is over."""
        while True:
            if turn.item is None:
                turn.item = next(turn.items, None)
                turn.attempts = 0
                if turn.item is None:
                    return False
            units, _, width, reps, per_token, _, table_key, limit = turn.item
            if table_key != turn.table:
                turn.table, turn.table_start = table_key, now
                turn.range_failed = False
            elif now - turn.table_start > limit:
                turn.item = None  # table_max_repair_time: skip the rest of the table (keyspace)
                continue
            end, ok = cluster.begin(reps, width * per_token, now, command_overhead=overhead, tables=len(units))
            turn.start, turn.end, turn.ok = now, end, ok
            push(end, _END, node)
            return True

    def finish_turn(node: int, now: float) -> None:
        nonlocal in_turn, in_turn_mask
        del turns[node]
        in_turn -= 1
        in_turn_mask &= ~(1 << node)
        bisect.insort(idle, (now, node, node))
        fill(now)

    if not replica_repair:  # a node coming back is eligible again
        for window in spec.faults.down:
            push(window.end, _UP, cluster.ids[window.address])
    fill(0.0)
    while events and coverage.remaining and t <= max_time:
        t, _, kind, node = heapq.heappop(events)
        if kind == _END:
            turn = turns[node]
            assert turn.item is not None
            units, r, _, reps, _, last, _, _ = turn.item
            cluster.end(reps, turn.start, turn.end, turn.ok)
            if cluster.record:
                keyspace = tables[units[0]].split(".", 1)[0]
                names = [tables[u].split(".", 1)[1] for u in units]
                cluster.note(reps, turn.start, turn.end, keyspace, names, (ranges[r],), turn.ok)
            # soakAfterRepair: the task holds the node's turn until repair_task_min_duration after its start.
            after = max(t, turn.start + floor)
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
                    push(after + retry_backoff, _START, node)
                    continue
                turn.range_failed = not last
                turn.item = None
            if after > t:
                push(after, _START, node)
            elif not start(node, turn, t):
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
        else:  # _WAKE, _UP
            if kind == _WAKE:
                wake_at = math.inf
            fill(t)
    result = _result("CEP-37 rules", cluster, coverage, t, time.process_time() - started_wall)
    result.notes.append(
        f"turns at once {parallel} (peak {peak_turns}), allow_parallel_replica_repair {replica_repair}, "
        f"repair_by_keyspace {repair_by_keyspace}, splitter {splitter}, repair_task_min_duration {floor:g}s, "
        f"nodetool/JMX charged {not in_process}"
    )
    return result


# ---------------------------------------------------------------------------------------------------------
# Reaper
#
# Sources: thelastpickle/cassandra-reaper at 8a4cf83d (4.2 branch merged into master, 2026-05-20); REAPER_SRC
# is src/server/src/main/java/io/cassandrareaper/, REAPER_YAML src/packaging/resource/cassandra-reaper.yaml (the
# packaged configuration: the defaults an installation starts from).
# ---------------------------------------------------------------------------------------------------------

REAPER_SRC = "thelastpickle/cassandra-reaper src/server/src/main/java/io/cassandrareaper/"
REAPER_YAML = "thelastpickle/cassandra-reaper src/packaging/resource/cassandra-reaper.yaml"


def run_reaper(
    spec: FleetSpec,
    model: DurationModel | None = None,
    *,
    equal_budget: bool = False,
    budget: RepairConfig | None = None,
    intensity: float | None = None,
    runner_limits: bool | None = None,
    repair_parallelism: str | None = None,
    max_parallel_repairs: int = 2,
    scheduling_interval: float = 10.0,
    thread_count: int = 15,
    concurrent_runs: bool = True,
    lookahead: int = 256,
    max_time: float = 365 * DAY,
    cluster: SimCluster | None = None,
) -> SchedulerResult:
    """The rules of Reaper 4.2.x, by default with its packaged configuration.

    Common to both variants: one repair run per keyspace (repair unit = the keyspace with all its tables, one
    session per segment: SegmentRunner.runRepair -> triggerRepair with the unit's tables); segments = the vnode
    ranges (REAPER_YAML:19 `segmentCountPerNode: 64` is below the vnode count of these rings, so
    SegmentGenerator.coalesceTokenRanges only joins ranges with identical replica sets, which random tokens and
    NTS 3/3/3 practically never give); every range once (no -pr); after a segment its locks are kept for
    duration x (1/intensity - 1) (SegmentRunner.java:806 `repairDuration / intensity - repairDuration`, the lease
    renewed through the pause, :269-288); a failed segment goes back to the run's pending segments.

    Shipped (`runner_limits` True, the default), Reaper 4.2.x's runner:
    - Locks are per (run, node): a node is in at most one segment per run, but segments of different runs may share
      nodes (storage/cassandra/CassandraConcurrencyDao.java:104 `WHERE repair_id = ? AND node = ?`;
      storage/repairsegment/MemoryRepairSegmentDao.java:214 "We only allow one segment per node per run").
    - At most `max_parallel_repairs` runs progress at once, the oldest first (ReaperApplicationConfiguration.java:239
      default 2, REAPER_YAML:34 `maxParallelRepairs: 2`; RepairRunner.isAllowedToRun :302-317, called at :258).
    - Each run's runner starts at most one segment per invocation (RepairRunner.startNextSegment :580-677: the
      first ready segment of a shuffled list, :596) and is invoked again `scheduling_interval` later
      (RepairManager.scheduleRetry :542-543, `repairManagerSchedulingIntervalSeconds`: REAPER_YAML:30 10 s; the code
      default is 30 s, ReaperApplicationConfiguration.java:267-269); a finished segment does not reschedule it
      (RepairRunner.handleResult :959 "Don't do rescheduling here"). Model: every run is invoked at t = 0, 10 s,
      20 s, ...; its pending segments are tried in a seeded shuffled order, first fit.
    - A segment is ready when none of its replicas is locked by its run and all are up (nodesReadyForNewRepair
      :695, which needs every replica's metrics; pending-compaction back-pressure not modelled).
    - Segments run on the one pool of `thread_count` threads (REAPER_YAML:23 `repairRunThreadCount: 15`;
      ReaperApplication.java:182-208 builds the RepairManager's executor with that many threads;
      RepairManager.submitSegment :546-547), a thread held for the repair and its intensity pause
      (SegmentRunner.java:265-288). Model: no segment starts while every thread is taken.
    - `intensity` 0.9 (REAPER_YAML:21 `repairIntensity: 0.9`).
    - `repair_parallelism` "datacenter_aware" (REAPER_YAML:20 `repairParallelism: DATACENTER_AWARE`): Cassandra
      validates the replicas of each DC one after another, the DCs in parallel (apache/cassandra
      src/java/org/apache/cassandra/repair/RepairJob.java, sendDCAwareValidationRequest). Model: the validation
      term x the most replicas the segment has in one DC.

    `equal_budget=True`: the same concurrency and intensity as ringward's shipped configuration (`budget`, default
    include/ringward/repair/default_config.yaml): `intensity` ringward's (1.0), `repair_parallelism` "parallel"
    (ringward's `parallelism: parallel`), and no runner limits beyond node locks (`runner_limits` False): a node
    is in one segment at a time across every run (ringward's rule), all runs at once, a segment starts the moment
    its replicas are free (no tick, no thread pool, no run limit), at most nodes / replicas-per-range segments
    per run. On the benchmark's rings the node locks allow fewer sessions than ringward's 34 % cap.

    The earlier model (docs/benchmarks.md before 2026-11-28, from Reaper's pre-2.2 rules) is
    `runner_limits=False, intensity=0.9, repair_parallelism="parallel"`. Explicit arguments win over `equal_budget`.
    """
    if equal_budget:
        config = _budget(budget)
        intensity = config.intensity if intensity is None else intensity
        runner_limits = False if runner_limits is None else runner_limits
        repair_parallelism = "parallel" if repair_parallelism is None else repair_parallelism
    else:
        intensity = 0.9 if intensity is None else intensity  # REAPER_YAML:21
        runner_limits = True if runner_limits is None else runner_limits
        repair_parallelism = "datacenter_aware" if repair_parallelism is None else repair_parallelism  # REAPER_YAML:20
    if repair_parallelism not in ("parallel", "datacenter_aware", "sequential"):
        raise ValueError(f"repair_parallelism {repair_parallelism!r}: parallel, datacenter_aware or sequential")
    if not 0 < intensity <= 1:
        raise ValueError(f"intensity {intensity}: must be in (0, 1]")
    cluster = cluster or SimCluster(spec, model, record=False)
    if runner_limits:
        return _reaper_runner(spec, cluster, intensity, repair_parallelism, max_parallel_repairs, scheduling_interval,
                              thread_count, max_time)  # fmt: skip
    return _reaper_idealised(spec, cluster, intensity, repair_parallelism, concurrent_runs, lookahead, max_time)


@dataclass
class _Segments:
    nodes: list[tuple[int, ...]]
    bytes: list[float]
    run: list[int]
    range: list[int]
    validation: list[float]  # validation factor: 1, or the replicas validating one after another
    run_units: list[tuple[int, ...]]
    keyspaces: list[str]
    ranges: list[TokenRange]
    coverage: _Coverage


def _segments(cluster: SimCluster, repair_parallelism: str) -> _Segments:
    ring = cluster.initial_ring
    ranges = ring.ranges()
    widths = [r.width() for r in ranges]
    placement = _placement(cluster)
    schema = cluster.catalog.tables()
    keyspaces = sorted(schema)
    tables = [f"{ks}.{t}" for ks in keyspaces for t in sorted(schema[ks])]
    unit_of = {name: i for i, name in enumerate(tables)}
    dc_of = {cluster.ids[n.address]: n.datacenter for n in ring.nodes}
    out = _Segments([], [], [], [], [], [], keyspaces, ranges, _Coverage(tables, len(ranges), ()))
    unrepairable: list[int] = []
    for run, keyspace in enumerate(keyspaces):
        per_token = cluster.bytes_per_token(keyspace)
        out.run_units.append(tuple(unit_of[f"{keyspace}.{t}"] for t in sorted(schema[keyspace])))
        for r, reps in enumerate(placement[keyspace]):
            if len(reps) < 2:
                unrepairable.append(r)
                continue
            out.nodes.append(reps)
            out.bytes.append(widths[r] * per_token)
            out.run.append(run)
            out.range.append(r)
            if repair_parallelism == "datacenter_aware":
                per_dc: dict[str, int] = {}
                for n in reps:
                    per_dc[dc_of[n]] = per_dc.get(dc_of[n], 0) + 1
                out.validation.append(float(max(per_dc.values())))
            elif repair_parallelism == "sequential":
                out.validation.append(float(len(reps)))
            else:
                out.validation.append(1.0)
    out.coverage = _Coverage(tables, len(ranges), sorted(set(unrepairable)))
    return out


def _reaper_runner(
    spec: FleetSpec,
    cluster: SimCluster,
    intensity: float,
    repair_parallelism: str,
    max_parallel_repairs: int,
    scheduling_interval: float,
    thread_count: int,
    max_time: float,
) -> SchedulerResult:
    """Reaper 4.2.x's runner (see `run_reaper`): per-(run, node) locks, `max_parallel_repairs` runs, one segment
    started per run per `scheduling_interval`, `thread_count` threads held through repair and pause."""
    started_wall = time.process_time()
    seg = _segments(cluster, repair_parallelism)
    coverage = seg.coverage
    runs = len(seg.keyspaces)
    masks = [sum(1 << n for n in reps) for reps in seg.nodes]
    rng = random.Random(f"{spec.seed}:reaper-shuffle")
    pending: list[list[int]] = [[] for _ in range(runs)]
    for s, run in enumerate(seg.run):
        pending[run].append(s)
    for order in pending:
        rng.shuffle(order)  # RepairRunner.java:596 shuffles the candidates (here once, seeded)
    left = [len(order) for order in pending]
    state = bytearray(len(seg.nodes))  # 0 pending, 1 running or pausing, 2 done
    locked = [0] * runs  # per run: nodes in one of its segments or their pause
    threads = 0
    peak_threads = 0
    peak_runs_active = 0
    starts: dict[int, tuple[float, float, bool]] = {}
    pause_factor = 1 / intensity - 1
    faulty = [cluster.ids[w.address] for w in spec.faults.down]
    faulty_mask = sum(1 << n for n in faulty)
    events: list[tuple[float, int, int, int]] = []
    seq = 0
    t = 0.0

    def push(when: float, kind: int, payload: int) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (when, seq, kind, payload))

    def allowed(run: int) -> bool:
        """RepairRunner.isAllowedToRun: among the oldest `max_parallel_repairs` runs not yet finished."""
        ahead = 0
        for other in range(run):
            if left[other]:
                ahead += 1
        return ahead < max_parallel_repairs

    def up_mask(now: float) -> int:
        down = 0
        for n in faulty:
            if not cluster.is_up(n, now):
                down |= 1 << n
        return down

    def next_segment(run: int, now: float) -> int | None:
        order = pending[run]
        blocked = locked[run] | (up_mask(now) if faulty_mask else 0)
        for s in order:
            if not state[s] and not masks[s] & blocked:
                return s
        return None

    for run in range(runs):
        push(0.0, _TICK, run)
    while events and coverage.remaining and t <= max_time:
        t, _, kind, payload = heapq.heappop(events)
        if kind == _TICK:
            run = payload
            if not left[run]:
                continue  # the run is done: its runner stops
            if allowed(run) and threads < thread_count:
                found = next_segment(run, t)
                if found is not None:
                    state[found] = 1
                    locked[run] |= masks[found]
                    threads += 1
                    peak_threads = max(peak_threads, threads)
                    end, ok = cluster.begin(
                        seg.nodes[found], seg.bytes[found], t, validation_factor=seg.validation[found],
                        tables=len(seg.run_units[seg.run[found]]),
                    )  # fmt: skip
                    starts[found] = (t, end, ok)
                    push(end, _END, found)
            active = sum(1 for r in range(runs) if left[r] and allowed(r))
            peak_runs_active = max(peak_runs_active, active)
            push(t + scheduling_interval, _TICK, run)
        elif kind == _END:
            s = payload
            begun, end, ok = starts.pop(s)
            reps = seg.nodes[s]
            cluster.end(reps, begun, end, ok)
            run = seg.run[s]
            if cluster.record:
                cluster.note(reps, begun, end, seg.keyspaces[run], (), (seg.ranges[seg.range[s]],), ok)
            if ok:
                for unit in seg.run_units[run]:
                    coverage.mark(unit, seg.range[s], t)
            push(t + (end - begun) * pause_factor, _WAKE, s if ok else -1 - s)
        else:  # _WAKE: the pause is over; locks and thread released
            s = payload if payload >= 0 else -1 - payload
            run = seg.run[s]
            locked[run] &= ~masks[s]
            threads -= 1
            if payload >= 0:
                state[s] = 2
                left[run] -= 1
                pending[run] = [x for x in pending[run] if state[x] != 2] if left[run] % 64 == 0 else pending[run]
            else:
                state[s] = 0  # failed: pending again, retried later in the run
    result = _result("Reaper rules", cluster, coverage, t, time.process_time() - started_wall)
    result.notes.append(
        f"segments {len(seg.nodes)}, runner limits: {max_parallel_repairs} runs, one start per run per "
        f"{scheduling_interval:g}s tick, {thread_count} threads (peak {peak_threads}); intensity {intensity}, "
        f"{repair_parallelism} validation"
    )
    return result


def _reaper_idealised(
    spec: FleetSpec,
    cluster: SimCluster,
    intensity: float,
    repair_parallelism: str,
    concurrent_runs: bool,
    lookahead: int,
    max_time: float,
) -> SchedulerResult:
    """Reaper's segment, lock and intensity rules without its runner limits (see `run_reaper`, equal budget).

    - A node is in one segment at a time across all runs; a run has at most min(segments, max(1, nodes /
      replicas per range)) segments running; runs of all keyspaces run at once (`concurrent_runs`) sharing the node
      locks, or one after another.
    - Segments start in ring order, the first whose replicas are all free and up: when nodes become free it looks
      at the pending segments of those nodes, at most `lookahead` per freed node. Failed segments go back to the
      pending list, retried later in the run.
    """
    started_wall = time.process_time()
    seg = _segments(cluster, repair_parallelism)
    coverage = seg.coverage
    keyspaces = seg.keyspaces
    seg_nodes, seg_bytes, seg_run, seg_range = seg.nodes, seg.bytes, seg.run, seg.range
    run_units = seg.run_units
    n_nodes = len(cluster.addresses)
    ring = cluster.initial_ring
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
        end, ok = cluster.begin(
            reps, seg_bytes[s], now, validation_factor=seg.validation[s], tables=len(seg.run_units[seg_run[s]])
        )
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
                cluster.note(reps, begun, end, keyspaces[run], (), (seg.ranges[seg_range[s]],), ok)
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
    result = _result("Reaper rules", cluster, coverage, t, time.process_time() - started_wall)
    result.notes.append(
        f"segments {len(seg_nodes)}, per-run parallelism {per_run_limit}, intensity {intensity}, "
        f"concurrent runs {concurrent_runs}, no runner limits, {repair_parallelism} validation"
    )
    return result
