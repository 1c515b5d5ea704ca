"""keyspace_migration: a safe replication change, triggered from the Airflow UI; and
keyspace_migration_rollback: the same pipeline back to the setting a migration started from (until cleanup).

precheck -> approval -> per ALTER step (pre-repair -> baseline -> alter -> repair -> verify) -> cleanup -> report.
This file only wires tasks; the operators live in plugins/ringward_airflow.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.hitl import ApprovalOperator
from airflow.providers.standard.operators.python import BranchPythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, Asset, Param, TaskGroup
from ringward.migration import MAX_STAGED_STEPS
from ringward_airflow.migration_operators import (
    CleanupOperator,
    KeyspaceAlterOperator,
    MigrationPrecheckOperator,
    MigrationReportOperator,
    PreviewVerifyOperator,
    RangeRepairOperator,
)
from ringward_airflow.spark_operators import SparkBaselineOperator, SparkVerifyOperator

TARGET_PARAMS = {
    "keyspace": Param("test", type="string", title="Keyspace", description="Name as stored (case-sensitive)."),
    "replication": Param(
        {"class": "NetworkTopologyStrategy", "dc1": 2},
        type="object",
        title="Target replication",
        description='e.g. {"class": "NetworkTopologyStrategy", "dc1": 3, "dc2": 3}',
    ),
}
ROLLBACK_PARAMS = {
    "rollback_of": Param(
        "", type="string", title="Migration to roll back", description="Its id, as its precheck logged it (ks@run_id)."
    ),
}
PARAMS = {
    "require_approval": Param(True, type="boolean", description="Wait for a person to approve the plan."),
    "pre_repair": Param(True, type="boolean", description="Full repair of the affected ranges before the ALTER."),
    "client_read_consistency": Param(
        "LOCAL_QUORUM",
        type="string",
        enum=["ONE", "LOCAL_ONE", "TWO", "QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL"],
        description="What the applications read at, for the read-window analysis.",
    ),
    "allow_quorum_gap": Param(
        False,
        type="boolean",
        description="Stage the change keeping only a replica of every range per step (QUORUM reads may miss "
        "writes until each step's repair): what a refusal offers when no route keeps QUORUM overlap.",
    ),
    "dry_run": Param(False, type="boolean", description="Stop after the precheck."),
    "cleanup": Param(True, type="boolean", description="Run nodetool cleanup on nodes that lost ranges."),
    "require_cleanup_approval": Param(False, type="boolean", description="Ask again before cleanup."),
    "snapshot_before_cleanup": Param(True, type="boolean"),
    "repair_parallelism": Param(2, type="integer", minimum=1, description="Concurrent repair sessions."),
    "repair_session_timeout": Param(3600, type="integer", minimum=10, description="Seconds per session."),
    "deferrable": Param(True, type="boolean", description="Wait for repairs in the triggerer, not a worker."),
    "node_wait_seconds": Param(
        600,
        type="integer",
        minimum=0,
        title="Wait for down nodes (seconds)",
        description="Before each repair session, wait this long for its nodes to be UN and reachable (a node "
        "restarting). A repair try that fails (e.g. its coordinator died) is retried 3 times, about 30 s, "
        "1 min and 2 min later (Airflow adds jitter), and repairs only the ranges not yet done.",
    ),
}
# Repair tries outlast a node restart: each try first waits for its nodes (node_wait_seconds), and the
# retries back off exponentially (30 s, 1 min, 2 min), so a restarting node does not exhaust them.
REPAIR_RETRIES = {
    "retries": 3,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=5),
}


def _approval_path(name: str, subject: str, body: str) -> tuple[BranchPythonOperator, ApprovalOperator, EmptyOperator]:
    """branch -> (approval | straight through) -> join; the approval is skipped unless the param asks for it."""
    join = EmptyOperator(task_id=f"{name}_passed", trigger_rule="none_failed_min_one_success")
    branch = BranchPythonOperator(
        task_id=f"{name}_needed",
        python_callable=lambda params, flag=f"require_{name}": f"{name}" if params[flag] else join.task_id,
    )
    approval = ApprovalOperator(task_id=name, subject=subject, body=body, response_timeout=timedelta(days=2))
    branch >> [approval, join]
    approval >> join
    return branch, approval, join


def migration_dag(dag_id: str, *, rollback: bool) -> DAG:
    """The pipeline; a rollback's precheck takes its target from the migration it undoes."""
    target = {"rollback_of": "{{ params.rollback_of }}"} if rollback else {
        "keyspace": "{{ params.keyspace }}", "replication": "{{ params.replication }}"}  # fmt: skip
    with DAG(
        dag_id=dag_id,
        schedule=None,
        catchup=False,
        max_active_runs=4,
        params={**(ROLLBACK_PARAMS if rollback else TARGET_PARAMS), **PARAMS},
        tags=["ringward", "cassandra", "migration", *(["rollback"] if rollback else [])],
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
        doc_md=__doc__,
        render_template_as_native_obj=True,
    ) as dag:
        _wire()
        MigrationPrecheckOperator(
            task_id="precheck",
            client_read_consistency="{{ params.client_read_consistency }}",
            allow_quorum_gap="{{ params.allow_quorum_gap }}",
            plans_dir="{{ var.value.get('ringward_plans_dir', '/tmp/ringward-plans') }}",
            **target,
        ) >> dag.get_task("continue_unless_dry_run")
    return dag


