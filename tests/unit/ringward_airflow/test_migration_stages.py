"""The migration's repair stage on in-memory fakes: it runs through the nightly executor, journals every
finished attempt, resumes from the journal, retries, keeps a node in one session at a time, and stops."""

from __future__ import annotations

import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import pytest
from ringward.errors import (
    ClusterError,
    ConfigurationError,
    MigrationError,
    RepairError,
    UnsafeChangeError,
    VerificationError,
)
from ringward.migration import MigrationStep, cleanup_nodes
from ringward.migration_progress import StageProgress, stage_progress
from ringward.migration_record import MigrationRecord
from ringward.placement import replica_map
from ringward.plan import MigrationPlan
from ringward.repair import Segment
from ringward.replication import Replication
from ringward.ring import Ring, TokenRange
from ringward.ring_sources import load_ring_file
from ringward_airflow.migration_stages import (
    PrecheckInput,
    RepairSettings,
    StageResult,
    apply_step,
    check_health,
    clean_up,
    confirm_ownership,
    participant_problems,
    preview_in_sync,
    repair_ranges,
    rollback_target,
    run_precheck_checks,
    save_ring_picture,
)
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


# -- the other stages, on the seed's ring -------------------------------------------------------------------
RING: Ring = load_ring_file(Path(__file__).resolve().parents[2] / "fixtures" / "rings" / "local_num_tokens_4.json")
SIMPLE_2 = Replication.simple(2)
NTS_2 = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 2})
NTS_3 = Replication.parse({"class": "NetworkTopologyStrategy", "dc1": 3})
STEP = MigrationStep(1, 1, SIMPLE_2, NTS_3)


class FakeCql:
    def __init__(self, replication: Replication, agreed: bool = True, releases: dict[str, list[str]] | None = None):
        self.current = replication
        self.agreed = agreed
        self.releases = releases or {"5.0.9": RING.addresses()}
        self.statements: list[str] = []

    def replication(self, keyspace: str) -> Replication:
        return self.current

    def alter_replication(self, keyspace: str, replication: Replication) -> str:
        self.current = replication
        self.statements.append(f"ALTER {keyspace} {replication.to_cql()}")
        return self.statements[-1]

    def schema_agreed(self, wait_seconds: float) -> bool:
        return self.agreed

    def schema_versions_text(self) -> str:
        return "version 317bd95f on 127.0.0.6; version 7134970d on the others"

    def release_versions(self) -> dict[str, list[str]]:
        return self.releases


class ClusterNodetool(FakeNodetool):
    """Reports the placement of `cql`'s current replication (what a node answers once the ALTER reached it)."""

    def __init__(self, cql: FakeCql, lagging: str | None = None) -> None:
        super().__init__()
        self.cql = cql
        self.lagging = lagging  # a node still reporting the old placement
        self.states: dict[str, dict[str, str]] = {}
        self.streaming: set[str] = set()
        self.done: list[tuple[str, str]] = []
        self.previews: dict[str, bool] = {}
        self.out_of_sync_previews: dict[str, int] = {}
        self.repairs: list[str] = []

    def status(self, address: str) -> dict[str, str]:
        return self.states.get(address, {a: "UN" for a in RING.addresses()})

    def is_streaming(self, address: str) -> bool:
        return address in self.streaming

    def describe_ring(self, address: str, keyspace: str) -> list[tuple[TokenRange, frozenset[str]]]:
        placement = replica_map(RING, SIMPLE_2 if address == self.lagging else self.cql.current)
        return [(r, frozenset(placement.for_token(r.end))) for r in placement.ranges]

    def snapshot(self, address: str, keyspace: str, tag: str) -> None:
        self.done.append(("snapshot", address))

    def cleanup(self, address: str, keyspace: str) -> None:
        self.done.append(("cleanup", address))

    def repair(self, address: str, keyspace: str, ranges: object, *, timeout: float = 3600.0,
               preview: bool = False) -> RepairOutcome:  # fmt: skip
        ranges = tuple(ranges) if isinstance(ranges, Sequence) else (ranges,)  # type: ignore[arg-type]
        if not preview:
            self.repairs.append(address)
            return RepairOutcome(address, keyspace, ranges, True, 0.01, None, "Repair completed successfully", None)  # type: ignore[arg-type]
        in_sync = self.previews.get(address, True)
        left = self.out_of_sync_previews.get(address, 0)
        if left:  # out of sync this many more previews (writes in flight), then in sync
            self.out_of_sync_previews[address] = left - 1
            in_sync = False
        output = "Previewed data was in sync" if in_sync else "Total estimated streaming: 12 ranges, 3 sstables"
        return RepairOutcome(address, keyspace, ranges, True, 0.01, None, output, in_sync)  # type: ignore[arg-type]


