"""The migration's repair stage on in-memory fakes: it runs through the nightly executor, journals every
finished attempt, resumes from the journal, retries, keeps a node in one session at a time, and stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

import pytest
from ringward.errors import ClusterError, MigrationError, RepairError
from ringward.repair import Segment
from ringward.ring import TokenRange
from ringward_airflow.migration_stages import RepairSettings, StageResult, participant_problems, repair_ranges
from ringward_cassandra.nodetool import RepairOutcome
from ringward_cassandra.ops_store import JournalEntry

STAGE = "post_repair:1"
FAST = RepairSettings(parallelism=2, max_attempts=3, retry_backoff=0.0, session_timeout=60.0)


class MemoryJournal:
    def __init__(self) -> None:
        self.entries: dict[tuple[str, str, TokenRange], JournalEntry] = {}

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]:
        return {r: e for (m, s, r), e in self.entries.items() if (m, s) == (migration_id, step)}

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None:
        self.entries[(migration_id, entry.step, entry.range)] = entry


class FakeNodetool:
    """`repair` answers from `script(coordinator, attempt)` (True: success) and tracks sessions per node."""

    def __init__(self, script: Callable[[str, int], bool] = lambda node, attempt: True, seconds: float = 0.0) -> None:
        self.script = script
        self.seconds = seconds
        self.calls: list[tuple[str, tuple[TokenRange, ...]]] = []
        self.aborted: list[str] = []
        self.busy: dict[str, int] = {}
        self.overlaps: list[str] = []
        self._lock = threading.Lock()

    def status(self, address: str) -> dict[str, str]:
        return {}

    def repair(
        self, address: str, keyspace: str, ranges: TokenRange | Sequence[TokenRange], *, timeout: float = 3600.0
    ) -> RepairOutcome:
        ranges = tuple(ranges) if isinstance(ranges, Sequence) else (ranges,)
        with self._lock:
            self.calls.append((address, ranges))
            attempt = sum(1 for a, r in self.calls if (a, r) == (address, ranges))
            if self.busy.get(address):
                self.overlaps.append(address)
            self.busy[address] = self.busy.get(address, 0) + 1
        time.sleep(self.seconds)
        with self._lock:
            self.busy[address] -= 1
        ok = self.script(address, attempt)
        output = "Repair completed" if ok else "error: Repair job has failed with the error message: boom"
        return RepairOutcome(address, keyspace, ranges, ok, 0.01, None, output)

    def abort_repairs(self, address: str) -> None:
        self.aborted.append(address)


def _segment(start: int, end: int, *replicas: str) -> Segment:
    return Segment("ks", (), TokenRange(start, end), replicas)


SEGMENTS = [
    _segment(0, 10, "n1", "n2"),
    _segment(10, 20, "n1", "n2"),  # same participants: one command with the range before
    _segment(20, 30, "n3", "n4"),
    _segment(30, 40, "n2", "n3"),
]


def _run(
    journal: MemoryJournal,
    nodetool: FakeNodetool,
    *,
    settings: RepairSettings = FAST,
    await_ready: Callable[[Sequence[str]], None] = lambda nodes: None,
    stop: Callable[[], bool] = lambda: False,
    segments: Sequence[Segment] = SEGMENTS,
) -> StageResult:
    return repair_ranges(
        segments, migration_id="ks@r", stage=STAGE, journal=journal, nodetool=nodetool, settings=settings,
        await_ready=await_ready, stop_requested=stop, log=lambda line: None, sleep=lambda seconds: None,
    )  # fmt: skip


def test_every_range_is_repaired_once_journalled_done_and_a_rerun_repairs_nothing() -> None:
    journal, nodetool = MemoryJournal(), FakeNodetool()
    assert _run(journal, nodetool) == StageResult(ranges=4, repaired=4, done=4)
    assert sorted(len(ranges) for _, ranges in nodetool.calls) == [1, 1, 2]  # shared participants: one session
    entries = journal.journal("ks@r", STAGE)
    assert set(entries) == {s.range for s in SEGMENTS}
    assert {(e.status, e.attempts) for e in entries.values()} == {("done", 1)}
    assert entries[TokenRange(20, 30)].coordinator == "n3"

    again = FakeNodetool()
    assert _run(journal, again) == StageResult(ranges=4, repaired=0, done=4)
    assert again.calls == []


def test_a_retried_task_repairs_only_what_the_journal_does_not_hold_as_done() -> None:
    journal = MemoryJournal()
    journal.record_journal("ks@r", JournalEntry(STAGE, TokenRange(20, 30), "done", "n3", 1, 1.0, ""))
    journal.record_journal("ks@r", JournalEntry(STAGE, TokenRange(30, 40), "failed", "n2", 3, 1.0, "boom"))
    nodetool = FakeNodetool()
    assert _run(journal, nodetool) == StageResult(ranges=4, repaired=3, done=4)
    assert sorted(r for _, ranges in nodetool.calls for r in ranges) == [
        TokenRange(0, 10), TokenRange(10, 20), TokenRange(30, 40),
    ]  # fmt: skip


def test_a_failed_session_is_retried_and_the_journal_counts_the_attempts() -> None:
    journal = MemoryJournal()
    nodetool = FakeNodetool(lambda node, attempt: node != "n3" or attempt > 1)
    assert _run(journal, nodetool).repaired == 4
    assert journal.journal("ks@r", STAGE)[TokenRange(20, 30)].attempts == 2


def test_a_command_failing_every_attempt_fails_the_task_naming_range_node_and_error() -> None:
    journal = MemoryJournal()
    nodetool = FakeNodetool(lambda node, attempt: node != "n3")
    with pytest.raises(RepairError) as failed:
        _run(journal, nodetool)
    assert "1 of 4 repair segments failed to repair: (20, 30] on n3: error: Repair job has failed" in str(
        failed.value.problem
    ), failed.value.problem
    assert "retry the task" in failed.value.fix
    assert sum(1 for node, _ in nodetool.calls if node == "n3") == FAST.max_attempts
    entry = journal.journal("ks@r", STAGE)[TokenRange(20, 30)]
    assert (entry.status, entry.attempts) == ("failed", 3) and "boom" in entry.detail
    assert journal.journal("ks@r", STAGE)[TokenRange(0, 10)].status == "done"


def test_a_node_is_in_one_session_at_a_time() -> None:
    nodetool = FakeNodetool(seconds=0.05)
    _run(MemoryJournal(), nodetool, settings=RepairSettings(parallelism=3, retry_backoff=0.0))
    assert nodetool.overlaps == []
    assert len(nodetool.calls) == 3


def test_a_participant_that_stays_down_fails_the_try_with_the_wait_s_error_and_starts_nothing_more() -> None:
    def await_ready(nodes: Sequence[str]) -> None:
        if "n3" in nodes:
            raise ClusterError("n3: JMX does not answer after 600 s", "Bring n3 back.")

    nodetool = FakeNodetool(seconds=0.02)
    with pytest.raises(ClusterError) as down:
        _run(MemoryJournal(), nodetool, settings=RepairSettings(parallelism=1, retry_backoff=0.0),
             await_ready=await_ready)  # fmt: skip
    assert down.value.problem == "n3: JMX does not answer after 600 s"
    assert all(node != "n3" for node, _ in nodetool.calls)


def test_a_killed_task_aborts_the_running_session_and_says_how_to_resume() -> None:
    killed = threading.Event()

    def script(node: str, attempt: int) -> bool:
        killed.set()  # the kill arrives while the first session runs
        return False

    nodetool = FakeNodetool(script)
    with pytest.raises(MigrationError) as stopped:
        _run(MemoryJournal(), nodetool, settings=RepairSettings(parallelism=1, retry_backoff=0.0), stop=killed.is_set)
    assert "killed" in stopped.value.problem and "Clear the task" in stopped.value.fix
    assert len(nodetool.calls) == 1 and len(nodetool.aborted) == 1


def test_the_participants_problems_name_jmx_gossip_and_cql() -> None:
    class Views(FakeNodetool):
        def status(self, address: str) -> dict[str, str]:
            if address == "n1":
                raise ClusterError("nodetool status on n1 failed: Connection refused\nstack", "fix")
            return {"n1": "UN", "n2": "UN", "n3": "DN"}

    problems = participant_problems(["n1", "n2", "n3"], Views(), lambda node, port: node != "n2", 9042)
    assert problems == {
        "n1": "JMX does not answer (nodetool status on n1 failed: Connection refused)",
        "n2": "refuses CQL connections on port 9042",
        "n3": "DN as seen from n2, DN as seen from n3",
    }
