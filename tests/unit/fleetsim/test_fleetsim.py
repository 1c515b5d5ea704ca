"""The fleet simulator: spec and catalog, virtual clock and session pool, faults, the two anchors."""

from __future__ import annotations

import dataclasses
import json
from datetime import timedelta
from typing import Any

import pytest
from ringward.repair import NodeSizeEstimate, RepairCommand, Segment, SizeEstimate
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Ring, TokenRange
from ringward_fleetsim import (
    EPOCH,
    DurationModel,
    Faults,
    FleetSpec,
    NodeDown,
    NodeJoin,
    SchedulerResult,
    SimCluster,
    SimNodetool,
    VirtualClock,
    run_cep37,
    run_reaper,
)
from ringward_fleetsim.ringward_run import run_ringward

MiB = 2**20
THIRD = 2**64 // 3
TOKENS = (MIN_TOKEN + THIRD, MIN_TOKEN + 2 * THIRD, MIN_TOKEN + 3 * THIRD)
NODES = ("10.0.0.1", "10.0.0.2", "10.0.0.3")
# Data: 3 x 640 MiB per table, so each (nearly equal) third of the ring holds 640 MiB: 10 s at 64 MiB/s.
MODEL = DurationModel(command_overhead=1.0, session_overhead=1.0, validation_rate=64 * MiB, mismatch_share=0.0)


def tiny(tables: int = 1, faults: Faults | None = None) -> FleetSpec:
    """Three nodes, one token each, NTS dc1: 3 (every node replicates every range), one keyspace."""
    nodes = tuple((address, "dc1", "rack1", (token,)) for address, token in zip(NODES, TOKENS, strict=True))
    return FleetSpec(
        nodes=3, vnodes=1, dcs=1, racks_per_dc=1, keyspaces=1, tables_per_keyspace=tables, rf_per_dc=3,
        table_bytes_median=3 * 640 * MiB, table_bytes_sigma=0.0, outliers=0, explicit_nodes=nodes,
        faults=faults or Faults(),
    )  # fmt: skip


def draft_cep37(spec: FleetSpec, model: DurationModel | None = MODEL, **more: Any) -> SchedulerResult:
    """The earlier model of CEP-37 (an early draft's defaults: table by table, fixed 16-subrange splitter, no replica
    check, no 5 s floor, nodetool/JMX charged, 60 s backoff), still reachable by parameters."""
    return run_cep37(spec, model, repair_by_keyspace=False, splitter="fixed", allow_parallel_replica_repair=True,
                     repair_task_min_duration=0, in_process=False, retry_backoff=60, **more)  # fmt: skip


def idealised_reaper(spec: FleetSpec, model: DurationModel | None = MODEL, **more: Any) -> SchedulerResult:
    """The earlier model of Reaper (pre-2.2 rules: no runner limits, parallel validation)."""
    return run_reaper(spec, model, runner_limits=False, repair_parallelism="parallel", **more)


def command(cluster: SimCluster, index: int = 1) -> RepairCommand:
    token_range = cluster.initial_ring.ranges()[index]
    return RepairCommand((Segment("ks00", (), token_range, NODES),))


