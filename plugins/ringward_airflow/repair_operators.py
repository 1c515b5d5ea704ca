"""Operators of the nightly subrange repair DAG: plan -> repair batches -> report.

Thin by design: the night is `ringward.repair`'s `plan_night`, `run_night` and `report_night`, pure functions
over ports; each operator's `execute` takes the ports from the runtime's hooks (the hook's ops store as it is, the
cluster view through `repair_ports.ClusterAdapter`), makes that one call and hands its record (`NightPlan`,
`NightOutcome`, `NightReport`) to XCom as JSON. Constructors only store arguments; nothing of a run is kept on the
instance but the kill flag `on_kill` sets.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from airflow.sdk import BaseNotifier, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.observability.stats import Stats
from ringward.assets import asset_cluster, covered_keyspaces
from ringward.clusters import metrics_cluster
from ringward.errors import ConfigurationError, RepairError
from ringward.repair import (
    DEFAULT_CONFIG_PATH,
    REPAIR_TYPES,
    NightOutcome,
    NightPlan,
    NightPlanReference,
    RecordedNight,
    RepairConfig,
    apply_run_overrides,
    decide_alerts,
    live_points,
    load_config,
    nightly_points,
    plan_night,
    report_night,
    run_night,
)
from ringward_cassandra.ops_store import PLAN_CHUNK_ROWS

from ringward_airflow.alerts import configured_notifiers, deliver, night_failed
from ringward_airflow.assets import add_keyspace_events, repaired_alias
from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook
from ringward_airflow.metrics import emit
from ringward_airflow.repair_ports import ClusterAdapter
from ringward_airflow.repair_runtime import current_runtime

__all__ = [
    "COMMON_PARAMS",
    "CONFIG_PATH_ENV",
    "SUMMARY_KEY",
    "PlanRepairOperator",
    "RepairFailureNotifier",
    "RepairReportOperator",
    "RepairRunOperator",
    "effective_config",
]

CONFIG_PATH_ENV = "RINGWARD_REPAIR_CONFIG"
SUMMARY_KEY = "summary"  # XCom key of the plan summary
METRIC_PREFIX = "ringward.repair"

# Run params that override one config field each (`config_overrides` takes the fields of RUN_OVERRIDABLE).
COMMON_PARAMS = {
    "enabled": "enabled",
    "keyspaces": "keyspaces.include",
    "tables": "tables.include",
    "repair_type": "repair_type",
    "parallel_repair_count": "parallel_repair_count",
    "max_duration": "window.max_duration",
}


# What the trigger form sends for "keep the configuration file's value" (the form offers no literal null).
AS_CONFIGURED = "config"
_SWITCH = {"on": True, "off": False}


def _form_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """The form's words as config values: `config` keeps the file's value, `on`/`off` set the kill switch,
    `scope: all` repairs every selected segment now (no minimum interval since its last repair)."""
    values = {name: (None if value == AS_CONFIGURED else value) for name, value in params.items()}
    if isinstance(values.get("enabled"), str):
        word = values["enabled"]
        if word not in _SWITCH:
            raise ConfigurationError(f"Param `enabled` is {word!r}.", "Choose config, on or off.")
        values["enabled"] = _SWITCH[word]
    return values


def effective_config(
    config_path: str | None, params: Mapping[str, Any] | None, file_config: RepairConfig | None = None
) -> RepairConfig:
    """The YAML configuration (argument, else $RINGWARD_REPAIR_CONFIG, else the shipped default; `file_config`:
    that file, read already) with the run's `config_overrides` and then the common params applied. Invalid
    values name the field."""
    params = _form_params(params or {})
    config = file_config or load_config(config_path or os.environ.get(CONFIG_PATH_ENV) or None)
    overrides = params.get("config_overrides") or {}
    if not isinstance(overrides, Mapping):
        raise ConfigurationError(
            f"Param `config_overrides` must be a JSON object, got {type(overrides).__name__}.",
            'Pass e.g. {"config_overrides": {"window": {"max_duration": "2h"}}}.',
        )
    # A run's settings cannot defeat the file's safety: an allow-list of fields, the file's `enabled: false` wins.
    file_config = config
    config = apply_run_overrides(config, overrides, file_config)
    common = {field: params[name] for name, field in COMMON_PARAMS.items() if params.get(name) is not None}
    if params.get("scope") == "all":
        common["min_repair_interval"] = 0
        common.update({f"repair_types.{kind}.min_repair_interval": 0 for kind in REPAIR_TYPES})
    elif params.get("scope") not in (None, "due"):
        raise ConfigurationError(f"Param `scope` is {params['scope']!r}.", "Choose due or all.")
    return apply_run_overrides(config, common, file_config)


def _config_or_fail(config_path: str | None, params: Mapping[str, Any] | None) -> RepairConfig:
    """A bad configuration fails the task at once: retrying cannot fix it. Every enabled type runs (`night_types`);
    none enabled is a disabled run."""
    try:
        config = effective_config(config_path, params)
    except ConfigurationError as error:
        raise AirflowFailException(str(error)) from None
    return config if config.enabled_types else config.model_copy(update={"enabled": False})


def one_type_run(config: RepairConfig) -> RepairConfig:
    """`config` for its one enabled type (`for_type`), as a session of that type sees it; several enabled types
    are refused (use `night_types` and `for_type` each); none enabled is a disabled run."""
    types = config.enabled_types
    if len(types) > 1:
        raise ConfigurationError(
            f"Repair types {', '.join(types)} are all enabled; one_type_run takes a configuration of one type.",
            "Run each type with config.for_type(kind), in the order of config.enabled_types.",
        )
    if not types:  # every type switched off: the run repairs nothing, as with the kill switch
        return config.model_copy(update={"enabled": False})
    return config.for_type(types[0])


class PlanRepairOperator(BaseOperator):
    """Plans tonight's run on a fresh ring and schema, and stores the plan in ringward_ops.

    The due segments, most urgent first, go to `ringward_ops.repair_plan` in chunks of PLAN_CHUNK_ROWS;
    the return value (XCom) is only a reference to them with the counts, a few hundred bytes however large
    the ring. The plan summary (counts, skipped keyspaces, effective config) is pushed under `summary`.
    """

    template_fields: Sequence[str] = ("config_path",)

    def __init__(
        self,
        *,
        config_path: str | None = None,
        cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        nodetool_conn_id: str = NodetoolHook.default_conn_name,
        cluster: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id
        self.cluster = cluster  # the declared cluster's name: the tag of a failure's metrics (RepairFailureNotifier)

    @property
    def metrics_cluster(self) -> str:
        """The `cluster` tag of a failure's metrics: the declared cluster's name, else the CQL connection id."""
        return metrics_cluster(self.cluster, self.cassandra_conn_id)

    def execute(self, context: Any) -> dict[str, Any]:
        config = _config_or_fail(self.config_path, context.get("params"))
        runtime = current_runtime()
        cassandra = runtime.cassandra(self.cassandra_conn_id)
        nodetool = runtime.nodetool(self.nodetool_conn_id)
        nodetool.prepare()  # its JVM boots while the ring and schema are read
        try:
            plan = plan_night(
                config, run_id=context["run_id"], store=cassandra.ops_store(),
                cluster=ClusterAdapter(cassandra), nodetool=nodetool, log=self.log, chunk_rows=PLAN_CHUNK_ROWS,
                cpu_seconds=time.process_time,
            )  # fmt: skip
        except ConfigurationError as error:  # e.g. beyond max_segments_per_plan: retrying cannot fix it
            raise AirflowFailException(str(error)) from None
        finally:
            cassandra.close()
            nodetool.close()
        context["ti"].xcom_push(key=SUMMARY_KEY, value=plan.to_json())
        # A small reference whatever the ring: per type (in run order) its stored plan, chunks and due count.
        return plan.reference().to_json()


class RepairRunOperator(BaseOperator):
    """Repairs the whole stored plan of the run: one task per night, whatever the ring.

    Reads the plan chunk by chunk (`WINDOW_CHUNKS` at a time) with the history of the partitions they touch,
    and runs them through the executor (`nodetool repair -full -st -et KS TABLES`, a node in one session at
    a time, held back under back-pressure, waiting for nodes that are down). If the ring changed since the
    plan, what is left is planned again on the new ring (segments repaired in this run are kept). Live
    progress goes to ringward_ops.repair_progress. Idempotent: a retry skips segments done in this run.
    On kill (SIGTERM) it stops starting sessions, aborts running ones and fails.
    """

    template_fields: Sequence[str] = ("config_path",)
    WINDOW_CHUNKS = 10

    def __init__(
        self,
        *,
        config_path: str | None = None,
        plan_task_id: str = "plan",
        cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        nodetool_conn_id: str = NodetoolHook.default_conn_name,
        cluster: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id
        self.cluster = cluster  # the declared cluster's name (None: single cluster): the metrics' `cluster` tag

    @property
    def metrics_cluster(self) -> str:
        """The `cluster` tag of the live metrics: the declared cluster's name, else the CQL connection id."""
        return metrics_cluster(self.cluster, self.cassandra_conn_id)

    # The one thing execute shares with on_kill (Airflow calls it on the same instance): the kill flag of the run
    # under way. Set in execute; constructors only store arguments (operators get copied).
    _killed: threading.Event | None = None

    def execute(self, context: Any) -> dict[str, Any]:
        config = _config_or_fail(self.config_path, context.get("params"))
        reference = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=SUMMARY_KEY) or {}
        if not reference:
            raise AirflowFailException("The plan task left no plan. Fix: clear the DAG run from the plan task.")
        killed = self._killed = threading.Event()
        runtime = current_runtime()
        nodetool = runtime.nodetool(self.nodetool_conn_id)
        nodetool.prepare()  # its JVM boots while the ring and plan are read
        cassandra = runtime.cassandra(self.cassandra_conn_id)
        try:
            outcome = run_night(
                NightPlanReference.from_json(reference), NightPlan.from_json(plan), config, run_id=context["run_id"],
                store=cassandra.ops_store(), cluster=ClusterAdapter(cassandra), nodetool=nodetool,
                runtime=runtime, still_enabled=_ConfigSwitch(self.config_path, context.get("params"), config, self.log),
                killed=killed.is_set, log=self.log, gauge=_gauge, window_chunks=self.WINDOW_CHUNKS,
                chunk_rows=PLAN_CHUNK_ROWS,
                progressed=self._progressed,
            )  # fmt: skip
        finally:
            cassandra.close()
            nodetool.close()
        if killed.is_set():
            raise AirflowException("Repair task killed: running sessions were aborted; the rest stays due.")
        return outcome.to_json()

    def _progressed(self, repair_type: str, progress: Mapping[str, Any]) -> None:
        emit(live_points(self.metrics_cluster, repair_type, progress))  # the tagged live metrics

    def on_kill(self) -> None:
        # Airflow 3.3 calls this from the SIGTERM handler and lets execute() go on. Only set the flag here:
        # taking locks or starting processes inside a signal handler can deadlock the interrupted thread; the
        # run's loop sees it between waits and aborts the running sessions (`Sessions.stop_if_killed`).
        if self._killed is not None:
            self._killed.set()


