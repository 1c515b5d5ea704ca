"""The night's records (what XCom and ringward_ops carry) and `report_night` over in-memory ports: the fleet
simulator's small ring and catalog, its in-memory ops store on the virtual clock."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest
from ringward.errors import ClusterError, ConfigurationError, RepairError
from ringward.repair import (
    NightOutcome,
    NightPlan,
    NightPlanReference,
    NightReport,
    RecordUpdate,
    RepairConfig,
    RunState,
    Segment,
    SegmentState,
    TypePlan,
    TypePlanRef,
    TypeReport,
    decode_segment,
    dump_config,
    parse_config,
    plan_night,
    record_failure,
    record_start,
    record_success,
    report_night,
    run_night,
)
from ringward.ring import TokenRange
from ringward_airflow.repair_ports import ClusterAdapter
from ringward_cassandra.ops.layout import due_records_in_order, segment_records
from ringward_cassandra.ops_store import history_bucket
from ringward_fleetsim import FleetSpec, Simulator
from ringward_fleetsim.runtime import SimulatedCassandra, SimulatedRuntime

# -- records ------------------------------------------------------------------------------------------------

PLAN_KEYS = [
    "run_id", "enabled", "fingerprint", "parallelism", "segments", "due", "chunks", "exhausted", "not_due",
    "skipped_ranges", "skipped_keyspaces", "keyspaces", "skipped_tables", "down_nodes", "planning_cpu_seconds",
    "config", "repair_type", "repair_types", "types", "host_ids", "forced",
]  # fmt: skip


def a_plan(config: RepairConfig, types: dict[str, TypePlan], *, enabled: bool = True) -> NightPlan:
    def total(name: str) -> int:
        return sum(int(getattr(entry, name)) for entry in types.values())

    return NightPlan(
        run_id="night-1", enabled=enabled, fingerprint="f00d", parallelism=2, segments=total("segments"),
        due=total("due"), chunks=total("chunks"), exhausted=total("exhausted"), not_due=total("not_due"),
        skipped_ranges=0, skipped_keyspaces={"leased": "held by m (migration)"}, keyspaces=("ar_a",),
        skipped_tables={}, down_nodes=(), planning_cpu_seconds=0.25, config=dump_config(config), types=types,
        host_ids={"10.0.0.1": "h1"}, forced=total("forced"), repair_type=",".join(types),
    )  # fmt: skip


def test_the_plan_summary_keeps_its_21_keys_and_reads_back_equal() -> None:
    plan = a_plan(parse_config({}), {"full": TypePlan("night-1#full", 2, 7, 3, 1, 0, 11)})
    value = plan.to_json()
    assert list(value) == PLAN_KEYS
    assert value["types"]["full"] == {"plan_id": "night-1#full", "chunks": 2, "due": 7, "not_due": 3,
                                      "exhausted": 1, "forced": 0, "segments": 11}  # fmt: skip
    assert value["repair_type"] == "full" and value["repair_types"] == ["full"]
    assert NightPlan.from_json(value) == plan


def test_a_summary_without_types_is_one_plan_of_the_runs_type() -> None:
    legacy = NightPlan.from_json({"run_id": "r", "due": 4, "not_due": 2, "exhausted": 1, "chunks": 1})
    assert legacy.type_plans("preview") == {"preview": TypePlan("r", 1, 4, 2, 1, 0, 0)}
    assert legacy.enabled is True and legacy.repair_type == "full"


def test_the_reference_is_small_and_reads_back_with_its_types_in_run_order() -> None:
    types = (TypePlanRef("full", "night-1#full", 1, 5), TypePlanRef("preview", "night-1#preview", 2, 4))
    reference = NightPlanReference("night-1", 3, 9, "f00d", types)
    value = reference.to_json()
    assert value == {"run_id": "night-1", "chunks": 3, "due": 9, "fingerprint": "f00d",
                     "types": [["full", "night-1#full", 1, 5], ["preview", "night-1#preview", 2, 4]]}  # fmt: skip
    assert NightPlanReference.from_json(value) == reference
    legacy = NightPlanReference.from_json({"run_id": "r", "chunks": 3, "due": 7})
    assert legacy.type_plans("preview") == (TypePlanRef("preview", "r", 3, 7),)


def test_an_unknown_repair_type_names_the_types_and_the_fix() -> None:
    with pytest.raises(ConfigurationError, match=r"'bogus' is not a repair type") as raised:
        NightPlanReference.from_json({"run_id": "r", "types": [["bogus", "r#bogus", 1, 1]]})
    assert "Use one of full, incremental, preview, paxos" in raised.value.fix


def test_the_outcome_and_the_report_read_back_equal_each_type_with_its_own_keys() -> None:
    outcome = NightOutcome({"DONE": 3}, {"full": {"DONE": 3}}, None, (), 0, 1, 12.5,
                           {"ks.t": {"repaired": 87.5, "lowest": 75.0, "nodes": 3}})  # fmt: skip
    assert NightOutcome.from_json(outcome.to_json()) == outcome
    report = NightReport(
        "night-1", RunState.DISABLED, {"SucceededTokenRangesCount": 0}, {}, "full,incremental,preview",
        {
            "full": TypeReport("full", RunState.DONE, {"FailedTokenRangesCount": 0}, {"ks.t": "100.0%"}),
            "incremental": TypeReport("incremental", RunState.DONE, {}, {"ks.t": "50.0%"},
                                      repaired_share={"ks.t": {"repaired": 87.5}}),
            "preview": TypeReport("preview", RunState.PARTIAL, {}, {"ks.t": "0.0%"}, out_of_sync_findings=None),
        },
        {"10.0.0.1": "h1"}, {"ks.t": "100.0%"},
    )  # fmt: skip
    value = report.to_json()
    assert value["state"] == "DISABLED"
    assert value["types"]["full"] == {"state": "DONE", "metrics": {"FailedTokenRangesCount": 0},
                                      "repaired": {"ks.t": "100.0%"}}  # fmt: skip
    assert value["types"]["preview"] == {"state": "PARTIAL", "metrics": {}, "previewed": {"ks.t": "0.0%"},
                                         "out_of_sync_findings": None}  # fmt: skip
    assert value["types"]["incremental"]["repaired_share"] == {"ks.t": {"repaired": 87.5}}
    assert NightReport.from_json(value) == report


def test_every_state_a_report_can_have_is_a_run_state() -> None:
    assert RunState("DISABLED") is RunState.DISABLED and RunState.DISABLED.is_terminal
    assert {state.value for state in RunState} >= {"DONE", "PARTIAL", "DISABLED", "RUNNING", "NOT_STARTED"}


# -- report_night on in-memory ports ------------------------------------------------------------------------


class Recorder:
    """The night's log and gauges, kept."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.gauges: dict[str, float] = {}

    def info(self, msg: str, *args: Any) -> None:
        self.lines.append(self._format(msg, args))

    def warning(self, msg: str, *args: Any) -> None:
        self.lines.append("WARNING " + self._format(msg, args))

    @staticmethod
    def _format(msg: str, args: tuple[Any, ...]) -> str:
        # As `logging` does: no arguments, no formatting; one mapping argument fills named placeholders.
        if not args:
            return msg
        return msg % (args[0] if len(args) == 1 and isinstance(args[0], dict) else args)

    def gauge(self, name: str, value: float) -> None:
        self.gauges[name] = value


