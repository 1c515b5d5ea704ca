"""The real nightly_subrange_repair DAG, run through Airflow (`dag.test()` in a child process, as
benchmarks/fleet/airflow_night.py runs it; the child forked from one that imported Airflow already,
tests/warm_airflow.py), on simulated fleets that child process puts under the shipped operators (`use_runtime`;
no connection is set, none could select the simulator). What the fleet-size redesign promises, read from
Airflow's own database and the simulator's ops store: three task instances whatever the ring, small XComs,
bounded ops partitions, every table covered; a node down for a while gets its ranges repaired once it is back,
and a node joining mid-run makes the worker plan what is left again."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import warm_airflow
from ringward_fleetsim import Faults, FleetSpec, NodeDown, NodeJoin

ROOT = Path(__file__).resolve().parents[2]
NIGHT = ROOT / "benchmarks" / "fleet" / "airflow_night.py"


def night(tmp_path: Path, spec: FleetSpec, conf: dict[str, Any] | None = None, *options: str) -> dict[str, Any]:
    figures: dict[str, Any] = nights(tmp_path, spec, conf, 1, *options)[0]
    return figures


def nights(
    tmp_path: Path, spec: FleetSpec, conf: dict[str, Any] | None = None, count: int = 1, *options: str
) -> list[dict[str, Any]]:
    """`count` nights one after another on one simulator (its history and virtual clock carry over);
    `options`: more of airflow_night.py's command line (its plan window knobs)."""
    spec_path, out = tmp_path / "spec.json", tmp_path / "night.json"
    spec.dump(spec_path)
    from ringward_cli.airflow_env import ensure_airflow_db

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    ensure_airflow_db(env)  # the test home's metadata database, migrated once
    result = warm_airflow.run(
        [str(NIGHT), "--spec", str(spec_path), "--json", str(out), "--conf", json.dumps(conf or {}),
         "--nights", str(count), *options],
        timeout=600, env=env, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout[-4000:]
    figures = json.loads(out.read_text())
    return [figures] if count == 1 else list(figures)


def assert_bounded(figures: dict[str, Any]) -> None:
    assert figures["task_states"] == {"plan": "success", "repair": "success", "report": "success"}, figures
    assert figures["largest_xcom_bytes"] < 1_000_000
    assert max(figures["ops_store"]["largest_partition"].values()) <= 100_000


def test_a_night_on_the_seed_clusters_twin_repairs_every_table(tmp_path: Path) -> None:
    figures = night(tmp_path, FleetSpec.small())
    assert_bounded(figures)
    assert figures["segments"] == figures["due"] > 0 and figures["repair_counts"] == {"DONE": figures["due"]}
    assert figures["run_state"] == "DONE" and figures["tables"] == figures["tables_fully_repaired"] == 6
    assert figures["simulated_seconds"] > 0


SIXTY = {"nodes": 60, "vnodes": 16, "dcs": 3, "keyspaces": 2, "tables": 3, "seed": 5,
         "table_bytes_median": 3 * 2**30}  # small tables: a night well under table_max_repair_time (6 h)  # fmt: skip


@pytest.fixture(scope="module")
def sixty_nodes() -> FleetSpec:
    return FleetSpec.fleet(**SIXTY)  # type: ignore[arg-type]


def test_sixty_nodes_with_one_down_for_ten_minutes_still_three_tasks_and_everything_repaired(
    tmp_path: Path, sixty_nodes: FleetSpec
) -> None:
    down = sixty_nodes.initial_nodes()[7].address
    spec = FleetSpec.fleet(**SIXTY, faults=Faults(down=(NodeDown(down, 60.0, 660.0),)))  # type: ignore[arg-type]
    figures = night(tmp_path, spec)
    assert_bounded(figures)
    assert figures["due"] > 1000 and figures["plan_chunks"] >= 1
    # The node's ranges waited for it during the run instead of being postponed to the next night.
    assert figures["repair_counts"] == {"DONE": figures["due"]}, figures["repair_counts"]
    assert figures["simulated_seconds"] > 660
    assert figures["run_state"] == "DONE" and figures["tables_fully_repaired"] == figures["tables"] == 6


def test_a_plan_read_in_many_windows_is_no_slower_with_a_node_down_for_hours(
    tmp_path: Path, sixty_nodes: FleetSpec
) -> None:
    """The plan is read from the store a window at a time; a node is down from 5 min to 2 h (the night without
    it takes about half an hour). The windows are no barrier: the rest of the plan runs while the node's
    segments wait for it. (They were once waited for at the end of the first window, and each window's tail
    held back the next: the 1000 x 256 one-keyspace night took 13.3 h through the DAG, 9.6 h since.)"""
    down = sixty_nodes.initial_nodes()[7].address
    spec = FleetSpec.fleet(**SIXTY, faults=Faults(down=(NodeDown(down, 300.0, 7200.0),)))  # type: ignore[arg-type]
    (tmp_path / "whole").mkdir(), (tmp_path / "windowed").mkdir()
    whole = night(tmp_path / "whole", spec)
    windowed = night(tmp_path / "windowed", spec, None, "--plan-chunk-rows", "100", "--window-chunks", "2")
    for figures in (whole, windowed):
        assert_bounded(figures)
        assert figures["repair_counts"] == {"DONE": figures["due"]}, figures["repair_counts"]
    assert windowed["plan_chunks"] >= 8 and whole["plan_chunks"] == 1  # four windows of 200 segments or more
    assert whole["simulated_seconds"] > 7200  # the down node's segments waited for it, in both runs
    assert windowed["simulated_seconds"] <= 1.05 * whole["simulated_seconds"], (windowed, whole)


def test_a_node_joining_mid_run_is_planned_again_without_failing(tmp_path: Path, sixty_nodes: FleetSpec) -> None:
    first = sixty_nodes.initial_nodes()[0]
    join = NodeJoin("10.9.9.9", first.datacenter, first.rack, at=120.0)
    spec = FleetSpec.fleet(**SIXTY, faults=Faults(joins=(join,)))  # type: ignore[arg-type]
    # Small windows of the plan, so the worker looks at the ring again soon after the join.
    figures = night(tmp_path, spec, {"config_overrides": {"ranges_per_command": 1}})
    assert_bounded(figures)
    assert figures["replans"] >= 1, figures
    assert figures["run_state"] == "DONE" and figures["tables_fully_repaired"] == figures["tables"]


def test_the_plan_task_reads_the_history_of_the_planned_segments(tmp_path: Path) -> None:
    """A history of every segment repaired an hour ago (airflow_night.py --seed-history): the plan task finds
    nothing due, reading exactly those records from their partitions, and writes no history itself."""
    figures = night(tmp_path, FleetSpec.small(), None, "--seed-history", "1", "--plan-only")
    assert figures["segments"] == figures["plan_types"]["full"]["not_due"] > 0 and figures["due"] == 0
    assert figures["ops_store"]["rows_read"]["repair_segments"] == figures["segments"]
    assert "repair_segments" not in figures["ops_store"]["rows_written"]


def test_a_preview_night_runs_on_its_own_history_and_repairs_nothing(tmp_path: Path) -> None:
    figures = night(tmp_path, FleetSpec.small(), {"repair_type": "preview"})
    assert_bounded(figures)
    assert figures["segments"] == figures["due"] > 0 and figures["repair_counts"] == {"DONE": figures["due"]}
    assert figures["run_state"] == "DONE"  # counted from the preview's own history
    assert figures["tables_fully_repaired"] == 0  # a preview is not a repair


def test_full_and_preview_in_one_night_each_on_its_own_cadence(tmp_path: Path) -> None:
    """Issue 24: every enabled type in one run (still three task instances), full first, then the preview; a
    second night within full's interval (24 h) repairs nothing, while the preview (interval 0) runs again."""
    types = {"full": {"enabled": True}, "preview": {"enabled": True, "min_repair_interval": 0}}
    spec = FleetSpec.small(faults=Faults(out_of_sync=("ar_a.t1",)))  # replicas of one table disagree
    first, second = nights(tmp_path, spec, {"config_overrides": {"repair_types": types}}, count=2)
    for figures in (first, second):
        assert_bounded(figures)
        assert figures["repair_types"] == ["full", "preview"] and figures["run_state"] == "DONE"
    full_due, preview_due = first["plan_types"]["full"]["due"], first["plan_types"]["preview"]["due"]
    assert full_due == preview_due == first["plan_types"]["full"]["segments"] > 0
    # Night 1: the full history moves; the preview's own history records what it compared, and what it
    # found out of sync (ar_a.t1) is kept in repair_previews and counted in the report.
    assert first["history_of_run"]["full"] == {"DONE": full_due}
    assert first["history_of_run"]["preview"] == {"DONE": preview_due}
    assert first["preview_findings"] == {"ar_a.t1": first["report_types"]["preview"]["out_of_sync_findings"]} != {}
    assert first["repair_counts_by_type"] == {"full": {"DONE": full_due}, "preview": {"DONE": preview_due}}
    assert first["tables_fully_repaired"] == first["tables"] == 6
    assert first["metrics"]["SucceededTokenRangesCount"] == full_due  # a preview never counts as a repair
    assert first["report_types"]["preview"]["metrics"]["SucceededTokenRangesCount"] == preview_due
    # Night 2, within full's interval: nothing for full, the preview runs on its own cadence.
    assert second["plan_types"]["full"]["due"] == 0 and second["plan_types"]["full"]["not_due"] == full_due
    assert second["history_of_run"]["full"] == {} and second["repair_counts_by_type"]["full"] == {}
    assert second["history_of_run"]["preview"] == {"DONE": preview_due}
    assert second["preview_findings"] == first["preview_findings"]  # still out of sync: a preview repairs nothing
    assert second["metrics"]["SucceededTokenRangesCount"] == 0
    assert second["tables_fully_repaired"] == 6  # still covered by the first night's full repair
