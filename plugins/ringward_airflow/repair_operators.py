"""Operators of the nightly subrange repair DAG: plan -> repair batches -> report.

Thin by design: the decisions live in `ringward.repair` (what is due, waves, locks, retries, window,
status) and the cluster access in `ringward_cassandra`; these classes wire hooks, XCom, logs and Stats.
Constructors only store arguments; hooks are built in `execute`.
"""

from __future__ import annotations

import dataclasses
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
from ringward.assets import covered_keyspaces
from ringward.errors import ClusterError, ConfigurationError, RepairError
from ringward.repair import (
    DEFAULT_CONFIG_PATH,
    REPAIR_TYPES,
    RING_CHANGED,
    BatchEffects,
    DiskHeadroomGuard,
    DueSelection,
    NextWindow,
    NodeBacklog,
    RecordUpdate,
    RepairCommand,
    RepairConfig,
    RepairType,
    RunSummary,
    Segment,
    SegmentRecord,
    SegmentState,
    SessionResult,
    TypeDue,
    allowed_parallelism,
    apply_run_overrides,
    back_pressure_reason,
    coverage_view,
    decide_alerts,
    decode_segment,
    disk_capacity,
    dump_config,
    history_key,
    incremental_repaired_shares,
    joined_nodes,
    live_metrics,
    live_points,
    load_config,
    nightly_points,
    repair_flags,
    ring_fingerprint,
    run_batch,
    select_due,
    select_due_by_type,
    status_table,
    type_plan_id,
)
from ringward.text import log_safe
from ringward_cassandra.cluster_repairs import plan_cluster, status_records, table_statuses
from ringward_cassandra.ops_store import DEFAULT_HISTORY_TTL, PLAN_CHUNK_ROWS, PreviewFinding, history_bucket
from ringward_cassandra.schema import data_disk_max_sizes

from ringward_airflow.alerts import configured_notifiers, deliver, night_failed
from ringward_airflow.assets import REPAIRED, add_keyspace_events
from ringward_airflow.hooks import NodetoolHook, RingwardCassandraHook
from ringward_airflow.metrics import emit
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


