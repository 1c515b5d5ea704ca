"""The migration's stages as plain functions over narrow interfaces to the cluster (no Airflow here).

The operators in `migration_operators` read the precheck's `MigrationRecord`, build the real clients and
call these; the unit tests call them with in-memory fakes. Each interface names only what a stage uses:
`Journal` (the ops keyspace's migration journal), `RepairNodetool` (repair, status, abort).

Range repair runs through the nightly executor (`ringward.repair.run_batch`): the same wave rule (a node in
one session at a time), retries with backoff and kill handling; the journal writes are its `save` effect,
so a retried or cleared task repairs only what the journal does not hold as done.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from ringward.errors import ClusterError, MigrationError, RepairError, RingwardError
from ringward.migration import RANGES_PER_COMMAND, RangeState, pending, range_count
from ringward.repair import (
    BatchEffects,
    RecordUpdate,
    RepairCommand,
    RepairConfig,
    Segment,
    SegmentState,
    SessionResult,
    run_batch,
)
from ringward.ring import TokenRange
from ringward_cassandra.nodetool import RepairOutcome
from ringward_cassandra.ops_store import JournalEntry

__all__ = [
    "Journal",
    "RepairNodetool",
    "RepairSettings",
    "StageResult",
    "journalled_pending",
    "participant_problems",
    "repair_ranges",
]


class Journal(Protocol):
    """The migration journal in `ringward_ops`: one entry per (stage, range)."""

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]: ...

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None: ...


class RepairNodetool(Protocol):
    """The nodetool commands the repair stage runs."""

    def status(self, address: str) -> dict[str, str]: ...

    def repair(
        self, address: str, keyspace: str, ranges: TokenRange | Sequence[TokenRange], *, timeout: float = 3600.0
    ) -> RepairOutcome: ...

    def abort_repairs(self, address: str) -> None: ...


@dataclass(frozen=True)
class RepairSettings:
    """How the blocking repair runs: sessions at once, attempts per command, backoff base, session timeout."""

    parallelism: int = 2
    max_attempts: int = 3
    retry_backoff: float = 5.0
    session_timeout: float = 3600.0

    def config(self) -> RepairConfig:
        """The nightly executor's settings for a migration repair: full, every command at full intensity."""
        return RepairConfig(
            repair_type="full",
            ranges_per_command=RANGES_PER_COMMAND,
            parallel_repair_count=max(1, self.parallelism),
            parallel_repair_percentage=0.0,
            intensity=1.0,
            max_retries=max(0, self.max_attempts - 1),
            retry_backoff=timedelta(seconds=self.retry_backoff),
            segment_timeout=timedelta(seconds=self.session_timeout),
        )


@dataclass(frozen=True)
class StageResult:
    """What a repair stage returns to XCom: ranges in the stage, repaired by this call, done per the journal."""

    ranges: int
    repaired: int
    done: int

    def as_json(self) -> dict[str, int]:
        return {"ranges": self.ranges, "repaired": self.repaired, "done": self.done}


def journalled_pending(journal: Journal, migration_id: str, stage: str, segments: Sequence[Segment]) -> list[Segment]:
    """`segments` not yet journalled as done in `stage` (a retried or cleared task resumes here)."""
    statuses = {token_range: entry.status for token_range, entry in journal.journal(migration_id, stage).items()}
    return pending(segments, statuses)


def participant_problems(
    nodes: Sequence[str], nodetool: RepairNodetool, accepts_cql: Callable[[str, int], bool], cql_port: int
) -> dict[str, str]:
    """node -> why it cannot take part in a repair session now; ready nodes are left out.

    Ready: it answers JMX, every participant sees it UN, and it accepts CQL connections.
    """
    problems: dict[str, str] = {}
    views: dict[str, dict[str, str]] = {}
    for node in nodes:
        try:
            views[node] = nodetool.status(node)
        except RingwardError as error:
            problems[node] = f"JMX does not answer ({_first_line(str(error))})"
    for node in nodes:
        if node in problems:
            continue
        seen = [(viewer, states.get(node, "absent")) for viewer, states in views.items()]
        wrong = [f"{state} as seen from {viewer}" for viewer, state in seen if state != "UN"]
        if wrong:
            problems[node] = ", ".join(wrong)
        elif not accepts_cql(node, cql_port):
            problems[node] = f"refuses CQL connections on port {cql_port}"
    return problems


