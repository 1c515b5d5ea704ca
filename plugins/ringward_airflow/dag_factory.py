"""ringward's DAGs, built by functions: a team calls them from a two-line file in its own DAG folder.

Public import path: `ringward_airflow.dag_factory` (docs/operators-guide.md, 0.1a and 0.3a).

    from ringward_airflow.dag_factory import keyspace_migration_dag, keyspace_migration_rollback_dag
    keyspace_migration, keyspace_migration_rollback = keyspace_migration_dag(), keyspace_migration_rollback_dag()

- `keyspace_migration_dag(...)`, `keyspace_migration_rollback_dag(...)`: change (or set back) a keyspace's
  replication safely; triggered by hand, no schedule.
- `nightly_repair_dag(...)`: the scheduled subrange repair.
- `cluster_dags(...)`: every DAG of every cluster the clusters file declares (`$RINGWARD_CLUSTERS`, else
  `[ringward] clusters_file`), ids suffixed `__<cluster>`; without a clusters file, today's single-cluster DAGs.

Each function takes the connection ids (and the repair's pool, schedule and configuration) as arguments and
hands them to every task that connects to the cluster; with `cluster=None` the DAG ids are the historical
ones (`keyspace_migration`, `keyspace_migration_rollback`, `nightly_subrange_repair`). The functions only
wire tasks: the operators live in this package, the decisions in `ringward`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.providers.standard.operators.python import BranchPythonOperator, ShortCircuitOperator
from airflow.sdk import DAG, AssetAlias, Param, TaskGroup
from airflow.sdk.definitions.deadline import DeadlineAlert
from ringward.clusters import (
    DEFAULT_CASSANDRA_CONN_ID,
    MIGRATION_DAG_ID,
    REPAIR_DAG_ID,
    ROLLBACK_DAG_ID,
    cluster_suffix,
    default_repair_pool,
)
from ringward.governance import RUN_DEFAULTS, RUN_LIMITS
from ringward.migration import MAX_STAGED_STEPS
from ringward.repair import load_config

from ringward_airflow import governance
from ringward_airflow.alerts import declared_deadline_alert
from ringward_airflow.assets import migrated_alias, migrations_asset, repaired_alias
from ringward_airflow.cluster_declarations import CLUSTERS_ENV, CLUSTERS_FILE_KEY, clusters_file, declared_clusters
from ringward_airflow.governance import MigrationApprovalOperator
from ringward_airflow.migration_base import MigrationOperator
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
    REAPER_CONN_ID,
    PauseRepairControllersOperator,
    RestoreRepairControllersOperator,
)
from ringward_airflow.repair_operators import (
    CONFIG_PATH_ENV,
    PlanRepairOperator,
    RepairFailureNotifier,
    RepairReportOperator,
    RepairRunOperator,
)
from ringward_airflow.spark_operators import SPARK_CASSANDRA_CONN_ID, SparkBaselineOperator, SparkVerifyOperator
from ringward_airflow.step_gate import STEP_GROUP, StepGateOperator
from ringward_airflow.ui.plugin import migration_page_path

__all__ = [
    "CLUSTERS_ENV",
    "CLUSTERS_FILE_KEY",
    "MIGRATION_DAG_ID",
    "MIGRATION_DOC",
    "REPAIR_DAG_ID",
    "REPAIR_POOL",
    "ROLLBACK_DAG_ID",
    "ROLLBACK_DOC",
    "cluster_dags",
    "clusters_file",
    "declared_clusters",
    "keyspace_migration_dag",
    "keyspace_migration_rollback_dag",
    "nightly_repair_dag",
]

REPAIR_POOL = default_repair_pool(None)  # `ringward_repair`: the guide documents it (0.3); 1 slot
CASSANDRA_CONN_ID = DEFAULT_CASSANDRA_CONN_ID
NODETOOL_CONN_ID = "ringward_nodetool"
SPARK_CONN_ID = "spark_default"

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

PARAM_SCHEMA_DRAFT = "http://json-schema.org/draft-07/schema#"


def _param(*default: Any, **schema: Any) -> Param:
    """A run setting whose JSON Schema names draft 7 (`$schema`); `default` as Param's (none: a value is required).

    Airflow validates each param with `jsonschema.validate`, which first checks the schema itself against its
    draft's meta-schema, for every param of every task, each time it serializes the DAG (the dag-processor on every
    parse, `airflow dags test` twice). Without `$schema` that is draft 2020-12's meta-schema, made of vocabularies
    tied by `$dynamicRef`: 0.67 ms a check against 0.17 ms for draft 7's, and the migration DAG (38 tasks, 15
    params) serialized in 0.93 s of CPU against 0.30 s (2026-11-29). The keywords used here (type, enum, minimum,
    maximum, minLength, title, description) mean the same in both drafts; Airflow's form reads the same keys."""
    return Param(*default, **{"$schema": PARAM_SCHEMA_DRAFT, **schema})