def test_a_healthy_cluster_passes_and_each_problem_is_named_in_one_refusal() -> None:
    cql = FakeCql(SIMPLE_2)
    nodetool = ClusterNodetool(cql)
    check_health(RING, nodetool, cql)
    first, second = RING.addresses()[:2]
    nodetool.states[first] = {a: ("DN" if a == second else "UN") for a in RING.addresses()}
    nodetool.streaming.add(second)
    cql.agreed = False
    with pytest.raises(ClusterError) as refused:
        check_health(RING, nodetool, cql)
    assert f"{first} sees {{'{second}': 'DN'}}" in refused.value.problem
    assert f"{second} is streaming" in refused.value.problem
    assert "do not agree on the schema (version 317bd95f on 127.0.0.6" in refused.value.problem
    assert "resetlocalschema" in refused.value.fix


def test_mixed_releases_are_refused_before_anything_else() -> None:
    cql = FakeCql(SIMPLE_2, releases={"5.0.9": RING.addresses()[1:], "4.1.5": RING.addresses()[:1]})
    with pytest.raises(ClusterError) as refused:
        check_health(RING, ClusterNodetool(cql), cql)
    assert "different Cassandra releases" in refused.value.problem


def test_precheck_checks_run_in_order_and_a_refusal_stops_them() -> None:
    seen: list[str] = []

    def capacity(given: PrecheckInput) -> None:
        seen.append(f"capacity of {given.keyspace}")
        raise UnsafeChangeError("127.0.0.3 would be 95 % full.", "Add disk first.")

    cql = FakeCql(SIMPLE_2)
    given = PrecheckInput("ks", RING, None, ClusterNodetool(cql), cql)  # type: ignore[arg-type]
    with pytest.raises(UnsafeChangeError):
        run_precheck_checks([lambda g: seen.append("pause reaper"), capacity, lambda g: seen.append("never")], given)
    assert seen == ["pause reaper", "capacity of ks"]


def test_the_alter_runs_once_and_every_node_confirms_the_new_owners() -> None:
    cql = FakeCql(SIMPLE_2)
    nodetool = ClusterNodetool(cql)
    lines: list[str] = []
    apply_step(STEP, "ks", RING, cql, nodetool, lines.append)
    assert cql.statements == [f"ALTER ks {NTS_3.to_cql()}"] and cql.current == NTS_3
    apply_step(STEP, "ks", RING, cql, nodetool, lines.append)  # the retry: already applied
    assert len(cql.statements) == 1 and "nothing to alter" in lines[-2]


def test_a_keyspace_changed_by_someone_else_is_refused_and_not_altered() -> None:
    cql = FakeCql(Replication.simple(1))
    with pytest.raises(MigrationError) as refused:
        apply_step(STEP, "ks", RING, cql, ClusterNodetool(cql), print)
    assert "someone else changed it" in refused.value.problem and cql.statements == []


def test_an_alter_without_schema_agreement_fails_the_try_naming_the_versions() -> None:
    cql = FakeCql(SIMPLE_2, agreed=False)
    with pytest.raises(ClusterError) as failed:
        apply_step(STEP, "ks", RING, cql, ClusterNodetool(cql), print)
    assert "did not agree on the schema within 60 s: version 317bd95f" in failed.value.problem
    assert "does not alter twice" in failed.value.fix