def repair_ranges(
    segments: Sequence[Segment],
    *,
    migration_id: str,
    stage: str,
    journal: Journal,
    nodetool: RepairNodetool,
    settings: RepairSettings,
    await_ready: Callable[[Sequence[str]], None],
    stop_requested: Callable[[], bool],
    log: Callable[[str], None],
    sleep: Callable[[float], None],
) -> StageResult:
    """Full repair of the `segments` the journal does not hold as done, through the nightly executor.

    Before each session `await_ready(participants)` waits for them (it raises ClusterError when one stays
    down: the batch stops starting sessions and that error fails the try, as the participant wait says).
    Every finished attempt is journalled. Raises RepairError naming the failed ranges, MigrationError when
    the task was killed.
    """
    todo = journalled_pending(journal, migration_id, stage, segments)
    done_before = [segment for segment in segments if segment not in todo]
    log(f"{stage}: {range_count(todo)} to repair, {range_count(done_before)} already done.")
    if not todo:
        # "repaired" counts this call's sessions; "done" what the journal holds.
        return StageResult(len(segments), 0, len(segments))
    not_ready: list[ClusterError] = []

    def session(command: RepairCommand) -> SessionResult:
        try:
            await_ready(command.replicas)
        except ClusterError as error:
            not_ready.append(error)
            return SessionResult(False, 0.0, error.problem)
        try:
            outcome = nodetool.repair(
                command.coordinator, command.keyspace, command.ranges, timeout=settings.session_timeout
            )
        except ClusterError as error:  # timed out: the nodetool process is gone, the session may not be
            nodetool.abort_repairs(command.coordinator)
            return SessionResult(False, settings.session_timeout, error.problem)
        if stop_requested():  # the kill stopped nodetool; the session may still run on the node
            nodetool.abort_repairs(command.coordinator)
            return SessionResult(False, outcome.seconds, "task killed")
        return SessionResult(
            outcome.succeeded, outcome.seconds, None if outcome.succeeded else _last_line(outcome.output)
        )

    def save(updates: Sequence[RecordUpdate]) -> None:
        for update in updates:
            if update.record.state not in (SegmentState.DONE, SegmentState.FAILED):
                continue  # the journal keeps finished attempts only
            status = RangeState.DONE if update.record.state is SegmentState.DONE else RangeState.FAILED
            journal.record_journal(
                migration_id,
                JournalEntry(stage, update.segment.range, status.value, update.segment.coordinator,
                             update.record.attempts, update.record.duration or 0.0, update.record.last_error or ""),
            )  # fmt: skip

    participants = {node for segment in todo for node in segment.replicas}
    effects = BatchEffects(
        repair=session,
        save=save,
        live_nodes=lambda: participants,  # readiness is awaited per session (await_ready), not postponed
        stop_requested=lambda: stop_requested() or bool(not_ready),
        log=log,
        sleep=sleep,
    )
    result = run_batch(
        todo, {}, config=settings.config(), run_id=f"{migration_id}/{stage}", parallelism=max(1, settings.parallelism),
        effects=effects, run_started=datetime.now(UTC),
    )  # fmt: skip
    if stop_requested():
        raise MigrationError("The task was killed; it stopped what it had started.", "Clear the task to resume.")
    if not_ready:
        raise not_ready[0]
    failed = [outcome for outcome in result.outcomes if outcome.state is not SegmentState.DONE]
    if failed:
        details = [f"{o.segment.range} on {o.segment.coordinator}: {o.reason or 'not repaired'}" for o in failed]
        raise RepairError(
            f"{len(failed)} of {len(todo)} repair segments failed to repair: " + "; ".join(details[:5]),
            "Bring the nodes named back to UN, then retry the task: finished ranges are skipped.",
        )
    return StageResult(len(segments), len(todo), len(segments))


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:300]


def _last_line(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line.strip()]
    return lines[-1][-500:] if lines else "nodetool printed nothing"
