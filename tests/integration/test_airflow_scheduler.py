"""The operator's real path: runs triggered, approved, paused, cleared and watched through Airflow's REST API,
executed by the real scheduler (LocalExecutor), dag-processor and triggerer, on the real seed cluster."""

from __future__ import annotations

from typing import Any

from airflow_stack import AirflowStack
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.seed_scenario import count_at_one_from, create_seed_keyspace

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
MIGRATION = "keyspace_migration"
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
    """Wait for the run's pending approval (found through the API, as Required Actions lists it) and approve it."""
    pending: list[dict[str, Any]] = []

    def asked() -> bool:
        pending[:] = stack.pending_approvals(dag_id, run_id)
        if stack.run(dag_id, run_id)["state"] in {"failed", "success"}:
            raise AssertionError(f"the run ended without asking for approval\n{stack.describe(dag_id, run_id)}")
        return bool(pending)

    stack.wait_until(asked, timeout, "the approval request", lambda: stack.describe(dag_id, run_id))
    (detail,) = pending
    stack.answer(dag_id, run_id, detail["task_instance"]["task_id"], "Approve")
    return detail


def test_migration_approved_through_the_api(seed_cluster: LocalCluster, airflow_stack: AirflowStack) -> None:
    with connect(NODES) as session:
        create_seed_keyspace(session, "seed_safe")
    airflow_stack.set_paused(MIGRATION, False)
    run_id = airflow_stack.trigger(
        MIGRATION, {"keyspace": "seed_safe", "replication": {"class": NTS, "dc1": 2}, "require_approval": True}
    )

    approval = approve_when_asked(airflow_stack, MIGRATION, run_id)
    assert "seed_safe" in approval["subject"]
    run = airflow_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=900)
    assert run["state"] == "success", airflow_stack.describe(MIGRATION, run_id)

    # No spurious red try anywhere (the deferral race made step_1.repair fail its first try).
    assert failed_tries(airflow_stack, MIGRATION, run_id) == []
    # The repair deferred to the real triggerer, which fired, and the task resumed in a new worker process.
    repair = airflow_stack.task_instance(MIGRATION, run_id, "step_1.repair")
    assert repair["state"] == "success" and repair["try_number"] == 1
    log = airflow_stack.log(MIGRATION, run_id, "step_1.repair", 1)
    assert "Pausing task as DEFERRED" in log, log[-3000:]
    assert "trigger" in log.lower() and "resuming" in log.lower(), log[-3000:]

    # The seed's hazard carried through: repair streamed the row to the new replica; the former one cleaned up.
    assert seed_cluster.nodetool("127.0.0.2", ["getendpoints", "seed_safe", "users", "1"]).stdout.split() == [
        "127.0.0.3",
        "127.0.0.4",
    ]
    assert count_at_one_from("127.0.0.4", "seed_safe") == 1
    assert seed_cluster.nodetool("127.0.0.2", ["flush", "seed_safe"]).returncode == 0
    sstables = seed_cluster.nodetool("127.0.0.2", ["getsstables", "seed_safe", "users", "1"])
    assert sstables.returncode == 0 and sstables.stdout.strip() == ""
