"""Running one batch of segments (Reaper's RepairRunner loop), with every side effect injected.

The loop starts a segment only when none of its replicas is busy (a running session, or the intensity
pause after one), at most `parallelism` at once, and only while the kill switch, the window and the
task allow it. Segments with the same replicas travel together, up to `ranges_per_command` per repair
command (Cassandra repairs them in one session); each keeps its own record. Failed sessions are retried
with exponential backoff until `max_retries`; a segment with a replica down is postponed to the next run.
Every state change is handed to `effects.save` at once, so a killed or retried task finds the history
where it left it.

The loop owns no threads and no clock: commands go to an injected `SessionPool` (threads running nodetool
in production, virtual time in the fleet simulator) and time comes from `effects.now`/`effects.sleep`.
It is built for fleet-size nights (millions of segments): a command waiting on a busy node costs one
look per scan, and scans stop after `_SCAN_LIMIT` waiting commands, so starting a session does not cost
O(pending). Segments with a replica down wait, indexed by the down node, and run once it is back; only
what is still blocked when nothing else is left is postponed to the next run.

A plan too large to hold at once comes in windows (`next_window`): the next one is taken when the queue runs
dry, into the same run, so a window is no barrier: sessions of the next window start while the last ones
of this window run, and segments waiting for a down node wait across windows, not at the end of each.
"""

from __future__ import annotations

import heapq
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from ringward.repair._backpressure import unit_time_exceeded
from ringward.repair._config import RepairConfig
from ringward.repair._progress import Progress
from ringward.repair._run import RunSummary
from ringward.repair._scheduler import intensity_pause, window_allows_start
from ringward.repair._segments import RepairCommand, Segment, group_segments
from ringward.repair._state import (
    SegmentRecord,
    SegmentState,
    backoff_delay,
    record_failure,
    record_start,
    record_success,
    retries_exhausted,
)

__all__ = [
    "RING_CHANGED",
    "BatchEffects",
    "BatchResult",
    "NextWindow",
    "RecordUpdate",
    "SegmentOutcome",
    "SessionPool",
    "SessionResult",
    "ThreadSessionPool",
    "run_batch",
]

_POLL_SECONDS = 0.5
_BUSY_WAIT_SECONDS = 2.0  # sessions run and none may start: wait this long for one to end (switches read after)
# Only commands for down nodes left: the kill switch, a pause and the window are read this often (who is up
# is read no more often than the caller's `live_nodes` allows: every 15 s in production).
_DOWN_NODE_POLL_SECONDS = 5.0
_MAX_IDLE_SLEEP = 5.0  # nothing runs and nothing may start yet: look again at least this often
_SCAN_LIMIT = 256  # waiting commands looked at per scan: beyond, the next scan gets its turn
_VERBOSE_UP_TO = 5000  # a line per segment for nights up to this size; beyond, a progress line a minute
_PROGRESS_EVERY = timedelta(seconds=60)
_BACK_PRESSURE_RETRY = timedelta(minutes=5)
_BACK_PRESSURE_GIVE_UP = timedelta(hours=2)  # held back this long: left for the next run, saying why
RING_CHANGED = "the ring changed: what is left is planned again"

# The plan's next segments and their history records, or None once the plan is exhausted.
NextWindow = Callable[[], tuple[Sequence[Segment], Mapping[str, SegmentRecord]] | None]


@dataclass(frozen=True)
class SessionResult:
    """What one repair session reported (the runner turns exceptions into a failed result)."""

    succeeded: bool
    seconds: float
    error: str | None = None


class SessionPool(Protocol):
    """Where repair commands run. `wait` blocks up to `timeout` seconds of the pool's own clock and returns
    the commands that finished since the last call, with their results."""

    def submit(self, command: RepairCommand) -> None: ...

    def wait(self, timeout: float) -> list[tuple[RepairCommand, SessionResult]]: ...

    def close(self) -> None: ...


