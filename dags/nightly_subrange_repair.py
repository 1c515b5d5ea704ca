"""Nightly subrange repair (Reaper / CEP-37 style): plan due segments -> repair them in batches -> report.

Settings: the YAML file named by $RINGWARD_REPAIR_CONFIG (default: ringward/repair/default_config.yaml),
overridden per run by the params below. Only wiring here; see ringward_airflow.repair_operators.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, Param
from ringward.repair import load_config
from ringward_airflow.repair_operators import (
    CONFIG_PATH_ENV,
    PlanRepairOperator,
    RepairFailureNotifier,
    RepairReportOperator,
    RepairSegmentsOperator,
)

CONFIG_PATH = os.environ.get(CONFIG_PATH_ENV) or None
SCHEDULE = load_config(CONFIG_PATH).schedule

with DAG(
    dag_id="nightly_subrange_repair",
    description="Subrange repair of every selected table within gc_grace_seconds, a node in one session at a time",
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["ringward", "cassandra", "repair"],
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=2),
        "on_failure_callback": [RepairFailureNotifier()],
    },
    params={
        "config_overrides": Param({}, type="object", description="any config field, nested or dotted keys"),
        "enabled": Param(None, type=["null", "boolean"], description="kill switch for this run"),
        "keyspaces": Param(None, type=["null", "array"], description="keyspace patterns to include"),
        "tables": Param(None, type=["null", "array"], description="keyspace.table patterns to include"),
        "repair_type": Param(None, type=["null", "string"], enum=[None, "full", "preview"]),
        "parallel_repair_count": Param(None, type=["null", "integer"], minimum=0),
        "max_duration": Param(None, type=["null", "string", "integer"], description="window.max_duration"),
        "batch_size": Param(256, type="integer", minimum=1, description="segments per repair task"),
    },
) as dag:
    plan = PlanRepairOperator(task_id="plan", config_path=CONFIG_PATH)
    # One task per batch, one batch at a time: node locks hold within a task, not across tasks.
    repair = RepairSegmentsOperator.partial(task_id="repair", config_path=CONFIG_PATH, max_active_tis_per_dag=1).expand(
        batch=plan.output
    )
    report = RepairReportOperator(task_id="report", config_path=CONFIG_PATH, trigger_rule="all_done")
    plan >> repair >> report