class _ConfigSwitch:
    """The kill switch, re-read from the configuration file between segments (parsed again only when the file
    changed: at fleet size the loop asks millions of times a night). Without a configured file the shipped default
    is the file: parsed once, not on every ask (that was most of a fleet night's CPU). A file unreadable now keeps
    the run's settings (`config`)."""

    def __init__(self, config_path: str | None, params: Mapping[str, Any] | None, config: RepairConfig, log: Any):
        self._config_path = config_path
        self._params = params
        self._config = config
        self._log = log
        self._file: tuple[str, int] | None = None
        self._value = True

    def __call__(self) -> bool:
        path = self._config_path or os.environ.get(CONFIG_PATH_ENV) or str(DEFAULT_CONFIG_PATH)
        try:
            stamp: tuple[str, int] | None = (path, os.stat(path).st_mtime_ns)
        except OSError:
            stamp = None
        if stamp is not None and stamp == self._file:
            return self._value
        try:
            # The file's own `enabled: false` first: a run param the edited file now refuses must not hide it.
            file = load_config(self._config_path or os.environ.get(CONFIG_PATH_ENV) or None)
            self._value = file.enabled and effective_config(self._config_path, self._params, file).enabled
            self._file = stamp
            return self._value
        except ConfigurationError as error:
            self._log.warning("Configuration unreadable now (%s); keeping the run's settings.", error)
            return self._config.enabled