class ThreadSessionPool:
    """The production pool: `repair` (one `nodetool repair` of a command) in worker threads."""

    def __init__(self, repair: Callable[[RepairCommand], SessionResult], workers: int) -> None:
        self._repair = repair
        self._pool = ThreadPoolExecutor(max_workers=max(1, workers), thread_name_prefix="repair")
        self._running: dict[Future[SessionResult], RepairCommand] = {}

    def _session(self, command: RepairCommand) -> SessionResult:
        try:
            return self._repair(command)
        except Exception as error:  # a runner bug or a lost connection must not kill the whole run
            return SessionResult(False, 0.0, f"{type(error).__name__}: {error}")

    def submit(self, command: RepairCommand) -> None:
        self._running[self._pool.submit(self._session, command)] = command

    def wait(self, timeout: float) -> list[tuple[RepairCommand, SessionResult]]:
        if not self._running:
            return []
        done, _ = wait(list(self._running), timeout=timeout, return_when=FIRST_COMPLETED)
        return [(self._running.pop(future), future.result()) for future in done]

    def close(self) -> None:
        self._pool.shutdown(wait=True)


@dataclass(frozen=True)
class SegmentOutcome:
    """A segment's final state in this batch; `started`/`finished` bound its last session."""

    segment: Segment
    state: SegmentState
    record: SegmentRecord | None
    started: datetime | None = None
    finished: datetime | None = None
    reason: str | None = None


@dataclass(frozen=True)
class RecordUpdate:
    """A segment's new history record; `started`/`finished` are its session bounds (None keeps them)."""

    segment: Segment
    record: SegmentRecord
    started: datetime | None = None
    finished: datetime | None = None


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _never_held_back(command: RepairCommand) -> str | None:
    return None


def _never_refused(command: RepairCommand) -> str | None:
    return None


def _unsupported_repair(command: RepairCommand) -> SessionResult:
    raise NotImplementedError("BatchEffects needs `repair` or `sessions`")


@dataclass
class BatchEffects:
    """The outside world of a batch.

    `repair` runs one repair command (in a worker thread of a `ThreadSessionPool`), unless `sessions` gives
    the pool itself (the fleet simulator's virtual-time pool); `save` stores the records of one command's
    segments together; `live_nodes` says who is up; `enabled` re-reads the kill switch; `stop_requested` is
    set when the task is killed; `held_back` says why a command must not start now (back-pressure on a
    participant: pending compactions, streaming, cleanup), or None; `refused` says why a command must not run
    in this run at all (incremental repair's disk-headroom guard: free disk does not come back within minutes
    as a compaction backlog does), and the command is postponed at once with that reason; `progress` receives
    the run's live progress (the shape the Repair page reads) at most once a minute and at the end."""

    repair: Callable[[RepairCommand], SessionResult] = _unsupported_repair
    save: Callable[[Sequence[RecordUpdate]], None] = lambda updates: None
    live_nodes: Callable[[], set[str]] = set
    enabled: Callable[[], bool] = lambda: True
    stop_requested: Callable[[], bool] = lambda: False
    now: Callable[[], datetime] = _utc_now
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = print
    sessions: SessionPool | None = None
    held_back: Callable[[RepairCommand], str | None] = _never_held_back
    refused: Callable[[RepairCommand], str | None] = _never_refused
    progress: Callable[[dict[str, Any]], None] | None = None
    ring_changed: Callable[[], bool] = lambda: False


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[SegmentOutcome, ...]
    stop_reason: str | None  # why segments were left unstarted (window closed, kill switch, killed)
    unstarted: tuple[Segment, ...] = ()  # left without a record: the ring changed (RING_CHANGED)

    @property
    def summary(self) -> RunSummary:
        return RunSummary.of(o.state for o in self.outcomes)


@dataclass
class _Running:
    command: RepairCommand
    records: dict[str, SegmentRecord]
    started: datetime


