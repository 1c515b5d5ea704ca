"""The operator's real path: runs triggered, approved, paused, cleared and watched through Airflow's REST API,
executed by the real scheduler (LocalExecutor), dag-processor and triggerer, on the real seed cluster."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from airflow_stack import AirflowStack, topology_under_test
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.ops_store import OpsStore
from ringward_cassandra.seed_scenario import count_at_one_from, create_seed_keyspace

pytestmark = pytest.mark.integration

NODES = list(load_topology(topology_under_test("seed")).addresses)  # 127.0.0.2-4, or the lane's own
MIGRATION = "keyspace_migration"
NIGHTLY = "nightly_subrange_repair"
NTS = "NetworkTopologyStrategy"


def failed_tries(stack: AirflowStack, dag_id: str, run_id: str) -> list[str]:
    """Every try of every task instance of the run that did not succeed (a retry's earlier tries included)."""
    bad = []
    for ti in stack.task_instances(dag_id, run_id):
        if ti["try_number"] > 1 or ti["state"] in {"failed", "up_for_retry", "upstream_failed"}:
            for attempt in stack.tries(dag_id, run_id, ti["task_id"]):
                if attempt["state"] not in {"success", "skipped"}:
                    bad.append(f"{ti['task_id']} try {attempt['try_number']}: {attempt['state']}")
    return bad


def approve_when_asked(stack: AirflowStack, dag_id: str, run_id: str, timeout: float = 300) -> dict[str, Any]:
    """Wait for the run's pending approval (found through the API, as Required Actions lists it) and approve
    it as soon as its task is parked for the answer: the quickest answer is the one that used to race the
    scheduler (its worker's end, reported while the answer resumes the task).

    Not before the park: Airflow orders an answer and the park by row locks (`SELECT ... FOR UPDATE` in both, so
    an answer given while the task is still writing its request resumes it when it parks), and SQLite, the
    stacks' database here, has none. An answer in that window was lost in a full run (2026-11-29, the Celery
    stack under three lanes' load): the approval stayed `awaiting_input` with its answer recorded, for 600 s."""
    pending: list[dict[str, Any]] = []

    def asked() -> bool:
        pending[:] = stack.pending_approvals(dag_id, run_id)
        if not pending and stack.run(dag_id, run_id)["state"] in {"failed", "success"}:
            raise AssertionError(f"the run ended without asking for approval\n{stack.describe(dag_id, run_id)}")
        task_id = pending[0]["task_instance"]["task_id"] if pending else None
        return task_id is not None and stack.task_instance(dag_id, run_id, task_id)["state"] == "awaiting_input"

    stack.wait_until(asked, timeout, "the approval request", lambda: stack.describe(dag_id, run_id))
    (detail,) = pending
    stack.answer(dag_id, run_id, detail["task_instance"]["task_id"], "Approve")
    return detail


def run_approved_migration(stack: AirflowStack, nodes: list[str], keyspace: str) -> tuple[str, dict[str, Any]]:
    """A keyspace_migration of a new seed keyspace to dc1: 2, approved through the API as soon as it asks; its
    run id and approval, once the run ended."""
    with connect(nodes) as session:
        create_seed_keyspace(session, keyspace)
    stack.set_paused(MIGRATION, False)
    run_id = stack.trigger(
        MIGRATION, {"keyspace": keyspace, "replication": {"class": NTS, "dc1": 2}, "require_approval": True}
    )
    approval = approve_when_asked(stack, MIGRATION, run_id)
    stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=900)
    return run_id, approval


@pytest.fixture(scope="module")
def approved_migration(cluster_manager: Any, airflow_stack: AirflowStack) -> tuple[str, dict[str, Any]]:
    """One keyspace_migration of the seed keyspace, approved through the API; its run id and approval."""
    cluster_manager.ensure("seed")
    return run_approved_migration(airflow_stack, NODES, "seed_safe")


