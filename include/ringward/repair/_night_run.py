"""The night's repair, `run_night`: every type's stored plan, window by window, through the executor (`run_batch`),
over ports. The kill and pause switches, who is up, the backlogs and the ring are read again during the run; if the
ring changed since the plan, what is left is planned again on the new ring. IO comes in through the ports.
"""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from ringward.errors import ClusterError
from ringward.repair._backpressure import NodeBacklog, back_pressure_reason
from ringward.repair._config import RepairConfig
from ringward.repair._executor import (
    RING_CHANGED,
    BatchEffects,
    NextWindow,
    RecordUpdate,
    SessionResult,
    run_batch,
)
from ringward.repair._headroom import DiskHeadroomGuard, disk_capacity
from ringward.repair._night import history_ttl_seconds, live_nodes, plan_chunks
from ringward.repair._night_records import NightOutcome, NightPlan, NightPlanReference
from ringward.repair._ops_rows import PreviewFinding
from ringward.repair._payload import decode_segment
from ringward.repair._ports import ClusterView, Gauge, NightLog, NightRuntime, Nodetool, RunProgress, RunStore
from ringward.repair._run import live_metrics, select_due
from ringward.repair._scheduler import allowed_parallelism
from ringward.repair._segments import RepairCommand, Segment
from ringward.repair._state import SegmentRecord, SegmentState, ring_fingerprint
from ringward.repair._types import incremental_repaired_shares, repair_flags, type_plan_id
from ringward.text import log_safe

__all__ = ["Sessions", "paused", "record_progress", "repair_error_line", "repaired_shares", "run_night"]


def repair_error_line(output: str) -> str:
    """The line of nodetool's output that says why the repair failed (not the Java stack trace)."""
    lines = [line.strip() for line in output.splitlines() if line.strip() and not line.startswith(("\t", " "))]
    reasons = [line for line in lines if line.startswith("error:") or "failed with error" in line]
    return (reasons[0] if reasons else " | ".join(lines[-3:]) or "nodetool repair failed")[-1500:]


class Every:
    """`read()`, called again only once `seconds` have passed on `clock` (the runtime's `monotonic`)."""

    def __init__(self, seconds: float, read: Callable[[], Any], clock: Callable[[], float]) -> None:
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


class BackPressure:
    """Why a command must wait (a participant under back-pressure), from each node's backlog read at most
    every `ttl` seconds; a node whose backlog cannot be read is not held back (its sessions still run).
    SSTables are counted in the run's `keyspaces` only (the plan's; none: every keyspace)."""

    def __init__(
        self, nodetool: Nodetool, config: RepairConfig, clock: Callable[[], float], ttl: float = 300.0,
        keyspaces: Sequence[str] = (),
    ) -> None:  # fmt: skip
        self._nodetool = nodetool
        self._keyspaces = tuple(keyspaces)
        self._config = config
        self._reads: dict[str, Every] = {}
        self._clock = clock
        self._ttl = ttl

    def _backlog(self, node: str) -> NodeBacklog:
        try:
            return self._nodetool.backlog(node, self._keyspaces)
        except ClusterError:
            return NodeBacklog()

    def _read(self, node: str) -> Every:
        read = self._reads.get(node)
        if read is None:
            read = self._reads[node] = Every(self._ttl, lambda: self._backlog(node), self._clock)
        return read

    def prefetch(self, nodes: Sequence[str]) -> None:
        """Read every node's backlog now, 16 at a time, before the run's window starts counting."""
        with ThreadPoolExecutor(max_workers=16, thread_name_prefix="backlog") as pool:
            list(pool.map(lambda node: self._read(node)(), nodes))

    def load(self, node: str) -> int | None:
        """The node's data size (its Load) as last read, for the disk-headroom guard; None when unreadable."""
        backlog: NodeBacklog = self._read(node)()
        return backlog.load_bytes

    def __call__(self, command: RepairCommand) -> str | None:
        for node in command.replicas:
            reason = back_pressure_reason(node, self._read(node)(), self._config)
            if reason is not None:
                return reason
        return None


