"""keyspace_migration's wiring: the order of the stages, and cleanup only behind a passed verification."""

from __future__ import annotations

import itertools
import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

import pytest
from airflow.dag_processing.dagbag import DagBag
from ringward.migration import MAX_STAGED_STEPS

ROOT = Path(__file__).resolve().parents[2]
DAGS_FOLDER = ROOT / "dags"


def _dag():  # type: ignore[no-untyped-def]
    return DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py")).dags["keyspace_migration"]


def test_each_step_runs_pre_repair_baseline_alter_repair_verify_in_order() -> None:
    dag = _dag()
    for index in range(1, MAX_STAGED_STEPS + 1):
        order = [f"step_{index}.{name}" for name in
                 ("pre_repair", "baseline", "alter", "repair", "verify_preview", "verify_counts")]  # fmt: skip
        for before, after in itertools.pairwise(order):
            assert after in dag.get_task(before).get_direct_relative_ids(upstream=False), (before, after)


def test_cleanup_waits_for_every_verification_and_fails_closed() -> None:
    dag = _dag()
    cleanup_ancestors = dag.get_task("cleanup").get_flat_relative_ids(upstream=True)
    for index in range(1, MAX_STAGED_STEPS + 1):
        assert f"step_{index}.verify_counts" in cleanup_ancestors
    # A failed verification makes cleanup_wanted upstream_failed (not skipped-and-continue).
    assert dag.get_task("cleanup_wanted").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("cleanup").trigger_rule == "all_success"


def test_the_form_offers_the_documented_params() -> None:
    params = _dag().params
    assert {"keyspace", "replication", "require_approval", "pre_repair", "client_read_consistency", "dry_run",
            "snapshot_before_cleanup"} <= set(params)  # fmt: skip
    assert params["require_approval"] is True and params["snapshot_before_cleanup"] is True
    assert params["allow_quorum_gap"] is False  # a refusal's fix may suggest it; the operator opts in


def test_the_params_default_to_the_safe_settings_and_the_approvals_are_controls() -> None:
    from ringward.governance import RUN_DEFAULTS
    from ringward_airflow.governance import MigrationApprovalOperator

    dagbag = DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py"))
    for dag_id in ("keyspace_migration", "keyspace_migration_rollback"):
        dag = dagbag.dags[dag_id]
        assert {name: dag.params[name] for name in RUN_DEFAULTS} == dict(RUN_DEFAULTS)
        for task_id in ("approval", "cleanup_approval"):  # another person answers; the body lists the settings
            assert isinstance(dag.get_task(task_id), MigrationApprovalOperator), (dag_id, task_id)
        # A run asking to skip the approval or the pre-repair goes through them unless the deployment allows it.
        branch = dag.get_task("approval_needed").python_callable
        assert branch(params={"require_approval": False}) == "approval"
        assert dag.get_task("step_1.pre_repair_wanted").python_callable(params={"pre_repair": False}) is True


def test_the_keyspace_lease_outlasts_the_approvals_wait() -> None:
    """The precheck's lease is still held when the latest approval lets the first stage renew it."""
    from ringward_cassandra.ops_store import LEASE_TTL_SECONDS

    for task_id in ("approval", "cleanup_approval"):
        wait = _dag().get_task(task_id).response_timeout.total_seconds()
        assert wait + 3600 < LEASE_TTL_SECONDS, task_id


def test_every_param_has_a_title_and_a_description() -> None:
    dagbag = DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py"))
    for dag_id in ("keyspace_migration", "keyspace_migration_rollback"):
        for name, param in dagbag.dags[dag_id].params.items():
            schema = param.schema
            assert schema.get("title") and schema.get("title") != name, (dag_id, name)
            assert param.description, (dag_id, name)


def test_a_migration_has_no_default_target() -> None:
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError

    params = _dag().params
    assert not params.get_param("keyspace").has_value and not params.get_param("replication").has_value
    with pytest.raises(ParamValidationError):  # a run without a chosen keyspace is not created
        ParamsDict(params).validate()
    chosen = ParamsDict(params)
    chosen.update({"keyspace": "shop", "replication": {"class": "NetworkTopologyStrategy", "dc1": 3}})
    assert chosen.validate()["keyspace"] == "shop"


