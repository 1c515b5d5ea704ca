"""Operators of the nightly subrange repair DAG: plan -> repair batches -> report.

Thin by design: the decisions live in `ringward.repair` (what is due, waves, locks, retries, window,
status) and the cluster access in `ringward_cassandra`; these classes wire hooks, XCom, logs and Stats.
Constructors only store arguments; hooks are built in `execute`.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseNotifier, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.observability.stats import Stats
from ringward.errors import ClusterError, ConfigurationError, RepairError
from ringward.repair import (
    BatchEffects,
    RepairCommand,
    RepairConfig,
    RunSummary,
    Segment,
    SegmentRecord,
    SegmentState,
    SessionResult,
    allowed_parallelism,
    apply_overrides,
    batch_waves,
    decode_batch,
    dump_config,
    encode_batch,
    load_config,
    prepare_run,
    ring_fingerprint,
    run_batch,
    status_table,
)
from ringward_cassandra.cluster_repairs import plan_cluster, records_by_segment, status_records, table_statuses

from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook

__all__ = [
    "COMMON_PARAMS",
    "CONFIG_PATH_ENV",
    "SUMMARY_KEY",
    "PlanRepairOperator",
    "RepairFailureNotifier",
    "RepairReportOperator",
    "RepairSegmentsOperator",
    "effective_config",
]

CONFIG_PATH_ENV = "RINGWARD_REPAIR_CONFIG"
SUMMARY_KEY = "summary"  # XCom key of the plan summary
METRIC_PREFIX = "ringward.repair"

# Run params that override one config field each (`config_overrides` takes any field, nested or dotted).
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


def effective_config(config_path: str | None, params: Mapping[str, Any] | None) -> RepairConfig:
    """The YAML configuration (argument, else $RINGWARD_REPAIR_CONFIG, else the shipped default) with the
    run's `config_overrides` and then the common params applied. Invalid values name the field."""
    params = _form_params(params or {})
    config = load_config(config_path or os.environ.get(CONFIG_PATH_ENV) or None)
    overrides = params.get("config_overrides") or {}
    if not isinstance(overrides, Mapping):
        raise ConfigurationError(
            f"Param `config_overrides` must be a JSON object, got {type(overrides).__name__}.",
            'Pass e.g. {"config_overrides": {"window": {"max_duration": "2h"}}}.',
        )
    config = apply_overrides(config, overrides)
    common = {field: params[name] for name, field in COMMON_PARAMS.items() if params.get(name) is not None}
    if params.get("scope") == "all":
        common["min_repair_interval"] = 0
    elif params.get("scope") not in (None, "due"):
        raise ConfigurationError(f"Param `scope` is {params['scope']!r}.", "Choose due or all.")
    return apply_overrides(config, common)


def _config_or_fail(config_path: str | None, params: Mapping[str, Any] | None) -> RepairConfig:
    """A bad configuration fails the task at once: retrying cannot fix it."""
    try:
        return effective_config(config_path, params)
    except ConfigurationError as error:
        raise AirflowFailException(str(error)) from None


def _live_nodes(client: Any, ring_addresses: Sequence[str]) -> set[str]:
    """Nodes some reachable node sees as Up/Normal (gossip view through nodetool status)."""
    for address in ring_addresses:
        try:
            states = client.status(address)
        except ClusterError:
            continue
        return {node for node, state in states.items() if state == "UN"}
    return set()