def assert_repair_deferred_and_resumed_in_one_try(stack: AirflowStack, run_id: str) -> str:
    """The migration's repair deferred to the triggerer, whose event resumed the same try in a new worker
    process, which journalled the wave done; its log."""
    repair = stack.task_instance(MIGRATION, run_id, "step_1.repair")
    assert repair["state"] == "success" and repair["try_number"] == 1, stack.describe(MIGRATION, run_id)
    log = stack.log(MIGRATION, run_id, "step_1.repair", 1)
    assert "Pausing task as DEFERRED" in log, log[-3000:]
    deferred = log.index("Pausing task as DEFERRED")
    # After the trigger's event the same try resumes (execute_complete), journals the wave and finds it done.
    resumed = re.search(r"post_repair:1: 0 ranges to repair, (\d+) ranges?\b.*already done", log[deferred:])
    assert resumed and int(resumed.group(1)) > 0, log[-3000:]
    return log


def assert_seed_hazard_repaired(cluster: LocalCluster, nodes: list[str], keyspace: str) -> None:
    """The seed's hazard carried through `nodes` (the seed topology's, in its order): repair streamed the row
    to the new replica; the former one cleaned up."""
    former, kept, gained = nodes
    assert cluster.nodetool(former, ["getendpoints", keyspace, "users", "1"]).stdout.split() == [kept, gained]
    assert count_at_one_from(gained, keyspace) == 1
    assert cluster.nodetool(former, ["flush", keyspace]).returncode == 0
    sstables = cluster.nodetool(former, ["getsstables", keyspace, "users", "1"])
    assert sstables.returncode == 0 and sstables.stdout.strip() == ""


def test_migration_approved_through_the_api(
    seed_cluster: LocalCluster, airflow_stack: AirflowStack, approved_migration: tuple[str, dict[str, Any]]
) -> None:
    run_id, approval = approved_migration
    assert "seed_safe" in approval["subject"]
    # The approver reads Markdown: the link to the run's Migration page, then the verdict first.
    assert f"ringward/migration/{MIGRATION}/" in approval["body"] and "## SAFE to apply" in approval["body"]
    # Then the run's own settings and who triggered it (the stack's one admin, allowed to approve its own runs).
    assert "### Run settings (triggered by `" in approval["body"], approval["body"]
    assert "Every run setting is at its safe default." in approval["body"]
    assert airflow_stack.run(MIGRATION, run_id)["state"] == "success", airflow_stack.describe(MIGRATION, run_id)
    # The report as a person reads it, with per-stage times from Airflow's own task instances.
    report = airflow_stack.task_instance(MIGRATION, run_id, "report")["rendered_fields"]["summary"]
    assert report.startswith("## Migration `seed_safe@") and "### Stages (Airflow task instances" in report

    # No spurious red try anywhere (the deferral race made step_1.repair, and the approval, fail a first try).
    assert failed_tries(airflow_stack, MIGRATION, run_id) == []
    assert_repair_deferred_and_resumed_in_one_try(airflow_stack, run_id)
    assert_seed_hazard_repaired(seed_cluster, NODES, "seed_safe")


def test_a_repair_failed_on_purpose_and_cleared_resumes_from_the_journal(
    seed_cluster: LocalCluster, airflow_stack: AirflowStack, approved_migration: tuple[str, dict[str, Any]]
) -> None:
    """An operator marks the finished repair failed (as they would a stuck one), then clears it from the UI."""
    run_id, _ = approved_migration
    task = "step_1.repair"
    airflow_stack.set_state(MIGRATION, run_id, task, "failed")
    assert airflow_stack.task_instance(MIGRATION, run_id, task)["state"] == "failed"
    airflow_stack.clear(MIGRATION, run_id, [task])
    run = airflow_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=300)
    assert run["state"] == "success", airflow_stack.describe(MIGRATION, run_id)

    rerun = airflow_stack.task_instance(MIGRATION, run_id, task)
    assert rerun["state"] == "success" and rerun["try_number"] == 2
    log = airflow_stack.log(MIGRATION, run_id, task, 2)
    # Every range was journalled done by the first try: the re-run repairs nothing again.
    done = re.search(r"0 ranges to repair, (\d+) ranges?\b.*already done", log)
    assert done and int(done.group(1)) > 0, log[-3000:]


