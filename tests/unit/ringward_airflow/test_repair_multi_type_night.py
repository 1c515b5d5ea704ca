"""Issue 24 remainder: several enabled repair types in one night (plan -> repair -> report), each on its own
cadence and history, one after another in a fixed order. The operators' own code paths, run on the fleet
simulator's small ring, ops store and virtual clock (no Airflow run: tests/dags runs the DAG itself)."""

from __future__ import annotations

import logging
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ringward.errors import ClusterError
from ringward.repair import (
    RUN_ORDER,
    NightOutcome,
    NightPlan,
    NightPlanReference,
    NodeBacklog,
    RepairConfig,
    Segment,
    SegmentRecord,
    TypePlanRef,
    history_key,
    parse_config,
    record_start,
    record_success,
    repaired_shares,
    report_night,
    select_due_by_type,
    type_plan_id,
)
from ringward.ring import TokenRange
from ringward_airflow import repair_operators
from ringward_airflow.repair_operators import (
    PlanRepairOperator,
    RepairReportOperator,
    RepairRunOperator,
    _config_or_fail,
)
from ringward_airflow.repair_ports import ClusterAdapter
from ringward_airflow.repair_runtime import use_runtime
from ringward_fleetsim import Faults, FleetSpec, NodeJoin, Simulator
from ringward_fleetsim.runtime import SimulatedCassandra, SimulatedRuntime

NOW = datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
ALL_TYPES = {"repair_types": {kind: {"enabled": True} for kind in ("full", "incremental", "preview", "paxos")}}


def _done(segment: Segment, kind: str, at: datetime) -> tuple[str, SegmentRecord]:
    started = record_start(None, segment.segment_id, "before", kind)
    return history_key(segment.segment_id, kind), record_success(started, at, 1.0, kind)


# -- pure: order and per-type selection ----------------------------------------------------------------------


def test_a_night_runs_the_repairs_first_then_paxos_then_the_preview() -> None:
    assert RUN_ORDER == ("full", "incremental", "paxos", "preview")
    config = parse_config(ALL_TYPES)
    assert config.enabled_types == RUN_ORDER
    segment = Segment("ks", ("t",), TokenRange(0, 10), ("n1", "n2"))
    plans = select_due_by_type([segment], {}, run_id="r", now=NOW, config=config)
    assert [p.repair_type for p in plans] == list(RUN_ORDER)
    assert [p.config.session_type for p in plans] == list(RUN_ORDER)  # each type runs with its own flags


def test_types_narrow_the_selection_to_the_types_named_keeping_the_order() -> None:
    config = parse_config(ALL_TYPES)
    a = Segment("ks", ("t",), TokenRange(0, 10), ("n1", "n2"))
    records = dict([_done(a, "full", NOW - HOUR), _done(a, "preview", NOW - 25 * HOUR)])
    plans = select_due_by_type([a], records, run_id="r", now=NOW, config=config, types=["preview", "full"])
    assert [p.repair_type for p in plans] == ["full", "preview"]
    full, preview = plans
    assert full.selection.not_due == (a,) and preview.selection.due == (a,)  # each on its own history
    assert select_due_by_type([a], records, run_id="r", now=NOW, config=parse_config({}), types=["paxos"]) == []


def test_each_type_has_a_stored_plan_of_its_own() -> None:
    assert type_plan_id("night-1", "full") == "night-1#full"
    assert type_plan_id("night-1", "preview", 2) == "night-1#preview#replan2"
    assert len({type_plan_id("r", kind) for kind in RUN_ORDER}) == 4


def test_a_reference_without_types_is_one_plan_of_the_runs_type() -> None:
    """A plan stored before this change (one type per run) is still run by the new repair task."""
    config = parse_config({"repair_type": "preview"})
    legacy = NightPlanReference.from_json({"run_id": "r", "chunks": 3, "due": 7})
    assert legacy.type_plans(config.session_type) == (TypePlanRef("preview", "r", 3, 7),)
    reference = {"types": [["full", "r#full", 1, 5], ["preview", "r#preview", 2, 9]]}
    assert NightPlanReference.from_json(reference).type_plans(config.session_type) == (
        TypePlanRef("full", "r#full", 1, 5),
        TypePlanRef("preview", "r#preview", 2, 9),
    )