def test_a_node_reporting_the_old_owners_fails_the_ownership_confirmation() -> None:
    cql = FakeCql(NTS_3)
    lagging = RING.addresses()[2]
    with pytest.raises(ClusterError) as failed:
        confirm_ownership(RING, STEP, "ks", ClusterNodetool(cql, lagging=lagging))
    assert failed.value.problem.startswith(f"{lagging} reports replicas ")
    confirm_ownership(RING, STEP, "ks", ClusterNodetool(cql))


def test_preview_counts_segments_in_sync_and_names_those_out_of_sync() -> None:
    segments = [_segment(0, 10, "127.0.0.3", "127.0.0.2"), _segment(20, 30, "127.0.0.4", "127.0.0.5")]
    nodetool = ClusterNodetool(FakeCql(NTS_3))
    assert preview_in_sync(segments, nodetool, lambda: None) == 2
    nodetool.previews["127.0.0.4"] = False
    with pytest.raises(VerificationError) as failed:
        preview_in_sync(segments, nodetool, lambda: None, sleep=lambda seconds: None)
    assert (
        "in 1 commands, in each of 3 previews: (20, 30] among 127.0.0.4, 127.0.0.5: "
        "Total estimated streaming" in failed.value.problem
    )
    assert "Do not run cleanup" in failed.value.fix
    assert nodetool.repairs == []  # a preview never repairs: it reports


def test_preview_out_of_sync_twice_is_previewed_again_and_passes() -> None:
    """Writes in flight between the replicas' Merkle trees read as out of sync: a later preview is in sync."""
    segments = [_segment(0, 10, "127.0.0.3", "127.0.0.2"), _segment(20, 30, "127.0.0.4", "127.0.0.5")]
    nodetool = ClusterNodetool(FakeCql(NTS_3))
    nodetool.out_of_sync_previews["127.0.0.4"] = 2
    lines: list[str] = []
    pauses: list[float] = []
    assert preview_in_sync(segments, nodetool, lambda: None, lines.append, pauses.append) == 2
    assert nodetool.repairs == [] and pauses == [5.0, 5.0]
    assert len(lines) == 2 and "(20, 30] among 127.0.0.4, 127.0.0.5 out of sync" in lines[0]


def test_cleanup_snapshots_and_cleans_only_the_nodes_that_lost_ranges() -> None:
    record = MigrationRecord("ks@r", "ks", RING, NTS_3, NTS_2, NTS_2, (MigrationStep(1, 1, NTS_3, NTS_2),), "ks@r", "r")
    nodetool = ClusterNodetool(FakeCql(NTS_2))
    lost = cleanup_nodes(RING, NTS_3, NTS_2)
    assert lost and clean_up(record, nodetool, snapshot=True, stop_check=lambda: None, log=print) == lost
    assert nodetool.done == [(kind, node) for node in lost for kind in ("snapshot", "cleanup")]


def test_describering_output_parses_to_ranges_and_their_replicas() -> None:
    from ringward_cassandra.nodetool import parse_describering

    output = (
        "Schema Version:7134970d\nTokenRange: \n"
        "\tTokenRange(start_token:-9000, end_token:-100, endpoints:[127.0.0.3, 127.0.0.2], rpc_endpoints:[...])\n"
        "\tTokenRange(start_token:-100, end_token:5000, endpoints:[127.0.0.4], rpc_endpoints:[...])\n"
    )
    assert parse_describering(output) == [
        (TokenRange(-9000, -100), frozenset({"127.0.0.2", "127.0.0.3"})),
        (TokenRange(-100, 5000), frozenset({"127.0.0.4"})),
    ]


# -- the deferred path: starting a wave, journalling what the trigger reports --------------------------------
class StartingNodetool:
    """`start_repair` returns a parent id, or None for a command that finished before it could be followed."""

    def __init__(self, finished_at_once: set[str] = frozenset()) -> None:  # type: ignore[assignment]
        self.finished_at_once = finished_at_once
        self.started: list[str] = []

    def start_repair(self, address: str, keyspace: str, ranges: Sequence[TokenRange]) -> str | None:
        self.started.append(address)
        return None if address in self.finished_at_once else f"parent-{address}"