def night_types(config: RepairConfig) -> tuple[RepairType, ...]:
    """The types tonight's run repairs, one after another in `RUN_ORDER` (full, incremental, paxos, preview);
    none enabled: full, which the disabled run plans as not due."""
    return config.enabled_types or ("full",)


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
            return self._plan(context, config, cassandra, nodetool)
        except ConfigurationError as error:  # e.g. beyond max_segments_per_plan: retrying cannot fix it
            raise AirflowFailException(str(error)) from None
        finally:
            cassandra.close()
            nodetool.close()

    def _plan(self, context: Any, config: RepairConfig, cassandra: Any, nodetool: Any) -> Any:
        run_id = context["run_id"]
        started = time.process_time()
        ring = cassandra.ring()
        store = cassandra.ops_store()
        leased = {ks: f"held by {lease.owner} ({lease.purpose})" for ks, lease in store.leased_keyspaces().items()}
        cluster = plan_cluster(cassandra.catalog(), ring, config, leased)
        for keyspace, why in cluster.excluded_keyspaces.items():
            self.log.warning("Keyspace %s skipped tonight: under a migration lease, %s", keyspace, why)
        for why in cluster.excluded_tables.values():
            self.log.warning("%s", why)
        live = _live_nodes(nodetool, ring.addresses())
        host_ids = {node.address: node.host_id for node in ring.nodes if node.host_id}
        joined = joined_nodes(host_ids, _last_host_ids(store))
        if joined and config.repair_new_nodes:
            self.log.warning("Joined since the last run, repaired tonight: %s", ", ".join(sorted(joined)))
        # Every enabled type, each on its own history and cadence, in the order the repair task runs them.
        kinds = night_types(config)
        now = cassandra.now()
        typed: list[TypeDue] = []
        clusters = {"incremental": cluster} if config.session_type == "incremental" else {"other": cluster}
        for kind in kinds:
            group = "incremental" if kind == "incremental" else "other"
            if group not in clusters:  # incremental leaves out tables with views or CDC: a cluster plan of its own
                clusters[group] = plan_cluster(cassandra.catalog(), ring, config.for_type(kind), leased)
                for why in clusters[group].excluded_tables.values():
                    self.log.warning("%s", why)
            segments = clusters[group].segments
            history = history_of_segments(store, segments, _history_args(kind))
            keyed = history if kind == "full" else {history_key(sid, kind): record for sid, record in history.items()}
            found = select_due_by_type(
                segments, keyed, run_id=run_id,
                now=now, config=config, joined=joined, types=[kind],
            )  # fmt: skip
            typed.extend(found or [TypeDue(kind, config.for_type(kind), DueSelection((), tuple(segments), ()), 0)])
        types: dict[str, dict[str, Any]] = {}
        for item in typed:
            plan_id = type_plan_id(run_id, item.repair_type)
            chunks = store.save_run_plan(plan_id, _chunks(item.selection.due), ttl_seconds=_ttl(config))
            types[item.repair_type] = {
                "plan_id": plan_id,
                "chunks": chunks,
                "due": len(item.selection.due),
                "not_due": len(item.selection.not_due),
                "exhausted": len(item.selection.exhausted),
                "forced": item.forced,
                "segments": len(item.selection.due) + len(item.selection.not_due) + len(item.selection.exhausted),
            }
            self.log.info("Plan of %s repair: %d due in %d chunks, %d not due, %d with retries used up.",
                          item.repair_type, types[item.repair_type]["due"], chunks,
                          types[item.repair_type]["not_due"], types[item.repair_type]["exhausted"])  # fmt: skip
        down = sorted(set(ring.addresses()) - live)

        def total(name: str) -> int:
            return sum(int(entry[name]) for entry in types.values())

        plan = {
            "run_id": run_id,
            "enabled": config.enabled,
            "fingerprint": ring_fingerprint(ring, {}),
            "parallelism": allowed_parallelism(config, len(ring.nodes)),
            "segments": total("segments"),  # segment x type: a segment planned for two types counts twice
            "due": total("due"),
            "chunks": total("chunks"),
            "exhausted": total("exhausted"),
            "not_due": total("not_due"),
            "skipped_ranges": len(cluster.skipped_ranges),
            "skipped_keyspaces": dict(cluster.excluded_keyspaces),
            "keyspaces": sorted({keyspace for c in clusters.values() for keyspace in c.gc_grace}),
            "skipped_tables": {k: v for c in clusters.values() for k, v in c.excluded_tables.items()},
            "down_nodes": down,
            "planning_cpu_seconds": round(time.process_time() - started, 2),
            "config": dump_config(config),
            "repair_type": ",".join(types),
            "repair_types": list(types),
            "types": types,
            "host_ids": host_ids,
            "forced": total("forced"),
        }
        if not config.enabled:
            self.log.warning("Repair is disabled (enabled: false): nothing runs tonight.")
        if down:
            self.log.warning("Down now: %s; their segments wait for them during the run.", ", ".join(down))
        self.log.info(
            "Plan: %(segments)d segments, %(due)d due in %(chunks)d stored chunks (parallelism %(parallelism)d), "
            "%(not_due)d not due, %(exhausted)d with retries used up; %(planning_cpu_seconds).1f s CPU",
            plan,
        )
        context["ti"].xcom_push(key=SUMMARY_KEY, value=plan)
        reference = {key: plan[key] for key in ("run_id", "chunks", "due", "fingerprint")}
        # A small reference whatever the ring: per type (in run order) its stored plan, chunks and due count.
        reference["types"] = [[kind, entry["plan_id"], entry["chunks"], entry["due"]] for kind, entry in types.items()]
        return reference


def _last_host_ids(store: Any) -> list[str]:
    """Host ids of the ring the last recorded run planned on (none recorded: nothing counts as joined)."""
    try:
        last = store.latest_repair_run()
    except Exception:  # an unreadable run record must not stop tonight's plan; nobody counts as joined
        return []
    ids = (last.summary.get("host_ids") if last is not None else None) or {}
    return [str(value) for value in ids.values()] if isinstance(ids, Mapping) else []


def _chunks(segments: Sequence[Segment]) -> list[list[str]]:
    """The segments as `encode_segment` JSON, in chunks of PLAN_CHUNK_ROWS. A fleet's plan repeats a few
    keyspaces, table lists and replica sets millions of times: each is encoded once (a third of the cost of
    `json.dumps` per segment)."""
    texts: dict[object, str] = {}

    def text(value: str | tuple[str, ...]) -> str:
        found = texts.get(value)
        if found is None:
            found = texts[value] = json.dumps(value if isinstance(value, str) else list(value), separators=(",", ":"))
        return found

    def addresses(replicas: tuple[str, ...]) -> str:
        # Nearly every replica set of a vnode ring is its own: written directly when no character needs escaping.
        raw = "".join(replicas)
        if '"' in raw or "\\" in raw or not raw.isprintable() or not raw.isascii():
            return json.dumps(list(replicas), separators=(",", ":"))
        return '["' + '","'.join(replicas) + '"]' if replicas else "[]"

    encoded = [
        f"[{text(s.keyspace)},{text(s.tables)},{s.range.start},{s.range.end},{addresses(s.replicas)}]" for s in segments
    ]
    return [encoded[i : i + PLAN_CHUNK_ROWS] for i in range(0, len(encoded), PLAN_CHUNK_ROWS)]


