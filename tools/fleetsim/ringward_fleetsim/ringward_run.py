"""ringward's own nightly repair on the simulator: planned by the real pure code, executed by the real
executor (`ringward.repair.run_batch`) through the virtual SessionPool and clock."""

from __future__ import annotations

import bisect
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from ringward.repair import (
    BatchEffects,
    RecordUpdate,
    RepairCommand,
    RepairConfig,
    Segment,
    SegmentRecord,
    SegmentState,
    SessionResult,
    allowed_parallelism,
    run_batch,
    select_due,
)

from ringward_fleetsim.anchors import DAY, SchedulerResult, _Coverage
from ringward_fleetsim.cluster import DurationModel, SimCluster, SimNodetool
from ringward_fleetsim.spec import FleetSpec

__all__ = ["RingwardPlan", "plan_ringward", "run_ringward"]


@dataclass
class RingwardPlan:
    segments: list[Segment]
    planning_cpu_seconds: float
    unit_tables: dict[str, tuple[str, ...]]  # keyspace -> tables it repairs ("ks.table" names)
    gc_grace: dict[str, dict[str, int]] = field(default_factory=dict)  # keyspace -> table -> gc_grace_seconds
    notes: list[str] = field(default_factory=list)


def plan_ringward(cluster: SimCluster, config: RepairConfig) -> RingwardPlan:
    """Every unit's segments on the ring at t = 0, as the DAG's plan task computes them (`plan_cluster`: units,
    outlier tables in units of their own, keyspaces sharing a replica map, the size splitter reading the
    simulated node-summed size estimates). `planning_cpu_seconds` counts that call, the simulated catalog's
    reads included (one row per table and node: about 5 % of it at fleet size)."""
    from ringward_cassandra.cluster_repairs import plan_cluster

    ring = cluster.ring(0.0)
    started = time.process_time()
    planned = plan_cluster(cluster.catalog, ring, config)
    cpu = time.process_time() - started
    segments = list(planned.segments)
    # Coverage is per keyspace and range: every table the keyspace's units repair, whichever unit holds it.
    schema = cluster.catalog.tables()
    unit_tables: dict[str, set[str]] = {}
    for segment in segments:  # no tables named: the whole keyspace
        names = segment.tables or tuple(schema[segment.keyspace])
        unit_tables.setdefault(segment.keyspace, set()).update(f"{segment.keyspace}.{t}" for t in names)
    gc_grace = {ks: dict(tables) for ks, tables in planned.gc_grace.items()}
    return RingwardPlan(segments, cpu, {ks: tuple(sorted(names)) for ks, names in unit_tables.items()}, gc_grace)


def run_ringward(
    spec: FleetSpec,
    config: RepairConfig | None = None,
    model: DurationModel | None = None,
    *,
    nights: int = 30,
    night_every: float = DAY,
    cluster: SimCluster | None = None,
) -> SchedulerResult:
    """Nightly runs (one every `night_every` seconds, or as soon as the last one ended) until every
    (table, ring range) was repaired once, or `nights` runs. Each run: the due segments as the plan task selects
    them (`select_due`: by the time left to gc_grace, merely-due segments held back behind the backlog) ->
    `run_batch` with the virtual pool; history kept in memory between runs."""
    config = config or RepairConfig()
    cluster = cluster or SimCluster(spec, model, record=False)
    wall = time.process_time()
    plan = plan_ringward(cluster, config)
    ring = cluster.initial_ring
    tokens = ring.sorted_tokens
    tables = [name for names in plan.unit_tables.values() for name in names]
    unit_of = {name: i for i, name in enumerate(tables)}
    coverage = _Coverage(tables, len(tokens), ())
    pieces: dict[tuple[str, int], int] = {}
    where: dict[str, tuple[str, int]] = {}
    for segment in plan.segments:
        key = (segment.keyspace, _ring_range(tokens, segment.range.end))
        pieces[key] = pieces.get(key, 0) + 1
        where[segment.segment_id] = key
    for keyspace, names in plan.unit_tables.items():  # ranges with no segment (RF 1, ignored DCs): nothing to do
        for r in range(len(tokens)):
            if (keyspace, r) not in pieces:
                for name in names:
                    coverage.mark(unit_of[name], r, 0.0)
    records: dict[str, SegmentRecord] = {}
    repaired: set[str] = set()  # segments repaired at least once: a range is covered when all its pieces are
    nodetool = SimNodetool(cluster)
    clock = cluster.clock

    def save(updates: Sequence[RecordUpdate]) -> None:
        for update in updates:
            records[update.segment.segment_id] = update.record
            # A segment counts once: a second night's repair of it (its record RUNNING, then DONE again) must not
            # take a piece off its range again (until 2026-11-28 it did, covering ranges early).
            if update.record.state is SegmentState.DONE and update.segment.segment_id not in repaired:
                repaired.add(update.segment.segment_id)
                key = where[update.segment.segment_id]
                pieces[key] -= 1
                if pieces[key] == 0:
                    for name in plan.unit_tables[key[0]]:
                        coverage.mark(unit_of[name], key[1], clock.t)

    parallelism = allowed_parallelism(config, len(ring.nodes))
    runs = 0
    for night in range(nights):
        clock.advance_to(night * night_every)
        if coverage.remaining == 0:
            break
        runs += 1
        started = time.process_time()
        due = select_due(plan.segments, records, run_id=f"night-{night}", now=clock.now(), config=config,
                         gc_grace=plan.gc_grace).due  # fmt: skip
        plan.planning_cpu_seconds += time.process_time() - started
        pool = nodetool.session_pool()
        effects = BatchEffects(
            repair=_no_threads,
            save=save,
            live_nodes=nodetool.live_nodes,
            now=clock.now,
            sleep=clock.sleep,
            log=lambda line: None,
            sessions=pool,
        )
        run_batch(due, records, config=config, run_id=f"night-{night}", parallelism=parallelism, effects=effects,
                  run_started=clock.now())  # fmt: skip
        pool.close()
    result = SchedulerResult(
        name="ringward",
        coverage_seconds=max(coverage.done_at.values(), default=0.0) if coverage.remaining == 0 else None,
        sessions=cluster.stats.sessions,
        failed_sessions=cluster.stats.failed,
        node_session_seconds=dict(zip(cluster.addresses, cluster.stats.node_seconds, strict=True)),
        table_covered=dict(coverage.done_at),
        uncovered_ranges=coverage.remaining,
        wall_seconds=time.process_time() - wall,
        planning_cpu_seconds=plan.planning_cpu_seconds,
    )
    result.notes.append(
        f"segments {len(plan.segments)}, parallelism {parallelism}, runs {runs}, planning CPU "
        f"{plan.planning_cpu_seconds:.1f}s, ranges_per_command {config.ranges_per_command}"
    )
    return result


def _ring_range(tokens: Sequence[int], end: int) -> int:
    """Index (in `Ring.ranges()` order) of the ring range a piece ending at `end` lies in."""
    index = bisect.bisect_left(tokens, end)
    return index % len(tokens)


def _no_threads(command: RepairCommand) -> SessionResult:
    raise RuntimeError("the simulator runs repair commands through its SessionPool, not effects.repair")
