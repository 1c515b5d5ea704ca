"""Operators of the nightly subrange repair DAG: plan -> repair batches -> report.

Thin by design: the decisions live in `ringward.repair` (what is due, waves, locks, retries, window,
status) and the cluster access in `ringward_cassandra`; these classes wire hooks, XCom, logs and Stats.
Constructors only store arguments; hooks are built in `execute`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from airflow.sdk import BaseNotifier, BaseOperator
from airflow.sdk.exceptions import AirflowException, AirflowFailException
from airflow.sdk.observability.stats import Stats
from ringward.errors import ClusterError, ConfigurationError, RepairError
from ringward.repair import (
    DEFAULT_CONFIG_PATH,
    REPAIR_TYPES,
    RING_CHANGED,
    BatchEffects,
    DiskHeadroomGuard,
    NextWindow,
    NightOutcome,
    NightPlan,
    NodeBacklog,
    RecordUpdate,
    RepairCommand,
    RepairConfig,
    RepairType,
    Segment,
    SegmentRecord,
    SegmentState,
    SessionResult,
    allowed_parallelism,
    apply_run_overrides,
    back_pressure_reason,
    decode_segment,
    disk_capacity,
    history_ttl_seconds,
    incremental_repaired_shares,
    live_metrics,
    live_nodes,
    load_config,
    plan_chunks,
    plan_night,
    repair_flags,
    report_night,
    ring_fingerprint,
    run_batch,
    select_due,
    type_plan_id,
)
from ringward.text import log_safe
from ringward_cassandra.cluster_repairs import plan_cluster
from ringward_cassandra.ops_store import PLAN_CHUNK_ROWS, PreviewFinding, history_bucket
from ringward_cassandra.schema import data_disk_max_sizes

from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook
from ringward_airflow.repair_ports import ClusterAdapter, StoreAdapter
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id

    def execute(self, context: Any) -> dict[str, Any]:
        config = _config_or_fail(self.config_path, context.get("params"))
        runtime = current_runtime()
        cassandra = runtime.cassandra(self.cassandra_conn_id)
        nodetool = runtime.nodetool(self.nodetool_conn_id)
        nodetool.prepare()  # its JVM boots while the ring and schema are read
        try:
            plan = plan_night(
                config, run_id=context["run_id"], store=StoreAdapter(cassandra.ops_store()),
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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.cassandra_conn_id = cassandra_conn_id
        self.nodetool_conn_id = nodetool_conn_id

    # Run state, set up in execute (constructors only store arguments; operators get copied).
    _killed: threading.Event | None = None
    _client: Any = None
    _coordinators: frozenset[str] = frozenset()
    _aborted = False
    _type: Mapping[str, str] = {}  # the store's history arguments for the run's type (`_of_type`)

    def execute(self, context: Any) -> dict[str, Any]:
        config = _config_or_fail(self.config_path, context.get("params"))
        reference = context["ti"].xcom_pull(task_ids=self.plan_task_id) or {}
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=SUMMARY_KEY) or {}
        if not reference:
            raise AirflowFailException("The plan task left no plan. Fix: clear the DAG run from the plan task.")
        killed = self._killed = threading.Event()
        self._coordinators = frozenset()
        self._aborted = False
        runtime = current_runtime()
        self._client = runtime.nodetool(self.nodetool_conn_id)
        self._client.prepare()  # its JVM boots while the ring and plan are read
        cassandra = runtime.cassandra(self.cassandra_conn_id)
        try:
            result = self._run(context, config, reference, plan, cassandra, killed)
        finally:
            cassandra.close()
            self._client.close()
        if killed.is_set():
            raise AirflowException("Repair task killed: running sessions were aborted; the rest stays due.")
        return result

    def _windows(self, store: Any, run_id: str, chunks: int) -> Iterator[list[Segment]]:
        for first in range(0, chunks, self.WINDOW_CHUNKS):
            rows = [row for c in range(first, min(chunks, first + self.WINDOW_CHUNKS))
                    for row in store.run_plan_chunk(run_id, c)]  # fmt: skip
            yield [decode_segment(json.loads(row)) for row in rows]

    def _run(
        self, context: Any, config: RepairConfig, reference: Mapping[str, Any], plan: Mapping[str, Any],
        cassandra: Any, killed: threading.Event,
    ) -> dict[str, Any]:  # fmt: skip
        run_id = context["run_id"]
        runtime = current_runtime()
        ring = cassandra.ring()
        store = cassandra.ops_store()
        clock = runtime.monotonic
        total = int(reference.get("due") or 0)
        paused = _Every(2.0, lambda: self._paused(store), clock)
        back_pressure = _BackPressure(self._client, config, clock, keyspaces=plan.get("keyspaces") or ())
        back_pressure.prefetch(ring.addresses())
        effects = BatchEffects(
            save=lambda updates: store.record_repairs(updates, ttl_seconds=history_ttl_seconds(config)),
            # Who is up, looked at every 15 s at most: each look costs a nodetool JVM start.
            live_nodes=_Every(15.0, lambda: live_nodes(self._client, ring.addresses()), clock),
            # The kill switch (the file, when it changed) between segments; the pause switch (a CQL read) every 2 s.
            enabled=lambda: self._still_enabled(context, config) and not paused(),
            stop_requested=lambda: self._stop_if_killed(killed),
            log=self.log.info,
            held_back=back_pressure,
            progress=lambda progress: self._progress(store, run_id, progress, plan),
            now=runtime.now,
            sleep=runtime.sleep,
        )
        # A runtime's own session pool hands back what a preview found; the type being run says how to keep it.
        keep_finding: list[Any] = [None]
        effects.sessions = runtime.sessions(lambda command, found: keep_finding[0] and keep_finding[0](command, found))
        queue = _type_plans(reference, config, run_id)
        # Read before the window starts counting, as the backlogs are; only for a night with incremental repair.
        incremental = any(kind == "incremental" for kind, *_ in queue)
        disk_guard = None
        if incremental:
            disk_guard = self._disk_guard(config, cassandra, ring, back_pressure, runtime.reads_node_state)
        started = effects.now()  # one window for the whole night, whatever the types
        counts: Counter[str] = Counter()
        by_type: dict[str, dict[str, int]] = {}
        failed: list[str] = []
        done_before = 0
        stop_reason = None
        replans = 0
        keyspaces: set[tuple[str, str]] = set()  # (type, keyspace) of the segments each type had planned
        for index, (kind, plan_id, chunks, planned) in enumerate(queue):
            typed = config.for_type(kind)
            self._type = _history_args(kind)
            windows = self._windows(store, plan_id, chunks)
            if stop_reason is not None:  # stopped in an earlier type: this type's plan stays due next run
                self._postpone_rest(windows, store, typed, run_id)
                continue
            later = sum(due for *_, due in queue[index + 1 :])  # the types after this one, for the progress total
            self.log.info("Repair type %s: %d segment(s) planned.", kind, planned)
            effects.repair = _session_of(self, typed, store, run_id)
            effects.refused = disk_guard if kind == "incremental" and disk_guard is not None else _never_refused
            keep_finding[0] = _finding_keeper(self, typed, store, run_id) if kind == "preview" else None
            fingerprint = reference.get("fingerprint")  # every type's stored plan was made on the plan task's ring
            # The ring is looked at every minute during a window, and between windows.
            effects.ring_changed = _ring_watch(cassandra, fingerprint, clock)
            kind_counts: Counter[str] = Counter()
            while (segments := next(windows, None)) is not None:
                keyspaces.update((kind, s.keyspace) for s in segments)
                if ring_fingerprint(cassandra.ring(), {}) != fingerprint:
                    segments = []  # the rest of the old plan is not run: planned again below
                else:
                    # The plan's later windows join the same run as its queue runs dry: no barrier between
                    # windows, and a down node's segments wait across them, not at the end of each.
                    result = run_batch(
                        segments, self._history(store, segments), config=typed, run_id=run_id, effects=effects,
                        run_started=started, parallelism=allowed_parallelism(typed, len(ring.nodes)),
                        run_total=total, done_before=done_before,
                        next_window=self._next_window(windows, store, kind, keyspaces),
                    )  # fmt: skip
                    done_before += len(result.outcomes)
                    kind_counts.update(o.state.value for o in result.outcomes)
                    failed.extend(f"{kind}: {o.segment.describe()}" for o in result.outcomes
                                  if o.state is SegmentState.FAILED)  # fmt: skip
                    if result.stop_reason and result.stop_reason != RING_CHANGED:
                        stop_reason = result.stop_reason
                        self._postpone_rest(windows, store, typed, run_id)
                        break
                    if result.stop_reason is None:
                        continue
                replans += 1
                self.log.warning("The ring changed since the plan: planning what is left of %s repair again on "
                                 "the new ring.", kind)  # fmt: skip
                ring = cassandra.ring()
                fingerprint = ring_fingerprint(ring, {})
                plan_id, chunks, left = self._replan(context, typed, cassandra, store, run_id, replans)
                total = done_before + left + later
                windows = self._windows(store, plan_id, chunks)
                effects.ring_changed = _ring_watch(cassandra, fingerprint, clock)
            counts.update(kind_counts)
            by_type[kind] = dict(kind_counts)
            self.log.info("Repair type %s: %s", kind, dict(kind_counts))
        self.log.info("Run: %s%s", dict(counts), f"; stopped: {stop_reason}" if stop_reason else "")
        incremental_keyspaces = sorted(keyspace for kind, keyspace in keyspaces if kind == "incremental")
        reads = incremental_keyspaces and runtime.reads_node_state
        shares = self._repaired_shares(ring, incremental_keyspaces) if reads else {}
        return {"counts": dict(counts), "types": by_type, "stop_reason": stop_reason, "failed": failed[:100],
                "failed_count": len(failed), "replans": replans, "run_seconds": runtime.run_seconds(started),
                "repaired_shares": shares}  # fmt: skip

    def _repaired_shares(self, ring: Any, keyspaces: Sequence[str]) -> dict[str, dict[str, float | int]]:
        """Each table's repaired share (`nodetool tablestats`' Percent repaired on every node, 8 at a time) at the
        end of the run, for the report and the Repair page; a node that cannot answer is left out, named."""

        def read(node: str) -> dict[str, float] | None:
            try:
                return self._client.percent_repaired(node, keyspaces)  # type: ignore[no-any-return]
            except ClusterError as error:
                self.log.warning("Repaired share of %s not read: %s", node, error)
                return None

        nodes = ring.addresses()
        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="tablestats") as pool:
            read_shares = dict(zip(nodes, pool.map(read, nodes), strict=True))
        return incremental_repaired_shares({node: found for node, found in read_shares.items() if found is not None})

    def _disk_guard(
        self, config: RepairConfig, cassandra: Any, ring: Any, back_pressure: _BackPressure, reads_node_state: bool
    ) -> DiskHeadroomGuard:
        """Incremental repair's disk-headroom guard for this run: each node's capacity read once (its own
        data_disk_usage_max_disk_size, else `data_disk_capacity`), its Load from the back-pressure reads."""
        ratio = config.repair_types.incremental.min_free_disk_ratio
        addresses = ring.addresses()
        # A runtime without node settings to read (`reads_node_state`): the configured capacity only.
        settings = data_disk_max_sizes(cassandra.session, addresses) if ratio and reads_node_state else {}
        capacities = {
            node.address: disk_capacity(node.address, node.datacenter, settings.get(node.address),
                                        config.data_disk_capacity)
            for node in ring.nodes
        }  # fmt: skip
        return DiskHeadroomGuard(ratio, capacities, back_pressure.load, self.log.warning)

    def _progress(self, store: Any, run_id: str, progress: Mapping[str, Any], plan: Mapping[str, Any]) -> None:
        """The batch's progress, each minute: stored for the Repair page and sent as live gauges."""
        store.record_run_progress(run_id, progress)
        skipped = int(plan.get("not_due", 0) or 0) + int(plan.get("exhausted", 0) or 0)
        for name, value in live_metrics(progress, skipped).items():
            Stats.gauge(f"{METRIC_PREFIX}.{name}", value)

    def _next_window(
        self, windows: Iterator[list[Segment]], store: Any, kind: str, keyspaces: set[tuple[str, str]]
    ) -> NextWindow:
        def next_window() -> tuple[list[Segment], dict[str, SegmentRecord]] | None:
            segments = next(windows, None)
            if segments is None:
                return None
            keyspaces.update((kind, s.keyspace) for s in segments)
            return segments, self._history(store, segments)

        return next_window

    def _history(self, store: Any, segments: Sequence[Segment]) -> dict[str, SegmentRecord]:
        return history_of_segments(store, segments, self._type)

    def _replan(
        self, context: Any, config: RepairConfig, cassandra: Any, store: Any, run_id: str, replans: int
    ) -> tuple[str, int, int]:
        """Plan what is still due on the current ring (segments repaired in this run are not due again) and
        store it under a plan id of its own: (plan id, chunks, due segments)."""
        ring = cassandra.ring()
        leased = {ks: "under a migration lease" for ks in store.leased_keyspaces()}
        cluster = plan_cluster(cassandra.catalog(), ring, config, leased)
        records = history_of_segments(store, cluster.segments, _of_type(config))
        fresh = {sid: r for sid, r in records.items() if not (r.run_id == run_id and r.state is SegmentState.DONE)}
        done_now = set(records) - set(fresh)
        due = select_due([s for s in cluster.segments if s.segment_id not in done_now], fresh, run_id=run_id,
                         now=cassandra.now(), config=config)  # fmt: skip
        plan_id = type_plan_id(run_id, config.session_type, replans)
        chunks = store.save_run_plan(
            plan_id, plan_chunks(due.due, PLAN_CHUNK_ROWS), ttl_seconds=history_ttl_seconds(config)
        )
        self.log.info("Re-planned on the new ring: %d segments due in %d chunks.", len(due.due), chunks)
        return plan_id, chunks, len(due.due)

    def _postpone_rest(self, windows: Iterator[list[Segment]], store: Any, config: RepairConfig, run_id: str) -> None:
        """Windows never reached (the run was stopped) stay due next run; recorded as postponed in this run."""
        for segments in windows:
            records = self._history(store, segments)
            updates = [RecordUpdate(s, _postponed(records.get(s.segment_id), s, run_id, config.session_type))
                       for s in segments]  # fmt: skip
            for i in range(0, len(updates), 500):
                store.record_repairs(updates[i : i + 500], ttl_seconds=history_ttl_seconds(config))

    _switch_file: tuple[str, int] | None = None
    _switch_value = True

    def _still_enabled(self, context: Any, config: RepairConfig) -> bool:
        """The kill switch, re-read from the configuration file between segments (parsed again only when the
        file changed: at fleet size the loop asks millions of times a night). Without a configured file the
        shipped default is the file: parsed once, not on every ask (that was most of a fleet night's CPU)."""
        path = self.config_path or os.environ.get(CONFIG_PATH_ENV) or str(DEFAULT_CONFIG_PATH)
        try:
            stamp: tuple[str, int] | None = (path, os.stat(path).st_mtime_ns)
        except OSError:
            stamp = None
        if stamp is not None and stamp == self._switch_file:
            return self._switch_value
        try:
            # The file's own `enabled: false` first: a run param the edited file now refuses must not hide it.
            file = load_config(self.config_path or os.environ.get(CONFIG_PATH_ENV) or None)
            params = context.get("params")
            self._switch_value = file.enabled and effective_config(self.config_path, params, file).enabled
            self._switch_file = stamp
            return self._switch_value
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
            self.log.warning("Repair paused from the UI by %s at %s (%s); the rest stays due.",
                             log_safe(events[0].changed_by), events[0].changed_at,
                             log_safe(events[0].reason))  # fmt: skip
            return True
        return False

    def _session(
        self, command: RepairCommand, config: RepairConfig, store: Any = None, run_id: str | None = None
    ) -> SessionResult:
        coordinator = command.coordinator
        kind = config.session_type
        with _COORDINATORS_LOCK:
            self._coordinators = self._coordinators | {coordinator}
        try:
            outcome = self._client.repair(
                coordinator, command.keyspace, command.ranges, tables=command.tables,
                flags=repair_flags(kind, config.repair_types.settings(kind)),
                hosts=command.replicas if config.ignore_dcs else (),
                timeout=config.segment_timeout.total_seconds(),
            )  # fmt: skip
        except ClusterError as error:  # timed out: the nodetool process is gone, the session may not be
            try:
                self._client.abort_repairs(coordinator)
            except ClusterError as abort_error:
                self.log.warning("%s", abort_error)
            return SessionResult(False, config.segment_timeout.total_seconds(), str(error))
        finally:
            with _COORDINATORS_LOCK:
                self._coordinators = self._coordinators - {coordinator}
        error = None if outcome.succeeded else _repair_error(outcome.output)
        found = getattr(outcome, "out_of_sync", None)
        if store is not None and found:
            self._keep_preview_finding(store, run_id, command, found, config)
        if found and kind == "preview" and config.repair_types.preview.repair_out_of_sync:
            return self._repair_found(command, config, outcome.seconds)
        return SessionResult(outcome.succeeded, outcome.seconds, error)

    def _repair_found(self, command: RepairCommand, config: RepairConfig, preview_seconds: float) -> SessionResult:
        """A full repair of a command a preview found out of sync (`repair_out_of_sync`): logged, not written
        to the full history (the full schedule is unchanged). Its failure fails the session, so it is retried."""
        self.log.warning("Repairing %s (full): the preview found it out of sync.", command.describe())
        try:
            outcome = self._client.repair(
                command.coordinator, command.keyspace, command.ranges, tables=command.tables,
                flags=repair_flags("full", config.repair_types.full),
                hosts=command.replicas if config.ignore_dcs else (), timeout=config.segment_timeout.total_seconds(),
            )  # fmt: skip
        except ClusterError as error:
            self._client.abort_repairs(command.coordinator)
            return SessionResult(False, preview_seconds + config.segment_timeout.total_seconds(), str(error))
        error = None if outcome.succeeded else _repair_error(outcome.output)
        return SessionResult(outcome.succeeded, preview_seconds + outcome.seconds, error)

    def _keep_preview_finding(
        self, store: Any, run_id: str | None, command: RepairCommand, out_of_sync: Mapping[str, int],
        config: RepairConfig,
    ) -> None:  # fmt: skip
        """What a preview found, kept for the Repair page; a store that cannot keep it does not fail the session."""
        found_at = datetime.now(UTC)
        for name, ranges in out_of_sync.items():
            keyspace, _, table = name.partition(".")
            finding = PreviewFinding(keyspace, table, tuple(command.ranges), ranges, found_at, run_id,
                                     command.coordinator)  # fmt: skip
            self.log.warning(
                "Preview: %d range(s) of %s out of sync among %s", ranges, name, ", ".join(command.replicas)
            )
            try:
                store.record_preview(finding, ttl_seconds=history_ttl_seconds(config))
            except Exception as error:  # the finding is in the log line above
                self.log.warning("Preview finding not stored (%s): %s", type(error).__name__, error)

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
                try:
                    self._client.abort_repairs(coordinator)
                except ClusterError as error:
                    self.log.warning("%s", error)
        return True