class _BatchRun:
    def __init__(
        self,
        segments: Sequence[Segment],
        records: Mapping[str, SegmentRecord],
        config: RepairConfig,
        run_id: str,
        parallelism: int,
        effects: BatchEffects,
        run_started: datetime,
        progress: Progress,
        next_window: NextWindow | None = None,
    ) -> None:
        commands = group_segments(segments, config.ranges_per_command)
        # The plan's order is its priority: a command keeps its place while it waits (busy node, backoff).
        self.queue: list[RepairCommand | None] = list(commands)
        self.position = {_key(c): i for i, c in enumerate(commands)}
        self.head = 0  # queue[:head] holds no command
        self.rank = dict(self.position)  # the plan's order, for commands that leave the queue and come back
        self.next_window = next_window
        self.segments_seen = progress.done + len(segments)  # the total grows with windows beyond a given one
        self.again: dict[str, RepairCommand] = {}  # put back (retries, held back): looked at first
        # Commands found waiting on a busy node are parked on it and looked at again only once it is free:
        # a scan never walks the same blocked commands again and again.
        self.parked: dict[str, deque[tuple[int, RepairCommand]]] = {}  # (rank, command), in the plan's order
        self.ready: list[tuple[int, RepairCommand]] = []  # heap by rank: parked commands whose node is free
        self.waiting = len(commands)  # commands not started, wherever they wait
        self.records = dict(records)
        self.config = config
        self.run_id = run_id
        self.parallelism = parallelism
        self.fx = effects
        self.run_started = run_started
        self.not_before: dict[str, datetime] = {}
        self.held_reason: dict[str, str] = {}
        self.held_since: dict[str, datetime] = {}
        self.refusals_said: set[str] = set()  # each refusal reason is logged once, not once per command
        # Seconds each node spent in sessions of each unit this run (CEP-37's table_max_repair_time is per
        # table and node): over the limit, the unit's rest is left for the next run.
        self.spent: dict[tuple[str, tuple[str, ...], str], float] = {}
        self.node_free_at: dict[str, datetime] = {}
        self.in_session: set[str] = set()
        self.running: dict[str, _Running] = {}  # by the command's key
        self.blocked_by: dict[str, list[RepairCommand]] = {}  # down node -> commands waiting for it
        self.outcomes: dict[str, SegmentOutcome] = {}
        self.progress = progress
        self.verbose = progress.total <= _VERBOSE_UP_TO
        self.stop_reason: str | None = None
        self.live: set[str] = set()
        # A scan that started nothing is repeated only once something changed: a session ended, a command
        # came back, the live set changed, or a backoff or rest it saw ends (`rescan_at`).
        self.changed = True
        self.rescan_at: datetime | None = None
        self.failed = 0
        self.postponed = 0
        self.per_node: dict[str, dict[str, int]] = {}
        self.last_report: datetime | None = None
        self.unstarted: list[Segment] = []
        self.down_wait_started: datetime | None = None  # since when only commands for down nodes are left

    # -- decisions ----------------------------------------------------------------------------------------
    def _why_stop(self) -> str | None:
        if self.fx.stop_requested():
            return "the task was killed"
        if not self.fx.enabled():
            return "repair disabled by the kill switch (enabled: false, or paused in the ringward UI)"
        if not window_allows_start(self.fx.now(), self.config.window, self.run_started):
            return "the repair window closed"
        if self.fx.ring_changed():
            return RING_CHANGED
        return None

    # -- queue --------------------------------------------------------------------------------------------
    def _take(self, command: RepairCommand) -> None:
        """Take a command out of the plan's queue or the put-back list (the ready heap is popped by the scan)."""
        key = _key(command)
        if self.again.pop(key, None) is not None:
            return
        index = self.position.get(key)
        if index is None or index >= len(self.queue) or self.queue[index] is not command:
            return
        self.queue[index] = None
        while self.head < len(self.queue) and self.queue[self.head] is None:
            self.head += 1

    def _compact(self) -> None:
        """Drop the holes left by started commands, so scans do not walk over them (order kept). Never
        during a scan: the scan walks the list it started on."""
        holes = sum(1 for c in self.queue[self.head : self.head + 4096] if c is None)
        if holes < 2048:  # sampled: compact once at least half of the queue's front is holes
            return
        kept: list[RepairCommand | None] = [c for c in self.queue[self.head :] if c is not None]
        self.queue = kept
        self.position = {_key(c): i for i, c in enumerate(kept) if c is not None}
        self.head = 0

    def _put_back(self, command: RepairCommand) -> None:
        """A command to start again (a retry, or a node back): it waits ahead of the plan's queue."""
        self.again[_key(command)] = command
        self.changed = True

    def _park(self, command: RepairCommand, node: str, rank: int | None) -> None:
        """Park on busy `node`; `rank` is known for a command off the ready heap (already out of the queue)."""
        if rank is None:
            self._take(command)
            rank = self.rank[_key(command)]
        self.parked.setdefault(node, deque()).append((rank, command))

    def _release(self, node: str) -> None:
        """Let every command waiting on `node` be looked at again (in plan order; scans take them from the ready
        heap, `_SCAN_LIMIT` at a time).

        Until 2026-11-30 (issue 40) only the first 16 were let go, to spare CPU: near saturation most of them are
        only parked again on another busy node. But when those 16 all needed another busy node, the rest waited for
        this node's next release, which never came while nothing ran on it: the node idled though a command
        behind them fitted. On the simulated fleets the busiest node lost 5-6 h of its night (medium fleet) in
        hundreds of such gaps, and ringward packed its node locks worse than the equal-budget Reaper model; all of
        them let go, it packs them better (docs/benchmarks.md, "Where ringward can win at equal budgets"), for
        1.7x the executor's CPU on a 1000-node keyspace (112 -> 187 s for 253,365 commands)."""
        waiting = self.parked.pop(node, None)
        if not waiting:
            return
        for entry in waiting:
            heapq.heappush(self.ready, entry)

    def _release_all(self) -> None:
        """Nothing runs: no node is busy, every parked command may be looked at."""
        for node in list(self.parked):
            for entry in self.parked.pop(node):
                heapq.heappush(self.ready, entry)

    def _waiting_for_nodes(self) -> int:
        return sum(len(commands) for commands in self.blocked_by.values())

    def _take_next_window(self) -> bool:
        """Queue the plan's next window behind what waits (False once the plan is exhausted, or stopping)."""
        if self.next_window is None or self.stop_reason is not None:
            return False
        window = self.next_window()
        if window is None:
            self.next_window = None
            return False
        segments, records = window
        self.segments_seen += len(segments)
        self.progress.total = max(self.progress.total, self.segments_seen)
        for segment_id, record in records.items():
            self.records.setdefault(segment_id, record)  # this run's own records are newer
        todo, settled = _settled_apart(segments, self.records, self.run_id, self.config.max_retries)
        for outcome in settled:
            self.outcomes[outcome.segment.segment_id] = outcome
            self.progress.advance()
        rank = len(self.rank)
        for command in group_segments(todo, self.config.ranges_per_command):
            key = _key(command)
            self.position[key] = len(self.queue)
            self.rank[key] = rank
            rank += 1
            self.queue.append(command)
            self.waiting += 1
        self.changed = True
        return True

    # -- state changes --------------------------------------------------------------------------------------
    def _finish(self, outcome: SegmentOutcome) -> None:
        self.outcomes[outcome.segment.segment_id] = outcome
        self.progress.advance()
        state = outcome.state
        if state is SegmentState.FAILED:
            self.failed += 1
        elif state is SegmentState.POSTPONED:
            self.postponed += 1
        if state in (SegmentState.DONE, SegmentState.FAILED):
            key = "done" if state is SegmentState.DONE else "failed"
            for node in outcome.segment.replicas:
                counts = self.per_node.setdefault(node, {"done": 0, "failed": 0})
                counts[key] += 1
        if self.verbose or state is SegmentState.FAILED:
            detail = f" ({outcome.reason})" if outcome.reason else ""
            self.fx.log(f"{self.progress.brief()} {state.value} {outcome.segment.describe()}{detail}")

    def _postpone(self, command: RepairCommand, reason: str) -> None:
        self.waiting -= 1
        updates = []
        for segment in command.segments:
            # A first record is of the run's type: a default (full) one would overwrite the full history.
            previous = self.records.get(segment.segment_id) or SegmentRecord(
                segment.segment_id, repair_type=self.config.repair_type or "full"
            )
            record = replace(
                previous, state=SegmentState.POSTPONED, attempts=previous.attempts_in(self.run_id), run_id=self.run_id
            )
            updates.append(RecordUpdate(segment, record))
        self.fx.save(updates)
        for update in updates:
            self._finish(SegmentOutcome(update.segment, SegmentState.POSTPONED, update.record, reason=reason))

    def _start(self, pool: SessionPool, command: RepairCommand, now: datetime) -> None:
        self._take(command)
        self.waiting -= 1
        records = {
            s.segment_id: record_start(
                self.records.get(s.segment_id), s.segment_id, self.run_id, self.config.repair_type
            )
            for s in command.segments
        }
        self._store([RecordUpdate(s, records[s.segment_id], now) for s in command.segments])
        attempt = records[command.segments[0].segment_id].attempts_in(self.run_id)
        if self.verbose:
            self.fx.log(f"{self.progress.brief()} start {command.describe()} attempt {attempt}")
        self.in_session.update(command.replicas)
        self.running[_key(command)] = _Running(command, records, now)
        pool.submit(command)

    def _completed(self, command: RepairCommand, result: SessionResult) -> None:
        job = self.running.pop(_key(command))
        self.in_session.difference_update(command.replicas)
        self.changed = True
        for node in command.replicas:
            unit = (command.keyspace, command.tables, node)
            self.spent[unit] = self.spent.get(unit, 0.0) + result.seconds
        for node in command.replicas:
            if node not in self.node_free_at:
                self._release(node)
        finished = self.fx.now()
        if result.succeeded:
            pause = intensity_pause(result.seconds, self.config.intensity)
            if pause:
                for node in command.replicas:
                    self.node_free_at[node] = finished + pause
            done = [
                RecordUpdate(s, record_success(job.records[s.segment_id], finished, result.seconds,
                                               self.config.repair_type), job.started, finished)
                for s in command.segments
            ]  # fmt: skip
            self._store(done)
            for update in done:
                self._finish(SegmentOutcome(update.segment, SegmentState.DONE, update.record, job.started, finished))
            return
        records = {
            s.segment_id: record_failure(job.records[s.segment_id], result.error or "repair failed", result.seconds)
            for s in command.segments
        }
        self._store([RecordUpdate(s, records[s.segment_id], job.started, finished) for s in command.segments])
        first = records[command.segments[0].segment_id]  # the command's segments share their attempts
        if retries_exhausted(first, self.run_id, self.config.max_retries):
            for segment in command.segments:
                self._finish(SegmentOutcome(segment, SegmentState.FAILED, records[segment.segment_id], job.started,
                                            finished, result.error))  # fmt: skip
            return
        self.waiting += 1
        self._put_back(command)
        if self._why_stop() is not None:
            return  # left for the next run with the other unstarted segments
        delay = backoff_delay(first.attempts_in(self.run_id) + 1, self.config.retry_backoff.total_seconds())
        self.not_before[_key(command)] = finished + timedelta(seconds=delay)
        if self.verbose:
            self.fx.log(f"retry {command.describe()} in {delay:.0f}s after: {(result.error or '')[-300:]}")

    def _store(self, updates: Sequence[RecordUpdate]) -> None:
        for update in updates:
            self.records[update.segment.segment_id] = update.record
        self.fx.save(updates)

    # -- nodes going down and coming back -------------------------------------------------------------------
    def _wait_for_node(self, command: RepairCommand, down: list[str]) -> None:
        self._take(command)
        self.blocked_by.setdefault(down[0], []).append(command)

    def _release_recovered(self) -> None:
        for node in [n for n in self.blocked_by if n in self.live]:
            for command in self.blocked_by.pop(node):
                still_down = [n for n in command.replicas if n not in self.live]
                if still_down:
                    self.blocked_by.setdefault(still_down[0], []).append(command)
                else:
                    self._put_back(command)

    def _postpone_blocked(self) -> None:
        for node, commands in sorted(self.blocked_by.items()):
            for command in commands:
                down = ", ".join(sorted(set(command.replicas) - self.live)) or node
                self._postpone(command, f"replica down: {down}")
        self.blocked_by.clear()

    # -- loop ---------------------------------------------------------------------------------------------
    def _start_what_fits(self, pool: SessionPool) -> None:
        now = self.fx.now()
        room = self.parallelism - len(self.running)
        if room <= 0 or not (self.waiting or self._take_next_window()):
            return
        live = self.fx.live_nodes()
        if live != self.live:
            self.live = live
            self.changed = True
        if not self.changed and (self.rescan_at is None or now < self.rescan_at):
            return
        self.changed = False
        self._compact()
        self._release_recovered()
        resting = {node: free_at for node, free_at in self.node_free_at.items() if free_at > now}
        for node in set(self.node_free_at) - set(resting):  # rested: what waited on them may start
            if node not in self.in_session:
                self._release(node)
        self.node_free_at = resting
        busy = self.in_session | set(resting) if resting else self.in_session
        self.rescan_at = min(resting.values()) if resting else None
        if len(live) - len(busy) < 2:  # no session fits: every repair needs two free replicas
            return
        looked = 0
        for command, rank in self._candidates():
            looked += 1
            replicas = command.replicas
            if not busy.isdisjoint(replicas):
                for node in replicas:  # the first busy one
                    if node in busy:
                        break
                self._park(command, node, rank)
            else:
                room -= self._consider(pool, command, rank is not None, live, now)
                if room:
                    busy = busy | set(replicas) if busy is not self.in_session else self.in_session
            if room <= 0 or looked >= _SCAN_LIMIT:
                break
        if looked >= _SCAN_LIMIT:
            self.changed = True  # commands beyond what this scan looked at may fit

    def _consider(self, pool: SessionPool, command: RepairCommand, from_ready: bool, live: set[str],
                  now: datetime) -> int:  # fmt: skip
        """Start `command` if nothing holds it back (1), else file it where it waits (0)."""
        replicas = command.replicas
        key = _key(command)
        wake = self.not_before.get(key)
        if wake is not None and wake > now:
            self.rescan_at = wake if self.rescan_at is None else min(self.rescan_at, wake)
            if from_ready:
                self._put_back(command)
            return 0
        down = [n for n in replicas if n not in live]
        if down:
            self._wait_for_node(command, down)
            return 0
        spent = max(self.spent.get((command.keyspace, command.tables, n), 0.0) for n in replicas)
        over = unit_time_exceeded(spent, self.config) if spent else None
        if over is not None:
            self._take(command)
            self._postpone(command, over)
            return 0
        refusal = self.fx.refused(command)
        if refusal is not None:
            self._take(command)
            if refusal not in self.refusals_said:
                self.refusals_said.add(refusal)
                self.fx.log(f"refused {command.describe()} (postponed to the next run): {refusal}")
            self._postpone(command, refusal)
            return 0
        reason = self.fx.held_back(command)
        if reason is not None:
            since = self.held_since.setdefault(key, now)
            if now - since >= _BACK_PRESSURE_GIVE_UP:
                self._take(command)
                self._postpone(command, f"held back since {since:%H:%M} UTC: {reason}")
                return 0
            self.not_before[key] = wake = now + _BACK_PRESSURE_RETRY
            self.rescan_at = wake if self.rescan_at is None else min(self.rescan_at, wake)
            if self.held_reason.get(key) != reason:
                self.fx.log(f"held back {command.describe()}: {reason}")
            self.held_reason[key] = reason
            if from_ready:
                self._put_back(command)
            return 0
        self._start(pool, command, now)
        return 1

    def _candidates(self) -> Iterator[tuple[RepairCommand, int | None]]:
        """Waiting commands in the order they may start, with their rank when they came off the ready heap:
        those put back first, then parked ones whose node is free (in plan order), then the plan's queue,
        then the plan's next window once the queue is empty."""
        for command in list(self.again.values()):
            yield command, None
        while self.ready:
            rank, command = heapq.heappop(self.ready)
            yield command, rank
        queue = self.queue
        index = self.head
        while True:
            while index < len(queue):
                queued = queue[index]
                index += 1
                if queued is not None:
                    yield queued, None
            # Asked for more with the queue empty and room left: the plan's next window may use the free nodes.
            if self.head < len(queue) or not self._take_next_window():
                return

    def _leftovers(self) -> list[RepairCommand]:
        parked = [c for entries in self.parked.values() for _, c in entries]
        ready = [c for _, c in sorted(self.ready, key=lambda entry: entry[0])]
        queued = [c for c in self.queue[self.head :] if c is not None]
        return [*self.again.values(), *ready, *parked, *queued]

    def _wait_seconds(self) -> float:
        """How long to wait for a session to end: briefly while commands may still start (a backoff or rest
        ending), longer when nothing can start before a session ends (the simulator's polls cost CPU)."""
        if len(self.running) < self.parallelism and (self.changed or self.rescan_at is not None):
            return _POLL_SECONDS
        return _BUSY_WAIT_SECONDS

    def _idle_sleep(self) -> None:
        """Nothing runs: sleep until the earliest backoff ends, at most `_MAX_IDLE_SLEEP`."""
        now = self.fx.now()
        wakes = [self.not_before[_key(c)] for c in self._leftovers()[:_SCAN_LIMIT] if _key(c) in self.not_before]
        seconds = min([(w - now).total_seconds() for w in wakes if w > now] or [_POLL_SECONDS])
        self.fx.sleep(min(_MAX_IDLE_SLEEP, max(_POLL_SECONDS, seconds)))

    def _waited_for_down_nodes(self) -> bool:
        """Sleep a while when all that is left waits for nodes that are down, until `wait_for_down_nodes` has
        passed (the next scan sees a node back and puts its commands back); False once it has."""
        now = self.fx.now()
        if self.down_wait_started is None:
            self.down_wait_started = now
            if self.config.wait_for_down_nodes:
                nodes = ", ".join(sorted(self.blocked_by))
                self.fx.log(f"{self.progress.brief()} {self._waiting_for_nodes()} repair commands wait for {nodes} "
                            f"(down): waiting up to {self.config.wait_for_down_nodes} for it to come back")  # fmt: skip
        if now - self.down_wait_started >= self.config.wait_for_down_nodes:
            return False
        self.fx.sleep(_DOWN_NODE_POLL_SECONDS)
        return True

    def _report(self, final: bool = False) -> None:
        now = self.fx.now()
        if not final and self.last_report is not None and now - self.last_report < _PROGRESS_EVERY:
            return
        self.last_report = now
        if not self.verbose:
            self.fx.log(f"{self.progress.brief()} {len(self.running)} sessions running, {self.failed} failed, "
                        f"{self.postponed} postponed")  # fmt: skip
        if self.fx.progress is None:
            return
        running: dict[str, int] = {}
        for job in self.running.values():
            for node in job.command.replicas:
                running[node] = running.get(node, 0) + 1
        self.fx.progress({
            "done": self.progress.done - self.failed - self.postponed, "failed": self.failed,
            "postponed": self.postponed, "total": self.progress.total, "running": running,
            "sessions": len(self.running), "held_back": len(self.held_since),
            "waiting_for_nodes": self._waiting_for_nodes(), "per_node": self.per_node,
            "eta_seconds": self.progress.eta_seconds, "updated_at": now.isoformat(), "final": final,
        })  # fmt: skip

    def run(self) -> BatchResult:
        pool = self.fx.sessions or ThreadSessionPool(self.fx.repair, self.parallelism)
        try:
            while self.waiting or self.running or self._take_next_window():
                self.stop_reason = self.stop_reason or self._why_stop()
                if self.stop_reason is None:
                    self._start_what_fits(pool)
                elif not self.running:
                    break
                if self.running:
                    self.down_wait_started = None
                    for command, result in pool.wait(self._wait_seconds()):
                        self._completed(command, result)
                elif self.waiting > self._waiting_for_nodes():
                    if self.parked:
                        self._release_all()
                        self.changed = True
                        continue
                    self._idle_sleep()
                elif self._take_next_window():  # only commands for down nodes: they wait while the rest runs
                    continue
                elif not self._waited_for_down_nodes():  # only commands waiting for a node that is down
                    break  # left for the next run
                self._report()
        finally:
            if self.fx.sessions is None:
                pool.close()
        if self.stop_reason == RING_CHANGED:  # the caller plans them again on the new ring: no record, no outcome
            self.unstarted = [s for c in self._leftovers() for s in c.segments]
            self.unstarted += [s for cs in self.blocked_by.values() for c in cs for s in c.segments]
        else:
            for command in self._leftovers():
                self._postpone(command, self.stop_reason or "not started")
            self._postpone_blocked()
        self._report(final=True)
        return BatchResult(tuple(self.outcomes.values()), self.stop_reason, tuple(self.unstarted))