def _wire() -> None:
    """Every task after the precheck, in the DAG being defined."""
    not_dry_run = ShortCircuitOperator(
        task_id="continue_unless_dry_run", python_callable=lambda params: not params["dry_run"]
    )
    approval_needed, _, approved = _approval_path(
        "approval",
        subject="Approve the replication change of {{ ti.xcom_pull(task_ids='precheck')['keyspace'] }}",
        body="{{ ti.xcom_pull(task_ids='precheck')['summary'] }}",
    )
    not_dry_run >> approval_needed

    previous = approved
    verifies = []
    for index in range(1, MAX_STAGED_STEPS + 1):
        with TaskGroup(group_id=f"step_{index}") as step:
            has_step = ShortCircuitOperator(
                task_id="has_step",
                python_callable=lambda ti, i=index: len(ti.xcom_pull(task_ids="precheck")["steps"]) >= i,
                ignore_downstream_trigger_rules=False,  # cleanup and report still run after the last step
            )
            pre_repair_wanted = ShortCircuitOperator(
                task_id="pre_repair_wanted",
                python_callable=lambda params: params["pre_repair"],
                ignore_downstream_trigger_rules=False,
            )
            repair_options = {
                "step_index": index,
                "parallelism": "{{ params.repair_parallelism }}",
                "session_timeout": "{{ params.repair_session_timeout }}",
                "deferrable": "{{ params.deferrable }}",
                "node_wait_seconds": "{{ params.node_wait_seconds }}",
                **REPAIR_RETRIES,
            }
            pre_repair = RangeRepairOperator(task_id="pre_repair", phase="pre", **repair_options)
            baseline = SparkBaselineOperator(
                task_id="baseline", step_index=index, trigger_rule="none_failed_min_one_success"
            )
            alter = KeyspaceAlterOperator(task_id="alter", step_index=index)
            repair = RangeRepairOperator(task_id="repair", phase="post", **repair_options)
            preview = PreviewVerifyOperator(task_id="verify_preview", step_index=index)
            verify = SparkVerifyOperator(
                task_id="verify_counts", step_index=index, baseline_task_id=f"step_{index}.baseline"
            )
            has_step >> pre_repair_wanted >> pre_repair >> baseline
            has_step >> baseline >> alter >> repair >> preview >> verify
        previous >> step
        previous = verify
        verifies.append(verify)

    cleanup_wanted = ShortCircuitOperator(
        task_id="cleanup_wanted",
        python_callable=lambda params: params["cleanup"],
        trigger_rule="none_failed_min_one_success",
    )
    cleanup_approval_needed, _, cleanup_approved = _approval_path(
        "cleanup_approval",
        subject="Approve nodetool cleanup of {{ ti.xcom_pull(task_ids='precheck')['keyspace'] }}",
        body="Verification passed. Cleanup deletes what former replicas still hold; rollback is possible until then.",
    )
    cleanup = CleanupOperator(task_id="cleanup", snapshot_before_cleanup="{{ params.snapshot_before_cleanup }}")
    report = MigrationReportOperator(
        task_id="report",
        trigger_rule="none_failed_min_one_success",
        outlets=[Asset("cassandra://ringward/keyspace_migration")],
    )
    verifies >> cleanup_wanted >> cleanup_approval_needed
    cleanup_approved >> cleanup >> report
    verifies >> report


keyspace_migration = migration_dag("keyspace_migration", rollback=False)
keyspace_migration_rollback = migration_dag("keyspace_migration_rollback", rollback=True)