def _never_refused(command: RepairCommand) -> str | None:
    return None


def _session_of(operator: RepairRunOperator, config: RepairConfig, store: Any, run_id: str) -> Any:
    """The executor's `repair` for sessions of `config`'s type."""
    return lambda command: operator._session(command, config, store, run_id)


def _finding_keeper(operator: RepairRunOperator, config: RepairConfig, store: Any, run_id: str) -> Any:
    """Keeps what a session of the runtime's own pool found out of sync, as `_session` keeps a nodetool preview's."""

    def keep(command: RepairCommand, found: Mapping[str, int]) -> None:
        if found:
            operator._keep_preview_finding(store, run_id, command, found, config)

    return keep


def _type_plans(
    reference: Mapping[str, Any], config: RepairConfig, run_id: str
) -> list[tuple[RepairType, str, int, int]]:
    """The stored plans the plan task left, in run order: (type, plan id, chunks, due segments). A reference
    without types (a plan made before several types ran in one night) is one plan of the run's type."""
    types = reference.get("types")
    if types is None:
        return [(config.session_type, run_id, int(reference.get("chunks") or 0), int(reference.get("due") or 0))]
    return [(_KINDS[kind], str(plan_id), int(chunks), int(due)) for kind, plan_id, chunks, due in types]


_KINDS: dict[str, RepairType] = {kind: kind for kind in REPAIR_TYPES}