def run_batch(
    segments: Sequence[Segment],
    records: Mapping[str, SegmentRecord],
    *,
    config: RepairConfig,
    run_id: str,
    parallelism: int,
    effects: BatchEffects,
    run_started: datetime,
    run_total: int | None = None,
    done_before: int = 0,
    next_window: NextWindow | None = None,
) -> BatchResult:
    """Repair `segments` (most urgent first), a node in at most one session at a time.

    Segments already finished in this run (`records[id].run_id == run_id` and DONE, or retries used
    up) are reported as they are, so an Airflow retry of the task does not repeat work.
    Progress counts the whole run when given its `run_total` and the segments of earlier batches
    (`done_before`); each log line starts with it: `[done/total share ETA]`.
    `next_window` gives the plan's later segments with their records, taken when the queue runs dry.
    """
    todo, settled = _settled_apart(segments, records, run_id, config.max_retries)
    started = done_before + len(settled)
    total = max(run_total, started + len(todo)) if run_total is not None else len(segments)
    progress = Progress(
        total, "repair", "segments", clock=lambda: effects.now().timestamp(),
        done=started if run_total is not None else len(settled),
    )  # fmt: skip
    batch = _BatchRun(todo, records, config, run_id, parallelism, effects, run_started, progress, next_window)
    result = batch.run()
    return BatchResult((*settled, *result.outcomes), result.stop_reason, result.unstarted)


def _settled_apart(
    segments: Sequence[Segment], records: Mapping[str, SegmentRecord], run_id: str, max_retries: int
) -> tuple[list[Segment], list[SegmentOutcome]]:
    """The segments still to repair, and outcomes for those this run already finished (a retried task)."""
    todo: list[Segment] = []
    settled: list[SegmentOutcome] = []
    for segment in segments:
        record = records.get(segment.segment_id)
        if record is not None and record.run_id == run_id and record.state is SegmentState.DONE:
            settled.append(SegmentOutcome(segment, SegmentState.DONE, record, reason="already repaired in this run"))
        elif retries_exhausted(record, run_id, max_retries):
            settled.append(SegmentOutcome(segment, SegmentState.FAILED, record, reason="retries used up in this run"))
        else:
            todo.append(segment)
    return todo, settled


def _key(command: RepairCommand) -> str:
    return command.segments[0].segment_id