@pytest.fixture
def simulator() -> Simulator:
    return Simulator(FleetSpec.small())


def _segments(simulator: Simulator, config: RepairConfig) -> tuple[Segment, ...]:
    cluster = ClusterAdapter(SimulatedCassandra(simulator))
    return cluster.plan(cluster.ring(), config, {}).segments


def _report(
    simulator: Simulator, plan: NightPlan, config: RepairConfig, recorder: Recorder, outcome: NightOutcome | None
) -> NightReport:
    return report_night(
        plan, outcome, config, run_id="night-1", store=simulator.ops_store(),
        cluster=ClusterAdapter(SimulatedCassandra(simulator)), run_started=simulator.clock.now() - timedelta(hours=2),
        log=recorder, gauge=recorder.gauge,
    )  # fmt: skip


def _repaired(simulator: Simulator, segments: tuple[Segment, ...], failed: int = 0) -> None:
    now = simulator.clock.now()
    updates = []
    for index, segment in enumerate(segments):
        started = record_start(None, segment.segment_id, "night-1")
        done = record_failure(started, "boom", 1.0) if index < failed else record_success(started, now, 1.0)
        updates.append(RecordUpdate(segment, done, now, now))
    simulator.ops_store().record_repairs(updates)


def test_a_night_that_repaired_everything_is_done_recorded_and_gauged(simulator: Simulator) -> None:
    config = parse_config({})
    segments = _segments(simulator, config)
    _repaired(simulator, segments)
    plan = a_plan(config, {"full": TypePlan("night-1#full", 1, len(segments), 0, 0, 0, len(segments))})
    recorder = Recorder()
    outcome = NightOutcome({"DONE": len(segments)}, {}, None, (), 0, 0, run_seconds=1234.4)
    report = _report(simulator, plan, config, recorder, outcome)
    assert report.state is RunState.DONE and set(report.tables.values()) == {"100.0%"}
    assert report.metrics["SucceededTokenRangesCount"] == len(segments) > 0
    assert report.metrics["ClusterRepairTimeInSec"] == 1234  # the repair task's own clock, not the wall time
    assert recorder.gauges["full.SucceededTokenRangesCount"] == len(segments)
    assert recorder.gauges["LongestUnrepairedSec"] == 0
    (recorded,) = simulator.ops_store().repair_runs()
    assert recorded.state == "DONE" and recorded.summary == report.to_json()
    assert any(line.startswith(f"Run DONE: {len(segments)} segments") for line in recorder.lines)
    assert "WARNING Keyspace leased was not repaired: held by m (migration)" in recorder.lines