# -- the operators on the simulator --------------------------------------------------------------------------


class _TaskInstance:
    def __init__(self) -> None:
        self.xcom: dict[tuple[str, str], Any] = {}

    def xcom_push(self, key: str, value: Any) -> None:
        self.xcom[("plan", key)] = value

    def xcom_pull(self, task_ids: str, key: str = "return_value") -> Any:
        return self.xcom.get((task_ids, key))


@pytest.fixture
def simulator() -> Simulator:
    return Simulator(FleetSpec.small())


@pytest.fixture(autouse=True)
def _no_gauges(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(repair_operators.Stats, "gauge", lambda *a, **k: None)


def _cassandra(simulator: Simulator) -> SimulatedCassandra:
    return SimulatedCassandra(simulator)


def night(simulator: Simulator, run_id: str, params: dict[str, Any], nodetool: Any = None) -> dict[str, Any]:
    """plan -> repair -> report of one night, each task's `execute` on the simulator's runtime (its ring, catalog,
    in-memory ops store, nodetool answers, sessions and virtual clock), as `dag.test()` runs them."""
    assert nodetool is None or nodetool is simulator.nodetool()  # the runtime hands the operators this one
    ti = _TaskInstance()
    context: dict[str, Any] = {"run_id": run_id, "ti": ti, "params": params}
    with use_runtime(SimulatedRuntime(simulator)):
        reference = PlanRepairOperator(task_id="plan").execute(context)
        ti.xcom[("plan", "return_value")] = reference
        result = RepairRunOperator(task_id="repair").execute(context)
        ti.xcom[("repair", "return_value")] = result
        report = RepairReportOperator(task_id="report").execute(context)
    return {"reference": reference, "plan": ti.xcom[("plan", "summary")], "result": result, "report": report}


def _report(
    simulator: Simulator, run_id: str, plan: dict[str, Any], result: dict[str, Any], config: RepairConfig
) -> dict[str, Any]:
    """The report task's one call, on the simulator's cluster and store, from the plan's and the repair's XComs."""
    cassandra = _cassandra(simulator)
    report = report_night(
        NightPlan.from_json(plan), NightOutcome.from_json(result), config, run_id=run_id,
        store=simulator.ops_store(), cluster=ClusterAdapter(cassandra), run_started=None,
        log=logging.getLogger("report"), gauge=lambda name, value: None,
    )  # fmt: skip
    return report.to_json()


def _of_run(simulator: Simulator, run_id: str, **kind: str) -> Counter[str]:
    rows = simulator.ops_store().repair_history(**kind)
    return Counter(r.record.state.value for r in rows if r.record.run_id == run_id)


FULL_AND_PREVIEW = {"config_overrides": {"repair_types": {"full": {"enabled": True}, "preview": {"enabled": True}}}}


def test_one_night_plans_and_runs_full_then_preview_each_on_its_own_history(simulator: Simulator) -> None:
    figures = night(simulator, "night-1", FULL_AND_PREVIEW)
    reference, plan, result, report = figures["reference"], figures["plan"], figures["result"], figures["report"]
    kinds = [entry[0] for entry in reference["types"]]
    assert kinds == ["full", "preview"] and len(str(reference)) < 500  # the XCom stays a small reference
    full_due, preview_due = plan["types"]["full"]["due"], plan["types"]["preview"]["due"]
    assert full_due == preview_due > 0 and plan["due"] == full_due + preview_due
    assert result["types"] == {"full": {"DONE": full_due}, "preview": {"DONE": preview_due}}
    assert _of_run(simulator, "night-1") == {"DONE": full_due}
    assert _of_run(simulator, "night-1", repair_type="preview") == {"DONE": preview_due}
    # One after another: every full session finished before the first preview started.
    store = simulator.ops_store()
    full_end = max(r.finished_at for r in store.repair_history() if r.finished_at)
    preview_start = min(r.started_at for r in store.repair_history(repair_type="preview") if r.started_at)
    assert full_end <= preview_start
    # The report, per type; a preview never counts as a repair.
    assert report["state"] == "DONE" and set(report["types"]) == {"full", "preview"}
    assert report["metrics"]["SucceededTokenRangesCount"] == full_due
    assert report["types"]["preview"]["metrics"]["SucceededTokenRangesCount"] == preview_due
    assert "repaired" not in report["types"]["preview"] and "previewed" in report["types"]["preview"]
    assert set(report["types"]["full"]["repaired"].values()) == {"100.0%"}
    assert set(report["types"]["preview"]["previewed"].values()) == {"100.0%"}  # from the preview's own history
    assert report["types"]["preview"]["out_of_sync_findings"] == 0  # the simulator's replicas agree
    assert store.preview_findings() == []


def test_what_a_preview_finds_is_kept_and_reported_and_repairs_nothing() -> None:
    simulator = Simulator(FleetSpec.small(faults=Faults(out_of_sync=("ar_a.t1",))))
    figures = night(simulator, "night-1", FULL_AND_PREVIEW)
    findings = simulator.ops_store().preview_findings()
    assert findings and {(f.keyspace, f.table, f.run_id) for f in findings} == {("ar_a", "t1", "night-1")}
    assert figures["report"]["types"]["preview"]["out_of_sync_findings"] == len(findings)
    assert figures["report"]["metrics"]["SucceededTokenRangesCount"] == figures["plan"]["types"]["full"]["due"]


def test_a_second_night_within_the_interval_runs_only_the_type_that_is_due(simulator: Simulator) -> None:
    types = {"full": {"enabled": True}, "preview": {"enabled": True, "min_repair_interval": 0}}
    params = {"config_overrides": {"repair_types": types}}
    first = night(simulator, "night-1", params)
    second = night(simulator, "night-2", params)
    assert second["plan"]["types"]["full"]["due"] == 0
    assert second["plan"]["types"]["full"]["not_due"] == first["plan"]["types"]["full"]["due"]
    assert second["plan"]["types"]["preview"]["due"] == first["plan"]["types"]["preview"]["due"]
    assert _of_run(simulator, "night-2") == {}  # no full repair tonight
    assert second["result"]["types"]["full"] == {} and second["report"]["state"] == "DONE"


def test_the_repair_type_param_runs_only_that_type(simulator: Simulator) -> None:
    figures = night(simulator, "night-1", {**FULL_AND_PREVIEW, "repair_type": "preview"})
    assert [entry[0] for entry in figures["reference"]["types"]] == ["preview"]
    assert _of_run(simulator, "night-1") == {}
    assert figures["report"]["metrics"]["SucceededTokenRangesCount"] == 0  # a preview is not a repair
    assert figures["report"]["tables"] and set(figures["report"]["tables"].values()) == {"0.0%"}


def test_a_window_closed_in_the_first_type_leaves_the_later_types_due(simulator: Simulator) -> None:
    params = {"config_overrides": {**FULL_AND_PREVIEW["config_overrides"], "window": {"max_duration": 1}}}
    figures = night(simulator, "night-1", params)
    assert figures["result"]["stop_reason"]
    preview = _of_run(simulator, "night-1", repair_type="preview")
    assert preview == {"POSTPONED": figures["plan"]["types"]["preview"]["due"]}  # never started, stays due
    assert figures["report"]["state"] == "PARTIAL"


def test_the_kill_switch_off_repairs_no_type(simulator: Simulator) -> None:
    figures = night(simulator, "night-1", {**FULL_AND_PREVIEW, "enabled": "off"})
    assert figures["plan"]["due"] == 0 and figures["report"]["state"] == "DISABLED"
    assert set(figures["plan"]["types"]) == {"full", "preview"}


def test_a_ring_change_re_plans_the_running_type_and_each_later_one() -> None:
    first = FleetSpec.small().initial_nodes()[0]
    join = NodeJoin("10.9.9.9", first.datacenter, first.rack, at=60.0)
    simulator = Simulator(FleetSpec.small(faults=Faults(joins=(join,))))
    params = {"config_overrides": {**FULL_AND_PREVIEW["config_overrides"], "ranges_per_command": 1}}
    figures = night(simulator, "night-1", params)
    result = figures["result"]
    assert result["replans"] >= 2, result  # full during its run; the preview before it starts (old ring's plan)
    assert "10.9.9.9" in simulator.ring().addresses()
    assert figures["report"]["state"] == "DONE" and set(figures["report"]["tables"].values()) == {"100.0%"}
    full, preview = _of_run(simulator, "night-1"), _of_run(simulator, "night-1", repair_type="preview")
    assert set(full) == set(preview) == {"DONE"}
    # The preview ran on the new ring: some of its sessions include the node that joined.
    rows = [r for r in simulator.ops_store().repair_history(repair_type="preview") if r.record.run_id == "night-1"]
    assert any("10.9.9.9" in row.replicas for row in rows)


def test_the_pause_stops_every_type_and_leaves_them_all_due(simulator: Simulator) -> None:
    simulator.ops_store().set_switch(True, "ops", "maintenance")
    figures = night(simulator, "night-1", FULL_AND_PREVIEW)
    assert figures["result"]["stop_reason"]
    due = figures["plan"]["types"]
    assert _of_run(simulator, "night-1") == {"POSTPONED": due["full"]["due"]}
    assert _of_run(simulator, "night-1", repair_type="preview") == {"POSTPONED": due["preview"]["due"]}
    assert figures["report"]["state"] == "PARTIAL"


class _Lines:
    """The repair task's log lines (what `dags test` prints), as text."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def info(self, message: str, *args: Any) -> None:
        self.lines.append(message % args if args else message)

    warning = info


@pytest.fixture
def repair_log(monkeypatch: pytest.MonkeyPatch) -> _Lines:
    lines = _Lines()
    monkeypatch.setattr(RepairRunOperator, "log", lines)
    return lines


def test_the_disk_guard_postpones_the_incremental_sessions_of_a_full_node_saying_why(
    simulator: Simulator, repair_log: _Lines, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node holding 90% of the configured capacity: its incremental sessions are postponed at once, saying
    why once; the full repair of the same ranges and the other nodes' incremental sessions run."""
    full_node = simulator.ring().nodes[0].address
    nodetool = simulator.nodetool()
    loads = {node.address: 10 * 2**30 for node in simulator.ring().nodes} | {full_node: 90 * 2**30}
    nodetool.backlog = lambda address, keyspaces=(): NodeBacklog(load_bytes=loads[address])
    types = {"full": {"enabled": True}, "incremental": {"enabled": True}}
    # data_disk_capacity is file-only (a run cannot loosen the disk guard): the configuration file sets it.
    (tmp_path / "repair.yaml").write_text("data_disk_capacity: 100GiB\n")
    monkeypatch.setenv("RINGWARD_REPAIR_CONFIG", str(tmp_path / "repair.yaml"))
    figures = night(simulator, "night-1", {"config_overrides": {"repair_types": types}}, nodetool)
    incremental = [r for r in simulator.ops_store().repair_history(repair_type="incremental")]
    refused = {r.record.state.value for r in incremental if full_node in r.replicas}
    ran = {r.record.state.value for r in incremental if full_node not in r.replicas}
    assert refused == {"POSTPONED"} and ran == {"DONE"}
    # The full repair of the same ranges is not guarded, and its history is its own.
    assert _of_run(simulator, "night-1") == {"DONE": figures["plan"]["types"]["full"]["due"]}
    reason = f"{full_node}: 10% of its data disk of {100 * 2**30} bytes (data_disk_capacity) is free"
    said = [line for line in repair_log.lines if reason in line and "(postponed to the next run)" in line]
    assert len(said) == 1  # once, not once per command
    postponed = [line for line in repair_log.lines if " POSTPONED ar_" in line]  # a line per segment (small run)
    assert len(postponed) == len(incremental) - len([r for r in incremental if full_node not in r.replicas])
    assert all(reason in line for line in postponed)
    assert figures["report"]["state"] == "PARTIAL"


def test_without_a_capacity_the_disk_guard_says_once_it_cannot_check_and_lets_sessions_run(
    simulator: Simulator, repair_log: _Lines
) -> None:
    params = {"config_overrides": {"repair_types": {"incremental": {"enabled": True}}}, "repair_type": "incremental"}
    figures = night(simulator, "night-1", params)
    assert figures["result"]["types"]["incremental"] == {"DONE": figures["plan"]["types"]["incremental"]["due"]}
    notes = [line for line in repair_log.lines if line.startswith("Disk headroom not checked on ")]
    assert len(notes) == 1 and "data_disk_capacity" in notes[0]


def test_the_report_keeps_the_repaired_share_of_the_incremental_tables(simulator: Simulator) -> None:
    """What the repair task read from tablestats at its end (the simulator keeps no SSTables, so it is given
    here); tables incremental repair does not cover are left out."""
    params = {"config_overrides": {"repair_types": {"incremental": {"enabled": True}}}, "repair_type": "incremental"}
    figures = night(simulator, "night-1", params)
    assert figures["result"]["repaired_shares"] == {}  # nothing to read on the simulator
    shares = {"ar_a.t1": {"repaired": 87.5, "lowest": 75.0, "nodes": 3}, "other.t": {"repaired": 1, "lowest": 1,
                                                                                      "nodes": 1}}  # fmt: skip
    config = _config_or_fail(None, params)
    report = _report(simulator, "night-1", figures["plan"], {**figures["result"], "repaired_shares": shares}, config)
    assert report["types"]["incremental"]["repaired_share"] == {"ar_a.t1": shares["ar_a.t1"]}


def test_the_repaired_share_is_read_on_every_node_that_answers() -> None:
    class Client:
        def percent_repaired(self, node: str, keyspaces: list[str]) -> dict[str, float]:
            assert keyspaces == ["ks"]
            if node == "n3":
                raise ClusterError("JMX connection refused on n3.", "Start the node.")
            return {"ks.t": {"n1": 100.0, "n2": 50.0}[node]}

    lines = _Lines()
    shares = repaired_shares(Client(), ["n1", "n2", "n3"], ["ks"], lines)  # type: ignore[arg-type]
    assert shares == {"ks.t": {"repaired": 75.0, "lowest": 50.0, "nodes": 2}}
    assert lines.lines == ["Repaired share of n3 not read: " + str(ClusterError("JMX connection refused on n3.",
                                                                                "Start the node."))]  # fmt: skip


def test_the_back_pressure_read_names_the_keyspaces_the_night_repairs(simulator: Simulator) -> None:
    """Each node's backlog counts SSTables in the planned keyspaces only (`nodetool tablestats KS...`: all of a
    node's tables, Cassandra's own included, cost 0.7 s a read on the seed cluster); the plan says which."""
    nodetool = simulator.nodetool()
    asked: list[tuple[str, tuple[str, ...]]] = []

    def backlog(address: str, keyspaces: tuple[str, ...] = ()) -> NodeBacklog:
        asked.append((address, tuple(keyspaces)))
        return NodeBacklog()

    nodetool.backlog = backlog
    selected = {"config_overrides": {"keyspaces": {"include": ["ar_a"]}}}
    figures = night(simulator, "night-1", selected, nodetool)
    assert figures["plan"]["keyspaces"] == ["ar_a"]
    assert {address for address, _ in asked} == set(simulator.ring().addresses())
    assert {keyspaces for _, keyspaces in asked} == {("ar_a",)}