def _postponed(record: SegmentRecord | None, segment: Segment, run_id: str, repair_type: str = "full") -> SegmentRecord:
    base = record or SegmentRecord(segment.segment_id, repair_type=repair_type)
    return SegmentRecord(
        segment.segment_id, SegmentState.POSTPONED, base.last_success, base.last_full_success,
        base.attempts_in(run_id), base.last_error, base.duration, run_id, base.repair_type,
    )  # fmt: skip


def _of_type(config: RepairConfig) -> dict[str, str]:
    """The store's history arguments for the config's type (`_history_args`)."""
    return _history_args(config.session_type)


def history_of_segments(
    store: Any, segments: Sequence[Segment], type_args: Mapping[str, str]
) -> dict[str, SegmentRecord]:
    """The records of `segments` only, read from the history partitions their ranges fall in (never a scan of
    the whole history table: at fleet size that is millions of rows across every node)."""
    units: dict[tuple[str, tuple[str, ...]], tuple[set[int], dict[tuple[int, int], str]]] = {}
    for segment in segments:
        buckets, ids = units.setdefault((segment.keyspace, segment.tables), (set(), {}))
        buckets.add(history_bucket(segment.range.start))
        ids[segment.range.start, segment.range.end] = segment.segment_id
    records: dict[str, SegmentRecord] = {}
    for (keyspace, tables), (buckets, ids) in units.items():
        records.update(store.records_of(keyspace, tables, buckets, ids, **type_args))
    return records