TARGET_PARAMS = {
    # No default: a migration must never have a target nobody chose. The form requires it.
    "keyspace": _param(
        type="string",
        minLength=1,
        title="Keyspace",
        description="The keyspace to change, as stored (case-sensitive).",
    ),
    "replication": _param(
        type="object",
        title="Target replication",
        description='The replication to change to, as JSON, e.g. {"class": "NetworkTopologyStrategy", "dc1": 3}. '
        "Give every datacenter that should keep replicas; 0 drops one explicitly.",
    ),
}
ROLLBACK_PARAMS = {
    "rollback_of": _param(
        type="string",
        minLength=1,
        title="Migration to roll back",
        description="Its id as its precheck logged it: keyspace@run_id.",
    ),
}
PARAMS = {
    "require_approval": _param(
        RUN_DEFAULTS["require_approval"],
        type="boolean",
        title="Require approval",
        description="Wait for another person to approve the plan. Off only where the deployment allows it "
        "([ringward] allow_unapproved_migrations); otherwise the precheck refuses the run.",
    ),
    "pre_repair": _param(
        RUN_DEFAULTS["pre_repair"],
        type="boolean",
        title="Repair before the ALTER",
        description="Full repair of the affected ranges on their current replicas first, so the new replicas "
        "receive complete data. Off only where the deployment allows it ([ringward] allow_skipping_pre_repair).",
    ),
    "client_read_consistency": _param(
        RUN_DEFAULTS["client_read_consistency"],
        type="string",
        enum=["ONE", "LOCAL_ONE", "TWO", "QUORUM", "LOCAL_QUORUM", "EACH_QUORUM", "ALL"],
        title="Applications read at",
        description="The consistency level applications read at: the precheck warns which ranges could read "
        "empty at it between the ALTER and the repair.",
    ),
    "dry_run": _param(
        RUN_DEFAULTS["dry_run"],
        type="boolean",
        title="Dry run",
        description="Only show the plan: stop after the precheck.",
    ),
    "cleanup": _param(
        RUN_DEFAULTS["cleanup"],
        type="boolean",
        title="Clean up",
        description="Run nodetool cleanup on the nodes that lost ranges (after verification).",
    ),
    "require_cleanup_approval": _param(
        RUN_DEFAULTS["require_cleanup_approval"],
        type="boolean",
        title="Require approval before cleanup",
        description="Ask a person again before cleanup (a rollback is possible until then).",
    ),
    "snapshot_before_cleanup": _param(
        RUN_DEFAULTS["snapshot_before_cleanup"],
        type="boolean",
        title="Snapshot before cleanup",
        description="Take a snapshot of the keyspace on each node before its cleanup deletes data. Off only where "
        "the deployment allows it ([ringward] allow_cleanup_without_snapshot).",
    ),
    "repair_parallelism": _param(
        RUN_DEFAULTS["repair_parallelism"],
        type="integer",
        minimum=RUN_LIMITS["repair_parallelism"][0],
        maximum=RUN_LIMITS["repair_parallelism"][1],
        title="Repair sessions at once",
        description="How many repair sessions run at the same time.",
    ),
    "repair_session_timeout": _param(
        RUN_DEFAULTS["repair_session_timeout"],
        type="integer",
        minimum=RUN_LIMITS["repair_session_timeout"][0],
        maximum=RUN_LIMITS["repair_session_timeout"][1],
        title="Repair session timeout (seconds)",
        description="A repair session taking longer than this fails and is retried.",
    ),
    "deferrable": _param(
        RUN_DEFAULTS["deferrable"],
        type="boolean",
        title="Wait in the triggerer",
        description="Wait for repairs in Airflow's triggerer instead of holding a worker slot.",
    ),
    "allow_quorum_gap": _param(
        RUN_DEFAULTS["allow_quorum_gap"],
        type="boolean",
        title="Allow a QUORUM gap",
        description="Stage the change keeping only a replica of every range per step (QUORUM reads may miss "
        "writes until each step's repair): what a refusal offers when no route keeps QUORUM overlap. Only where "
        "the deployment allows it ([ringward] allow_quorum_gap).",
    ),
    "node_capacity": _param(
        dict(RUN_DEFAULTS["node_capacity"]),
        type="object",
        title="Node capacity",
        description='Bytes each node may hold, by node address or datacenter, e.g. {"dc1": "2TiB", "10.0.0.7": '
        '"1TiB"}: the precheck refuses a change that fills a node past it (the cassandra connection\'s extra '
        "`capacity` when empty), and warns when a node grows by more than half its load.",
    ),
    "node_wait_seconds": _param(
        RUN_DEFAULTS["node_wait_seconds"],
        type="integer",
        minimum=RUN_LIMITS["node_wait_seconds"][0],
        maximum=RUN_LIMITS["node_wait_seconds"][1],
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
    name: str, subject: str, body: str, needed: Callable[[dict[str, Any]], bool], connections: _MigrationConnections
) -> tuple[BranchPythonOperator, MigrationApprovalOperator, EmptyOperator]:
    """branch -> (approval | straight through) -> join; the approval is skipped unless `needed(params)`."""
    join = EmptyOperator(task_id=f"{name}_passed", trigger_rule="none_failed_min_one_success")
    branch = BranchPythonOperator(
        task_id=f"{name}_needed",
        python_callable=lambda params: name if needed(params) else join.task_id,
    )
    # Another person answers (ringward_airflow.governance); the body ends with the run's non-default settings.
    approval = MigrationApprovalOperator(
        task_id=name, subject=subject, body=body, response_timeout=APPROVAL_TIMEOUT,
        cluster=connections.cluster["cluster"], cassandra_conn_id=connections.cluster["cassandra_conn_id"],
    )  # fmt: skip
    branch >> [approval, join]
    approval >> join
    return branch, approval, join


def keyspace_migration_dag(
    *,
    cluster: str | None = None,
    cassandra_conn_id: str = CASSANDRA_CONN_ID,
    nodetool_conn_id: str = NODETOOL_CONN_ID,
    spark_conn_id: str = SPARK_CONN_ID,
    spark_cassandra_conn_id: str = SPARK_CASSANDRA_CONN_ID,
    reaper_conn_id: str = REAPER_CONN_ID,
) -> DAG:
    """The `keyspace_migration` DAG (`keyspace_migration__<cluster>` with a cluster): change a keyspace's
    replication safely. Triggered by hand (no schedule); its tasks run in Airflow's default pool.

    cassandra_conn_id: the cluster's CQL connection (ring, schema, `ringward_ops`, the ALTER).
    nodetool_conn_id: nodetool of the cluster's nodes (repairs, cleanup, AutoRepair).
    spark_conn_id: the Spark cluster of the row-count verification; spark_cassandra_conn_id: the read-only CQL
    login the Spark job uses on this cluster. reaper_conn_id: the Reaper managing this cluster (an absent
    connection: no Reaper schedules are looked for).
    """
    connections = _MigrationConnections(
        cassandra_conn_id, nodetool_conn_id, spark_conn_id, spark_cassandra_conn_id, reaper_conn_id, cluster
    )
    return _migration_dag(MIGRATION_DAG_ID + cluster_suffix(cluster), rollback=False, cluster=cluster,
                          connections=connections)  # fmt: skip


def keyspace_migration_rollback_dag(
    *,
    cluster: str | None = None,
    cassandra_conn_id: str = CASSANDRA_CONN_ID,
    nodetool_conn_id: str = NODETOOL_CONN_ID,
    spark_conn_id: str = SPARK_CONN_ID,
    spark_cassandra_conn_id: str = SPARK_CASSANDRA_CONN_ID,
    reaper_conn_id: str = REAPER_CONN_ID,
) -> DAG:
    """The `keyspace_migration_rollback` DAG (`keyspace_migration_rollback__<cluster>`): set a keyspace's
    replication back to what it was before a migration, until that migration's cleanup ran. Arguments as
    `keyspace_migration_dag`; give both DAGs of a cluster the same ones."""
    connections = _MigrationConnections(
        cassandra_conn_id, nodetool_conn_id, spark_conn_id, spark_cassandra_conn_id, reaper_conn_id, cluster
    )
    return _migration_dag(ROLLBACK_DAG_ID + cluster_suffix(cluster), rollback=True, cluster=cluster,
                          connections=connections)  # fmt: skip


class _MigrationConnections:
    """The connection ids every connecting task of a migration DAG receives, and the cluster's declared name
    (None: the single cluster), the `cluster` tag of the metrics they send (`ringward.clusters.metrics_cluster`)."""

    def __init__(self, cassandra: str, nodetool: str, spark: str, spark_cassandra: str, reaper: str,
                 name: str | None = None) -> None:  # fmt: skip
        self.cluster: dict[str, Any] = {
            "cassandra_conn_id": cassandra, "nodetool_conn_id": nodetool, "reaper_conn_id": reaper,
            "cluster": name}  # fmt: skip
        self.spark: dict[str, Any] = {
            **self.cluster, "spark_conn_id": spark, "spark_cassandra_conn_id": spark_cassandra}  # fmt: skip


def _migration_doc(rollback: bool, cluster: str | None, connections: _MigrationConnections) -> str:
    """The DAG's doc, naming the Reaper connection it uses; a cluster's DAGs name their sibling DAGs by their
    suffixed ids, and the cluster."""
    doc = ROLLBACK_DOC if rollback else MIGRATION_DOC
    doc = doc.replace(f"`{REAPER_CONN_ID}`", f"`{connections.cluster['reaper_conn_id']}`")
    if cluster is None:
        return doc
    suffix = cluster_suffix(cluster)
    doc = doc.replace(f"`{ROLLBACK_DAG_ID}`", f"`{ROLLBACK_DAG_ID}{suffix}`")
    doc = doc.replace(f"`{MIGRATION_DAG_ID}`", f"`{MIGRATION_DAG_ID}{suffix}`")
    return f"{doc}\nCluster: **{cluster}** (connection `{connections.cluster['cassandra_conn_id']}`).\n"


def _migration_dag(dag_id: str, *, rollback: bool, cluster: str | None, connections: _MigrationConnections) -> DAG:
    """The pipeline; a rollback's precheck takes its target from the migration it undoes."""
    target: dict[str, Any] = {"rollback_of": "{{ params.rollback_of }}"} if rollback else {
        "keyspace": "{{ params.keyspace }}", "replication": "{{ params.replication }}"}  # fmt: skip
    with DAG(
        dag_id=dag_id,
        schedule=None,
        catchup=False,
        max_active_runs=4,
        params={**(ROLLBACK_PARAMS if rollback else TARGET_PARAMS), **PARAMS},
        tags=["ringward", "cassandra", "migration", *(["rollback"] if rollback else []), *_cluster_tag(cluster)],
        default_args={"retries": 2, "retry_delay": timedelta(seconds=30)},
        doc_md=_migration_doc(rollback, cluster, connections),
        render_template_as_native_obj=True,
        user_defined_macros={"migration_page": migration_page_path},
    ) as dag:
        _wire(connections, cluster)
        precheck = MigrationPrecheckOperator(
            task_id="precheck",
            client_read_consistency="{{ params.client_read_consistency }}",
            allow_quorum_gap="{{ params.allow_quorum_gap }}",
            # Per user, not a shared /tmp folder another local user could plant first (issue 25).
            plans_dir="{{ var.value.get('ringward_plans_dir', '~/.cache/ringward/plans') }}",
            **target,
            **connections.cluster,
        )
        precheck >> dag.get_task("continue_unless_dry_run")
        # Only when the precheck failed: ends the run failed with the refusal; everything else is skipped.
        precheck >> MigrationRefusedOperator(task_id="refused")
    return dag


def _cluster_tag(cluster: str | None) -> list[str]:
    return [] if cluster is None else [f"cluster:{cluster}"]


def _wire(connections: _MigrationConnections, cluster: str | None) -> None:
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
        connections=connections,
    )
    continue_unless_dry_run >> approval_branch
    # AutoRepair and Reaper schedules off from here to the end of the run (restore_repair_controllers).
    pause_controllers = PauseRepairControllersOperator(task_id="pause_repair_controllers", **connections.cluster)
    approved >> pause_controllers

    previous: MigrationOperator = pause_controllers
    verifies: list[MigrationOperator] = []
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
                **connections.cluster,
            }
            pre_repair = MigrationRepairOperator(task_id="pre_repair", phase="pre", **repair_options)
            baseline = SparkBaselineOperator(
                task_id="baseline", step_index=index, trigger_rule="none_failed_min_one_success", **connections.spark
            )
            alter = KeyspaceAlterOperator(task_id="alter", step_index=index, **connections.cluster)
            repair = MigrationRepairOperator(task_id="repair", phase="post", **repair_options)
            preview = PreviewVerifyOperator(task_id="verify_preview", step_index=index, **connections.cluster)
            verify = SparkVerifyOperator(
                task_id="verify_counts",
                step_index=index,
                baseline_task_id=f"step_{index}.baseline",
                **connections.spark,
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
        connections=connections,
    )
    cleanup = CleanupOperator(
        task_id="cleanup", snapshot_before_cleanup="{{ params.snapshot_before_cleanup }}", **connections.cluster
    )
    report = MigrationReportOperator(
        task_id="report",
        trigger_rule="none_failed_min_one_success",
        # + an event of cassandra://<cluster>/<keyspace> through the alias (ringward_airflow.assets)
        outlets=[migrations_asset(cluster), AssetAlias(migrated_alias(cluster))],
        **connections.cluster,
    )
    verifies >> cleanup_wanted >> cleanup_approval_needed
    cleanup_approved >> cleanup >> report
    verifies >> report
    # Whatever happened (all_done): set back what the pause turned off. Before the report, so a restore that
    # fails leaves the report upstream_failed and the run failed.
    restore_controllers = RestoreRepairControllersOperator(task_id="restore_repair_controllers", **connections.cluster)
    [pause_controllers, *verifies, cleanup] >> restore_controllers >> report


