"""keyspace_migration and keyspace_migration_rollback: wiring only (operators in plugins/ringward_airflow).

What the Airflow UI shows of each DAG is MIGRATION_DOC / ROLLBACK_DOC below: operator text.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import BranchPythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, Asset, AssetAlias, Param, TaskGroup
from ringward.governance import RUN_DEFAULTS
from ringward.migration import MAX_STAGED_STEPS
from ringward_airflow import governance
from ringward_airflow.assets import LEGACY_MIGRATION_ASSET, MIGRATED
from ringward_airflow.governance import MigrationApprovalOperator
from ringward_airflow.migration_operators import (
    CleanupOperator,
    KeyspaceAlterOperator,
    MigrationPrecheckOperator,
    MigrationRefusedOperator,
    MigrationRepairOperator,
    MigrationReportOperator,
    PreviewVerifyOperator,
)
from ringward_airflow.repair_controller_operators import (
    PauseRepairControllersOperator,
    RestoreRepairControllersOperator,
)
from ringward_airflow.spark_operators import SparkBaselineOperator, SparkVerifyOperator
from ringward_airflow.step_gate import STEP_GROUP, StepGateOperator
from ringward_airflow.ui.plugin import migration_page_path

MIGRATION_DOC = """\
### Change a keyspace's replication safely

Give the **keyspace** and the **target replication**. The run then:

1. **precheck**: reads the live ring, checks the cluster's health and shows which token ranges change
   replicas. A change that would lose data or cannot work (unknown datacenter, more replicas than nodes,
   a datacenter left out, a system keyspace) is **refused**: the run fails at the precheck, every other task
   is skipped, and the task `refused` shows the problem and the fix. Nothing is changed on the cluster.