class Sessions:
    """The night's repair sessions through nodetool: each one a `nodetool repair` of a command with its type's
    flags, aborted on its coordinator when it times out; what a preview finds is kept. Once the task is killed
    (`stop_if_killed`), nodetool is stopped and the running sessions are aborted, once."""

    def __init__(self, nodetool: Nodetool, store: RunStore, run_id: str, log: NightLog, now: Callable[[], datetime]):
        self.nodetool = nodetool
        self.store = store
        self.run_id = run_id
        self.log = log
        self.now = now
        self.coordinators: frozenset[str] = frozenset()
        self.aborted = False
        self._lock = threading.Lock()

    def session(self, command: RepairCommand, config: RepairConfig) -> SessionResult:
        coordinator = command.coordinator
        kind = config.session_type
        with self._lock:
            self.coordinators = self.coordinators | {coordinator}
        try:
            outcome = self.nodetool.repair(
                coordinator, command.keyspace, command.ranges, tables=command.tables,
                flags=repair_flags(kind, config.repair_types.settings(kind)),
                hosts=command.replicas if config.ignore_dcs else (),
                timeout=config.segment_timeout.total_seconds(),
            )  # fmt: skip
        except ClusterError as error:  # timed out: the nodetool process is gone, the session may not be
            try:
                self.nodetool.abort_repairs(coordinator)
            except ClusterError as abort_error:
                self.log.warning("%s", abort_error)
            return SessionResult(False, config.segment_timeout.total_seconds(), str(error))
        finally:
            with self._lock:
                self.coordinators = self.coordinators - {coordinator}
        reason = None if outcome.succeeded else repair_error_line(outcome.output)
        found = outcome.out_of_sync
        if found:
            self.keep_finding(command, found, config)
        if found and kind == "preview" and config.repair_types.preview.repair_out_of_sync:
            return self._repair_found(command, config, outcome.seconds)
        return SessionResult(outcome.succeeded, outcome.seconds, reason)

    def _repair_found(self, command: RepairCommand, config: RepairConfig, preview_seconds: float) -> SessionResult:
        """A full repair of a command a preview found out of sync (`repair_out_of_sync`): logged, not written
        to the full history (the full schedule is unchanged). Its failure fails the session, so it is retried."""
        self.log.warning("Repairing %s (full): the preview found it out of sync.", command.describe())
        try:
            outcome = self.nodetool.repair(
                command.coordinator, command.keyspace, command.ranges, tables=command.tables,
                flags=repair_flags("full", config.repair_types.full),
                hosts=command.replicas if config.ignore_dcs else (), timeout=config.segment_timeout.total_seconds(),
            )  # fmt: skip
        except ClusterError as error:
            self.nodetool.abort_repairs(command.coordinator)
            return SessionResult(False, preview_seconds + config.segment_timeout.total_seconds(), str(error))
        reason = None if outcome.succeeded else repair_error_line(outcome.output)
        return SessionResult(outcome.succeeded, preview_seconds + outcome.seconds, reason)

    def keep_finding(self, command: RepairCommand, out_of_sync: Mapping[str, int], config: RepairConfig) -> None:
        """What a preview found, kept for the Repair page; a store that cannot keep it does not fail the session."""
        found_at = self.now()
        for name, ranges in out_of_sync.items():
            keyspace, _, table = name.partition(".")
            self.log.warning(
                "Preview: %d range(s) of %s out of sync among %s", ranges, name, ", ".join(command.replicas)
            )
            try:
                finding = PreviewFinding(keyspace, table, tuple(command.ranges), ranges, found_at, self.run_id,
                                         command.coordinator)  # fmt: skip
                self.store.record_preview(finding, ttl_seconds=history_ttl_seconds(config))
            except Exception as error:  # the finding is in the log line above
                self.log.warning("Preview finding not stored (%s): %s", type(error).__name__, error)

    def stop_if_killed(self, killed: Callable[[], bool]) -> bool:
        """Polled by the batch loop between waits: once killed, stop nodetool and abort running sessions."""
        if not killed():
            return False
        if not self.aborted:
            self.aborted = True
            self.log.warning("Task killed: stopping nodetool and aborting sessions on %s", sorted(self.coordinators))
            self.nodetool.terminate_all()
            for coordinator in sorted(self.coordinators):
                try:
                    self.nodetool.abort_repairs(coordinator)
                except ClusterError as error:
                    self.log.warning("%s", error)
        return True


