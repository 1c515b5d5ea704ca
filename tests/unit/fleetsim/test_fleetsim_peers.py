"""The peers' models follow their shipped rules (CEP-37 5.0.9, Reaper 4.2.x), the equal-budget variants, the bound.

Each test checks one cited rule's effect on a tiny spec (tools/fleetsim/ringward_fleetsim/anchors.py names the
upstream file of each rule)."""

from __future__ import annotations

import dataclasses
from collections import defaultdict

import pytest
from ringward.repair import RepairConfig
from ringward_fleetsim import (
    DurationModel,
    Faults,
    FleetSpec,
    NodeDown,
    SessionRecord,
    SimCluster,
    lower_bound,
    run_cep37,
    run_reaper,
)
from ringward_fleetsim.ringward_run import run_ringward
from test_fleetsim import MODEL, NODES, MiB, draft_cep37, idealised_reaper, tiny  # the tiny specs, shared


def overlapping(log: list[SessionRecord]) -> int:
    """The most sessions of `log` running at one instant."""
    edges = sorted([(r.start, 1) for r in log] + [(r.end, -1) for r in log], key=lambda e: (e[0], e[1]))
    most = current = 0
    for _, step in edges:
        current += step
        most = max(most, current)
    return most


def wide(nodes: int = 90, keyspaces: int = 4) -> FleetSpec:
    """Enough nodes (3 DCs, NTS 3/3/3, 4 vnodes) that node locks let many segments of one run go together."""
    spec = FleetSpec.fleet(nodes=nodes, vnodes=4, keyspaces=keyspaces, tables=1, table_bytes_median=64 * MiB * 1000)
    return dataclasses.replace(spec, table_bytes_sigma=0.0, outliers=0)


# -- CEP-37 5.0.9 ---------------------------------------------------------------------------------------------------
def test_cep37_by_keyspace_issues_one_session_per_range_for_all_tables() -> None:
    # repair_by_keyspace true + RepairTokenRangeSplitter (fixture :9, :25): one assignment per primary range with
    # every table of the keyspace (3 <= max_tables_per_assignment 64), not 16 subranges x table by table.
    cluster = SimCluster(tiny(tables=3), MODEL, record=True)
    result = run_cep37(cluster.spec, cluster=cluster, repair_check_interval=0)
    assert result.uncovered_ranges == 0
    assert result.sessions == 3
    assert {r.tables for r in cluster.log} == {("t00", "t01", "t02")}
    assert draft_cep37(tiny(tables=3), repair_check_interval=0).sessions == 3 * 3 * 16  # the earlier model


def test_cep37_token_range_splitter_limits_tables_and_bytes_per_assignment() -> None:
    cluster = SimCluster(tiny(tables=3), MODEL, record=True)
    run_cep37(cluster.spec, cluster=cluster, repair_check_interval=0, max_tables_per_assignment=2)
    assert sorted({r.tables for r in cluster.log}) == [("t00", "t01"), ("t02",)]
    assert len(cluster.log) == 3 * 2
    # A range holds 640 MiB of each table: over a 256 MiB bytes_per_assignment each table is alone, in 3 pieces.
    cluster = SimCluster(tiny(tables=2), MODEL, record=True)
    run_cep37(cluster.spec, cluster=cluster, repair_check_interval=0, bytes_per_assignment=256 * MiB)
    assert len(cluster.log) == 3 * 2 * 3 and {r.tables for r in cluster.log} == {("t00",), ("t01",)}


def test_cep37_without_parallel_replica_repair_mutual_replicas_never_repair_at_once() -> None:
    # allow_parallel_replica_repair false (fixture :17): on RF 3 over 3 nodes every node replicates every other's
    # ranges, so one turn at a time although 3 turns are allowed; allowed (equal budget), the turns overlap.
    cluster = SimCluster(tiny(tables=2), MODEL, record=True)
    run_cep37(cluster.spec, cluster=cluster, repair_check_interval=0, parallel_repair_count=3)
    assert overlapping(cluster.log) == 1
    together = SimCluster(tiny(tables=2), MODEL, record=True)
    run_cep37(together.spec, cluster=together, repair_check_interval=0, parallel_repair_count=3,
              allow_parallel_replica_repair=True)  # fmt: skip
    assert overlapping(together.log) == 3


def test_cep37_nodes_that_share_no_range_take_turns_together() -> None:
    # The seed cluster: NTS dc1: 2 over two racks, so 127.0.0.2 and 127.0.0.3 (rack1) never share a range:
    # they run their turns at once, 127.0.0.4 (a replica of both) alone.
    cluster = SimCluster(FleetSpec.small(), MODEL, record=True)
    run_cep37(cluster.spec, cluster=cluster, repair_check_interval=0)
    assert overlapping(cluster.log) == 2
    for a in cluster.log:
        for b in cluster.log:
            if a.start < b.end and b.start < a.end and a is not b:
                assert "127.0.0.4" in a.nodes and "127.0.0.4" in b.nodes and set(a.nodes) != set(b.nodes)