def test_a_disabled_night_is_reported_disabled_with_the_wall_time(simulator: Simulator) -> None:
    config = parse_config({"enabled": False})
    segments = _segments(simulator, config)
    plan = a_plan(config, {"full": TypePlan("night-1#full", 0, 0, len(segments), 0, 0, len(segments))}, enabled=False)
    recorder = Recorder()
    report = _report(simulator, plan, config, recorder, None)
    assert report.state is RunState.DISABLED
    assert report.metrics["ClusterRepairTimeInSec"] == 2 * 3600  # no repair result: since the DAG run started
    assert report.metrics["SkippedTokenRangesCount"] == len(segments) > 0
    assert simulator.ops_store().repair_runs()[0].state == "DISABLED"


def test_failed_segments_fail_the_report_after_it_is_recorded(simulator: Simulator) -> None:
    config = parse_config({"max_retries": 2})
    segments = _segments(simulator, config)
    _repaired(simulator, segments, failed=2)
    plan = a_plan(config, {"full": TypePlan("night-1#full", 1, len(segments), 0, 0, 0, len(segments))})
    with pytest.raises(RepairError, match="2 segment\\(s\\) failed after 2 retries in run night-1") as raised:
        _report(simulator, plan, config, Recorder(), None)
    assert "last_error in ringward_ops.repair_history" in raised.value.fix
    (recorded,) = simulator.ops_store().repair_runs()
    assert recorded.state == "PARTIAL" and recorded.summary["metrics"]["FailedTokenRangesCount"] == 2  # type: ignore[index]


def test_a_previews_coverage_is_its_own_and_its_findings_are_counted(simulator: Simulator) -> None:
    config = parse_config({"repair_types": {"full": {"enabled": True}, "preview": {"enabled": True}}})
    segments = _segments(simulator, config)
    none_due = {
        kind: TypePlan(f"night-1#{kind}", 0, 0, len(segments), 0, 0, len(segments)) for kind in ("full", "preview")
    }
    plan = a_plan(config, none_due)
    report = _report(simulator, plan, config, Recorder(), None)
    preview = report.to_json()["types"]["preview"]
    assert "repaired" not in preview and preview["out_of_sync_findings"] == 0
    assert set(preview["previewed"].values()) == {"0.0%"}  # nothing previewed in its own history


# -- plan_night on in-memory ports --------------------------------------------------------------------------


class Status:
    """`nodetool status`: the first node does not answer, the others see `down` as DN."""

    def __init__(self, addresses: list[str], down: set[str]) -> None:
        self.addresses = addresses
        self.down = down
        self.asked: list[str] = []

    def status(self, address: str) -> dict[str, str]:
        self.asked.append(address)
        if address == self.addresses[0]:
            raise ClusterError(f"JMX connection refused on {address}.", "Start the node.")
        return {node: "DN" if node in self.down else "UN" for node in self.addresses}


