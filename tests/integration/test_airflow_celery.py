"""The operator's real path on CeleryExecutor, as docker-compose.yaml's `celery` profile runs it: Debian's
redis-server as broker, the metadata database as result backend, `airflow celery worker` (concurrency 2) as a
process of its own beside the api-server, scheduler, dag-processor and triggerer, on the seed cluster.

The deferral/approval race ringward_airflow.executor fixes for LocalExecutor: a resumed task is queued under the
key its deferred (or approval-parked) workload ended with. By code reading, CeleryExecutor (provider 3.26.0) is
protected: it keeps the key in `running` from the moment it sends the resumed workload (so the scheduler's
`executor.has_task` guard holds), and it polls only the result of the Celery task it sent last for that key.
The proof here: the approval answered at once and the deferred repair resumed, with no failed try, with the
worker that ran the repair killed (SIGKILL to its process group) while the repair was deferred and a new worker
started; and a nightly run.

The stack runs as a deployment with two people does: self-approval refused (`[ringward] allow_self_approval`
False, docs/operators-guide.md "Governance"). The migration is triggered by `admin` and approved by `approver`
through the REST API; an approval by the user who triggered the run fails the run before its ALTER.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from typing import Any

import pytest
from airflow_stack import APPROVER, AirflowStack, start_stack, topology_under_test
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster, load_topology
from ringward_cassandra.seed_scenario import create_seed_keyspace
from test_airflow_scheduler import (
    MIGRATION,
    NTS,
    approve_when_asked,
    assert_nightly_repairs,
    assert_repair_deferred_and_resumed_in_one_try,
    failed_tries,
)
from test_migration_recovery import _fill, _throttle

pytestmark = pytest.mark.integration

# The seed topology's nodes in its order (or those of the file RINGWARD_TEST_TOPOLOGY_SEED names).
NODES = list(load_topology(topology_under_test("seed")).addresses)
NIGHTLY_KEYSPACE = "celery_nightly"
REPAIR = "step_1.repair"


@pytest.fixture(scope="module")
def celery_stack(cluster_manager: Any) -> Iterator[AirflowStack]:
    """One Celery stack for the module, on the seed cluster; every process of it (redis and the workers too)
    gone after, or the teardown fails naming what survived."""
    cluster_manager.ensure("seed")
    yield from start_stack(nightly_keyspaces=[NIGHTLY_KEYSPACE], executor="celery",
                           settings={"AIRFLOW__RINGWARD__ALLOW_SELF_APPROVAL": "False"})  # fmt: skip


def worker_ran(stack: AirflowStack, worker: str, run_id: str, task_id: str) -> bool:
    """True when `worker`'s log shows it executing a workload of the task in the run (Celery's own log line)."""
    text = (stack.home / f"{worker}.log").read_text(errors="replace")
    return re.search(rf"Executing workload in Celery: .*task_id='{re.escape(task_id)}'.*run_id='{re.escape(run_id)}'",
                     text) is not None  # fmt: skip


def test_the_user_who_triggered_a_migration_cannot_approve_it_through_the_api(
    seed_cluster: LocalCluster, celery_stack: AirflowStack
) -> None:
    """Issue 36: whoever may trigger a migration could approve it too. With self-approval refused, `admin`
    triggers and answers its own approval through the REST API: the approval fails, naming the problem and the
    fix, and nothing after it runs (the keyspace keeps its replication)."""
    keyspace = "celery_self_approved"
    with connect(NODES) as session:
        create_seed_keyspace(session, keyspace)
    celery_stack.set_paused(MIGRATION, False)
    run_id = celery_stack.trigger(
        MIGRATION,
        {"keyspace": keyspace, "replication": {"class": NTS, "dc1": 2}, "require_approval": True},
    )
    approval = approve_when_asked(celery_stack, MIGRATION, run_id)  # as `admin`, who triggered it
    run = celery_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=300)
    assert run["state"] == "failed", celery_stack.describe(MIGRATION, run_id)
    task_id = approval["task_instance"]["task_id"]
    assert celery_stack.task_instance(MIGRATION, run_id, task_id)["state"] == "failed"
    log = celery_stack.log(MIGRATION, run_id, task_id, 1)
    assert "admin triggered this run and approved it: a migration needs a second person's approval" in log, log[-3000:]
    assert "Another person approves: clear this approval task to ask again" in log, log[-3000:]
    assert celery_stack.task_instance(MIGRATION, run_id, "step_1.alter")["state"] != "success"
    with connect(NODES) as session:
        replication = (
            session.execute("SELECT replication FROM system_schema.keyspaces WHERE keyspace_name = %s", [keyspace])
            .one()
            .replication
        )
    assert replication["class"].endswith("SimpleStrategy"), replication


def test_nightly_repair_on_celery(seed_cluster: LocalCluster, celery_stack: AirflowStack) -> None:
    assert_nightly_repairs(celery_stack, NODES, NIGHTLY_KEYSPACE)


def test_an_approved_migration_survives_its_worker_killed_while_the_repair_is_deferred(
    seed_cluster: LocalCluster, celery_stack: AirflowStack
) -> None:
    """The approval answered through the API as soon as it is asked (the answer that used to race the scheduler);
    then the worker that ran the repair dies (SIGKILL, no warm shutdown) while the repair waits in the triggerer,
    and a new worker starts. The repair's trigger fires either way; its resumed workload waits in redis for a
    worker. One migration for both: each alone is the same minutes of precheck, repair and Spark verification."""
    keyspace = "celery_killed"
    _fill(rows=3000, body_bytes=1000, keyspace=keyspace, nodes=NODES)  # incompressible: the throttle bites
    celery_stack.set_paused(MIGRATION, False)
    _throttle(seed_cluster, 1)  # megabit/s: the post-ALTER session streams to the gained replica for a while
    events: dict[str, float] = {}
    try:
        run_id = celery_stack.trigger(
            MIGRATION,
            # Only the stages up to the verification: the pre-repair and the cleanup add minutes and nothing here.
            {"keyspace": keyspace, "replication": {"class": NTS, "dc1": 2}, "require_approval": True,
             "deferrable": True, "pre_repair": False, "cleanup": False},
        )  # fmt: skip
        approval = approve_when_asked(celery_stack.as_user(APPROVER), MIGRATION, run_id)  # a second person
        assert keyspace in approval["subject"]

        celery_stack.wait_for_deferral(MIGRATION, run_id, REPAIR)
        (first_worker,) = celery_stack.workers
        celery_stack.kill_worker(first_worker)
        events["killed"] = time.monotonic()
        state = celery_stack.task_instance(MIGRATION, run_id, REPAIR)["state"]
        assert state == "deferred", f"the worker died after the repair left the deferral ({state}): not the case"
        second_worker = celery_stack.start_worker()
        events["new worker ready"] = time.monotonic()
        _throttle(seed_cluster, 0)
        run = celery_stack.wait_for_state(MIGRATION, run_id, {"success", "failed"}, timeout=600)
        events["run ended"] = time.monotonic()
    finally:
        _throttle(seed_cluster, 0)
    assert run["state"] == "success", celery_stack.describe(MIGRATION, run_id)
    # No spurious failed try: neither the approval answered at once nor the killed worker's end.
    assert failed_tries(celery_stack, MIGRATION, run_id) == []
    # The repair finished in its one try: deferred on the first worker, resumed and journalled done on the second.
    assert_repair_deferred_and_resumed_in_one_try(celery_stack, run_id)
    assert worker_ran(celery_stack, first_worker, run_id, REPAIR)
    assert worker_ran(celery_stack, second_worker, run_id, REPAIR)
    print({name: f"{seconds - events['killed']:.0f} s after the kill" for name, seconds in events.items()})