def test_cep37_a_task_shorter_than_five_seconds_is_floored() -> None:
    # repair_task_min_duration 5 s (fixture :3, soakAfterRepair): a task of 0 + 1 + 1 s (in-process: no JMX
    # cost) holds the turn until 5 s after its start. Three turns one after another: the last one's session ends
    # at 2 x 5 + 2 s; without the floor 3 x 2 s.
    spec = dataclasses.replace(tiny(), table_bytes_median=3 * 64 * MiB)
    floored = run_cep37(spec, MODEL, repair_check_interval=0)
    assert floored.coverage_seconds == pytest.approx(12, rel=1e-6)
    bare = run_cep37(spec, MODEL, repair_check_interval=0, repair_task_min_duration=0)
    assert bare.coverage_seconds == pytest.approx(6, rel=1e-6)
    # The earlier model charged the nodetool/JMX start cost (1 s here) on each of its 16 subranges x 3 turns.
    draft = draft_cep37(spec, repair_check_interval=0, parallel_repair_count=1, parallel_repair_percentage=0)
    assert draft.coverage_seconds == pytest.approx(3 * 16 * (2 + 1 / 16))


def test_cep37_retries_thirty_seconds_apart() -> None:
    # repair_max_retries 3, repair_retry_backoff 30 s (fixture :23-24): a task failing on a down node is tried 4 times,
    # each try floored at 5 s (no JMX cost: it fails at once), then 30 s apart: tries at 0, 35, 70, 105.
    spec = tiny(faults=Faults(down=(NodeDown(NODES[2], 0, 1000),)))
    cluster = SimCluster(spec, MODEL, record=True)
    run_cep37(spec, cluster=cluster, repair_check_interval=0, max_time=500)
    first = sorted(r.start for r in cluster.log)[:4]
    assert first == pytest.approx([0, 35, 70, 105])


def test_cep37_equal_budget_takes_ringwards_concurrency() -> None:
    budget = RepairConfig(parallel_repair_percentage=34)
    spec = FleetSpec.fleet(nodes=30, vnodes=4, keyspaces=1, tables=2, table_bytes_median=MiB)
    result = run_cep37(spec, equal_budget=True, budget=budget)
    assert "turns at once 11 " in result.notes[0] and "allow_parallel_replica_repair True" in result.notes[0]
    assert "repair_task_min_duration 0s" in result.notes[0]
    assert "turns at once 3 " in run_cep37(spec).notes[0]


# -- Reaper 4.2.x ---------------------------------------------------------------------------------------------------
def test_reaper_starts_at_most_one_segment_per_run_per_tick_and_two_runs_at_once() -> None:
    # RepairRunner.startNextSegment starts one segment per invocation, every repairManagerSchedulingIntervalSeconds
    # (10 s, cassandra-reaper.yaml:30); isAllowedToRun lets maxParallelRepairs (2) runs progress.
    cluster = SimCluster(wide(), MODEL, record=True)
    result = run_reaper(cluster.spec, cluster=cluster, intensity=1.0)
    assert result.uncovered_ranges == 0
    starts: dict[str, list[float]] = defaultdict(list)
    for record in cluster.log:
        starts[record.keyspace].append(record.start)
    for keyspace, times in starts.items():
        assert all(t % 10 == pytest.approx(0, abs=1e-6) for t in times), keyspace
        assert len(set(times)) == len(times), keyspace  # never two of one run in one tick
    for record in cluster.log:
        running = {r.keyspace for r in cluster.log if r.start <= record.start < r.end}
        assert len(running) <= 2


def test_reaper_never_runs_more_segments_than_its_threads() -> None:
    # repairRunThreadCount 15 (cassandra-reaper.yaml:23): a segment holds a thread through its repair and pause.
    # Long segments and a 1 s tick would run ~40 segments of 4 runs at once without the pool.
    cluster = SimCluster(wide(), MODEL, record=True)
    run_reaper(cluster.spec, cluster=cluster, intensity=1.0, scheduling_interval=1.0, max_parallel_repairs=4)
    assert overlapping(cluster.log) == 15
    cluster = SimCluster(wide(), MODEL, record=True)
    run_reaper(cluster.spec, cluster=cluster, intensity=1.0, scheduling_interval=1.0, max_parallel_repairs=4,
               thread_count=100)  # fmt: skip
    assert overlapping(cluster.log) > 15


def test_reaper_locks_are_per_run_and_node() -> None:
    # CassandraConcurrencyDao.java:104 locks (run, node): two runs share nodes, one run never does.
    cluster = SimCluster(wide(nodes=30, keyspaces=2), MODEL, record=True)
    run_reaper(cluster.spec, cluster=cluster, intensity=1.0)
    shared_across_runs = False
    for a in cluster.log:
        for b in cluster.log:
            if a is not b and a.start < b.end and b.start < a.end and set(a.nodes) & set(b.nodes):
                assert a.keyspace != b.keyspace
                shared_across_runs = True
    assert shared_across_runs


