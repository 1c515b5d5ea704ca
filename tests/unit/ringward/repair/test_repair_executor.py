"""The batch executor: node locks under real threads, retries, liveness, kill switch, window, idempotence."""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ringward.repair import (
    BatchEffects,
    RecordUpdate,
    RepairCommand,
    Segment,
    SegmentRecord,
    SegmentState,
    SessionResult,
    decode_segment,
    encode_segment,
    group_segments,
    parse_config,
    run_batch,
)
from ringward.ring import TokenRange

NODES = ("a", "b", "c", "d", "e", "f")


def segment(index: int, replicas: tuple[str, ...]) -> Segment:
    return Segment("ks", ("t",), TokenRange(index * 100, index * 100 + 50), replicas)


class FakeCluster:
    """Records session intervals per node; fails sessions on demand."""

    def __init__(self, seconds: float = 0.02, failures: dict[int, int] | None = None) -> None:
        self.seconds = seconds
        self.failures = dict(failures or {})
        self.sessions: list[tuple[Segment, float, float]] = []
        self.commands: list[RepairCommand] = []
        self.saved: list[tuple[str, SegmentState]] = []
        self.saves = 0
        self.live: set[str] = set(NODES)
        self._lock = threading.Lock()
        self.max_concurrent = 0
        self._running = 0

    def repair(self, command: RepairCommand) -> SessionResult:
        with self._lock:
            self._running += 1
            self.max_concurrent = max(self.max_concurrent, self._running)
            self.commands.append(command)
        started = time.monotonic()
        time.sleep(self.seconds)
        finished = time.monotonic()
        failed = False
        with self._lock:
            self._running -= 1
            for seg in command.segments:
                self.sessions.append((seg, started, finished))
                left = self.failures.get(seg.range.start // 100, 0)
                if left:
                    self.failures[seg.range.start // 100] = left - 1
                    failed = True
        return SessionResult(not failed, finished - started, "boom" if failed else None)

    def save(self, updates: Sequence[RecordUpdate]) -> None:
        self.saves += 1
        self.saved.extend((u.segment.segment_id, u.record.state) for u in updates)

    def effects(self, **overrides: object) -> BatchEffects:
        fields: dict[str, object] = {
            "repair": self.repair,
            "save": self.save,
            "live_nodes": lambda: set(self.live),
            "log": lambda line: None,
        }
        fields.update(overrides)
        return BatchEffects(**fields)  # type: ignore[arg-type]


def config(**fields: object):  # type: ignore[no-untyped-def]
    # No wait for down nodes by default: FakeCluster's tests sleep on the wall clock.
    return parse_config({"retry_backoff": 0, "parallel_repair_count": 3, "wait_for_down_nodes": 0, **fields})


def run(segments: list[Segment], cluster: FakeCluster, records=None, parallelism: int = 3, **fields: object):  # type: ignore[no-untyped-def]
    effects_overrides = {k: fields.pop(k) for k in list(fields) if k in {"enabled", "stop_requested"}}
    return run_batch(
        segments,
        records or {},
        config=config(**fields),
        run_id="run-1",
        parallelism=parallelism,
        effects=cluster.effects(**effects_overrides),
        run_started=datetime.now(UTC),
    )


def overlapping_sessions(cluster: FakeCluster) -> list[tuple[Segment, Segment]]:
    clashes = []
    for (one, s1, e1), (two, s2, e2) in itertools.combinations(cluster.sessions, 2):
        if set(one.replicas) & set(two.replicas) and s1 < e2 and s2 < e1:
            clashes.append((one, two))
    return clashes


@settings(max_examples=15, deadline=None)
@given(st.lists(st.lists(st.sampled_from(NODES), min_size=2, max_size=3, unique=True), min_size=1, max_size=8))
def test_a_node_is_never_in_two_sessions_at_once(replica_sets: list[list[str]]) -> None:
    segments = [segment(i, tuple(replicas)) for i, replicas in enumerate(replica_sets)]
    cluster = FakeCluster(seconds=0.01)
    result = run(segments, cluster)
    assert overlapping_sessions(cluster) == []
    assert {o.state for o in result.outcomes} == {SegmentState.DONE}
    assert len(result.outcomes) == len(segments)


def test_disjoint_segments_run_concurrently_up_to_the_parallelism() -> None:
    segments = [segment(0, ("a", "b")), segment(1, ("c", "d")), segment(2, ("e", "f")), segment(3, ("a", "c"))]
    cluster = FakeCluster(seconds=0.2)
    run(segments, cluster, parallelism=2)
    assert cluster.max_concurrent == 2
    assert overlapping_sessions(cluster) == []


def test_failed_sessions_are_retried_until_max_retries_then_failed() -> None:
    cluster = FakeCluster(failures={0: 1, 1: 10})
    result = run([segment(0, ("a", "b")), segment(1, ("c", "d"))], cluster, max_retries=2)
    states = {o.segment.range.start // 100: o for o in result.outcomes}
    assert states[0].state is SegmentState.DONE and states[0].record and states[0].record.attempts == 2
    assert states[1].state is SegmentState.FAILED and states[1].record and states[1].record.attempts == 3
    assert states[1].record.last_error == "boom"
    assert result.summary.line().startswith("PARTIAL")


def test_a_segment_with_a_replica_down_is_postponed_and_the_others_run() -> None:
    cluster = FakeCluster()
    cluster.live.discard("c")
    result = run([segment(0, ("a", "b")), segment(1, ("b", "c"))], cluster)
    by_index = {o.segment.range.start // 100: o for o in result.outcomes}
    assert by_index[0].state is SegmentState.DONE
    assert by_index[1].state is SegmentState.POSTPONED and by_index[1].reason == "replica down: c"
    assert [s for s, _, _ in cluster.sessions] == [segment(0, ("a", "b"))]


def test_the_kill_switch_stops_between_segments() -> None:
    cluster = FakeCluster()
    segments = [segment(i, ("a", "b")) for i in range(4)]
    result = run(segments, cluster, enabled=lambda: not cluster.sessions)
    assert len(cluster.sessions) == 1
    postponed = [o for o in result.outcomes if o.state is SegmentState.POSTPONED]
    assert len(postponed) == 3 and result.stop_reason and "kill switch" in result.stop_reason
    assert SegmentState.POSTPONED in {state for _, state in cluster.saved}


def test_a_killed_task_starts_nothing_more() -> None:
    cluster = FakeCluster()
    result = run([segment(i, ("a", "b")) for i in range(3)], cluster, stop_requested=lambda: bool(cluster.sessions))
    assert len(cluster.sessions) == 1
    assert result.stop_reason == "the task was killed"


def test_no_segment_starts_after_the_window_closes() -> None:
    cluster = FakeCluster(seconds=0.3)
    result = run([segment(i, ("a", "b")) for i in range(3)], cluster, window={"max_duration": 0.2})
    assert len(cluster.sessions) == 1
    assert result.stop_reason == "the repair window closed"
    assert result.summary.counts[SegmentState.POSTPONED] == 2


def test_intensity_pauses_the_nodes_of_a_finished_segment() -> None:
    cluster = FakeCluster(seconds=0.1)
    run([segment(0, ("a", "b")), segment(1, ("b", "c"))], cluster, intensity=0.5)
    (_, _, first_end), (_, second_start, _) = sorted(cluster.sessions, key=lambda s: s[1])
    assert second_start - first_end >= 0.09  # pause = session time * (1/0.5 - 1)


def test_segments_done_earlier_in_the_same_run_are_not_repeated() -> None:
    done = segment(0, ("a", "b"))
    records = {
        done.segment_id: SegmentRecord(
            done.segment_id, SegmentState.DONE, datetime.now(UTC) - timedelta(minutes=1), run_id="run-1", attempts=1
        )
    }
    cluster = FakeCluster()
    result = run([done, segment(1, ("c", "d"))], cluster, records=records)
    assert [s for s, _, _ in cluster.sessions] == [segment(1, ("c", "d"))]
    assert {o.state for o in result.outcomes} == {SegmentState.DONE}


def test_segments_travel_as_json_and_come_back_equal() -> None:
    for original in (segment(0, ("a", "b")), Segment("k", ("t1", "t2"), TokenRange(5, -(2**63)), ("a",))):
        assert decode_segment(json.loads(json.dumps(encode_segment(original)))) == original


def test_segments_with_the_same_replicas_share_a_command() -> None:
    cluster = FakeCluster()
    segments = [segment(i, ("a", "b")) for i in range(5)] + [segment(10 + i, ("c", "d")) for i in range(2)]
    result = run(segments, cluster, ranges_per_command=4)
    assert sorted(len(c.segments) for c in cluster.commands) == [1, 2, 4]
    assert all(len({s.replicas for s in c.segments}) == 1 for c in cluster.commands)
    assert sorted(o.segment.segment_id for o in result.outcomes) == sorted(s.segment_id for s in segments)
    assert all(o.state is SegmentState.DONE for o in result.outcomes)


def test_a_command_saves_its_segments_records_together() -> None:
    cluster = FakeCluster()
    segments = [segment(i, ("a", "b")) for i in range(4)]
    run(segments, cluster, ranges_per_command=4)
    assert cluster.saves == 2  # RUNNING for all four at the start, DONE for all four at the end
    assert [state for _, state in cluster.saved] == [SegmentState.RUNNING] * 4 + [SegmentState.DONE] * 4


def test_a_failed_command_retries_all_its_segments_and_records_each() -> None:
    cluster = FakeCluster(failures={1: 1})  # segment 1 fails once: its whole command is repaired again
    segments = [segment(i, ("a", "b")) for i in range(3)]
    result = run(segments, cluster, ranges_per_command=3)
    assert [len(c.segments) for c in cluster.commands] == [3, 3]
    assert all(o.state is SegmentState.DONE for o in result.outcomes)
    assert [state for sid, state in cluster.saved if sid == segments[0].segment_id].count(SegmentState.FAILED) == 1


def test_replicas_listed_in_another_order_share_a_command() -> None:
    # NTS lists a range's replicas in ring-walk order: {a, b} comes as (a, b) and as (b, a).
    segments = [segment(0, ("a", "b")), segment(1, ("b", "a")), segment(2, ("a", "c"))]
    commands = group_segments(segments, 16)
    assert [c.ranges for c in commands] == [(segments[0].range, segments[1].range), (segments[2].range,)]
    assert commands[0].coordinator == "a"
    assert set(commands[0].replicas) == {"a", "b"}


def test_a_command_refuses_segments_of_different_replica_sets() -> None:
    with pytest.raises(ValueError, match="share keyspace, tables and replicas"):
        RepairCommand((segment(0, ("a", "b")), segment(1, ("a", "c"))))


def test_progress_counts_the_whole_run_and_leads_each_line() -> None:
    cluster = FakeCluster(seconds=0.0)
    lines: list[str] = []
    segments = [segment(i, (NODES[i % 3], NODES[3 + i % 3])) for i in range(4)]
    run_batch(
        segments, {}, config=config(), run_id="run-1", parallelism=3, effects=cluster.effects(log=lines.append),
        run_started=datetime.now(UTC), run_total=579, done_before=256,
    )  # fmt: skip
    finished = [line for line in lines if " DONE " in line]
    assert len(finished) == 4
    assert all(line.startswith("[") for line in lines), lines
    assert finished[0].startswith("[257/579 44.4% ETA ")
    assert finished[-1].startswith("[260/579 44.9% ETA ")
    assert all(len(line) < 120 for line in lines), lines  # short: the progress is never off-screen


class VirtualPool:
    """Sessions in virtual time: each command takes `seconds`; the clock jumps to the next completion."""

    def __init__(self, seconds: float = 10.0, fail: set[str] | None = None) -> None:
        self.clock = datetime(2026, 1, 1, tzinfo=UTC)
        self.seconds = seconds
        self.fail = fail or set()
        self.live = set(NODES)
        self.down_until: dict[str, datetime] = {}
        self.running: list[tuple[datetime, RepairCommand]] = []
        self.started: list[tuple[datetime, RepairCommand]] = []

    def now(self) -> datetime:
        return self.clock

    def sleep(self, seconds: float) -> None:
        self.clock += timedelta(seconds=seconds)

    def live_nodes(self) -> set[str]:
        return {n for n in NODES if self.down_until.get(n, self.clock) <= self.clock}

    def submit(self, command: RepairCommand) -> None:
        self.started.append((self.clock, command))
        self.running.append((self.clock + timedelta(seconds=self.seconds), command))

    def wait(self, timeout: float) -> list[tuple[RepairCommand, SessionResult]]:
        deadline = self.clock + timedelta(seconds=timeout)
        ends = sorted(end for end, _ in self.running)
        if not ends or ends[0] > deadline:
            self.clock = deadline
            return []
        self.clock = ends[0]
        done = [(c, SessionResult(c.segments[0].segment_id not in self.fail, self.seconds))
                for end, c in self.running if end <= self.clock]  # fmt: skip
        self.running = [(end, c) for end, c in self.running if end > self.clock]
        return done

    def close(self) -> None:
        pass

    def effects(self, **overrides: object) -> BatchEffects:
        fields: dict[str, object] = {
            "sessions": self, "now": self.now, "sleep": self.sleep, "live_nodes": self.live_nodes,
            "log": lambda line: None,
        }  # fmt: skip
        fields.update(overrides)
        return BatchEffects(**fields)  # type: ignore[arg-type]


def virtual_run(
    segments: list[Segment],
    pool: VirtualPool,
    parallelism: int = 3,  # type: ignore[no-untyped-def]
    settings: dict[str, object] | None = None,
    **overrides: object,
):
    return run_batch(
        segments, {}, config=config(**(settings or {})), run_id="run-1", parallelism=parallelism,
        effects=pool.effects(**overrides), run_started=pool.clock,
    )  # fmt: skip


def test_a_node_back_within_the_run_gets_its_segments_repaired_in_the_same_run() -> None:
    pool = VirtualPool(seconds=60)
    pool.down_until["c"] = pool.clock + timedelta(minutes=5)
    segments = [segment(i, ("a", "b")) for i in range(10)] + [segment(20, ("b", "c"))]
    result = virtual_run(segments, pool)
    assert {o.state for o in result.outcomes} == {SegmentState.DONE}
    started_c = [at for at, c in pool.started if "c" in c.replicas]
    assert started_c and started_c[0] >= datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def test_a_node_still_down_when_nothing_else_is_left_postpones_its_segments_when_told_not_to_wait() -> None:
    pool = VirtualPool(seconds=60)
    pool.down_until["c"] = pool.clock + timedelta(days=1)
    result = virtual_run([segment(0, ("a", "b")), segment(1, ("b", "c"))], pool, settings={"wait_for_down_nodes": 0})
    by_index = {o.segment.range.start // 100: o for o in result.outcomes}
    assert by_index[0].state is SegmentState.DONE
    assert by_index[1].state is SegmentState.POSTPONED and by_index[1].reason == "replica down: c"
    assert pool.clock < datetime(2026, 1, 1, 1, tzinfo=UTC)  # did not wait a day for c


def test_the_run_waits_for_a_node_that_comes_back_within_wait_for_down_nodes() -> None:
    """Only c's segment is left after a minute; c is back at 3 h: repaired in this run, not the next."""
    pool = VirtualPool(seconds=60)
    back = pool.clock + timedelta(hours=3)
    pool.down_until["c"] = back
    lines: list[str] = []
    result = virtual_run([segment(0, ("a", "b")), segment(1, ("b", "c"))], pool,
                         settings={"wait_for_down_nodes": "8h"}, log=lines.append)  # fmt: skip
    assert {o.state for o in result.outcomes} == {SegmentState.DONE}
    started_c = [at for at, c in pool.started if "c" in c.replicas]
    assert started_c and back <= started_c[0] <= back + timedelta(seconds=60)  # seen within a poll
    assert any("wait for c (down): waiting up to 8:00:00" in line for line in lines), lines


def test_the_run_stops_waiting_for_a_down_node_after_wait_for_down_nodes() -> None:
    pool = VirtualPool(seconds=60)
    pool.down_until["c"] = pool.clock + timedelta(days=1)
    result = virtual_run([segment(0, ("a", "b")), segment(1, ("b", "c"))], pool, settings={"wait_for_down_nodes": "2h"})
    by_index = {o.segment.range.start // 100: o for o in result.outcomes}
    assert by_index[0].state is SegmentState.DONE
    assert by_index[1].state is SegmentState.POSTPONED and by_index[1].reason == "replica down: c"
    waited_from = datetime(2026, 1, 1, 0, 1, tzinfo=UTC)  # a-b's session ended: only c's segment left
    assert waited_from + timedelta(hours=2) <= pool.clock <= waited_from + timedelta(hours=2, minutes=1)


def test_the_wait_for_down_nodes_ends_with_the_repair_window() -> None:
    pool = VirtualPool(seconds=60)
    pool.down_until["c"] = pool.clock + timedelta(days=1)
    result = virtual_run([segment(0, ("a", "b")), segment(1, ("b", "c"))], pool,
                         settings={"wait_for_down_nodes": "8h", "window": {"max_duration": "30m"}})  # fmt: skip
    assert result.stop_reason == "the repair window closed"
    assert pool.clock <= datetime(2026, 1, 1, 0, 31, tzinfo=UTC)


def test_the_kill_switch_is_seen_within_seconds_while_waiting_for_a_down_node() -> None:
    pool = VirtualPool(seconds=60)
    pool.down_until["c"] = pool.clock + timedelta(days=1)
    switched_off = pool.clock + timedelta(minutes=10)
    result = virtual_run([segment(0, ("a", "b")), segment(1, ("b", "c"))], pool,
                         settings={"wait_for_down_nodes": "8h"}, enabled=lambda: pool.clock < switched_off)  # fmt: skip
    assert result.stop_reason is not None and "kill switch" in result.stop_reason
    assert switched_off <= pool.clock <= switched_off + timedelta(seconds=5)


def test_back_pressure_holds_a_command_back_then_lets_it_run() -> None:
    pool = VirtualPool(seconds=60)
    release = pool.clock + timedelta(minutes=12)
    lines: list[str] = []

    def held_back(command: RepairCommand) -> str | None:
        return "b has 230 pending compactions (limit 100)" if "b" in command.replicas and pool.clock < release else None

    result = virtual_run([segment(0, ("a", "b")), segment(1, ("c", "d"))], pool, held_back=held_back,
                         log=lines.append)  # fmt: skip
    assert {o.state for o in result.outcomes} == {SegmentState.DONE}
    assert next(at for at, c in pool.started if "b" in c.replicas) >= release
    assert sum("230 pending compactions" in line for line in lines) == 1  # said once, not every look


def test_back_pressure_that_never_clears_postpones_after_two_hours_saying_why() -> None:
    pool = VirtualPool(seconds=60)
    result = virtual_run([segment(0, ("a", "b"))], pool, held_back=lambda command: "a is running cleanup")
    (outcome,) = result.outcomes
    assert outcome.state is SegmentState.POSTPONED and outcome.reason and "a is running cleanup" in outcome.reason
    assert timedelta(hours=2) <= pool.clock - datetime(2026, 1, 1, tzinfo=UTC) < timedelta(hours=3)


def test_a_refused_command_is_postponed_at_once_saying_why_once_and_the_others_run() -> None:
    pool = VirtualPool(seconds=60)
    lines: list[str] = []
    full_disk = "b: 10% of its data disk is free, below min_free_disk_ratio 20%"

    def refused(command: RepairCommand) -> str | None:
        return full_disk if "b" in command.replicas else None

    segments = [segment(0, ("a", "b")), segment(1, ("c", "d")), segment(2, ("b", "c"))]
    result = virtual_run(segments, pool, settings={"ranges_per_command": 1}, refused=refused, log=lines.append)
    by_index = {o.segment.range.start // 100: o for o in result.outcomes}
    assert by_index[1].state is SegmentState.DONE
    for index in (0, 2):
        assert by_index[index].state is SegmentState.POSTPONED and by_index[index].reason == full_disk
    assert [c.replicas for _, c in pool.started] == [("c", "d")]  # no session of b started, none waited for
    assert pool.clock - datetime(2026, 1, 1, tzinfo=UTC) < timedelta(minutes=5)
    assert sum(f"(postponed to the next run): {full_disk}" in line for line in lines) == 1


def test_a_segment_postponed_before_its_first_record_is_recorded_under_the_runs_type() -> None:
    """Not under full (the default record's type): that would overwrite the full history of the range."""
    pool = VirtualPool(seconds=60)
    saved: list[RecordUpdate] = []
    result = virtual_run([segment(0, ("a", "b"))], pool, settings={"repair_type": "incremental"},
                         refused=lambda command: "a: disk full", save=saved.extend)  # fmt: skip
    (outcome,) = result.outcomes
    assert outcome.state is SegmentState.POSTPONED and outcome.record is not None
    assert {u.record.repair_type for u in saved} == {"incremental"}


def test_live_progress_reports_done_failed_and_running_per_node() -> None:
    pool = VirtualPool(seconds=30)
    seen: list[dict[str, object]] = []
    segments = [segment(i, (NODES[i % 3], NODES[3 + i % 3])) for i in range(12)]
    virtual_run(segments, pool, progress=seen.append)
    assert seen and seen[-1]["final"] is True
    assert seen[-1]["done"] == 12 and seen[-1]["failed"] == 0 and seen[-1]["total"] == 12
    per_node = seen[-1]["per_node"]
    assert isinstance(per_node, dict) and sum(c["done"] for c in per_node.values()) == 24  # two replicas each
    # Three sessions of two nodes each start at once: the first report (before any finished) names them running.
    assert len(seen) >= 2 and seen[0]["final"] is False and seen[0]["done"] == 0
    assert seen[0]["running"] == dict.fromkeys(NODES[:6], 1) and seen[0]["sessions"] == 3
    assert seen[-1]["running"] == {} and seen[-1]["sessions"] == 0


def test_a_night_of_twenty_thousand_commands_runs_in_virtual_time_keeping_the_node_rule() -> None:
    nodes = [f"n{i}" for i in range(100)]
    pool = VirtualPool(seconds=5)
    segments = [segment(i, tuple(nodes[(i * 7 + k * 13) % 100] for k in range(3))) for i in range(20_000)]
    result = run_batch(
        segments, {}, config=config(ranges_per_command=1), run_id="run-1", parallelism=5,
        effects=pool.effects(live_nodes=lambda: set(nodes)), run_started=pool.clock,
    )  # fmt: skip
    assert result.summary.counts[SegmentState.DONE] == 20_000
    intervals: dict[str, list[tuple[datetime, datetime]]] = {}
    for at, command in pool.started:
        for node in command.replicas:
            intervals.setdefault(node, []).append((at, at + timedelta(seconds=5)))
    for spans in intervals.values():
        spans.sort()
        assert all(end <= nxt for (_, end), (nxt, _) in itertools.pairwise(spans))


def test_a_unit_over_table_max_repair_time_leaves_its_rest_for_the_next_run() -> None:
    pool = VirtualPool(seconds=3600)
    segments = [segment(i, ("a", "b")) for i in range(4)] + [Segment("other", ("t",), TokenRange(1, 2), ("a", "b"))]
    result = run_batch(
        segments, {}, config=config(table_max_repair_time="2h", ranges_per_command=1), run_id="run-1",
        parallelism=1, effects=pool.effects(), run_started=pool.clock,
    )  # fmt: skip
    states = [(o.segment.keyspace, o.state) for o in result.outcomes]
    assert states.count(("ks", SegmentState.DONE)) == 3  # 1 h, 2 h, then 3 h > 2 h: the fourth waits
    postponed = [o for o in result.outcomes if o.state is SegmentState.POSTPONED]
    assert len(postponed) == 1 and postponed[0].reason and "table_max_repair_time" in postponed[0].reason
    assert ("other", SegmentState.DONE) in states  # another unit on the same nodes is not held back


def windows_of(*windows: list[Segment], records: dict[str, SegmentRecord] | None = None):  # type: ignore[no-untyped-def]
    """A `next_window` over `windows` (the stored plan's later chunks), counting the windows taken."""
    taken: list[int] = []
    rest = iter(windows)

    def next_window():  # type: ignore[no-untyped-def]
        window = next(rest, None)
        if window is None:
            return None
        taken.append(len(window))
        return window, {s.segment_id: records[s.segment_id] for s in window if s.segment_id in (records or {})}

    return next_window, taken


def test_a_later_window_runs_while_a_down_node_is_waited_for_not_after() -> None:
    """The plan comes in windows; c is down for 3 h. The second window's sessions (d, e, f) start at once,
    not after the first window's wait for c, and c's segment still runs in this run once c is back."""
    pool = VirtualPool(seconds=60)
    back = pool.clock + timedelta(hours=3)
    pool.down_until["c"] = back
    second = [segment(10 + i, ("d", "e")) for i in range(3)] + [segment(20, ("e", "f"))]
    next_window, taken = windows_of(second)
    result = run_batch(
        [segment(0, ("a", "b")), segment(1, ("b", "c"))], {}, config=config(wait_for_down_nodes="8h"),
        run_id="run-1", parallelism=3, effects=pool.effects(), run_started=datetime(2026, 1, 1, tzinfo=UTC),
        next_window=next_window,
    )  # fmt: skip
    assert taken == [4]
    assert len(result.outcomes) == 6 and {o.state for o in result.outcomes} == {SegmentState.DONE}
    started = {c.segments[0].range.start // 100: at for at, c in pool.started}
    assert max(started[i] for i in (10, 11, 12, 20)) < datetime(2026, 1, 1, 0, 10, tzinfo=UTC)
    assert back <= started[1] <= back + timedelta(seconds=60)


def test_the_next_window_is_taken_when_the_queue_runs_dry_not_before() -> None:
    """A window is read from the store only when the queue has nothing left to start: the first window's six
    one-range commands on three node pairs run in two rounds (0 s, 60 s) before the second window is asked for."""
    pool = VirtualPool(seconds=60)
    asked_at: list[datetime] = []
    rest = iter([[segment(10, ("a", "b"))], [segment(11, ("c", "d"))]])

    def next_window():  # type: ignore[no-untyped-def]
        asked_at.append(pool.clock)
        window = next(rest, None)
        return None if window is None else (window, {})

    first = [segment(i, pair) for i, pair in enumerate([("a", "b"), ("c", "d"), ("e", "f")] * 2)]
    result = run_batch(first, {}, config=config(ranges_per_command=1), run_id="run-1", parallelism=3,
                       effects=pool.effects(), run_started=pool.clock, next_window=next_window)  # fmt: skip
    assert len(result.outcomes) == 8 and {o.state for o in result.outcomes} == {SegmentState.DONE}
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    # Once per window and once to learn the plan is over; the first ask after the second round started.
    assert len(asked_at) == 3 and asked_at[0] == t0 + timedelta(seconds=120), asked_at
    assert sorted({at for at, _ in pool.started}) == [t0, t0 + timedelta(seconds=60), t0 + timedelta(seconds=120)]


def test_a_retried_task_skips_segments_of_later_windows_done_earlier_in_the_run() -> None:
    pool = VirtualPool(seconds=60)
    done_before = segment(10, ("d", "e"))
    record = SegmentRecord(done_before.segment_id, state=SegmentState.DONE, run_id="run-1")
    next_window, _ = windows_of([done_before, segment(11, ("e", "f"))], records={done_before.segment_id: record})
    result = run_batch([segment(0, ("a", "b"))], {}, config=config(), run_id="run-1", parallelism=3,
                       effects=pool.effects(), run_started=pool.clock, next_window=next_window)  # fmt: skip
    by_index = {o.segment.range.start // 100: o for o in result.outcomes}
    assert by_index[10].reason == "already repaired in this run"
    assert by_index[11].state is SegmentState.DONE and len(pool.started) == 2


class TimedPool(VirtualPool):
    """A VirtualPool whose commands take the seconds `seconds_of` gives them (by their first segment's index)."""

    def __init__(self, seconds_of: dict[int, float], default: float) -> None:
        super().__init__(seconds=default)
        self.seconds_of = seconds_of

    def submit(self, command: RepairCommand) -> None:
        seconds = self.seconds_of.get(command.segments[0].range.start // 100, self.seconds)
        self.started.append((self.clock, command))
        self.running.append((self.clock + timedelta(seconds=seconds), command))


def test_a_freed_node_starts_a_command_that_fits_however_many_wait_on_it_before() -> None:
    """Issue 40: a node that comes free is given a command whose other replicas are free, even when more than a
    handful of commands ahead of it wait on the node and also need a node busy for long. Until 2026-11-30 only the
    first 16 parked on it were looked at again; the one that fitted waited for the long session (1000 s) and the
    node idled meanwhile (on the simulated fleets, 5-6 h of the busiest node's night in hundreds of such gaps)."""
    pool = TimedPool({0: 1000.0}, default=10.0)
    segments = [segment(0, ("a", "b")), segment(1, ("c", "d"))]  # b busy for 1000 s, c for 10 s
    segments += [segment(i, ("c", "b")) for i in range(2, 42)]  # 40 wait on c, then on b
    segments.append(segment(50, ("c", "e")))  # fits as soon as c is free
    result = virtual_run(segments, pool, settings={"ranges_per_command": 1})
    assert {o.state for o in result.outcomes} == {SegmentState.DONE}
    started = {c.segments[0].range.start // 100: at for at, c in pool.started}
    assert started[50] == datetime(2026, 1, 1, tzinfo=UTC) + timedelta(seconds=10), started[50]