class RepairReportOperator(BaseOperator):
    """Summarises the run from the repair history: run state, per-table coverage, CEP-37-named metrics.

    Records the run in ringward_ops.repair_runs. Fails when segments failed (retries used up), so the
    DAG's failure notifier fires; postponed segments (node down, window closed, kill switch) make the run
    PARTIAL without failing it: they are due again next run.
    """

    template_fields: Sequence[str] = ("config_path",)

    def __init__(
        self,
        *,
        config_path: str | None = None,
        plan_task_id: str = "plan",
        repair_task_id: str = "repair",
        cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        alert_notifiers: Sequence[BaseNotifier] | None = None,  # None: ringward_airflow.alerts.configured_notifiers
        cluster: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.repair_task_id = repair_task_id
        self.cassandra_conn_id = cassandra_conn_id
        self.alert_notifiers = alert_notifiers
        self.cluster = cluster  # the declared cluster's name (None: single cluster): the metrics' `cluster` tag

    @property
    def metrics_cluster(self) -> str:
        """The `cluster` tag of the night's metrics and alerts: the declared cluster's name, else the CQL
        connection id."""
        return metrics_cluster(self.cluster, self.cassandra_conn_id)

    def execute(self, context: Any) -> dict[str, Any]:
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=SUMMARY_KEY)
        if not plan:
            raise AirflowFailException("The plan task left no plan: nothing to report. Fix the plan task first.")
        config = _config_or_fail(self.config_path, context.get("params"))
        repaired = context["ti"].xcom_pull(task_ids=self.repair_task_id)
        started = getattr(context.get("dag_run"), "start_date", None)
        cassandra = current_runtime().cassandra(self.cassandra_conn_id)
        try:
            report = report_night(
                NightPlan.from_json(plan), NightOutcome.from_json(repaired) if repaired else None, config,
                run_id=context["run_id"], store=cassandra.ops_store(), cluster=ClusterAdapter(cassandra),
                run_started=started, log=self.log, gauge=_gauge, recorded=lambda night: self._observed(night, context),
            )  # fmt: skip
        except RepairError as error:  # segments failed: fails the run (and fires the notifier), not retried
            raise AirflowFailException(str(error)) from None
        finally:
            cassandra.close()
        return report.to_json()

    def _observed(self, night: RecordedNight, context: Any) -> None:
        """The recorded night's tagged metrics, its alerts to the configured notifiers, and an asset event per
        keyspace covered within gc_grace."""
        cluster = self.metrics_cluster
        emit(nightly_points(cluster, night.state, night.coverages, night.summaries, finished=night.finished,
                            run_seconds=night.run_seconds,
                            longest_unrepaired_seconds=night.longest_unrepaired_seconds))  # fmt: skip
        counts = {"failed": night.failed, "postponed": night.postponed}
        alerts = decide_alerts(cluster, night.run_id, night.state, night.statuses, counts)
        if alerts:
            deliver(alerts, configured_notifiers() if self.alert_notifiers is None else self.alert_notifiers, context)
        covered = covered_keyspaces(night.statuses)
        # cassandra://<declared name, else the CQL connection id>/<keyspace> (ringward.assets.asset_cluster)
        extra = {"run_id": night.run_id, "state": night.state}
        authority = asset_cluster(self.cluster, self.cassandra_conn_id)
        add_keyspace_events(context, repaired_alias(self.cluster), authority, covered, extra)


def _gauge(name: str, value: float) -> None:
    Stats.gauge(f"{METRIC_PREFIX}.{name}", value)


class RepairFailureNotifier(BaseNotifier):
    """Failure notification of the repair DAG: an ERROR log line and a `ringward.repair.failed_tasks`
    counter. Replace or extend with a provider notifier (Slack, SMTP) in the DAG's callbacks."""

    def notify(self, context: Any) -> None:
        ti = context.get("ti") or context.get("task_instance")
        task_id = getattr(ti, "task_id", "?")
        error = context.get("exception")
        self.log.error("ringward nightly repair: task %s of run %s failed: %s", task_id, context.get("run_id"), error)
        Stats.incr(f"{METRIC_PREFIX}.failed_tasks")
        task = context.get("task")
        cluster = getattr(task, "metrics_cluster", None) or RingwardCassandraHook.default_conn_name
        night_failed(context, cluster)  # outcome FAILED and the configured notifiers