def _ttl(config: RepairConfig) -> int:
    ttl = getattr(config, "history_ttl", None)
    return int(ttl.total_seconds()) if ttl is not None else DEFAULT_HISTORY_TTL


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
            save=lambda updates: store.record_repairs(updates, ttl_seconds=_ttl(config)),
            # Who is up, looked at every 15 s at most: each look costs a nodetool JVM start.
            live_nodes=_Every(15.0, lambda: _live_nodes(self._client, ring.addresses()), clock),
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
        emit(live_points(self.cassandra_conn_id, self._type.get("repair_type", "full"), progress))  # tagged metrics

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
        chunks = store.save_run_plan(plan_id, _chunks(due.due), ttl_seconds=_ttl(config))
        self.log.info("Re-planned on the new ring: %d segments due in %d chunks.", len(due.due), chunks)
        return plan_id, chunks, len(due.due)

    def _postpone_rest(self, windows: Iterator[list[Segment]], store: Any, config: RepairConfig, run_id: str) -> None:
        """Windows never reached (the run was stopped) stay due next run; recorded as postponed in this run."""
        for segments in windows:
            records = self._history(store, segments)
            updates = [RecordUpdate(s, _postponed(records.get(s.segment_id), s, run_id, config.session_type))
                       for s in segments]  # fmt: skip
            for i in range(0, len(updates), 500):
                store.record_repairs(updates[i : i + 500], ttl_seconds=_ttl(config))

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
                store.record_preview(finding, ttl_seconds=_ttl(config))
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
        alert_notifiers: Sequence[BaseNotifier] | None = None,  # None: ringward_airflow.alerts.configured_notifiers
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.config_path = config_path
        self.plan_task_id = plan_task_id
        self.repair_task_id = repair_task_id
        self.cassandra_conn_id = cassandra_conn_id
        self.alert_notifiers = alert_notifiers

    def execute(self, context: Any) -> dict[str, Any]:
        plan = context["ti"].xcom_pull(task_ids=self.plan_task_id, key=SUMMARY_KEY)
        if not plan:
            raise AirflowFailException("The plan task left no plan: nothing to report. Fix the plan task first.")
        config = _config_or_fail(self.config_path, context.get("params"))
        cassandra = current_runtime().cassandra(self.cassandra_conn_id)
        try:
            return self._report(context, plan, config, cassandra)
        finally:
            cassandra.close()

    def _report(self, context: Any, plan: Mapping[str, Any], config: RepairConfig, cassandra: Any) -> dict[str, Any]:
        run_id = context["run_id"]
        now = cassandra.now()
        store = cassandra.ops_store()
        ring = cassandra.ring()
        rows = store.repair_history()
        cluster = plan_cluster(cassandra.catalog(), ring, config, plan.get("skipped_keyspaces"))
        type_plans: Mapping[str, Mapping[str, Any]] = plan.get("types") or {config.session_type: plan}
        per_type: dict[str, dict[str, Any]] = {}
        summaries: dict[str, RunSummary] = {}
        coverages: dict[str, list[Any]] = {}  # each type's table statuses, for the tagged metrics
        for kind in type_plans:
            typed = config.for_type(_KINDS[kind])
            kind_rows = rows if kind == "full" else store.repair_history(**_history_args(kind))
            # Each type's coverage from its own successes (full's rows are read as they are: no copy at fleet size).
            covered_rows = kind_rows if kind == "full" else [
                dataclasses.replace(r, record=coverage_view(r.record)) for r in kind_rows
            ]  # fmt: skip
            summaries[kind] = run_summary(type_plans[kind], [r.record for r in kind_rows if r.record.run_id == run_id])
            kind_cluster = cluster
            if (kind == "incremental") != (config.session_type == "incremental"):  # the type's own tables
                kind_cluster = plan_cluster(cassandra.catalog(), ring, typed, plan.get("skipped_keyspaces"))
            coverage = table_statuses(
                kind_cluster, status_records(kind_cluster, covered_rows), now, config.gc_grace_alarm
            )
            coverages[kind] = coverage
            per_type[kind] = {
                "state": summaries[kind].state.value,
                "metrics": summaries[kind].metrics(),
                # A preview's share is of ranges compared, never of ranges repaired.
                "previewed" if kind == "preview" else "repaired": {
                    f"{s.keyspace}.{s.table}": s.repaired_percent for s in coverage
                },
            }
            if kind == "preview":
                per_type[kind]["out_of_sync_findings"] = self._findings_of(store, run_id)
            if kind == "incremental":  # its tables' repaired/unrepaired split, as the repair task read it at its end
                shares = (context["ti"].xcom_pull(task_ids=self.repair_task_id) or {}).get("repaired_shares") or {}
                per_type[kind]["repaired_share"] = {t: v for t, v in shares.items() if t in per_type[kind]["repaired"]}
            for name, value in summaries[kind].metrics().items():
                Stats.gauge(f"{METRIC_PREFIX}.{kind}.{name}", value)
        # The run's segment counts are of the repairs: a preview never counts as a repair. Its state (and
        # failures) takes every type, the preview's too.
        repairs = [s for kind, s in summaries.items() if kind != "preview"]
        summary = RunSummary({state: sum(s.counts[state] for s in repairs) for state in SegmentState})
        overall = RunSummary({state: sum(s.counts[state] for s in summaries.values()) for state in SegmentState})
        records = status_records(cluster, rows)  # repairs recorded under any splitter count
        statuses = table_statuses(cluster, records, now, config.gc_grace_alarm)
        metrics = {
            **summary.metrics(),
            "LongestUnrepairedSec": longest_unrepaired_seconds(cluster.segments, records, now),
            "ClusterRepairTimeInSec": round(_run_seconds(context, now, self.repair_task_id)),
        }
        for name, value in metrics.items():
            Stats.gauge(f"{METRIC_PREFIX}.{name}", value)
        # A run stopped by the kill switch from the start repaired nothing on purpose: say so, not DONE.
        state = overall.state.value if plan.get("enabled", True) else "DISABLED"
        report = {
            "run_id": run_id,
            "state": state,
            "metrics": metrics,
            "skipped_keyspaces": plan.get("skipped_keyspaces", {}),
            "repair_type": plan.get("repair_type", "full"),
            "types": per_type,
            "host_ids": plan.get("host_ids", {}),
            "tables": {f"{s.keyspace}.{s.table}": s.repaired_percent for s in statuses},
        }
        store.record_repair_run(run_id, state, report, plan.get("config", {}))
        emit(nightly_points(self.cassandra_conn_id, state, coverages, summaries, finished=now,
                            run_seconds=metrics["ClusterRepairTimeInSec"],
                            longest_unrepaired_seconds=metrics["LongestUnrepairedSec"]))  # fmt: skip
        troubled = {"failed": overall.counts[SegmentState.FAILED], "postponed": overall.counts[SegmentState.POSTPONED]}
        alerts = decide_alerts(self.cassandra_conn_id, run_id, state, statuses, troubled)  # to the notifiers
        if alerts:
            deliver(alerts, configured_notifiers() if self.alert_notifiers is None else self.alert_notifiers, context)
        covered = covered_keyspaces(statuses)  # an asset event per keyspace covered within gc_grace
        add_keyspace_events(context, REPAIRED, self.cassandra_conn_id, covered, {"run_id": run_id, "state": state})
        self.log.info("Run %s\n%s", overall.line(), status_table(statuses))
        for kind, kind_summary in summaries.items():
            self.log.info("%s: %s", kind, kind_summary.line())
        for keyspace, why in report["skipped_keyspaces"].items():
            self.log.warning("Keyspace %s was not repaired: %s", keyspace, why)
        failed = overall.counts[SegmentState.FAILED]
        if failed:  # fails the run (and fires the notifier); retrying the report would change nothing
            error = RepairError(
                f"{failed} segment(s) failed after {config.max_retries} retries in run {run_id}.",
                "Read the repair task logs (last_error in ringward_ops.repair_history); they stay due next run.",
            )
            raise AirflowFailException(str(error))
        return report

    def _findings_of(self, store: Any, run_id: str) -> int | None:
        """How many preview findings the run kept (None: unreadable now; the findings are in the repair log)."""
        try:
            return sum(1 for finding in store.preview_findings() if finding.run_id == run_id)
        except Exception as error:  # the report must not fail over a count the log has too
            self.log.warning("Preview findings unreadable now (%s): %s", type(error).__name__, error)
            return None


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


def _run_seconds(context: Any, now: datetime, repair_task_id: str = "repair") -> float:
    measured = (context["ti"].xcom_pull(task_ids=repair_task_id) or {}).get("run_seconds")
    if measured is not None:  # the runtime's own clock timed the run (`RepairRuntime.run_seconds`)
        return float(measured)
    return _wall_seconds(context, now)


def _wall_seconds(context: Any, now: datetime) -> float:
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
        cluster = getattr(context.get("task"), "cassandra_conn_id", RingwardCassandraHook.default_conn_name)
        night_failed(context, cluster)  # outcome FAILED and the configured notifiers