def paused(store: RunStore, log: NightLog) -> bool:
    """The pause switch of the ringward UI (ringward_ops.repair_switch), read between segments."""
    try:
        events = store.switch_events(limit=1)
    except Exception as error:  # an unreadable switch must not stop a repair nobody paused
        log.warning("Pause switch unreadable now (%s); carrying on.", error)
        return False
    if events and events[0].paused:
        log.warning("Repair paused from the UI by %s at %s (%s); the rest stays due.",
                    log_safe(events[0].changed_by), events[0].changed_at, log_safe(events[0].reason))  # fmt: skip
        return True
    return False


def record_progress(store: RunProgress, run_id: str, progress: Mapping[str, Any], skipped: int, gauge: Gauge) -> None:
    """The batch's progress, each minute: stored for the Repair page and sent as live gauges (`skipped`: the
    segments the plan left out)."""
    store.record_run_progress(run_id, progress)
    for name, value in live_metrics(progress, skipped).items():
        gauge(name, value)


def _postponed(record: SegmentRecord | None, segment: Segment, run_id: str, repair_type: str = "full") -> SegmentRecord:
    base = record or SegmentRecord(segment.segment_id, repair_type=repair_type)
    return SegmentRecord(
        segment.segment_id, SegmentState.POSTPONED, base.last_success, base.last_full_success,
        base.attempts_in(run_id), base.last_error, base.duration, run_id, base.repair_type,
    )  # fmt: skip


def _never_refused(command: RepairCommand) -> str | None:
    return None


class _Night:
    """One run of `run_night`: its ports and the state the loop over the types shares."""

    def __init__(
        self, config: RepairConfig, run_id: str, store: RunStore, cluster: ClusterView, log: NightLog,
        window_chunks: int, chunk_rows: int,
    ) -> None:  # fmt: skip
        self.config = config
        self.run_id = run_id
        self.store = store
        self.cluster = cluster
        self.log = log
        self.window_chunks = window_chunks
        self.chunk_rows = chunk_rows

    def windows(self, plan_id: str, chunks: int) -> Iterator[list[Segment]]:
        for first in range(0, chunks, self.window_chunks):
            rows = [row for c in range(first, min(chunks, first + self.window_chunks))
                    for row in self.store.run_plan_chunk(plan_id, c)]  # fmt: skip
            yield [decode_segment(json.loads(row)) for row in rows]

    def next_window(self, windows: Iterator[list[Segment]], kind: str, keyspaces: set[tuple[str, str]]) -> NextWindow:
        def next_window() -> tuple[list[Segment], dict[str, SegmentRecord]] | None:
            segments = next(windows, None)
            if segments is None:
                return None
            keyspaces.update((kind, s.keyspace) for s in segments)
            return segments, self.store.segment_records(segments, kind)

        return next_window

    def postpone_rest(self, windows: Iterator[list[Segment]], config: RepairConfig) -> None:
        """Windows never reached (the run was stopped) stay due next run; recorded as postponed in this run."""
        kind = config.session_type
        for segments in windows:
            records = self.store.segment_records(segments, kind)
            updates = [RecordUpdate(s, _postponed(records.get(s.segment_id), s, self.run_id, kind)) for s in segments]
            for i in range(0, len(updates), 500):
                self.store.record_repairs(updates[i : i + 500], ttl_seconds=history_ttl_seconds(config))

    def replan(self, config: RepairConfig, replans: int) -> tuple[str, int, int]:
        """Plan what is still due on the current ring (segments repaired in this run are not due again) and
        store it under a plan id of its own: (plan id, chunks, due segments)."""
        ring = self.cluster.ring()
        leased = {ks: "under a migration lease" for ks in self.store.leased_keyspaces()}
        planned = self.cluster.plan(ring, config, leased)
        records = self.store.segment_records(planned.segments, config.session_type)
        fresh = {sid: r for sid, r in records.items()
                 if not (r.run_id == self.run_id and r.state is SegmentState.DONE)}  # fmt: skip
        done_now = set(records) - set(fresh)
        due = select_due([s for s in planned.segments if s.segment_id not in done_now], fresh, run_id=self.run_id,
                         now=self.cluster.now(), config=config, gc_grace=planned.gc_grace)  # fmt: skip
        plan_id = type_plan_id(self.run_id, config.session_type, replans)
        chunks = self.store.save_run_plan(
            plan_id, plan_chunks(due.due, self.chunk_rows), ttl_seconds=history_ttl_seconds(config)
        )
        self.log.info("Re-planned on the new ring: %d segments due in %d chunks.", len(due.due), chunks)
        return plan_id, chunks, len(due.due)