def test_a_wave_starts_replica_disjoint_commands_after_their_participants_are_ready() -> None:
    from ringward_airflow.migration_stages import start_wave

    awaited: list[Sequence[str]] = []
    journal, nodetool = MemoryJournal(), StartingNodetool(finished_at_once={"n3"})
    started = start_wave(SEGMENTS, parallelism=2, migration_id="ks@r", stage=STAGE, journal=journal,
                         nodetool=nodetool, await_ready=awaited.append)  # fmt: skip
    assert awaited == [["n1", "n2", "n3", "n4"]]  # n1+n2 and n3+n4 are disjoint; n2+n3 waits for a later wave
    assert sorted(nodetool.started) == ["n1", "n3"]
    assert list(started) == ["parent-n1"] and started["parent-n1"].ranges == (TokenRange(0, 10), TokenRange(10, 20))
    assert {r: e.status for r, e in journal.journal("ks@r", STAGE).items()} == {TokenRange(20, 30): "done"}


def test_the_trigger_s_event_is_journalled_and_a_dead_session_fails_the_try_naming_it() -> None:
    from ringward.repair import RepairCommand
    from ringward_airflow.migration_stages import record_session_outcomes, session_labels

    labels = session_labels({
        "p1": RepairCommand((SEGMENTS[0], SEGMENTS[1])),
        "p2": RepairCommand((SEGMENTS[2],)),
    })  # fmt: skip
    event = {
        "status": "dead",
        "labels": labels,
        "sessions": {"p1": {"ok": True}, "p2": {"ok": False, "error": "coordinator n3 restarted: cannot finish"}},
    }
    journal = MemoryJournal()
    with pytest.raises(RepairError) as failed:
        record_session_outcomes(event, migration_id="ks@r", stage=STAGE, journal=journal, session_timeout=60)
    assert failed.value.problem == "1 repair commands failed: (20, 30] on n3: coordinator n3 restarted: cannot finish"
    statuses = {r: e.status for r, e in journal.journal("ks@r", STAGE).items()}
    assert statuses == {TokenRange(0, 10): "done", TokenRange(10, 20): "done", TokenRange(20, 30): "failed"}


def test_a_session_without_a_result_when_the_wait_timed_out_says_so() -> None:
    from ringward.repair import RepairCommand
    from ringward_airflow.migration_stages import record_session_outcomes, session_labels

    event = {"status": "timeout", "labels": session_labels({"p": RepairCommand((SEGMENTS[3],))}), "sessions": {}}
    with pytest.raises(RepairError) as failed:
        record_session_outcomes(event, migration_id="ks@r", stage=STAGE, journal=MemoryJournal(), session_timeout=60)
    assert "(30, 40] on n2: no result within the session timeout (60 s)" in failed.value.problem


# -- the stage's progress beside its journal (what the Migration page reads) -----------------------------
class ProgressJournal(MemoryJournal):
    """A journal that keeps each stage's progress, as both ops stores do."""

    def __init__(self) -> None:
        super().__init__()
        self.stored: list[tuple[str, StageProgress]] = []

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None:
        self.stored.append((migration_id, progress))

    def expected(self, segments: Sequence[Segment] = SEGMENTS) -> StageProgress:
        """The stage's progress as its journal holds it now."""
        statuses = {r: e.status for r, e in self.journal("ks@r", STAGE).items()}
        return stage_progress(STAGE, [s.range for s in segments], statuses)


def _without_time(progress: StageProgress) -> StageProgress:
    return replace(progress, updated_at=None)