def refusal_shown(stack: AirflowStack, dag_id: str, run_id: str) -> str:
    """Where the run shows an operator why it was refused: the precheck's rendered summary (Markdown)."""
    return str(stack.task_instance(dag_id, run_id, "precheck")["rendered_fields"]["summary"])


def test_a_refused_target_ends_the_run_with_the_refusal_readable(
    seed_cluster: LocalCluster, airflow_stack: AirflowStack
) -> None:
    with connect(NODES) as session:
        create_seed_keyspace(session, "refused")
    airflow_stack.set_paused(MIGRATION, False)
    run_id = airflow_stack.trigger(
        MIGRATION, {"keyspace": "refused", "replication": {"class": NTS, "dc9": 2}, "require_approval": True}
    )
    run = airflow_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=300)
    assert run["state"] == "failed"
    precheck = airflow_stack.task_instance(MIGRATION, run_id, "precheck")
    assert precheck["state"] == "failed" and precheck["try_number"] == 1, "a refusal is final: never retried"
    shown = refusal_shown(airflow_stack, MIGRATION, run_id)
    assert shown.startswith("## REFUSED: replication change of `refused`"), shown[-3000:]
    assert "dc9" in shown and shown.index("**Problem**") < shown.index("**Fix**"), shown[-3000:]
    assert airflow_stack.pending_approvals(MIGRATION, run_id) == []
    # A refusal, not a crash: the refused leaf fails the run with it, everything else is skipped.
    states = {ti["task_id"]: ti["state"] for ti in airflow_stack.task_instances(MIGRATION, run_id)}
    assert states["refused"] == "failed" and "upstream_failed" not in states.values(), states


def test_a_paused_dag_runs_nothing_until_unpaused(seed_cluster: LocalCluster, airflow_stack: AirflowStack) -> None:
    with connect(NODES) as session:
        create_seed_keyspace(session, "paused")
    airflow_stack.set_paused(MIGRATION, True)
    try:
        run_id = airflow_stack.trigger(
            MIGRATION, {"keyspace": "paused", "replication": {"class": NTS, "dc1": 2}, "dry_run": True}
        )
        time.sleep(8)  # several scheduler loops (about one a second)
        assert airflow_stack.run(MIGRATION, run_id)["state"] == "queued"
        started = [t["task_id"] for t in airflow_stack.task_instances(MIGRATION, run_id) if t["state"]]
        assert started == [], started
    finally:
        airflow_stack.set_paused(MIGRATION, False)
    run = airflow_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=300)
    assert run["state"] == "success", airflow_stack.describe(MIGRATION, run_id)
    assert airflow_stack.task_instance(MIGRATION, run_id, "precheck")["state"] == "success"


def assert_nightly_repairs(stack: AirflowStack, nodes: list[str], keyspace: str) -> None:
    """A nightly_subrange_repair run of a new seed keyspace, triggered through the API, ends in success with no
    failed try and the keyspace's table repaired in full (ringward_ops' run record)."""
    with connect(nodes) as session:
        create_seed_keyspace(session, keyspace)
    stack.set_paused(NIGHTLY, False)
    try:
        run_id = stack.trigger(
            NIGHTLY,
            {"keyspaces": [keyspace], "config_overrides": {"splitter": {"subranges_per_range": 1},
                                                           "retry_backoff": 1, "parallel_repair_count": 3}},
        )  # fmt: skip
        run = stack.wait_for_state(NIGHTLY, run_id, {"success", "failed"}, timeout=600)
    finally:
        stack.set_paused(NIGHTLY, True)  # its schedule must not start runs of its own
    assert run["state"] == "success", stack.describe(NIGHTLY, run_id)
    assert failed_tries(stack, NIGHTLY, run_id) == []
    with connect(nodes) as session:
        latest = OpsStore(session).repair_runs()[0]
    assert (latest.run_id, latest.state) == (run_id, "DONE"), latest
    assert latest.summary["tables"][f"{keyspace}.users"] == "100.0%", latest.summary


def test_nightly_repair_through_the_scheduler(seed_cluster: LocalCluster, airflow_stack: AirflowStack) -> None:
    assert_nightly_repairs(airflow_stack, NODES, "nightly")
