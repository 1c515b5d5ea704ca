"""nightly_subrange_repair: wiring only (operators in ringward_airflow.repair_operators). The Airflow UI
shows DOC below. Settings: the YAML file named by $RINGWARD_REPAIR_CONFIG (default:
ringward/repair/default_config.yaml), overridden per run by the params."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

from airflow.sdk import DAG, AssetAlias, Param
from ringward.repair import load_config
from ringward_airflow.assets import REPAIRED
from ringward_airflow.repair_operators import (
    CONFIG_PATH_ENV,
    PlanRepairOperator,
    RepairFailureNotifier,
    RepairReportOperator,
    RepairRunOperator,
)

CONFIG_PATH = os.environ.get(CONFIG_PATH_ENV) or None
REPAIR_POOL = "ringward_repair"  # the operator's guide documents it; create it with 1 slot per cluster
SCHEDULE = load_config(CONFIG_PATH).schedule

DOC = f"""\
### Nightly subrange repair

Repairs every selected table's token ranges in small segments, so each range is repaired within its
`gc_grace_seconds`; a node takes part in one repair session at a time. Schedule: `{SCHEDULE}`.

1. **plan**: reads the ring and the repair history, picks for each enabled repair type the segments that
   are **due** (not repaired by that type within its `min_repair_interval`, 24 h by default) and stores
   them, most urgent first, one plan per type, in `ringward_ops` (XCom holds only a reference). Keyspaces
   under a running migration are skipped.
2. **repair**: one task for the whole night, whatever the size of the ring: repairs the stored plans, one
   type after another (full, incremental, paxos, preview),
   a node in one session at a time; waits for nodes that are down, holds sessions back from nodes under
   back-pressure, plans again if the ring changes. Progress (`[done/total share ETA]`) goes to the log
   and, live, to the ringward Repair page. It runs in the `ringward_repair` pool.
3. **report**: coverage per table and per type, the run's state (DONE, PARTIAL, DISABLED); fails if
   segments failed. A preview never counts as a repair.

**Triggering it by hand.** A manual run repairs what is due *now*. With *Segments to repair* set to
**all**, it repairs every selected segment, even those repaired recently. Triggering a paused DAG with
"unpause" also starts the scheduled run it missed (only the latest); that run goes first (one run at a
time) and repairs what is due, so a manual run after it finds nothing due unless *all* is chosen.
Use *Keyspaces* / *Tables* to repair only part of the cluster.

Settings come from the YAML file named by `$RINGWARD_REPAIR_CONFIG` (else the shipped default); the
form's fields override some of them for one run, and *config* keeps the file's value. The file's
`enabled: false` wins over the form, and its safety settings (back-pressure, disk headroom, history TTL,
segment limits) cannot be overridden per run (operator's guide, 6.5b).
"""

with DAG(
    dag_id="nightly_subrange_repair",
    description="Subrange repair of every selected table within gc_grace_seconds, a node in one session at a time",
    schedule=SCHEDULE,
    start_date=datetime(2026, 1, 1, tzinfo=UTC),
    catchup=False,
    max_active_runs=1,
    tags=["ringward", "cassandra", "repair"],
    doc_md=DOC,
    default_args={
        "retries": 2,
        "retry_delay": timedelta(minutes=2),
        "on_failure_callback": [RepairFailureNotifier()],
    },
    params={
        "scope": Param(
            "due",
            type="string",
            enum=["due", "all"],
            values_display={"due": "due: not repaired within min_repair_interval", "all": "all: every selected one"},
            title="Segments to repair",
            description="due: what the schedule would repair now. all: every selected segment, even if repaired "
            "recently (a manual repair of the whole selection).",
        ),
        "enabled": Param(
            "config",
            type="string",
            enum=["config", "on", "off"],
            values_display={"config": "as in the configuration file", "on": "on", "off": "off: repair nothing"},
            title="Repair enabled",
            description="The kill switch for this run; off repairs nothing. on cannot override the file's "
            "`enabled: false`, which is also re-read between segments: setting it there stops a running repair.",
        ),
        "keyspaces": Param(
            None,
            type=["null", "array"],
            title="Keyspaces",
            description="Keyspace name patterns to repair, one per line (e.g. shop*); empty: the file's selection.",
        ),
        "tables": Param(
            None,
            type=["null", "array"],
            title="Tables",
            description="keyspace.table patterns to repair, one per line; empty: the file's selection.",
        ),
        "repair_type": Param(
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
        "parallel_repair_count": Param(
            None,
            type=["null", "integer"],
            minimum=0,
            title="Sessions at once",
            description="Repair sessions running at the same time (0: as the file's percentage allows), at most "
            "the file's value; empty: the file's value.",
        ),
        "max_duration": Param(
            None,
            type=["null", "string", "integer"],
            title="Stop starting segments after",
            description="A duration such as 2h or 45m (or seconds); segments not started by then stay due for the "
            "next run. Empty: the file's window.",
        ),
        "config_overrides": Param(
            {},
            type="object",
            title="Other settings",
            description='Other run-overridable fields as JSON, nested or dotted, e.g. {"intensity": 0.5}. Safety '
            "settings (back_pressure, data_disk_capacity, history_ttl, ...) are file-only: operator's guide 6.5b.",
        ),
    },
) as dag:
    plan = PlanRepairOperator(task_id="plan", config_path=CONFIG_PATH)
    # One worker for the night: the node locks (a node in one session at a time) hold within one task.
    repair = RepairRunOperator(task_id="repair", config_path=CONFIG_PATH, pool=REPAIR_POOL)
    report = RepairReportOperator(
        task_id="report", config_path=CONFIG_PATH, trigger_rule="all_done", outlets=[AssetAlias(REPAIRED)]
    )  # an event of cassandra://<cluster>/<keyspace> for each keyspace covered within gc_grace
    plan >> repair >> report