# -- spec and catalog ------------------------------------------------------------------------------------------
def test_small_spec_is_the_seed_cluster_with_the_autorepair_benchmark_keyspaces() -> None:
    spec = FleetSpec.small()
    cluster = SimCluster(spec)
    ring = cluster.ring(0)
    from ringward_cassandra.localcluster.topology import PRESETS_DIR  # a renamed module fails here, never skips

    seed = json.loads((PRESETS_DIR / "seed.json").read_text())
    assert {(n.address, n.datacenter, n.rack, n.tokens) for n in ring.nodes} == {
        (n["address"], n["datacenter"], n["rack"], tuple(n["tokens"])) for n in seed["nodes"]
    }
    catalog = cluster.catalog
    assert catalog.tables() == {ks: {"t1": 864000, "t2": 864000} for ks in ("ar_a", "ar_b", "ar_c")}
    assert catalog.replication("ar_a") == Replication.network_topology({"dc1": 2})
    assert set(catalog.table_bytes().values()) == {10 * MiB}
    estimates = catalog.range_size_estimates("ar_a")
    assert len(estimates) == 2 * 12 and all(isinstance(e, SizeEstimate) for e in estimates)
    assert sum(e.partitions_count for e in estimates if e.table == "t1") == pytest.approx(10 * MiB / 1024, rel=0.01)
    per_node = catalog.size_estimates("ar_a")  # what the nightly plan reads: summed per table on each node
    assert len(per_node) == 2 * 3 and all(isinstance(e, NodeSizeEstimate) for e in per_node)
    assert sum(e.partitions_count for e in per_node if e.table == "t1") == pytest.approx(10 * MiB / 1024, rel=0.01)
    backlog = catalog.backlog("127.0.0.2")
    assert (backlog["pending_compactions"] if isinstance(backlog, dict) else backlog.pending_compactions) == 0