def _ring_watch(cluster: ClusterView, fingerprint: str | None, clock: Callable[[], float]) -> Every:
    """Whether the ring moved away from `fingerprint`, looked at once a minute."""
    return Every(60.0, lambda: fingerprint is not None and ring_fingerprint(cluster.ring(), {}) != fingerprint, clock)


def repaired_shares(
    nodetool: Nodetool, nodes: Sequence[str], keyspaces: Sequence[str], log: NightLog
) -> dict[str, dict[str, float | int]]:
    """Each table's repaired share (`nodetool tablestats`' Percent repaired on every node, 8 at a time) at the
    end of the run, for the report and the Repair page; a node that cannot answer is left out, named."""

    def read(node: str) -> Mapping[str, float] | None:
        try:
            return nodetool.percent_repaired(node, keyspaces)
        except ClusterError as error:
            log.warning("Repaired share of %s not read: %s", node, error)
            return None

    with ThreadPoolExecutor(max_workers=8, thread_name_prefix="tablestats") as pool:
        read_shares = dict(zip(nodes, pool.map(read, nodes), strict=True))
    return incremental_repaired_shares({node: found for node, found in read_shares.items() if found is not None})


def _disk_guard(
    config: RepairConfig, cluster: ClusterView, ring_nodes: Sequence[Any], back_pressure: BackPressure,
    reads_node_state: bool, log: NightLog,
) -> DiskHeadroomGuard:  # fmt: skip
    """Incremental repair's disk-headroom guard for this run: each node's capacity read once (its own
    data_disk_usage_max_disk_size, else `data_disk_capacity`), its Load from the back-pressure reads."""
    ratio = config.repair_types.incremental.min_free_disk_ratio
    addresses = [node.address for node in ring_nodes]
    # A runtime without node settings to read (`reads_node_state`): the configured capacity only.
    settings = cluster.disk_max_sizes(addresses) if ratio and reads_node_state else {}
    capacities = {
        node.address: disk_capacity(node.address, node.datacenter, settings.get(node.address),
                                    config.data_disk_capacity)
        for node in ring_nodes
    }  # fmt: skip
    return DiskHeadroomGuard(ratio, capacities, back_pressure.load, log.warning)


