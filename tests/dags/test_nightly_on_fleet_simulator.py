"""The real nightly_subrange_repair DAG, run through Airflow (`dag.test()` in a child process, as
benchmarks/fleet/airflow_night.py runs it), on simulated fleets: only its two connections differ. What the
fleet-size redesign promises, read from Airflow's own database and the simulator's ops store: three task
instances whatever the ring, small XComs, bounded ops partitions, every table covered; a node down for a while
gets its ranges repaired once it is back, and a node joining mid-run makes the worker plan what is left again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from ringward_fleetsim import Faults, FleetSpec, NodeDown, NodeJoin

ROOT = Path(__file__).resolve().parents[2]
NIGHT = ROOT / "benchmarks" / "fleet" / "airflow_night.py"


def night(tmp_path: Path, spec: FleetSpec, conf: dict[str, Any] | None = None) -> dict[str, Any]:
    spec_path, out = tmp_path / "spec.json", tmp_path / "night.json"
    spec.dump(spec_path)
    from ringward_cli.airflow_env import ensure_airflow_db

    env = {k: v for k, v in os.environ.items() if not k.startswith("AIRFLOW_CONN_")}
    ensure_airflow_db(env)  # the test home's metadata database, migrated once
    result = subprocess.run(
        [sys.executable, str(NIGHT), "--spec", str(spec_path), "--json", str(out), "--conf", json.dumps(conf or {})],
        capture_output=True, text=True, timeout=600, env=env, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    figures: dict[str, Any] = json.loads(out.read_text())
    return figures


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


def test_a_node_joining_mid_run_is_planned_again_without_failing(tmp_path: Path, sixty_nodes: FleetSpec) -> None:
    first = sixty_nodes.initial_nodes()[0]
    join = NodeJoin("10.9.9.9", first.datacenter, first.rack, at=120.0)
    spec = FleetSpec.fleet(**SIXTY, faults=Faults(joins=(join,)))  # type: ignore[arg-type]
    # Small windows of the plan, so the worker looks at the ring again soon after the join.
    figures = night(tmp_path, spec, {"config_overrides": {"ranges_per_command": 1}})
    assert_bounded(figures)
    assert figures["replans"] >= 1, figures
    assert figures["run_state"] == "DONE" and figures["tables_fully_repaired"] == figures["tables"]


def test_a_preview_night_runs_on_its_own_history_and_repairs_nothing(tmp_path: Path) -> None:
    figures = night(tmp_path, FleetSpec.small(), {"repair_type": "preview"})
    assert_bounded(figures)
    assert figures["segments"] == figures["due"] > 0 and figures["repair_counts"] == {"DONE": figures["due"]}
    assert figures["run_state"] == "DONE"  # counted from the preview's own history
    assert figures["tables_fully_repaired"] == 0  # a preview is not a repair