class PlanRepairOperator(BaseOperator):
    """Plans tonight's run on a fresh ring and schema.

    Returns the batches (what the repair task is mapped over: waves of encoded segments) and pushes the
    plan summary (counts, skipped keyspaces, effective config) under the XCom key `summary`.
    """

    template_fields: Sequence[str] = ("config_path",)

    def __init__(
        self,
        *,
        config_path: str | None = None,
        batch_size: int = 256,
        cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        nodetool_conn_id: str = NodetoolHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.batch_size = batch_size
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id

    def execute(self, context: Any) -> list[Any]:
        params = context.get("params") or {}
        config = _config_or_fail(self.config_path, params)
        batch_size = int(params.get("batch_size") or self.batch_size)
        cassandra = RingwardCassandraHook(self.cassandra_conn_id)
        nodetool = NodetoolHook(self.nodetool_conn_id).client
        nodetool.prepare()  # its JVM boots while the ring and schema are read
        try:
            return self._plan(context, config, batch_size, cassandra, nodetool)
        finally:
            cassandra.close()
            nodetool.close()

    def _plan(
        self, context: Any, config: RepairConfig, batch_size: int, cassandra: RingwardCassandraHook, nodetool: Any
    ) -> Any:
        run_id = context["run_id"]
        ring = cassandra.ring()
        store = cassandra.ops_store()
        leased = {ks: f"held by {lease.owner} ({lease.purpose})" for ks, lease in store.leased_keyspaces().items()}
        cluster = plan_cluster(cassandra.session, ring, config, leased)
        for keyspace, why in cluster.excluded_keyspaces.items():
            self.log.warning("Keyspace %s skipped tonight: under a migration lease, %s", keyspace, why)
        records = records_by_segment(store.repair_history())
        live = _live_nodes(nodetool, ring.addresses())
        run = prepare_run(
            cluster.segments, records, run_id=run_id, now=datetime.now(UTC), live_nodes=live,
            node_count=len(ring.nodes), config=config,
        )  # fmt: skip
        for segment in run.postponed:
            self.log.warning("Postponed (replica down): %s", segment.describe())
            record = _postponed(records.get(segment.segment_id), segment, run_id)
            store.record_repair(segment.keyspace, segment.tables, segment.range, record, replicas=segment.replicas)
        batches = batch_waves(run.waves, batch_size) if run.waves else []
        plan = {
            "run_id": run_id,
            "enabled": config.enabled,
            "fingerprint": ring_fingerprint(ring, {}),
            "parallelism": run.parallelism,
            "segments": len(cluster.segments),
            "due": run.due_count,
            "batches": len(batches),
            "batch_segments": [sum(len(wave) for wave in batch) for batch in batches],
            "postponed": len(run.postponed),
            "exhausted": len(run.exhausted),
            "not_due": len(run.not_due),
            "skipped_ranges": len(cluster.skipped_ranges),
            "skipped_keyspaces": dict(cluster.excluded_keyspaces),
            "live_nodes": sorted(live),
            "config": dump_config(config),
        }
        if not config.enabled:
            self.log.warning("Repair is disabled (enabled: false): nothing runs tonight.")
        self.log.info(
            "Plan: %(segments)d segments, %(due)d due in %(batches)d batches (parallelism %(parallelism)d), "
            "%(postponed)d postponed, %(not_due)d not due, %(exhausted)d with retries used up",
            plan,
        )
        context["ti"].xcom_push(key=SUMMARY_KEY, value=plan)
        return [encode_batch(batch) for batch in batches]


def _postponed(record: SegmentRecord | None, segment: Segment, run_id: str) -> SegmentRecord:
    base = record or SegmentRecord(segment.segment_id)
    return SegmentRecord(
        segment.segment_id, SegmentState.POSTPONED, base.last_success, base.last_full_success,
        base.attempts_in(run_id), base.last_error, base.duration, run_id,
    )  # fmt: skip


class RepairSegmentsOperator(BaseOperator):
    """Repairs one batch (waves of segments) with `nodetool repair -full -st -et KS TABLES`.

    Run mapped with `max_active_tis_per_dag=1`: the per-node locks hold within a task, so batches must
    not overlap. On kill (SIGTERM) it stops starting segments, aborts running sessions and fails.
    """

    template_fields: Sequence[str] = ("batch", "config_path")

    def __init__(
        self,
        *,
        batch: Sequence[Sequence[Sequence[Any]]],
        config_path: str | None = None,
        plan_task_id: str = "plan",
        cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        nodetool_conn_id: str = NodetoolHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.batch = batch
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id

    # Run state, set up in execute (constructors only store arguments; operators get copied).
    _killed: threading.Event | None = None
    _client: Any = None
    _coordinators: frozenset[str] = frozenset()
    _aborted = False

    def execute(self, context: Any) -> dict[str, Any]:
        params = context.get("params") or {}
        config = _config_or_fail(self.config_path, params)
        segments = [segment for wave in decode_batch(self.batch) for segment in wave]
        killed = self._killed = threading.Event()
        self._coordinators = frozenset()
        self._aborted = False
        self._client = NodetoolHook(self.nodetool_conn_id).client
        self._client.prepare()  # its JVM boots while the ring and history are read
        cassandra = RingwardCassandraHook(self.cassandra_conn_id)
        try:
            result = self._run(context, config, segments, cassandra, killed)
        finally:
            cassandra.close()
            self._client.close()
        if killed.is_set():
            raise AirflowException("Repair task killed: running sessions were aborted; the rest stays due.")
        return result

    def _run(
        self, context: Any, config: RepairConfig, segments: list[Segment], cassandra: Any, killed: threading.Event
    ) -> dict[str, Any]:
        run_id = context["run_id"]
        ring = cassandra.ring()
        store = cassandra.ops_store()
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=SUMMARY_KEY) or {}
        if plan.get("fingerprint") not in (None, ring_fingerprint(ring, {})):
            raise AirflowFailException(
                "The ring changed since the plan task ran; its segments may no longer match the replicas. "
                "Fix: clear the DAG run from the plan task (or wait for the next run) to plan again."
            )
        wanted = {s.segment_id for s in segments}
        records = {k: v for k, v in records_by_segment(store.repair_history()).items() if k in wanted}
        live = _CachedLiveness(self._client, ring.addresses())

        effects = BatchEffects(
            repair=lambda command: self._session(command, config),
            save=store.record_repairs,
            live_nodes=live,
            enabled=lambda: self._still_enabled(context, config) and not self._paused(store),
            stop_requested=lambda: self._stop_if_killed(killed),
            log=self.log.info,
        )
        started = datetime.now(UTC)
        # Progress of the whole run: this batch's segments count after those of the batches before it.
        sizes = plan.get("batch_segments") or []
        before = sizes[: max(0, int(getattr(context["ti"], "map_index", 0) or 0))]
        result = run_batch(
            segments, records, config=config, run_id=run_id, effects=effects, run_started=started,
            parallelism=allowed_parallelism(config, len(ring.nodes)),
            run_total=sum(sizes) if sizes else None, done_before=sum(before),
        )  # fmt: skip
        stopped = f"; stopped: {result.stop_reason}" if result.stop_reason else ""
        self.log.info("Batch %s%s", result.summary.line(), stopped)
        return {
            "counts": {state.value: n for state, n in result.summary.counts.items()},
            "stop_reason": result.stop_reason,
            "failed": [o.segment.describe() for o in result.outcomes if o.state is SegmentState.FAILED],
        }

    def _still_enabled(self, context: Any, config: RepairConfig) -> bool:
        """The kill switch, re-read from the configuration file between segments."""
        try:
            return effective_config(self.config_path, context.get("params")).enabled
        except ConfigurationError as error:
            self.log.warning("Configuration unreadable now (%s); keeping the run's settings.", error)
            return config.enabled

    def _paused(self, store: Any) -> bool:
        """The pause switch of the ringward UI (ringward_ops.repair_switch), read between segments."""
        try:
            events = store.switch_events(limit=1)
        except Exception as error:  # an unreadable switch must not stop a repair nobody paused
            self.log.warning("Pause switch unreadable now (%s); carrying on.", error)
            return False
        if events and events[0].paused:
            self.log.warning("Repair paused from the UI by %s at %s; the rest stays due.", events[0].changed_by,
                             events[0].changed_at)  # fmt: skip
            return True
        return False

    def _session(self, command: RepairCommand, config: RepairConfig) -> SessionResult:
        coordinator = command.coordinator
        with _COORDINATORS_LOCK:
            self._coordinators = self._coordinators | {coordinator}
        try:
            outcome = self._client.repair(
                coordinator, command.keyspace, command.ranges, tables=command.tables,
                preview=config.repair_type == "preview", hosts=command.replicas if config.ignore_dcs else (),
                timeout=config.segment_timeout.total_seconds(),
            )  # fmt: skip
        except ClusterError as error:  # timed out: the nodetool process is gone, the session may not be
            self._client.abort_repairs(coordinator)
            return SessionResult(False, config.segment_timeout.total_seconds(), str(error))
        finally:
            with _COORDINATORS_LOCK:
                self._coordinators = self._coordinators - {coordinator}
        error = None if outcome.succeeded else _repair_error(outcome.output)
        return SessionResult(outcome.succeeded, outcome.seconds, error)

    def on_kill(self) -> None:
        # Airflow 3.3 calls this from the SIGTERM handler and lets execute() go on. Only set the flag here:
        # taking locks or starting processes inside a signal handler can deadlock the interrupted thread.
        if self._killed is not None:
            self._killed.set()

    def _stop_if_killed(self, killed: threading.Event) -> bool:
        """Polled by the batch loop between waits: once killed, stop nodetool and abort running sessions."""
        if not killed.is_set():
            return False
        if not self._aborted and self._client is not None:
            self._aborted = True
            self.log.warning("Task killed: stopping nodetool and aborting sessions on %s", sorted(self._coordinators))
            self._client.terminate_all()
            for coordinator in sorted(self._coordinators):
                self._client.abort_repairs(coordinator)
        return True


def _repair_error(output: str) -> str:
    """The line of nodetool's output that says why the repair failed (not the Java stack trace)."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith(("\t", " "))]
    reasons = [line for line in lines if line.startswith("error:") or "failed with error" in line]
    return (reasons[0] if reasons else " | ".join(lines[-3:]) or "nodetool repair failed")[-1500:]


_COORDINATORS_LOCK = threading.Lock()


class _CachedLiveness:
    """Who is up, refreshed at most every `ttl` seconds (each look costs a nodetool JVM start)."""

    def __init__(self, client: Any, addresses: Sequence[str], ttl: float = 15.0) -> None:
        self._client = client
        self._addresses = list(addresses)
        self._ttl = ttl
        self._at = -ttl
        self._live: set[str] = set()

    def __call__(self) -> set[str]:
        if time.monotonic() - self._at >= self._ttl:
            self._live = _live_nodes(self._client, self._addresses)
            self._at = time.monotonic()
        return set(self._live)


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
        cassandra_conn_id: str = RingwardCassandraHook.default_conn_name,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.cassandra_conn_id = cassandra_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=SUMMARY_KEY)
        if not plan:
            raise AirflowFailException("The plan task left no plan: nothing to report. Fix the plan task first.")
        config = _config_or_fail(self.config_path, context.get("params"))
        cassandra = RingwardCassandraHook(self.cassandra_conn_id)
        try:
            return self._report(context, plan, config, cassandra)
        finally:
            cassandra.close()

    def _report(self, context: Any, plan: Mapping[str, Any], config: RepairConfig, cassandra: Any) -> dict[str, Any]:
        run_id = context["run_id"]
        now = datetime.now(UTC)
        store = cassandra.ops_store()
        rows = store.repair_history()
        cluster = plan_cluster(cassandra.session, cassandra.ring(), config, plan.get("skipped_keyspaces"))
        summary = run_summary(plan, [r.record for r in rows if r.record.run_id == run_id])
        records = status_records(cluster, rows)  # repairs recorded under any splitter count
        statuses = table_statuses(cluster, records, now, config.gc_grace_alarm)
        metrics = {
            **summary.metrics(),
            "LongestUnrepairedSec": longest_unrepaired_seconds(cluster.segments, records, now),
            "ClusterRepairTimeInSec": round(_run_seconds(context, now)),
        }
        for name, value in metrics.items():
            Stats.gauge(f"{METRIC_PREFIX}.{name}", value)
        # A run stopped by the kill switch from the start repaired nothing on purpose: say so, not DONE.
        state = summary.state.value if plan.get("enabled", True) else "DISABLED"
        report = {
            "run_id": run_id,
            "state": state,
            "metrics": metrics,
            "skipped_keyspaces": plan.get("skipped_keyspaces", {}),
            "tables": {f"{s.keyspace}.{s.table}": s.repaired_percent for s in statuses},
        }
        store.record_repair_run(run_id, state, report, plan.get("config", {}))
        self.log.info("Run %s\n%s", summary.line(), status_table(statuses))
        for keyspace, why in report["skipped_keyspaces"].items():
            self.log.warning("Keyspace %s was not repaired: %s", keyspace, why)
        failed = summary.counts[SegmentState.FAILED]
        if failed:  # fails the run (and fires the notifier); retrying the report would change nothing
            error = RepairError(
                f"{failed} segment(s) failed after {config.max_retries} retries in run {run_id}.",
                "Read the repair task logs (last_error in ringward_ops.repair_history); they stay due next run.",
            )
            raise AirflowFailException(str(error))
        return report


def run_summary(plan: Mapping[str, Any], run_records: Sequence[SegmentRecord]) -> RunSummary:
    """The run's outcome: what the history says for its segments, plus due segments no task reached.

    A session left RUNNING (task died mid-session) counts as failed; segments not due count as skipped.
    """
    states = [SegmentState.FAILED if r.state is SegmentState.RUNNING else r.state for r in run_records]
    tally = Counter(states)
    reached = sum(n for state, n in tally.items() if state is not SegmentState.POSTPONED)
    unreached = max(0, int(plan.get("due", 0)) - reached)
    skipped = int(plan.get("not_due", 0)) + int(plan.get("exhausted", 0))
    return RunSummary.of([*states, *[SegmentState.POSTPONED] * unreached, *[SegmentState.SKIPPED] * skipped])


def longest_unrepaired_seconds(segments: Sequence[Segment], records: Mapping[str, SegmentRecord], now: datetime) -> int:
    """Age of the oldest full repair among the planned segments (CEP-37 LongestUnrepairedSec); -1 = never."""
    ages = []
    for segment in segments:
        record = records.get(segment.segment_id)
        if record is None or record.last_full_success is None:
            return -1
        ages.append((now - record.last_full_success).total_seconds())
    return round(max(ages, default=0.0))


def _run_seconds(context: Any, now: datetime) -> float:
    started = getattr(context.get("dag_run"), "start_date", None)
    return (now - started).total_seconds() if started else 0.0


class RepairFailureNotifier(BaseNotifier):
    """Failure notification of the repair DAG: an ERROR log line and a `ringward.repair.failed_tasks`
    counter. Replace or extend with a provider notifier (Slack, SMTP) in the DAG's callbacks."""

    def notify(self, context: Any) -> None:
        ti = context.get("ti") or context.get("task_instance")
        task_id = getattr(ti, "task_id", "?")
        error = context.get("exception")
        self.log.error("ringward nightly repair: task %s of run %s failed: %s", task_id, context.get("run_id"), error)
        Stats.incr(f"{METRIC_PREFIX}.failed_tasks")