def _plan(simulator: Simulator, config: RepairConfig, recorder: Recorder, status: Status | None = None) -> NightPlan:
    ring = simulator.ring()
    return plan_night(
        config, run_id="night-1", store=simulator.ops_store(),
        cluster=ClusterAdapter(SimulatedCassandra(simulator)),
        nodetool=status or Status([*ring.addresses(), "unknown"], set()), log=recorder, chunk_rows=3,
        cpu_seconds=iter([10.0, 10.5]).__next__,
    )  # fmt: skip


def test_the_plan_stores_the_due_segments_in_chunks_and_says_so(simulator: Simulator) -> None:
    recorder = Recorder()
    config = parse_config({})
    plan = _plan(simulator, config, recorder)
    segments = _segments(simulator, config)
    full = plan.types["full"]
    assert full.due == len(segments) > 3 and full.chunks == -(-len(segments) // 3)  # 3 segments a chunk
    stored = [row for chunk in range(full.chunks) for row in simulator.ops_store().run_plan_chunk(full.plan_id, chunk)]
    assert sorted(decode_segment(json.loads(row)).segment_id for row in stored) == sorted(
        s.segment_id for s in segments
    )
    assert plan.planning_cpu_seconds == 0.5 and plan.down_nodes == () and plan.enabled
    assert plan.reference() == NightPlanReference(
        "night-1",
        full.chunks,
        full.due,
        plan.fingerprint,
        (TypePlanRef("full", "night-1#full", full.chunks, full.due),),
    )
    assert (
        f"Plan of full repair: {full.due} due in {full.chunks} chunks, 0 not due (0 of them due but held back behind "
        "the backlog on their nodes), 0 with retries used up." in recorder.lines
    )
    assert any(line.startswith(f"Plan: {full.due} segments, {full.due} due in") for line in recorder.lines)


def test_a_second_plan_finds_nothing_due_within_the_interval(simulator: Simulator) -> None:
    config = parse_config({})
    segments = _segments(simulator, config)
    _repaired(simulator, segments)
    plan = _plan(simulator, config, Recorder())
    assert (plan.due, plan.not_due, plan.chunks) == (0, len(segments), 0)


class CountingStore:
    """The in-memory ops store, counting the history the night reads: calls, partitions and records decoded."""

    def __init__(self, store: Any) -> None:
        self.store = store
        self.partitions: list[tuple[str, tuple[str, ...], int]] = []
        self.decoded = 0
        self.scans = 0

    def records_of(self, keyspace: str, tables: Any, buckets: Any, ids: Any, repair_type: str = "full") -> Any:
        wanted = sorted(set(buckets))
        self.partitions.extend((keyspace, tuple(tables), b) for b in wanted)
        found = self.store.records_of(keyspace, tables, wanted, ids, repair_type=repair_type)
        self.decoded += len(found)
        return found

    def due_records_of(self, keyspace: str, tables: Any, buckets: Any, ids: Any, repair_type: str = "full") -> Any:
        wanted = sorted(set(buckets))
        self.partitions.extend((keyspace, tuple(tables), b) for b in wanted)
        found = self.store.due_records_of(keyspace, tables, wanted, ids, repair_type=repair_type)
        self.decoded += len(found)
        return found

    def segment_records(self, segments: Any, repair_type: str) -> Any:
        """As both stores read them (`layout.segment_records` over their own `records_of`), over the counting one."""
        return segment_records(segments, repair_type, self.records_of)

    def due_records(self, segments: Any, repair_type: str) -> Any:
        """As both stores read them (`layout.segment_records` over their `due_records_of`), over the counting one."""
        return segment_records(segments, repair_type, self.due_records_of)

    def due_records_in_order(self, segments: Any, repair_type: str) -> Any:
        """As both stores read them (`layout.due_records_in_order` over their `due_records_of`), over the counting
        one."""
        return due_records_in_order(segments, repair_type, self.due_records_of)

    def repair_history(self, *args: Any, **kwargs: Any) -> Any:
        self.scans += 1
        return self.store.repair_history(*args, **kwargs)

    def history_of(self, *args: Any, **kwargs: Any) -> Any:
        self.scans += 1
        return self.store.history_of(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_the_plan_reads_only_the_history_partitions_of_its_segments(simulator: Simulator) -> None:
    """Issue 40: the plan task reads the history by segment, never the whole table: the partitions its segments'
    ranges fall in, and a record decoded only for a planned range. History of a keyspace no longer planned (and of
    ranges of an old ring) is neither read nor decoded."""
    config = parse_config({})
    segments = _segments(simulator, config)
    _repaired(simulator, segments[: len(segments) // 2])
    gone = [Segment("dropped_ks", (), TokenRange(s.range.start, s.range.end), s.replicas) for s in segments]
    old_ring = [Segment(s.keyspace, s.tables, TokenRange(s.range.start, s.range.end - 1), s.replicas)
                for s in segments if s.range.end - 1 > s.range.start]  # fmt: skip
    _repaired(simulator, (*gone, *old_ring))
    counting = CountingStore(simulator.ops_store())
    plan = plan_night(
        config, run_id="night-1", store=counting, cluster=ClusterAdapter(SimulatedCassandra(simulator)),
        nodetool=Status([*simulator.ring().addresses(), "unknown"], set()), log=Recorder(), chunk_rows=3,
        cpu_seconds=iter([10.0, 10.5]).__next__,
    )  # fmt: skip
    assert plan.due == len(segments) - len(segments) // 2 and plan.not_due == len(segments) // 2
    planned = {(s.keyspace, s.tables, history_bucket(s.range.start)) for s in segments}
    assert old_ring and sorted(counting.partitions) == sorted(planned)  # each once, and no other
    assert counting.decoded == len(segments) // 2  # the planned ranges with a history row, nothing else
    assert counting.scans == 0


def test_leased_keyspaces_down_nodes_and_the_kill_switch_are_named(simulator: Simulator) -> None:
    ring = simulator.ring()
    keyspace = _segments(simulator, parse_config({}))[0].keyspace
    simulator.ops_store().add_lease(keyspace, "migration-7", "replication change")
    down = ring.addresses()[-1]
    status = Status(ring.addresses(), {down})
    recorder = Recorder()
    plan = _plan(simulator, parse_config({"enabled": False}), recorder, status)
    assert plan.skipped_keyspaces == {keyspace: "held by migration-7 (replication change)"}
    assert keyspace not in plan.keyspaces and plan.down_nodes == (down,) and status.asked == ring.addresses()[:2]
    assert plan.due == 0 and not plan.enabled
    why = "held by migration-7 (replication change)"
    assert f"WARNING Keyspace {keyspace} skipped tonight: under a migration lease, {why}" in recorder.lines
    assert f"WARNING Down now: {down}; their segments wait for them during the run." in recorder.lines
    assert "WARNING Repair is disabled (enabled: false): nothing runs tonight." in recorder.lines


# -- run_night on in-memory ports, in virtual time ----------------------------------------------------------


def _run(
    simulator: Simulator, plan: NightPlan, config: RepairConfig, recorder: Recorder, *,
    still_enabled: bool = True, killed: bool = False,
) -> NightOutcome:  # fmt: skip
    return run_night(
        plan.reference(), plan, config, run_id="night-1", store=simulator.ops_store(),
        cluster=ClusterAdapter(SimulatedCassandra(simulator)), nodetool=simulator.nodetool(),
        runtime=SimulatedRuntime(simulator), still_enabled=lambda: still_enabled, killed=lambda: killed,
        log=recorder, gauge=recorder.gauge, window_chunks=2, chunk_rows=3,
    )  # fmt: skip


def test_the_night_repairs_every_due_segment_window_by_window_in_virtual_time(simulator: Simulator) -> None:
    config = parse_config({})
    plan = _plan(simulator, config, Recorder())
    assert plan.chunks > 2  # more than one window of two chunks
    recorder = Recorder()
    started = simulator.clock.now()
    outcome = _run(simulator, plan, config, recorder)
    assert outcome.counts == {"DONE": plan.due} and outcome.types == {"full": {"DONE": plan.due}}
    assert outcome.stop_reason is None and outcome.failed == () and outcome.replans == 0
    assert outcome.run_seconds == (simulator.clock.now() - started).total_seconds() > 0  # the virtual clock's
    history = [r for r in simulator.ops_store().repair_history() if r.record.run_id == "night-1"]
    assert len(history) == plan.due and {r.record.state for r in history} == {SegmentState.DONE}
    progress = simulator.ops_store().run_progress("night-1")
    assert progress is not None and progress["final"] is True and progress["done"] == plan.due
    assert recorder.gauges["SucceededTokenRangesCount"] == plan.due and recorder.gauges["RepairsInProgress"] == 0
    assert f"Repair type full: {plan.due} segment(s) planned." in recorder.lines
    assert f"Run: {{'DONE': {plan.due}}}" in recorder.lines


def test_the_plan_pages_are_dropped_when_the_run_ends(simulator: Simulator) -> None:
    config = parse_config({})
    plan = _plan(simulator, config, Recorder())
    store = simulator.ops_store()
    full = plan.types["full"]
    assert full.chunks > 2 and all(store.run_plan_chunk(full.plan_id, chunk) for chunk in range(full.chunks))
    outcome = _run(simulator, plan, config, Recorder())
    assert outcome.counts == {"DONE": plan.due}
    assert [store.run_plan_chunk(full.plan_id, chunk) for chunk in range(full.chunks)] == [[]] * full.chunks


class _Undeletable:
    """The simulator's ops store, whose plans cannot be dropped."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def drop_run_plan(self, run_id: str, chunks: int) -> None:
        raise ClusterError("Cassandra timed out.", "Retry.")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def test_a_plan_that_cannot_be_dropped_is_left_to_its_ttl_without_failing_the_run(simulator: Simulator) -> None:
    config = parse_config({})
    plan = _plan(simulator, config, Recorder())
    recorder = Recorder()
    outcome = run_night(
        plan.reference(), plan, config, run_id="night-1", store=_Undeletable(simulator.ops_store()),
        cluster=ClusterAdapter(SimulatedCassandra(simulator)), nodetool=simulator.nodetool(),
        runtime=SimulatedRuntime(simulator), still_enabled=lambda: True, killed=lambda: False,
        log=recorder, gauge=recorder.gauge, window_chunks=2, chunk_rows=3,
    )  # fmt: skip
    assert outcome.counts == {"DONE": plan.due}
    assert simulator.ops_store().run_plan_chunk(plan.types["full"].plan_id, 0) != []
    assert any(line.startswith("WARNING Plan night-1#full not deleted (ClusterError: ") for line in recorder.lines)


def test_the_kill_switch_and_a_kill_leave_every_planned_segment_postponed(simulator: Simulator) -> None:
    config = parse_config({})
    plan = _plan(simulator, config, Recorder())
    first_window = 2 * 3  # two chunks of three segments: the windows after it are postponed unread by the executor
    switched_off = _run(simulator, plan, config, Recorder(), still_enabled=False)
    assert switched_off.counts == {"POSTPONED": first_window}
    assert switched_off.stop_reason is not None and "kill switch" in switched_off.stop_reason
    assert simulator.ops_store().run_plan_chunk(plan.types["full"].plan_id, 0) == []  # the run is over: dropped
    plan = _plan(simulator, config, Recorder())
    recorder = Recorder()
    killed = _run(simulator, plan, config, recorder, killed=True)
    assert simulator.ops_store().run_plan_chunk(plan.types["full"].plan_id, 0) != []  # kept for the task's retry
    assert killed.stop_reason == "the task was killed" and killed.counts == {"POSTPONED": first_window}
    assert "WARNING Task killed: stopping nodetool and aborting sessions on []" in recorder.lines
    history = [r for r in simulator.ops_store().repair_history() if r.record.run_id == "night-1"]
    assert len(history) == plan.due and {r.record.state for r in history} == {SegmentState.POSTPONED}


def test_the_pause_switch_stops_the_night_naming_who_paused_it(simulator: Simulator) -> None:
    config = parse_config({})
    plan = _plan(simulator, config, Recorder())
    simulator.ops_store().set_switch(True, "ops-oncall", "maintenance")
    recorder = Recorder()
    outcome = _run(simulator, plan, config, recorder)
    assert outcome.counts == {"POSTPONED": 2 * 3} and outcome.stop_reason is not None  # the first window's
    history = [r for r in simulator.ops_store().repair_history() if r.record.run_id == "night-1"]
    assert len(history) == plan.due and {r.record.state for r in history} == {SegmentState.POSTPONED}
    assert any(line.startswith("WARNING Repair paused from the UI by ops-oncall at ") for line in recorder.lines)