@pytest.mark.parametrize("name", ["repair_parallelism", "repair_session_timeout", "node_wait_seconds"])
def test_numeric_run_settings_have_a_floor_and_a_cap_the_run_is_refused_past(name: str) -> None:
    """Airflow refuses a run whose number is past the param's bound, naming both; the bound is what the migration's
    repair accepts (a larger one used to fail the repair task on a pydantic error, mid-migration)."""
    from airflow.sdk.definitions.param import ParamsDict
    from airflow.sdk.exceptions import ParamValidationError
    from ringward.governance import RUN_LIMITS
    from ringward_airflow.migration_stages import RepairSettings

    low, high = RUN_LIMITS[name]
    target = {"keyspace": "shop", "replication": {"class": "NetworkTopologyStrategy", "dc1": 3}}
    dags = DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py")).dags
    params = dags["keyspace_migration"].params
    for value in (low, high):
        accepted = ParamsDict(params)
        accepted.update({**target, name: value})
        assert accepted.validate()[name] == value
    for value, bound in (
        (high + 1, f"greater than the maximum of {high}"),
        (low - 1, f"less than the minimum of {low}"),
    ):
        refused = ParamsDict(params)
        with pytest.raises(ParamValidationError, match=bound) as caught:  # on setting it, as a trigger does
            refused.update({**target, name: value})
            refused.validate()
        assert f"param {name}" in str(caught.value)
    rollback = dags["keyspace_migration_rollback"].params.get_param(name).schema
    assert (rollback["minimum"], rollback["maximum"]) == (low, high)
    # The caps are what the migration's repair takes: at the cap it builds its configuration.
    top = RepairSettings(parallelism=RUN_LIMITS["repair_parallelism"][1],
                         session_timeout=float(RUN_LIMITS["repair_session_timeout"][1])).config()  # fmt: skip
    assert top.parallel_repair_count == 100_000 and top.segment_timeout.days == 3650


def test_the_ui_docs_are_for_operators() -> None:
    dagbag = DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py"))
    for dag in dagbag.dags.values():
        doc = dag.doc_md or ""
        assert doc.startswith("### ") and "wires" not in doc and "plugins/" not in doc, dag.dag_id
    assert "refused" in _dag().doc_md and "Required Actions" in _dag().doc_md


def test_a_refusal_skips_the_rest_and_the_refused_task_fails_the_run() -> None:
    dag = _dag()
    refused = dag.get_task("refused")
    assert refused.trigger_rule == "all_failed" and refused.upstream_task_ids == {"precheck"}
    assert refused.downstream_task_ids == set()  # a leaf: its failure is the run's
    gate = dag.get_task("continue_unless_dry_run")
    assert gate.trigger_rule == "all_done" and gate.ignore_downstream_trigger_rules  # skips everything after it
    assert dag.get_task("precheck").downstream_task_ids == {"continue_unless_dry_run", "refused"}