def test_reaper_datacenter_aware_validates_one_replica_after_another_within_a_dc() -> None:
    # repairParallelism DATACENTER_AWARE (cassandra-reaper.yaml:20): the validation of each DC's replicas is
    # sequential, DCs in parallel: x2 with NTS 2/2/2, x1 with 1/1/1, x3 on one DC with RF 3.
    for spec, factor in (
        (FleetSpec.fleet(nodes=12, vnodes=2, keyspaces=1, tables=1, rf_per_dc=2, table_bytes_median=640 * MiB), 2),
        (FleetSpec.fleet(nodes=12, vnodes=2, keyspaces=1, tables=1, rf_per_dc=1, table_bytes_median=640 * MiB), 1),
        (tiny(), 3),
    ):
        for parallelism, expected in (("datacenter_aware", factor), ("parallel", 1)):
            cluster = SimCluster(spec, MODEL, record=True)
            run_reaper(spec, cluster=cluster, intensity=1.0, repair_parallelism=parallelism)
            assert cluster.log
            for record in cluster.log:
                nbytes = sum(r.width() for r in record.ranges) * cluster.bytes_per_token(record.keyspace)
                assert record.end - record.start == pytest.approx(MODEL.seconds(nbytes, validation_factor=expected))


def test_reaper_pause_holds_the_locks_at_the_shipped_intensity() -> None:
    # repairIntensity 0.9 (cassandra-reaper.yaml:21), SegmentRunner.java:806: the next segment of the run on the
    # same nodes starts at the first tick after duration / 0.9.
    cluster = SimCluster(tiny(), MODEL, record=True)
    run_reaper(tiny(), cluster=cluster, repair_parallelism="parallel")
    starts = sorted(r.start for r in cluster.log)
    duration = cluster.log[0].end - cluster.log[0].start
    assert duration == pytest.approx(12, rel=1e-3)
    assert starts == pytest.approx([0, 20, 40])  # 12 / 0.9 = 13.3 s: the ticks at 20 and 40


def test_reaper_equal_budget_is_ringwards_intensity_without_runner_limits() -> None:
    spec = tiny(tables=2)
    equal = run_reaper(spec, MODEL, equal_budget=True)
    assert equal.coverage_seconds == pytest.approx(3 * 22, rel=1e-6)  # back to back, no pause, no tick
    assert equal.coverage_seconds == idealised_reaper(spec, intensity=1.0).coverage_seconds


# -- the lower bound --------------------------------------------------------------------------------------------------
def test_lower_bound_is_each_nodes_data_and_its_down_time() -> None:
    # Each node replicates all 3 ranges: 1920 MiB, 30 s at 64 MiB/s. Down from 10 s to 100 s: 20 s left after.
    assert lower_bound(tiny(), MODEL).work_seconds == pytest.approx(30, rel=1e-6)
    bound = lower_bound(tiny(faults=Faults(down=(NodeDown(NODES[1], 10, 100),))), MODEL)
    assert bound.seconds == pytest.approx(120, rel=1e-6) and bound.busiest_node == NODES[1]
    late = lower_bound(tiny(faults=Faults(down=(NodeDown(NODES[1], 40, 100),))), MODEL)
    assert late.seconds == pytest.approx(30, rel=1e-6)  # done before it goes down
    # Session bound: RF 3 on 3 nodes gives every range the same replica set: one session, at 1 s, over 3 at once.
    assert bound.fewest_sessions == 1 and bound.session_seconds == pytest.approx(1 / 3)


def test_lower_bound_session_term_counts_replica_sets_over_the_concurrency() -> None:
    cheap = DurationModel(command_overhead=0, session_overhead=100.0, validation_rate=2**50, mismatch_share=0)
    spec = FleetSpec.fleet(nodes=30, vnodes=4, keyspaces=2, tables=1, table_bytes_median=MiB)
    bound = lower_bound(spec, cheap, max_sessions=3)
    assert bound.seconds == bound.session_seconds == pytest.approx(bound.fewest_sessions * 100 / 3)
    assert 0 < bound.fewest_sessions <= 2 * 30 * 4


@pytest.mark.parametrize(
    "spec",
    [
        tiny(tables=2, faults=Faults(down=(NodeDown(NODES[0], 5, 60),))),
        FleetSpec.small(),
        dataclasses.replace(
            FleetSpec.fleet(nodes=30, vnodes=4, keyspaces=2, tables=3, table_bytes_median=64 * MiB),
            faults=Faults(down=(NodeDown("10.1.0.1", 60, 600),)),
        ),
    ],
    ids=["tiny-with-fault", "seed-cluster", "30-nodes-with-fault"],
)
def test_lower_bound_is_below_every_scheduler(spec: FleetSpec) -> None:
    bound = lower_bound(spec, MODEL)
    results = [
        run_cep37(spec, MODEL),
        run_cep37(spec, MODEL, equal_budget=True),
        draft_cep37(spec),
        run_reaper(spec, MODEL),
        run_reaper(spec, MODEL, equal_budget=True),
        idealised_reaper(spec),
        run_ringward(spec, model=MODEL),
    ]
    for result in results:
        assert result.coverage_seconds is not None, result.name
        assert bound.seconds <= result.coverage_seconds + 1e-9, result.name
