"""Running one batch of segments (Reaper's RepairRunner loop), with every side effect injected.

The loop starts a segment only when none of its replicas is busy (a running session, or the intensity
pause after one), at most `parallelism` at once, and only while the kill switch, the window and the
task allow it. Segments with the same replicas travel together, up to `ranges_per_command` per repair
command (Cassandra repairs them in one session); each keeps its own record. Failed sessions are retried
with exponential backoff until `max_retries`; a segment with a replica down is postponed to the next run.
Every state change is handed to `effects.save` at once, so a killed or retried task finds the history
where it left it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from ringward.repair._config import RepairConfig
from ringward.repair._progress import Progress
from ringward.repair._run import RunSummary
from ringward.repair._scheduler import intensity_pause, next_runnable, window_allows_start
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

__all__ = ["BatchEffects", "BatchResult", "RecordUpdate", "SegmentOutcome", "SessionResult", "run_batch"]

_POLL_SECONDS = 0.5


@dataclass(frozen=True)
class SessionResult:
    """What one repair session reported (the runner turns exceptions into a failed result)."""

    succeeded: bool
    seconds: float
    error: str | None = None


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


@dataclass
class BatchEffects:
    """The outside world of a batch. `repair` runs one repair command (in a worker thread); `save` stores the
    records of one command's segments together (one round of writes, not one per segment); `live_nodes` says
    who is up; `enabled` re-reads the kill switch;
    `stop_requested` is set when the task is killed."""

    repair: Callable[[RepairCommand], SessionResult]
    save: Callable[[Sequence[RecordUpdate]], None]
    live_nodes: Callable[[], set[str]]
    enabled: Callable[[], bool] = lambda: True
    stop_requested: Callable[[], bool] = lambda: False
    now: Callable[[], datetime] = _utc_now
    sleep: Callable[[float], None] = time.sleep
    log: Callable[[str], None] = print


@dataclass(frozen=True)
class BatchResult:
    outcomes: tuple[SegmentOutcome, ...]
    stop_reason: str | None  # why segments were left unstarted (window closed, kill switch, killed)

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
    ) -> None:
        self.pending = group_segments(segments, config.ranges_per_command)
        self.records = dict(records)
        self.config = config
        self.run_id = run_id
        self.parallelism = parallelism
        self.fx = effects
        self.run_started = run_started
        self.not_before: dict[str, datetime] = {}
        self.node_free_at: dict[str, datetime] = {}
        self.running: dict[Future[SessionResult], _Running] = {}  # keyed by the command's session
        self.outcomes: dict[str, SegmentOutcome] = {}
        self.progress = progress
        self.stop_reason: str | None = None

    # -- decisions ----------------------------------------------------------------------------------------
    def _why_stop(self) -> str | None:
        if self.fx.stop_requested():
            return "the task was killed"
        if not self.fx.enabled():
            return "repair disabled by the kill switch (enabled: false, or paused in the ringward UI)"
        if not window_allows_start(self.fx.now(), self.config.window, self.run_started):
            return "the repair window closed"
        return None

    def _busy_nodes(self, now: datetime) -> set[str]:
        busy = {node for job in self.running.values() for node in job.command.replicas}
        return busy | {node for node, free_at in self.node_free_at.items() if free_at > now}

    # -- state changes --------------------------------------------------------------------------------------
    def _finish(self, outcome: SegmentOutcome) -> None:
        self.outcomes[outcome.segment.segment_id] = outcome
        self.progress.advance()
        detail = f" ({outcome.reason})" if outcome.reason else ""
        self.fx.log(f"{self.progress.brief()} {outcome.state.value} {outcome.segment.describe()}{detail}")

    def _postpone(self, command: RepairCommand, reason: str) -> None:
        updates = []
        for segment in command.segments:
            previous = self.records.get(segment.segment_id) or SegmentRecord(segment.segment_id)
            record = replace(
                previous, state=SegmentState.POSTPONED, attempts=previous.attempts_in(self.run_id), run_id=self.run_id
            )
            updates.append(RecordUpdate(segment, record))
        self.fx.save(updates)
        for update in updates:
            self._finish(SegmentOutcome(update.segment, SegmentState.POSTPONED, update.record, reason=reason))

    def _start(self, pool: ThreadPoolExecutor, command: RepairCommand, now: datetime) -> None:
        self.pending.remove(command)
        records = {
            s.segment_id: record_start(self.records.get(s.segment_id), s.segment_id, self.run_id)
            for s in command.segments
        }
        self._store([RecordUpdate(s, records[s.segment_id], now) for s in command.segments])
        attempt = records[command.segments[0].segment_id].attempts_in(self.run_id)
        self.fx.log(f"{self.progress.brief()} start {command.describe()} attempt {attempt}")
        self.running[pool.submit(self._session, command)] = _Running(command, records, now)

    def _session(self, command: RepairCommand) -> SessionResult:
        try:
            return self.fx.repair(command)
        except Exception as error:  # a runner bug or a lost connection must not kill the whole batch
            return SessionResult(False, 0.0, f"{type(error).__name__}: {error}")

    def _completed(self, future: Future[SessionResult]) -> None:
        job = self.running.pop(future)
        result = future.result()
        finished = self.fx.now()
        command = job.command
        if result.succeeded:
            pause = intensity_pause(result.seconds, self.config.intensity)
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
        if self._why_stop() is not None:
            self.pending.insert(0, command)  # left for the next run with the other unstarted segments
            return
        delay = backoff_delay(first.attempts_in(self.run_id) + 1, self.config.retry_backoff.total_seconds())
        self.not_before[_key(command)] = finished + timedelta(seconds=delay)
        self.fx.log(f"retry {command.describe()} in {delay:.0f}s after: {(result.error or '')[-300:]}")
        self.pending.insert(0, command)

    def _store(self, updates: Sequence[RecordUpdate]) -> None:
        for update in updates:
            self.records[update.segment.segment_id] = update.record
        self.fx.save(updates)

    # -- loop ---------------------------------------------------------------------------------------------
    def _start_what_fits(self, pool: ThreadPoolExecutor) -> None:
        now = self.fx.now()
        room = self.parallelism - len(self.running)
        ready = [c for c in self.pending if self.not_before.get(_key(c), now) <= now]
        if room <= 0 or not ready:
            return
        live = self.fx.live_nodes()
        for command in [c for c in ready if not live.issuperset(c.replicas)]:
            self.pending.remove(command)
            down = ", ".join(sorted(set(command.replicas) - live))
            self._postpone(command, f"replica down: {down}")
        ready = [c for c in ready if c in self.pending]
        for command in next_runnable(ready, self._busy_nodes(now), room):
            self._start(pool, command, now)

    def run(self) -> BatchResult:
        with ThreadPoolExecutor(max_workers=self.parallelism, thread_name_prefix="repair") as pool:
            while self.pending or self.running:
                self.stop_reason = self.stop_reason or self._why_stop()
                if self.stop_reason is None:
                    self._start_what_fits(pool)
                elif not self.running:
                    break
                if self.running:
                    done, _ = wait(list(self.running), timeout=_POLL_SECONDS, return_when=FIRST_COMPLETED)
                    for future in done:
                        self._completed(future)
                elif self.pending:
                    self.fx.sleep(_POLL_SECONDS)
        for command in list(self.pending):
            self._postpone(command, self.stop_reason or "not started")
        return BatchResult(tuple(self.outcomes.values()), self.stop_reason)


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
) -> BatchResult:
    """Repair `segments` (most urgent first), a node in at most one session at a time.

    Segments already finished in this run (`records[id].run_id == run_id` and DONE, or retries used
    up) are reported as they are, so an Airflow retry of the task does not repeat work.
    Progress counts the whole run when given its `run_total` and the segments of earlier batches
    (`done_before`); each log line starts with it: `[done/total share ETA]`.
    """
    todo: list[Segment] = []
    settled: list[SegmentOutcome] = []
    for segment in segments:
        record = records.get(segment.segment_id)
        if record is not None and record.run_id == run_id and record.state is SegmentState.DONE:
            settled.append(SegmentOutcome(segment, SegmentState.DONE, record, reason="already repaired in this run"))
        elif retries_exhausted(record, run_id, config.max_retries):
            settled.append(SegmentOutcome(segment, SegmentState.FAILED, record, reason="retries used up in this run"))
        else:
            todo.append(segment)
    started = done_before + len(settled)
    total = max(run_total, started + len(todo)) if run_total is not None else len(segments)
    progress = Progress(total, "repair", "segments", done=started if run_total is not None else len(settled))
    result = _BatchRun(todo, records, config, run_id, parallelism, effects, run_started, progress).run()
    return BatchResult((*settled, *result.outcomes), result.stop_reason)


def _key(command: RepairCommand) -> str:
    return command.segments[0].segment_id