def _history_args(kind: str) -> dict[str, str]:
    """The store's history arguments for one type: none for full (the history every store has)."""
    return {} if kind == "full" else {"repair_type": kind}


def _repair_error(output: str) -> str:
    """The line of nodetool's output that says why the repair failed (not the Java stack trace)."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith(("\t", " "))]
    reasons = [line for line in lines if line.startswith("error:") or "failed with error" in line]
    return (reasons[0] if reasons else " | ".join(lines[-3:]) or "nodetool repair failed")[-1500:]


_COORDINATORS_LOCK = threading.Lock()


class _Every:
    """`read()`, called again only once `seconds` have passed on `clock` (the runtime's `monotonic`)."""

    def __init__(self, seconds: float, read: Any, clock: Any = time.monotonic) -> None:
        self._seconds = seconds
        self._read = read
        self._now = clock
        self._at = -float("inf")
        self._value: Any = None

    def __call__(self) -> Any:
        now = self._now()
        if now - self._at >= self._seconds:
            self._value = self._read()
            self._at = now
        return self._value


def _ring_watch(cassandra: Any, fingerprint: str | None, clock: Any) -> _Every:
    """Whether the ring moved away from `fingerprint`, looked at once a minute."""
    return _Every(60.0, lambda: fingerprint is not None and ring_fingerprint(cassandra.ring(), {}) != fingerprint,
                  clock)  # fmt: skip


class _BackPressure:
    """Why a command must wait (a participant under back-pressure), from each node's backlog read at most
    every `ttl` seconds; a node whose backlog cannot be read is not held back (its sessions still run).
    SSTables are counted in the run's `keyspaces` only (the plan's; none: every keyspace)."""

    def __init__(
        self, client: Any, config: RepairConfig, clock: Any = time.monotonic, ttl: float = 300.0,
        keyspaces: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self._client = client
        self._keyspaces = tuple(keyspaces)
        self._config = config
        self._reads: dict[str, _Every] = {}
        self._clock = clock
        self._ttl = ttl

    def _backlog(self, node: str) -> NodeBacklog:
        try:
            return self._client.backlog(node, self._keyspaces)  # type: ignore[no-any-return]
        except ClusterError:
            return NodeBacklog()

    def _read(self, node: str) -> _Every:
        read = self._reads.get(node)
        if read is None:
            read = self._reads[node] = _Every(self._ttl, lambda: self._backlog(node), self._clock)
        return read

    def prefetch(self, nodes: Sequence[str]) -> None:
        """Read every node's backlog now, 16 at a time, before the run's window starts counting."""
        with ThreadPoolExecutor(max_workers=16, thread_name_prefix="backlog") as pool:
            list(pool.map(lambda node: self._read(node)(), nodes))

    def load(self, node: str) -> int | None:
        """The node's data size (its Load) as last read, for the disk-headroom guard; None when unreadable."""
        return self._read(node)().load_bytes

    def __call__(self, command: RepairCommand) -> str | None:
        for node in command.replicas:
            reason = back_pressure_reason(node, self._read(node)(), self._config)
            if reason is not None:
                return reason
        return None


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
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.repair_task_id = repair_task_id
        self.cassandra_conn_id = cassandra_conn_id

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
                run_id=context["run_id"], store=StoreAdapter(cassandra.ops_store()), cluster=ClusterAdapter(cassandra),
                run_started=started, log=self.log, gauge=_gauge,
            )  # fmt: skip
        except RepairError as error:  # segments failed: fails the run (and fires the notifier), not retried
            raise AirflowFailException(str(error)) from None
        finally:
            cassandra.close()
        return report.to_json()


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