def test_a_stage_stores_its_progress_as_found_and_as_its_journal_holds_it_when_it_ends() -> None:
    """Stored when the stage starts (the journal as a retried task finds it) and when it ends, failed or not: each
    time what `stage_progress` makes of the journal then, its counts the journal's."""
    journal = ProgressJournal()
    journal.record_journal("ks@r", JournalEntry(STAGE, TokenRange(30, 40), "done", "n2", 1, 1.0, ""))
    found = journal.expected()
    with pytest.raises(RepairError):
        _run(journal, FakeNodetool(lambda node, attempt: node != "n3"))
    assert [m for m, _ in journal.stored] == ["ks@r"] * len(journal.stored) and len(journal.stored) >= 2
    assert _without_time(journal.stored[0][1]) == found and (found.done, found.failed) == (1, 0)
    last = journal.stored[-1][1]
    assert _without_time(last) == journal.expected() and (last.done, last.failed) == (3, 1)
    assert last.updated_at is not None and last.codes().triaged(0, 4) == [2, 0, 1, 3]  # failed first, then done
    assert _run(journal, FakeNodetool()).repaired == 1  # the retry: the failed range, then all done
    assert (journal.stored[-1][1].done, journal.stored[-1][1].failed) == (4, 0)


def test_a_running_stage_stores_its_progress_at_most_every_interval() -> None:
    """Between the start and the end, the entries journalled are stored at most every `PROGRESS_INTERVAL`."""
    from ringward_airflow.migration_stages import PROGRESS_INTERVAL, StageProgressWriter

    journal, now = ProgressJournal(), [0.0]
    writer = StageProgressWriter(journal, "ks@r", STAGE, SEGMENTS, {}, clock=lambda: now[0])
    writer.store()
    for i, segment in enumerate(SEGMENTS):
        entry = JournalEntry(STAGE, segment.range, "done", "n1", 1, 1.0, "")
        journal.record_journal("ks@r", entry)
        writer.journalled(entry)
        now[0] = (i + 1) * PROGRESS_INTERVAL / 2
        writer.store()
    assert [p.done for _, p in journal.stored] == [0, 2, 4]
    writer.store(final=True)
    assert [p.done for _, p in journal.stored] == [0, 2, 4, 4]


def test_the_deferred_repair_stores_its_progress_after_its_journal_writes() -> None:
    """A wave's command that finished before it could be followed is journalled done and its progress stored; after
    the trigger's event, `keep_stage_progress` stores what the journal then holds (the failed session first)."""
    from ringward.repair import RepairCommand
    from ringward_airflow.migration_stages import (
        StageProgressWriter,
        keep_stage_progress,
        record_session_outcomes,
        session_labels,
        start_wave,
    )

    journal = ProgressJournal()
    nodetool = StartingNodetool(finished_at_once={"n3"})
    writer = StageProgressWriter(journal, "ks@r", STAGE, SEGMENTS, {})
    started = start_wave(SEGMENTS, parallelism=2, migration_id="ks@r", stage=STAGE, journal=journal,
                         nodetool=nodetool, await_ready=lambda nodes: None, progress=writer)  # fmt: skip
    assert list(started) == ["parent-n1"]
    assert _without_time(journal.stored[-1][1]) == journal.expected() and journal.stored[-1][1].done == 1
    event = {"status": "dead", "labels": session_labels({"p1": RepairCommand((SEGMENTS[0], SEGMENTS[1]))}),
             "sessions": {"p1": {"ok": False, "error": "boom"}}}  # fmt: skip
    with pytest.raises(RepairError):
        record_session_outcomes(event, migration_id="ks@r", stage=STAGE, journal=journal, session_timeout=60)
    keep_stage_progress(journal, "ks@r", STAGE, SEGMENTS)
    assert _without_time(journal.stored[-1][1]) == journal.expected()
    assert (journal.stored[-1][1].done, journal.stored[-1][1].failed) == (1, 2)
    stored = len(journal.stored)
    keep_stage_progress(MemoryJournal(), "ks@r", STAGE, SEGMENTS)  # a journal that keeps no progress: nothing
    assert len(journal.stored) == stored