_DEFAULT_CONFIG_SOURCE = "the YAML file named by `$RINGWARD_REPAIR_CONFIG` (else the shipped default)"


def _repair_doc(schedule: str, pool: str, config_source: str = _DEFAULT_CONFIG_SOURCE) -> str:
    return f"""\
### Nightly subrange repair

Repairs every selected table's token ranges in small segments, so each range is repaired within its
`gc_grace_seconds`; a node takes part in one repair session at a time. Schedule: `{schedule}`.

1. **plan**: reads the ring and the repair history, picks for each enabled repair type the segments that
   are **due** (not repaired by that type within its `min_repair_interval`, 24 h by default) and stores
   them, most urgent first, one plan per type, in `ringward_ops` (XCom holds only a reference). Keyspaces
   under a running migration are skipped.
2. **repair**: one task for the whole night, whatever the size of the ring: repairs the stored plans, one
   type after another (full, incremental, paxos, preview),
   a node in one session at a time; waits for nodes that are down, holds sessions back from nodes under
   back-pressure, plans again if the ring changes. Progress (`[done/total share ETA]`) goes to the log
   and, live, to the ringward Repair page. It runs in the `{pool}` pool.
3. **report**: coverage per table and per type, the run's state (DONE, PARTIAL, DISABLED); fails if
   segments failed. A preview never counts as a repair.

**Triggering it by hand.** A manual run repairs what is due *now*. With *Segments to repair* set to
**all**, it repairs every selected segment, even those repaired recently. Triggering a paused DAG with
"unpause" also starts the scheduled run it missed (only the latest); that run goes first (one run at a
time) and repairs what is due, so a manual run after it finds nothing due unless *all* is chosen.
Use *Keyspaces* / *Tables* to repair only part of the cluster.

Settings come from {config_source}; the
form's fields override some of them for one run, and *config* keeps the file's value. The file's
`enabled: false` wins over the form, and its safety settings (back-pressure, disk headroom, history TTL,
segment limits) cannot be overridden per run (operator's guide, 6.5b).
"""