2. **approval**: the plan waits under *Required Actions* for a person other than the one who triggered the run;
   it lists every run setting that differs from the safe default. Turning the approval off, skipping the
   pre-repair or the snapshot, or allowing a QUORUM gap is refused unless the Airflow deployment allows it
   (`[ringward]` settings in airflow.cfg, see the operator's guide, "Governance").
3. per ALTER step: full repair of the affected ranges, the `ALTER KEYSPACE`, full repair of the same ranges
   on their new replicas, then verification (preview repair, per-replica row counts).
   Cassandra's AutoRepair (every node) and the keyspace's Reaper schedules (with a `reaper_default`
   connection) are off from the approval to the end of the run, and set back as they were afterwards,
   also when the run fails (task `restore_repair_controllers`).
4. **cleanup**: `nodetool cleanup` only on nodes that lost ranges (a snapshot first, unless turned off).
5. **report**: what changed, how long each stage took, the verification evidence (task `report`,
   *Rendered Templates* -> `summary`).

A failed or cleared task resumes where it stopped: finished ranges are not repaired again. Until cleanup
has run, `keyspace_migration_rollback` restores the previous replication.
"""
ROLLBACK_DOC = """\
### Roll back a keyspace migration (until its cleanup ran)

Give the **migration id** the migration's precheck logged (`keyspace@run_id`; also in
`ringward_ops.migrations`). The run restores the replication the keyspace had before, with the same
precheck, approval, repairs and verification as a migration. After the original migration's cleanup the
former replicas no longer hold their data: the precheck then refuses, and a new `keyspace_migration` to
the old setting is the way back.
"""

TARGET_PARAMS = {
    # No default: a migration must never have a target nobody chose. The form requires it.
    "keyspace": Param(
        type="string",
        minLength=1,
        title="Keyspace",
        description="The keyspace to change, as stored (case-sensitive).",
    ),
    "replication": Param(
        type="object",
        title="Target replication",
        description='The replication to change to, as JSON, e.g. {"class": "NetworkTopologyStrategy", "dc1": 3}. '
        "Give every datacenter that should keep replicas; 0 drops one explicitly.",
    ),
}
ROLLBACK_PARAMS = {
    "rollback_of": Param(
        type="string",
        minLength=1,
        title="Migration to roll back",
        description="Its id as its precheck logged it: keyspace@run_id.",
    ),
}
PARAMS = {
    "require_approval": Param(
        RUN_DEFAULTS["require_approval"],
        type="boolean",
        title="Require approval",
        description="Wait for another person to approve the plan. Off only where the deployment allows it "
        "([ringward] allow_unapproved_migrations); otherwise the precheck refuses the run.",
    ),
    "pre_repair": Param(
        RUN_DEFAULTS["pre_repair"],
        type="boolean",
        title="Repair before the ALTER",
        description="Full repair of the affected ranges on their current replicas first, so the new replicas "
        "receive complete data. Off only where the deployment allows it ([ringward] allow_skipping_pre_repair).",
    ),
    "client_read_consistency": Param(
        RUN_DEFAULTS["client_read_consistency"],
        type="string",
        enum=["ONE", "LOCAL_ONE", "TWO", "QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL"],
        title="Applications read at",
        description="The consistency level applications read at: the precheck warns which ranges could read "
        "empty at it between the ALTER and the repair.",
    ),
    "dry_run": Param(
        RUN_DEFAULTS["dry_run"],
        type="boolean",
        title="Dry run",
        description="Only show the plan: stop after the precheck.",
    ),
    "cleanup": Param(
        RUN_DEFAULTS["cleanup"],
        type="boolean",
        title="Clean up",
        description="Run nodetool cleanup on the nodes that lost ranges (after verification).",
    ),
    "require_cleanup_approval": Param(
        RUN_DEFAULTS["require_cleanup_approval"],
        type="boolean",
        title="Require approval before cleanup",
        description="Ask a person again before cleanup (a rollback is possible until then).",
    ),
    "snapshot_before_cleanup": Param(
        RUN_DEFAULTS["snapshot_before_cleanup"],
        type="boolean",
        title="Snapshot before cleanup",
        description="Take a snapshot of the keyspace on each node before its cleanup deletes data. Off only where "
        "the deployment allows it ([ringward] allow_cleanup_without_snapshot).",
    ),
    "repair_parallelism": Param(
        RUN_DEFAULTS["repair_parallelism"],
        type="integer",
        minimum=1,
        title="Repair sessions at once",
        description="How many repair sessions run at the same time.",
    ),
    "repair_session_timeout": Param(
        RUN_DEFAULTS["repair_session_timeout"],
        type="integer",
        minimum=10,
        title="Repair session timeout (seconds)",
        description="A repair session taking longer than this fails and is retried.",
    ),
    "deferrable": Param(
        RUN_DEFAULTS["deferrable"],
        type="boolean",
        title="Wait in the triggerer",
        description="Wait for repairs in Airflow's triggerer instead of holding a worker slot.",
    ),
    "allow_quorum_gap": Param(
        RUN_DEFAULTS["allow_quorum_gap"],
        type="boolean",
        title="Allow a QUORUM gap",
        description="Stage the change keeping only a replica of every range per step (QUORUM reads may miss "
        "writes until each step's repair): what a refusal offers when no route keeps QUORUM overlap. Only where "
        "the deployment allows it ([ringward] allow_quorum_gap).",
    ),
    "node_capacity": Param(
        dict(RUN_DEFAULTS["node_capacity"]),
        type="object",
        title="Node capacity",
        description='Bytes each node may hold, by node address or datacenter, e.g. {"dc1": "2TiB", "10.0.0.7": '
        '"1TiB"}: the precheck refuses a change that fills a node past it (the cassandra connection\'s extra '
        "`capacity` when empty), and warns when a node grows by more than half its load.",
    ),
    "node_wait_seconds": Param(
        RUN_DEFAULTS["node_wait_seconds"],
        type="integer",
        minimum=0,
        title="Wait for down nodes (seconds)",
        description="Before each repair session, wait this long for its nodes to be UN and reachable (a node "
        "restarting). A repair try that fails (e.g. its coordinator died) is retried 3 times, about 30 s, "
        "1 min and 2 min later (Airflow adds jitter), and repairs only the ranges not yet done.",
    ),
}
# How long an approval waits for its answer; the keyspace lease outlasts it (ringward_cassandra.ops_store
# LEASE_TTL_SECONDS), and the first task after the approval renews it.
APPROVAL_TIMEOUT = timedelta(days=2)
# Repair tries outlast a node restart: each try first waits for its nodes (node_wait_seconds), and the
# retries back off exponentially (30 s, 1 min, 2 min), so a restarting node does not exhaust them.
REPAIR_RETRIES = {
    "retries": 3,
    "retry_delay": timedelta(seconds=30),
    "retry_exponential_backoff": 2.0,
    "max_retry_delay": timedelta(minutes=5),
}


def _approval_path(
    name: str, subject: str, body: str, needed: Callable[[dict[str, Any]], bool]
) -> tuple[BranchPythonOperator, MigrationApprovalOperator, EmptyOperator]:
    """branch -> (approval | straight through) -> join; the approval is skipped unless `needed(params)`."""
    join = EmptyOperator(task_id=f"{name}_passed", trigger_rule="none_failed_min_one_success")
    branch = BranchPythonOperator(
        task_id=f"{name}_needed",
        python_callable=lambda params: name if needed(params) else join.task_id,
    )
    # Another person answers (ringward_airflow.governance); the body ends with the run's non-default settings.
    approval = MigrationApprovalOperator(task_id=name, subject=subject, body=body, response_timeout=APPROVAL_TIMEOUT)
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
        doc_md=ROLLBACK_DOC if rollback else MIGRATION_DOC,
        render_template_as_native_obj=True,
        user_defined_macros={"migration_page": migration_page_path},
    ) as dag:
        _wire()
        precheck = MigrationPrecheckOperator(
            task_id="precheck",
            client_read_consistency="{{ params.client_read_consistency }}",
            allow_quorum_gap="{{ params.allow_quorum_gap }}",
            # Per user, not a shared /tmp folder another local user could plant first (issue 25).
            plans_dir="{{ var.value.get('ringward_plans_dir', '~/.cache/ringward/plans') }}",
            **target,
        )
        precheck >> dag.get_task("continue_unless_dry_run")
        # Only when the precheck failed: ends the run failed with the refusal; everything else is skipped.
        precheck >> MigrationRefusedOperator(task_id="refused")
    return dag


def _wire() -> None:
    """Every task after the precheck, in the DAG being defined."""
    continue_unless_dry_run = ShortCircuitOperator(
        task_id="continue_unless_dry_run",
        # Runs after a failed precheck too, to skip the rest (not upstream_failed); the `refused` task fails the run.
        trigger_rule="all_done",
        python_callable=lambda ti, params: bool(ti.xcom_pull(task_ids="precheck")) and not params["dry_run"],
    )
    approval_branch, _, approved = _approval_path(
        "approval",
        subject="Approve the replication change of {{ ti.xcom_pull(task_ids='precheck')['keyspace'] }}",
        # The plan as Markdown (verdict, settings, placement tables); the plain summary for older records.
        body="{% set plan = ti.xcom_pull(task_ids='precheck') %}"
        "[Open the migration page: ring picture, range table, progress](/{{ migration_page(dag.dag_id, run_id) }})"
        "\n\n{{ plan.get('approval_md') or plan['summary'] }}",
        # A run skips it only where the deployment allows it (the precheck refuses such a run otherwise).
        needed=governance.approval_needed,
    )
    continue_unless_dry_run >> approval_branch
    # AutoRepair and Reaper schedules off from here to the end of the run (restore_repair_controllers).
    pause_controllers = PauseRepairControllersOperator(task_id="pause_repair_controllers")
    approved >> pause_controllers

    previous = pause_controllers
    verifies = []
    for index in range(1, MAX_STAGED_STEPS + 1):
        with TaskGroup(group_id=STEP_GROUP.format(index=index)) as step:
            # Skips this step and every later one at once when the plan has fewer steps; cleanup and report still run.
            has_step = StepGateOperator(task_id="has_step", step_index=index)
            pre_repair_wanted = ShortCircuitOperator(
                task_id="pre_repair_wanted",
                python_callable=governance.pre_repair_wanted,  # off only where the deployment allows it
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
            pre_repair = MigrationRepairOperator(task_id="pre_repair", phase="pre", **repair_options)
            baseline = SparkBaselineOperator(
                task_id="baseline", step_index=index, trigger_rule="none_failed_min_one_success"
            )
            alter = KeyspaceAlterOperator(task_id="alter", step_index=index)
            repair = MigrationRepairOperator(task_id="repair", phase="post", **repair_options)
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
        needed=lambda params: bool(params["require_cleanup_approval"]),
    )
    cleanup = CleanupOperator(task_id="cleanup", snapshot_before_cleanup="{{ params.snapshot_before_cleanup }}")
    report = MigrationReportOperator(
        task_id="report",
        trigger_rule="none_failed_min_one_success",
        outlets=[Asset(LEGACY_MIGRATION_ASSET), AssetAlias(MIGRATED)],  # + cassandra://<cluster>/<keyspace>
    )
    verifies >> cleanup_wanted >> cleanup_approval_needed
    cleanup_approved >> cleanup >> report
    verifies >> report
    # Whatever happened (all_done): set back what the pause turned off. Before the report, so a restore that
    # fails leaves the report upstream_failed and the run failed.
    restore_controllers = RestoreRepairControllersOperator(task_id="restore_repair_controllers")
    [pause_controllers, *verifies, cleanup] >> restore_controllers >> report


keyspace_migration = migration_dag("keyspace_migration", rollback=False)
keyspace_migration_rollback = migration_dag("keyspace_migration_rollback", rollback=True)