def _run_at(db: Path, dag_id: str, logical_date: datetime) -> tuple[str, dict[str, str], dict[str, str]]:
    """(state, task states, rendered `summary` per task) of the run of `dag_id` at `logical_date`."""
    with closing(sqlite3.connect(db)) as connection:
        run_id, state = connection.execute(
            "SELECT run_id, state FROM dag_run WHERE dag_id = ? AND logical_date = ?",
            (dag_id, logical_date.strftime("%Y-%m-%d %H:%M:%S.%f")),
        ).fetchone()
        states = dict(connection.execute(
            "SELECT task_id, state FROM task_instance WHERE dag_id = ? AND run_id = ?", (dag_id, run_id)))  # fmt: skip
        tables = {name for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "rtif_v2" in tables:  # Airflow 3.4: rendered fields keyed by the task attempt's id
            query = ("SELECT ti.task_id, r.rendered_fields FROM rtif_v2 r JOIN task_instance ti "
                     "ON ti.id = r.task_instance_id WHERE ti.dag_id = ? AND ti.run_id = ?")  # fmt: skip
        else:
            query = "SELECT task_id, rendered_fields FROM rendered_task_instance_fields WHERE dag_id = ? AND run_id = ?"
        rendered = {
            task_id: json.loads(fields).get("summary", "")
            for task_id, fields in connection.execute(query, (dag_id, run_id))
        }
    return state, states, rendered


def test_a_refused_run_reads_as_a_refusal() -> None:
    """`ringward airflow dags test` with a keyspace name the precheck refuses before it touches any cluster."""
    from ringward_cli.airflow_env import airflow_environment

    env = airflow_environment(ROOT)
    logical_date = datetime.now(UTC).replace(year=2001)  # a date of its own: no other run has it
    conf = {"keyspace": "no such!", "replication": {"class": "NetworkTopologyStrategy", "dc1": 2}}
    ringward = str(Path(sys.executable).parent / "ringward")
    command = [ringward, "airflow", "dags", "test", "keyspace_migration", logical_date.isoformat(),
               "--conf", json.dumps(conf)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    output = result.stdout + result.stderr
    state, states, rendered = _run_at(Path(env["AIRFLOW_HOME"]) / "airflow.db", "keyspace_migration", logical_date)
    assert state == "failed", output[-3000:]
    assert states.pop("precheck") == "failed" and states.pop("refused") == "failed"
    assert states.pop("continue_unless_dry_run") == "success"
    assert set(states.values()) == {"skipped"}, states  # no upstream_failed wall
    for task_id in ("precheck", "refused"):
        summary = rendered[task_id]
        assert summary.startswith("## REFUSED: replication change of `no such!`"), summary
        assert summary.index("**Problem**") < summary.index("not a valid") < summary.index("**Fix**")
    assert "\nFix: Give the keyspace's name as stored" in output


def test_the_approval_links_the_migration_page_of_its_run() -> None:
    dag = DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py")).dags["keyspace_migration"]
    body = dag.get_task("approval").body
    assert "migration_page(dag.dag_id, run_id)" in body
    page = dag.user_defined_macros["migration_page"]("keyspace_migration", "manual__2026-11-23T10:00:00+00:00")
    assert page == "ringward/migration/keyspace_migration/manual__2026-11-23T10%3A00%3A00%2B00%3A00"


def test_repair_controllers_are_off_from_approval_to_the_end_whatever_happens() -> None:
    dagbag = DagBag(dag_folder=str(DAGS_FOLDER / "keyspace_migration.py"))
    for dag_id in ("keyspace_migration", "keyspace_migration_rollback"):
        dag = dagbag.dags[dag_id]
        pause, restore = dag.get_task("pause_repair_controllers"), dag.get_task("restore_repair_controllers")
        assert pause.upstream_task_ids == {"approval_passed"}
        assert "step_1.has_step" in pause.get_flat_relative_ids(upstream=False)
        assert "step_1.alter" in pause.get_flat_relative_ids(upstream=False)  # before the first ALTER
        # After every task that repairs or alters, also after a failure (all_done), and before the report, so a
        # failed restore fails the run (the report, a leaf, becomes upstream_failed).
        assert restore.trigger_rule == "all_done"
        ancestors = restore.get_flat_relative_ids(upstream=True)
        assert {"pause_repair_controllers", "cleanup"} <= ancestors
        for index in range(1, MAX_STAGED_STEPS + 1):
            assert {f"step_{index}.alter", f"step_{index}.repair", f"step_{index}.verify_counts"} <= ancestors
        assert restore.downstream_task_ids == {"report"}
        assert dag.params["node_capacity"] == {}


class _Precheck:
    """The task instance a gate sees: the precheck's record, with `steps` as many as the plan has."""

    map_index = -1

    def __init__(self, steps: int) -> None:
        self.steps = steps
        self.pushed: dict[str, object] = {}

    def xcom_pull(self, task_ids: str) -> dict[str, object]:
        assert task_ids == "precheck"
        return {"steps": [{}] * self.steps}

    def xcom_push(self, key: str, value: object) -> None:
        self.pushed[key] = value


@pytest.mark.parametrize("planned", range(1, MAX_STAGED_STEPS))
def test_the_first_absent_step_skips_every_later_step_at_once_and_nothing_else(planned: int) -> None:
    from airflow.providers.common.compat.sdk import DownstreamTasksSkipped

    dag = _dag()
    for index in range(1, planned + 1):  # steps the plan has pass their gate
        assert dag.get_task(f"step_{index}.has_step").execute({"ti": _Precheck(planned)}) is True
    with pytest.raises(DownstreamTasksSkipped) as skipped:
        dag.get_task(f"step_{planned + 1}.has_step").execute({"ti": _Precheck(planned)})
    absent = {
        task_id
        for task_id in dag.task_ids
        if task_id.startswith(tuple(f"step_{i}." for i in range(planned + 1, MAX_STAGED_STEPS + 1)))
    }
    absent.discard(f"step_{planned + 1}.has_step")  # the gate itself ends successful
    assert set(skipped.value.tasks) == absent
    # cleanup and the report are not among them: they follow the last step that ran
    assert not {"cleanup_wanted", "cleanup", "report", "restore_repair_controllers"} & set(skipped.value.tasks)