REPAIR_PARAMS = {
    "scope": _param(
        "due",
        type="string",
        enum=["due", "all"],
        values_display={"due": "due: not repaired within min_repair_interval", "all": "all: every selected one"},
        title="Segments to repair",
        description="due: what the schedule would repair now. all: every selected segment, even if repaired "
        "recently (a manual repair of the whole selection).",
    ),
    "enabled": _param(
        "config",
        type="string",
        enum=["config", "on", "off"],
        values_display={"config": "as in the configuration file", "on": "on", "off": "off: repair nothing"},
        title="Repair enabled",
        description="The kill switch for this run; off repairs nothing. on cannot override the file's "
        "`enabled: false`, which is also re-read between segments: setting it there stops a running repair.",
    ),
    "keyspaces": _param(
        None,
        type=["null", "array"],
        title="Keyspaces",
        description="Keyspace name patterns to repair, one per line (e.g. shop*); empty: the file's selection.",
    ),
    "tables": _param(
        None,
        type=["null", "array"],
        title="Tables",
        description="keyspace.table patterns to repair, one per line; empty: the file's selection.",
    ),
    "repair_type": _param(
        "config",
        type="string",
        enum=["config", "full", "incremental", "preview", "paxos"],
        values_display={
            "config": "as in the configuration file",
            "full": "full repair",
            "incremental": "incremental repair (read the operator's guide first)",
            "preview": "preview: report differences, repair nothing",
            "paxos": "Paxos state only",
        },
        title="Repair type",
        description="only this type runs tonight (config: every enabled type, one after another); preview "
        "reports ranges out of sync and repairs nothing.",
    ),
    "parallel_repair_count": _param(
        None,
        type=["null", "integer"],
        minimum=0,
        title="Sessions at once",
        description="Repair sessions running at the same time (0: as the file's percentage allows), at most "
        "the file's value; empty: the file's value.",
    ),
    "max_duration": _param(
        None,
        type=["null", "string", "integer"],
        title="Stop starting segments after",
        description="A duration such as 2h or 45m (or seconds); segments not started by then stay due for the "
        "next run. Empty: the file's window.",
    ),
    "config_overrides": _param(
        {},
        type="object",
        title="Other settings",
        description='Other run-overridable fields as JSON, nested or dotted, e.g. {"intensity": 0.5}. Safety '
        "settings (back_pressure, data_disk_capacity, history_ttl, ...) are file-only: operator's guide 6.5b.",
    ),
}