# -- resuming an unfinished migration -------------------------------------------------------------------
class MemoryStore(MemoryJournal):
    """The ops keyspace's migrations, leases and journal, in memory."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: dict[str, tuple[str, dict[str, object]]] = {}
        self.leases: dict[str, str] = {}

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, None, dict[str, object]]]:
        return [(m, state, None, body) for m, (state, body) in self.rows.items() if body["keyspace"] == keyspace]

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        holder = self.leases.setdefault(resource, owner)
        if holder != owner:
            raise MigrationError(f"{resource} is leased by {holder}.", "Wait for it.")

    def record_migration(self, migration_id: str, keyspace: str, old: str, new: str, state: str,
                         plan: dict[str, object]) -> None:  # fmt: skip
        self.rows[migration_id] = (state, plan)


def _half_done_store() -> tuple[MemoryStore, MigrationRecord]:
    record = MigrationRecord("ks@run-1", "ks", RING, SIMPLE_2, NTS_3, NTS_3, (STEP,), "ks@run-1", "run-1",
                             dag_id="keyspace_migration", summary="the plan")  # fmt: skip
    store = MemoryStore()
    store.record_migration(record.migration_id, "ks", "{}", "{}", "altered:1", record.to_json())
    pre = record.repair_segments(1, "pre")
    for segment in pre:
        store.record_journal(record.migration_id, JournalEntry("pre_repair:1", segment.range, "done", "n", 1, 0, ""))
    return store, record


def test_the_unfinished_migration_is_found_with_its_row_state_and_a_new_run_takes_it_over() -> None:
    from ringward.migration_record import MigrationState
    from ringward_airflow.migration_stages import take_over, unfinished_migration

    store, record = _half_done_store()
    found = unfinished_migration(store, "ks", NTS_3)
    assert found is not None and found.migration_id == "ks@run-1" and found.state == MigrationState.altered(1)
    assert found.steps == record.steps and found.ring == RING  # read, not planned again
    left = take_over(found, store, run_id="run-2", dag_id=None)
    assert store.leases == {"keyspace:ks": "ks@run-1"}
    state, stored = store.rows["ks@run-1"]
    assert state == "altered:1" and stored["run_id"] == "run-2" and stored["dag_id"] == "keyspace_migration"
    pre, post = len(record.repair_segments(1, "pre")), len(record.repair_segments(1, "post"))
    assert left[0].startswith("step 1/1: ALTER applied; pre-repair of ")
    assert f": {pre} of {pre} segments done; repair of " in left[0] and f": 0 of {post} segments done" in left[0]
    assert left[-1] == "cleanup: to run (after verification)"


def test_a_different_target_while_one_is_unfinished_is_refused_and_none_is_found_for_another_keyspace() -> None:
    from ringward_airflow.migration_stages import unfinished_migration

    store, _ = _half_done_store()
    assert unfinished_migration(store, "other", NTS_3) is None
    with pytest.raises(MigrationError) as refused:
        unfinished_migration(store, "ks", NTS_2)
    assert "unfinished migration ks@run-1" in refused.value.problem


def test_a_row_state_ringward_never_writes_is_refused_naming_the_fix() -> None:
    from ringward_airflow.migration_stages import unfinished_migration

    store, _ = _half_done_store()
    _, body = store.rows["ks@run-1"]
    store.rows["ks@run-1"] = ("altered", body)  # hand-edited: no step count
    with pytest.raises(MigrationError) as refused:
        unfinished_migration(store, "ks", NTS_3)
    assert "'altered' is not one ringward writes" in refused.value.problem
    assert "planned, altered:<step>, cleaned or done" in refused.value.fix


def test_a_lease_someone_else_holds_stops_the_take_over_before_the_record_changes() -> None:
    from ringward_airflow.migration_stages import take_over, unfinished_migration

    store, _ = _half_done_store()
    store.leases["keyspace:ks"] = "ks@other"
    found = unfinished_migration(store, "ks", NTS_3)
    assert found is not None
    with pytest.raises(MigrationError):
        take_over(found, store, run_id="run-2", dag_id="keyspace_migration")
    assert store.rows["ks@run-1"][1]["run_id"] == "run-1"


class _Recorded:
    def __init__(self, rows: dict[str, tuple[dict[str, object], str]]) -> None:
        self.rows = rows

    def migration(self, migration_id: str) -> dict[str, object] | None:
        return self.rows[migration_id][0] if migration_id in self.rows else None

    def migration_state(self, migration_id: str) -> str | None:
        return self.rows[migration_id][1] if migration_id in self.rows else None


def test_a_rollback_targets_the_old_replication_until_cleanup() -> None:
    old = {"class": "SimpleStrategy", "replication_factor": "2"}
    store = _Recorded({
        "ks@run1": ({"keyspace": "ks", "old": old, "lease_owner": "ks@run0"}, "altered:1"),
        "ks@run2": ({"keyspace": "ks", "old": old}, "cleaned"),
    })  # fmt: skip
    assert rollback_target(store, "ks@run1") == ("ks", old, "ks@run0")
    with pytest.raises(MigrationError, match="already ran cleanup") as cleaned:
        rollback_target(store, "ks@run2")
    assert "new keyspace_migration" in str(cleaned.value)
    with pytest.raises(ConfigurationError, match="No migration 'nope' is recorded") as unknown:
        rollback_target(store, "nope")
    assert "SELECT migration_id" in str(unknown.value)


def test_the_ring_picture_is_written_only_with_a_folder(tmp_path: Path) -> None:
    from ringward.plan import build_plan

    plan = build_plan(RING, Replication.simple(1), Replication.simple(2), keyspace="ks")
    assert save_ring_picture(plan, None, "ks@run1") is None
    picture = save_ring_picture(plan, str(tmp_path / "plans"), "ks@manual__2026-11-24T06:00:00+00:00")
    assert picture is not None and picture.parent == tmp_path / "plans"
    assert ":" not in picture.name and picture.read_text().startswith("<svg")


def _seed_plan() -> MigrationPlan:
    from ringward.plan import build_plan

    return build_plan(RING, Replication.simple(1), Replication.simple(2), keyspace="ks")


def test_a_link_planted_at_the_ring_picture_is_replaced_not_followed(tmp_path: Path) -> None:
    # Security review (issue 25, finding 10): another local user plants a link named like the next picture
    # in the shared plans folder; writing the picture must not overwrite what the link points to.
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    plans = tmp_path / "plans"
    plans.mkdir(mode=0o700)
    (plans / "ks@run1.svg").symlink_to(victim)
    picture = save_ring_picture(_seed_plan(), str(plans), "ks@run1")
    assert victim.read_text() == "precious"
    assert picture is not None and not picture.is_symlink() and picture.read_text().startswith("<svg")
    assert stat.S_IMODE(picture.stat().st_mode) == 0o600
    assert [p.name for p in plans.iterdir()] == ["ks@run1.svg"]  # no temporary file left behind


def test_the_ring_picture_folder_is_created_private(tmp_path: Path) -> None:
    picture = save_ring_picture(_seed_plan(), str(tmp_path / "new" / "plans"), "ks@run1")
    assert picture is not None
    assert stat.S_IMODE((tmp_path / "new" / "plans").stat().st_mode) == 0o700
    assert stat.S_IMODE(picture.stat().st_mode) == 0o600


@pytest.mark.parametrize("planted", ["world-writable", "link"])
def test_a_planted_plans_folder_is_refused(tmp_path: Path, planted: str) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    plans = tmp_path / "plans"
    if planted == "link":
        plans.symlink_to(elsewhere, target_is_directory=True)
    else:
        plans.mkdir()
        plans.chmod(0o777)
    with pytest.raises(ConfigurationError, match="private to the user") as refused:
        save_ring_picture(_seed_plan(), str(plans), "ks@run1")
    assert "symbolic link" in str(refused.value) if planted == "link" else "mode 777" in str(refused.value)
    assert f"Remove {plans}" in str(refused.value)
    assert list(elsewhere.iterdir()) == [] and not (plans / "ks@run1.svg").exists()