def test_fleet_spec_shape_outliers_and_json_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    spec = FleetSpec.fleet(nodes=12, vnodes=8, dcs=3, keyspaces=2, tables=5,
                           faults=Faults(down=(NodeDown("10.1.0.1", 1.0, 2.0),), session_failure_rate=0.1))  # fmt: skip
    nodes = spec.initial_nodes()
    assert len(nodes) == 12 and {len(n.tokens) for n in nodes} == {8}
    assert {n.datacenter for n in nodes} == {"dc1", "dc2", "dc3"} and len({(n.datacenter, n.rack) for n in nodes}) == 9
    sizes = sorted(t.bytes for t in spec.table_specs())
    assert len(sizes) == 10 and sizes[-1] > 5 * sizes[len(sizes) // 2]  # the outliers
    path = tmp_path / "spec.json"
    spec.dump(path)
    assert FleetSpec.load(path) == spec
    assert FleetSpec.from_json(FleetSpec.small().to_json()) == FleetSpec.small()


def test_the_system_keyspaces_are_replicated_and_planned_as_on_a_real_cluster() -> None:
    from ringward.repair import load_config, select_units
    from ringward_cassandra.ops.schema import TABLE_ORDER
    from ringward_fleetsim.spec import SimCatalog

    plain = FleetSpec.fleet(nodes=6, vnodes=4, dcs=3, keyspaces=2, tables=3)
    spec = dataclasses.replace(plain, system_keyspaces=True)
    catalog = SimCatalog(spec, Ring(tuple(spec.initial_nodes())))
    schema = catalog.tables()
    assert sorted(schema) == ["ks00", "ks01", "ringward_ops", "system_auth", "system_distributed"]
    assert sorted(schema["ringward_ops"]) == sorted(TABLE_ORDER)  # ringward's own tables, as its schema creates them
    assert {"roles", "role_members", "role_permissions", "resource_role_permissons_index", "network_permissions",
            "identity_to_role"} <= set(schema["system_auth"])  # fmt: skip
    assert sorted(schema["system_distributed"]) == [
        "parent_repair_history", "partition_denylist", "repair_history", "view_build_status",
    ]  # fmt: skip
    assert set(schema["system_auth"].values()) == {90 * 86400}
    expected = Replication.network_topology({"dc1": 3, "dc2": 3, "dc3": 3})
    assert {catalog.replication(ks) for ks in ("system_auth", "system_distributed", "ringward_ops")} == {expected}
    # The default selection plans them (node-local system keyspaces and system_traces stay out).
    assert {unit.keyspace for unit in select_units({ks: sorted(t) for ks, t in schema.items()}, load_config())} == set(
        schema
    )
    # The user keyspaces' tables are drawn as without them.
    assert [t for t in spec.table_specs() if t.keyspace.startswith("ks")] == list(plain.table_specs())
    assert FleetSpec.from_json(spec.to_json()) == spec


# -- clock and pool -------------------------------------------------------------------------------------------
def test_clock_starts_at_the_epoch_and_sleep_advances() -> None:
    clock = VirtualClock()
    assert clock.now() == EPOCH and clock.now().tzinfo is not None
    clock.sleep(90)
    assert clock.now() == EPOCH + timedelta(seconds=90)


def test_a_command_finishes_at_the_modelled_time() -> None:
    cluster = SimCluster(tiny(), MODEL)
    pool = SimNodetool(cluster).session_pool()
    pool.submit(command(cluster))
    assert pool.wait(5) == []
    assert cluster.clock.t == 5
    [(done, result)] = pool.wait(3600)
    assert result.succeeded and result.seconds == pytest.approx(1 + 1 + 10)
    assert cluster.clock.t == pytest.approx(12) and done == command(cluster)
    assert pool.wait(7) == [] and cluster.clock.t == pytest.approx(19)
    [record] = cluster.log
    assert record.ok and record.nodes == NODES and record.end == pytest.approx(12)


def test_concurrent_sessions_on_a_node_share_its_rates() -> None:
    cluster = SimCluster(tiny(), MODEL)
    pool = SimNodetool(cluster).session_pool()
    pool.submit(command(cluster, 1))
    pool.submit(command(cluster, 2))  # same replicas: k = 2 for the second, fixed at its start
    finished = [result.seconds for _, result in pool.wait(100)] + [result.seconds for _, result in pool.wait(100)]
    assert finished == pytest.approx([12, 22])


def test_a_down_node_fails_sessions_and_shows_dn() -> None:
    spec = tiny(faults=Faults(down=(NodeDown("10.0.0.2", 0, 100), NodeDown("10.0.0.3", 105, 200))))
    cluster = SimCluster(spec, MODEL)
    nodetool = SimNodetool(cluster)
    assert nodetool.status("10.0.0.1") == {"10.0.0.1": "UN", "10.0.0.2": "DN", "10.0.0.3": "UN"}
    pool = nodetool.session_pool()
    pool.submit(command(cluster))
    [(_, result)] = pool.wait(100)
    assert not result.succeeded and result.seconds == pytest.approx(1) and "10.0.0.2" in (result.error or "")
    cluster.clock.advance_to(100)
    assert nodetool.live_nodes() == set(NODES)
    pool.submit(command(cluster))  # 10.0.0.3 goes down 5 s into the session
    [(_, result)] = pool.wait(100)
    assert not result.succeeded and result.seconds == pytest.approx(5)


def test_session_failure_rate_is_seeded() -> None:
    spec = tiny(faults=Faults(session_failure_rate=0.5))
    outcomes = []
    for _ in range(2):
        cluster = SimCluster(spec, MODEL)
        pool = SimNodetool(cluster).session_pool()
        run = []
        for _ in range(20):
            pool.submit(command(cluster))
            run += [r.succeeded for _, r in pool.wait(1000)]
        outcomes.append(run)
    assert outcomes[0] == outcomes[1] and 0 < sum(outcomes[0]) < 20


def test_a_joining_node_changes_the_ring() -> None:
    spec = tiny(faults=Faults(joins=(NodeJoin("10.0.0.4", "dc1", "rack1", at=50.0, vnodes=4),)))
    cluster = SimCluster(spec, MODEL)
    assert cluster.ring().addresses() == list(NODES)
    cluster.clock.advance_to(50)
    ring = cluster.ring()
    assert ring.addresses() == [*NODES, "10.0.0.4"] and len(ring.ranges()) == 7
    assert SimNodetool(cluster).status()["10.0.0.4"] == "UN"


# -- anchors --------------------------------------------------------------------------------------------------
def test_cep37_turns_one_at_a_time_are_hand_checkable() -> None:
    # Each node: 1 primary range -> 16 subranges (number_of_subranges over 1 range) x 2 tables, one session at
    # a time, each 1 + 1 + 10/16 s. Three turns one after another (parallelism 1, checks without delay).
    result = draft_cep37(tiny(tables=2), parallel_repair_count=1, parallel_repair_percentage=0,
                       repair_check_interval=0)  # fmt: skip
    assert result.sessions == 3 * 2 * 16
    assert result.coverage_seconds == pytest.approx(3 * 2 * 16 * (2 + 10 / 16), rel=1e-6)
    assert result.covered_within_gc_grace({"ks00.t00": 864000, "ks00.t01": 864000})


def test_cep37_concurrent_turns_overlap_and_share_replicas() -> None:
    alone = draft_cep37(tiny(tables=2), parallel_repair_count=1, parallel_repair_percentage=0,
                      repair_check_interval=0).coverage_seconds  # fmt: skip
    together = draft_cep37(tiny(tables=2), parallel_repair_count=3, repair_check_interval=0).coverage_seconds
    assert alone is not None and together is not None
    assert alone / 3 < together < alone  # no lock: turns overlap, but the shared replicas slow each other


def test_cep37_skips_ranges_a_down_node_fails_until_its_next_turn() -> None:
    spec = tiny(faults=Faults(down=(NodeDown("10.0.0.3", 0, 3600),)))
    result = draft_cep37(spec, repair_check_interval=0)
    assert result.failed_sessions == 2 * 16 * 4  # two nodes' turns, each session tried 1 + 3 times
    assert result.coverage_seconds is not None and result.coverage_seconds > 86400  # min_repair_interval


def test_reaper_one_segment_per_node_with_the_intensity_pause() -> None:
    # RF 3 on 3 nodes: one segment at a time; each 1 + 1 + 10 s (both tables: 20 s of data);
    # intensity 0.5 pauses the replicas as long as the segment ran.
    result = idealised_reaper(tiny(tables=2), intensity=0.5)
    assert result.sessions == 3
    assert result.coverage_seconds == pytest.approx(5 * 22, rel=1e-6)
    down = idealised_reaper(tiny(tables=2, faults=Faults(down=(NodeDown("10.0.0.1", 0, 100),))), intensity=0.5)
    assert down.coverage_seconds == pytest.approx(100 + 5 * 22, rel=1e-6) and down.failed_sessions == 0


def test_reaper_retries_failed_segments_later_in_the_run() -> None:
    spec = dataclasses.replace(tiny(tables=2), faults=Faults(session_failure_rate=0.3))
    result = idealised_reaper(spec, intensity=1.0)
    assert result.uncovered_ranges == 0 and result.sessions == 3 + result.failed_sessions


def test_anchors_run_on_a_multi_dc_fleet() -> None:
    spec = FleetSpec.fleet(nodes=30, vnodes=4, keyspaces=2, tables=3, table_bytes_median=MiB)
    for result in (run_cep37(spec), run_cep37(spec, equal_budget=True), run_reaper(spec),
                   run_reaper(spec, equal_budget=True)):  # fmt: skip
        assert result.uncovered_ranges == 0 and result.coverage_seconds is not None


def test_ringward_runs_on_the_simulator() -> None:
    result = run_ringward(FleetSpec.small())
    assert result.uncovered_ranges == 0 and result.sessions > 0


def test_node_seconds_count_every_participant() -> None:
    cluster = SimCluster(tiny(), MODEL)
    pool = SimNodetool(cluster).session_pool()
    pool.submit(command(cluster, 0))
    pool.wait(100)
    assert cluster.stats.node_seconds == pytest.approx([12, 12, 12])
    assert TokenRange(TOKENS[2], TOKENS[0]) == cluster.initial_ring.ranges()[0]


def test_anchors_record_their_sessions_when_asked() -> None:
    cluster = SimCluster(tiny(tables=2), MODEL, record=True)
    idealised_reaper(cluster.spec, None, cluster=cluster, intensity=0.5)
    assert [(round(r.start), round(r.end), r.ok, r.keyspace) for r in cluster.log] == [
        (0, 22, True, "ks00"), (44, 66, True, "ks00"), (88, 110, True, "ks00"),
    ]  # fmt: skip
    cluster = SimCluster(tiny(tables=2), MODEL, record=True)
    draft_cep37(cluster.spec, None, cluster=cluster, parallel_repair_count=1, parallel_repair_percentage=0,
                repair_check_interval=0)  # fmt: skip
    assert len(cluster.log) == 96 and {r.tables for r in cluster.log} == {("t00",), ("t01",)}


def test_simulator_for_gives_the_process_one_cluster_per_spec_file(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from ringward_fleetsim import simulator_for

    path = tmp_path / "small.json"
    FleetSpec.small().dump(path)
    simulator = simulator_for(str(path))
    assert simulator_for(str(path)) is simulator
    assert simulator.ring().addresses() == ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
    assert simulator.catalog().tables()["ar_a"] == {"t1": 864000, "t2": 864000}
    assert simulator.nodetool().clock is simulator.clock and simulator.clock.now() == EPOCH
    assert simulator.ops_store() is simulator.ops_store()


# -- the cost model fitted on measured commands (benchmarks/calibrate_cost.py) -------------------------------


def _measured(terms: Any, noise: float = 0.0) -> list[Any]:
    from ringward_fleetsim.calibration import Measured

    points = []
    for i, (group, sessions, mib) in enumerate(
        [(g, s, m) for g in ("32", "96", "192") for s in (1, 2) for m in (1.0, 8.0, 40.0)]
    ):
        seconds = terms.predict(sessions, mib * 2**20) * (1 + (noise if i % 2 else -noise))
        points.append(Measured(group, sessions, mib * 2**20, seconds))
    return points


def test_the_fit_recovers_the_terms_that_made_the_measurements() -> None:
    from ringward_fleetsim.calibration import Terms, errors, fit, held_out_errors

    truth = Terms(command_overhead=0.8, session_overhead=0.3, seconds_per_byte=1 / (40 * 2**20))
    fitted = fit(_measured(truth))
    assert fitted.command_overhead == pytest.approx(0.8, rel=1e-6)
    assert fitted.session_overhead == pytest.approx(0.3, rel=1e-6)
    assert fitted.seconds_per_byte == pytest.approx(truth.seconds_per_byte, rel=1e-6)
    noisy = _measured(truth, noise=0.1)
    found = errors(noisy, [fit(noisy).predict(p.sessions, p.bytes_per_replica) for p in noisy])
    assert 0.02 < found["rms_relative"] < 0.2 and found["max_relative"] >= found["median_relative"]
    assert held_out_errors(noisy)["rms_relative"] >= found["rms_relative"] * 0.9  # a size it never saw


def test_measurements_that_cannot_separate_the_terms_are_refused() -> None:
    from ringward_fleetsim.calibration import Terms, fit

    one_session = [p for p in _measured(Terms(1.0, 0.5, 1e-8)) if p.sessions == 1]
    with pytest.raises(ValueError, match="vary the session count"):
        fit(one_session)


def test_the_three_term_calibration_reads_the_first_fit_and_scales_for_sensitivity(
    tmp_path: Any, monkeypatch: Any
) -> None:
    import ringward_fleetsim.calibration as calibration

    path = tmp_path / "calibration.json"
    path.write_text(json.dumps({"terms": {"command_overhead": 0.7, "session_overhead": 0.2,
                                          "seconds_per_byte": 1 / (50 * 2**20)}}))  # fmt: skip
    monkeypatch.setattr(calibration, "CALIBRATION_FILE", path)
    model = DurationModel.calibrated_three_terms()
    assert (model.command_overhead, model.session_overhead) == (0.7, 0.2)
    assert model.validation_rate == pytest.approx(50 * 2**20)
    assert model.mismatch_share == DurationModel().mismatch_share  # not fitted: kept as assumed
    triple = model.scaled(3.0)
    assert triple.seconds(10 * 2**20, sessions=2) == pytest.approx(3 * model.seconds(10 * 2**20, sessions=2))
    path.write_text("{}")
    with pytest.raises(ValueError, match=r"calibrate_cost\.py"):
        DurationModel.calibrated_three_terms()