def nightly_repair_dag(
    *,
    cluster: str | None = None,
    cassandra_conn_id: str = CASSANDRA_CONN_ID,
    nodetool_conn_id: str = NODETOOL_CONN_ID,
    pool: str | None = None,
    schedule: str | None = None,
    repair_config: str | Path | None = None,
    deadline: DeadlineAlert | list[DeadlineAlert] | None = None,
) -> DAG:
    """The `nightly_subrange_repair` DAG (`nightly_subrange_repair__<cluster>` with a cluster).

    cassandra_conn_id, nodetool_conn_id: the cluster's CQL and nodetool connections (every task gets them).
    pool: the pool the repair task runs in (create it with 1 slot); default `ringward_repair`, or
    `ringward_repair__<cluster>` with a cluster. repair_config: the repair's YAML configuration (default:
    $RINGWARD_REPAIR_CONFIG, else the shipped one), read now for the schedule and again by every task.
    schedule: a cron expression or preset; default: the configuration's `schedule`.
    deadline: Airflow Deadline Alerts of the DAG, e.g. `ringward_airflow.alerts.nightly_deadline_alert(...)`: a
    night still running hours after it was queued calls its notifier (default: none).
    """
    config_path = str(repair_config) if repair_config is not None else os.environ.get(CONFIG_PATH_ENV) or None
    schedule = schedule or load_config(config_path).schedule
    pool = pool or default_repair_pool(cluster)
    # `cluster`: the metrics' `cluster` tag (the declared name; the CQL connection id for the single cluster).
    connections: dict[str, Any] = {"cassandra_conn_id": cassandra_conn_id, "cluster": cluster}
    with DAG(
        dag_id=REPAIR_DAG_ID + cluster_suffix(cluster),
        description="Subrange repair of every selected table within gc_grace_seconds, a node in one session at a time",
        schedule=schedule,
        start_date=datetime(2026, 1, 1, tzinfo=UTC),
        catchup=False,
        max_active_runs=1,
        tags=["ringward", "cassandra", "repair", *_cluster_tag(cluster)],
        doc_md=_repair_doc(schedule, pool, *([] if repair_config is None else [f"`{repair_config}`"])),
        default_args={
            "retries": 2,
            "retry_delay": timedelta(minutes=2),
            "on_failure_callback": [RepairFailureNotifier()],
        },
        params=REPAIR_PARAMS,
        deadline=deadline,
    ) as dag:
        plan = PlanRepairOperator(
            task_id="plan", config_path=config_path, nodetool_conn_id=nodetool_conn_id, **connections
        )
        # One worker for the night: the node locks (a node in one session at a time) hold within one task.
        repair = RepairRunOperator(
            task_id="repair", config_path=config_path, pool=pool, nodetool_conn_id=nodetool_conn_id, **connections
        )
        report = RepairReportOperator(
            task_id="report",
            config_path=config_path,
            trigger_rule="all_done",
            outlets=[AssetAlias(repaired_alias(cluster))],
            **connections,
        )  # an event of cassandra://<cluster>/<keyspace> for each keyspace covered within gc_grace
        plan >> repair >> report
    return dag