def run_night(
    reference: NightPlanReference,
    plan: NightPlan,
    config: RepairConfig,
    *,
    run_id: str,
    store: RunStore,
    cluster: ClusterView,
    nodetool: Nodetool,
    runtime: NightRuntime,
    still_enabled: Callable[[], bool],
    killed: Callable[[], bool],
    log: NightLog,
    gauge: Gauge,
    window_chunks: int,
    chunk_rows: int,
    progressed: Callable[[str, Mapping[str, Any]], None] | None = None,
) -> NightOutcome:
    """Repair every type's stored plan (`reference`, in run order), one type after another in one window.

    Reads each plan `window_chunks` chunks at a time with the history of the partitions they touch, and runs them
    through the executor (a node in one session at a time, held back under back-pressure, waiting for nodes that
    are down). If the ring changed since the plan, what is left is planned again on the new ring. A type stopped
    early (window closed, kill or pause switch, `killed`) leaves its rest and the later types postponed. Live
    progress goes to ringward_ops.repair_progress and to the live gauges. `still_enabled`: the kill switch as the
    configuration file says now; `killed`: whether the task was killed (its sessions are then aborted);
    `progressed`: each progress record too, with the repair type being run (the tagged live metrics).
    """
    night = _Night(config, run_id, store, cluster, log, window_chunks, chunk_rows)
    ring = cluster.ring()
    clock = runtime.monotonic
    total = reference.due
    pause = Every(2.0, lambda: paused(store, log), clock)
    back_pressure = BackPressure(nodetool, config, clock, keyspaces=plan.keyspaces)
    back_pressure.prefetch(ring.addresses())
    sessions = Sessions(nodetool, store, run_id, log, runtime.now)
    skipped = plan.not_due + plan.exhausted

    effects = BatchEffects(
        save=lambda updates: store.record_repairs(updates, ttl_seconds=history_ttl_seconds(config)),
        # Who is up, looked at every 15 s at most: each look costs a nodetool JVM start.
        live_nodes=Every(15.0, lambda: live_nodes(nodetool, ring.addresses()), clock),
        # The kill switch (the file, when it changed) between segments; the pause switch (a CQL read) every 2 s.
        enabled=lambda: still_enabled() and not pause(),
        stop_requested=lambda: sessions.stop_if_killed(killed),
        log=log.info,
        held_back=back_pressure,
        progress=lambda report: _progressed(report),
        now=runtime.now,
        sleep=runtime.sleep,
    )
    # A runtime's own session pool hands back what a preview found; the type being run says how to keep it.
    keeping: list[RepairConfig | None] = [None]
    running_type = [config.session_type]

    def _progressed(report: Mapping[str, Any]) -> None:
        record_progress(store, run_id, report, skipped, gauge)
        if progressed is not None:
            progressed(running_type[0], report)

    def keep_finding(command: RepairCommand, found: Mapping[str, int]) -> None:
        typed = keeping[0]
        if typed is not None and found:
            sessions.keep_finding(command, found, typed)

    effects.sessions = runtime.sessions(keep_finding)
    queue = reference.type_plans(config.session_type)
    # Read before the window starts counting, as the backlogs are; only for a night with incremental repair.
    disk_guard = None
    if any(entry.repair_type == "incremental" for entry in queue):
        disk_guard = _disk_guard(config, cluster, ring.nodes, back_pressure, runtime.reads_node_state, log)
    started = effects.now()  # one window for the whole night, whatever the types
    counts: Counter[str] = Counter()
    by_type: dict[str, dict[str, int]] = {}
    failed: list[str] = []
    done_before = 0
    stop_reason = None
    replans = 0
    keyspaces: set[tuple[str, str]] = set()  # (type, keyspace) of the segments each type had planned
    stored = [(entry.plan_id, entry.chunks) for entry in queue]  # every stored plan of the run, re-plans too
    for index, entry in enumerate(queue):
        kind, plan_id, chunks = entry.repair_type, entry.plan_id, entry.chunks
        typed = config.for_type(kind)
        windows = night.windows(plan_id, chunks)
        if stop_reason is not None:  # stopped in an earlier type: this type's plan stays due next run
            night.postpone_rest(windows, typed)
            continue
        later = sum(e.due for e in queue[index + 1 :])  # the types after this one, for the progress total
        log.info("Repair type %s: %d segment(s) planned.", kind, entry.due)
        running_type[0] = kind
        effects.repair = _session_of(sessions, typed)
        effects.refused = disk_guard if kind == "incremental" and disk_guard is not None else _never_refused
        keeping[0] = typed if kind == "preview" else None
        fingerprint = reference.fingerprint  # every type's stored plan was made on the plan task's ring
        # The ring is looked at every minute during a window, and between windows.
        effects.ring_changed = _ring_watch(cluster, fingerprint, clock)
        kind_counts: Counter[str] = Counter()
        while (segments := next(windows, None)) is not None:
            keyspaces.update((kind, s.keyspace) for s in segments)
            if ring_fingerprint(cluster.ring(), {}) != fingerprint:
                segments = []  # the rest of the old plan is not run: planned again below
            else:
                # The plan's later windows join the same run as its queue runs dry: no barrier between
                # windows, and a down node's segments wait across them, not at the end of each.
                result = run_batch(
                    segments, store.segment_records(segments, kind), config=typed, run_id=run_id, effects=effects,
                    run_started=started, parallelism=allowed_parallelism(typed, len(ring.nodes)),
                    run_total=total, done_before=done_before,
                    next_window=night.next_window(windows, kind, keyspaces),
                )  # fmt: skip
                done_before += len(result.outcomes)
                kind_counts.update(o.state.value for o in result.outcomes)
                failed.extend(f"{kind}: {o.segment.describe()}" for o in result.outcomes
                              if o.state is SegmentState.FAILED)  # fmt: skip
                if result.stop_reason and result.stop_reason != RING_CHANGED:
                    stop_reason = result.stop_reason
                    night.postpone_rest(windows, typed)
                    break
                if result.stop_reason is None:
                    continue
            replans += 1
            log.warning("The ring changed since the plan: planning what is left of %s repair again on "
                        "the new ring.", kind)  # fmt: skip
            ring = cluster.ring()
            fingerprint = ring_fingerprint(ring, {})
            plan_id, chunks, left = night.replan(typed, replans)
            stored.append((plan_id, chunks))
            total = done_before + left + later
            windows = night.windows(plan_id, chunks)
            effects.ring_changed = _ring_watch(cluster, fingerprint, clock)
        counts.update(kind_counts)
        by_type[kind] = dict(kind_counts)
        log.info("Repair type %s: %s", kind, dict(kind_counts))
    log.info("Run: %s%s", dict(counts), f"; stopped: {stop_reason}" if stop_reason else "")
    if not killed():  # a killed task is retried by Airflow and reads its plan again; otherwise the run is over
        _drop_plans(store, stored, log)
    incremental_keyspaces = sorted(keyspace for kind, keyspace in keyspaces if kind == "incremental")
    reads = incremental_keyspaces and runtime.reads_node_state
    shares = repaired_shares(nodetool, ring.addresses(), incremental_keyspaces, log) if reads else {}
    return NightOutcome(dict(counts), by_type, stop_reason, tuple(failed[:100]), len(failed), replans,
                        runtime.run_seconds(started), shares)  # fmt: skip


def _drop_plans(store: RunStore, stored: Sequence[tuple[str, int]], log: NightLog) -> None:
    """Delete the run's stored plans: what they held is in the history now (repaired, failed or postponed), and
    the next night plans afresh. One that cannot be deleted now expires with its TTL."""
    for plan_id, chunks in stored:
        try:
            store.drop_run_plan(plan_id, chunks)
        except Exception as error:  # the run's outcome must not fail over its plan's clean-up
            log.warning("Plan %s not deleted (%s: %s); it expires with its TTL.", plan_id, type(error).__name__, error)


def _session_of(sessions: Sessions, config: RepairConfig) -> Callable[[RepairCommand], SessionResult]:
    """The executor's `repair` for sessions of `config`'s type."""
    return lambda command: sessions.session(command, config)