_KINDS = (MIGRATION_DAG_ID, ROLLBACK_DAG_ID, REPAIR_DAG_ID)


def cluster_dags(*kinds: str, path: str | Path | None = None) -> dict[str, DAG]:
    """Every DAG of every declared cluster, by DAG id: `keyspace_migration__<cluster>`,
    `keyspace_migration_rollback__<cluster>` and `nightly_subrange_repair__<cluster>` (only the `kinds`
    given, by their unsuffixed ids; default all three). Without a clusters file: today's single-cluster DAGs
    with the default connections. A DAG file exposes them with `globals().update(cluster_dags())`. A cluster's
    `nightly_deadline` becomes its nightly DAG's Deadline Alert (`alerts.declared_deadline_alert`)."""
    unknown = sorted(set(kinds) - set(_KINDS))
    if unknown:
        from ringward.errors import ConfigurationError

        raise ConfigurationError(
            f"cluster_dags() knows no DAG {', '.join(map(repr, unknown))}.",
            f"Ask for some of {', '.join(_KINDS)}, or for none to get all three.",
        )
    wanted = kinds or _KINDS
    clusters = declared_clusters(path)
    dags: list[DAG] = []
    if not clusters:
        builders: Mapping[str, Callable[[], DAG]] = {
            MIGRATION_DAG_ID: keyspace_migration_dag,
            ROLLBACK_DAG_ID: keyspace_migration_rollback_dag,
            REPAIR_DAG_ID: nightly_repair_dag,
        }
        dags = [builders[kind]() for kind in _KINDS if kind in wanted]
    for cluster in clusters:
        migration = {
            "cluster": cluster.name,
            "cassandra_conn_id": cluster.cassandra_conn_id,
            "nodetool_conn_id": cluster.nodetool_conn_id,
            "spark_conn_id": cluster.spark_conn_id,
            "spark_cassandra_conn_id": cluster.spark_cassandra_conn_id,
            "reaper_conn_id": cluster.reaper,
        }
        if MIGRATION_DAG_ID in wanted:
            dags.append(keyspace_migration_dag(**migration))
        if ROLLBACK_DAG_ID in wanted:
            dags.append(keyspace_migration_rollback_dag(**migration))
        if REPAIR_DAG_ID in wanted:
            dags.append(nightly_repair_dag(
                cluster=cluster.name,
                cassandra_conn_id=cluster.cassandra_conn_id,
                nodetool_conn_id=cluster.nodetool_conn_id,
                pool=cluster.repair_pool,
                schedule=cluster.schedule,
                repair_config=cluster.repair_config,
                deadline=None if cluster.nightly_deadline is None else declared_deadline_alert(
                    cluster.name, cluster.nightly_deadline),
            ))  # fmt: skip
    return {dag.dag_id: dag for dag in dags}
