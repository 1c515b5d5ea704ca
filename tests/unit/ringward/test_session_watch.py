"""When a repair session is dead, and how a task waits for a session's participants."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest
from ringward.errors import ClusterError
from ringward.session_watch import CoordinatorView, DownTracker, await_participants, dead_session_reason

STARTED = 1_795_474_200.4  # a session's start, epoch seconds


def test_a_live_coordinator_that_did_not_restart_keeps_its_session() -> None:
    view = CoordinatorView("127.0.0.4", generation=1_795_474_100, reachable=True)
    assert dead_session_reason(view, STARTED, down_since=None, now=STARTED + 300) is None


def test_a_coordinator_restarted_after_the_session_began_killed_it() -> None:
    view = CoordinatorView("127.0.0.4", generation=int(STARTED) + 25, reachable=True)
    reason = dead_session_reason(view, STARTED, down_since=None, now=STARTED + 40)
    assert reason is not None and "127.0.0.4 restarted" in reason


def test_the_generation_of_the_start_second_itself_is_not_a_restart() -> None:
    # The node started in the same second as the session (whole seconds): it was already up.
    view = CoordinatorView("127.0.0.4", generation=int(STARTED), reachable=True)
    assert dead_session_reason(view, STARTED, down_since=None, now=STARTED + 1) is None


def test_a_coordinator_gone_from_gossip_left_the_ring() -> None:
    view = CoordinatorView("127.0.0.4", generation=None, reachable=False)
    reason = dead_session_reason(view, STARTED, down_since=None, now=STARTED)
    assert reason is not None and "no longer in the ring" in reason


def test_an_unreachable_coordinator_is_dead_only_after_the_grace() -> None:
    view = CoordinatorView("127.0.0.4", generation=1_795_474_100, reachable=False)
    assert dead_session_reason(view, STARTED, down_since=STARTED + 10, now=STARTED + 29, down_grace=20) is None
    reason = dead_session_reason(view, STARTED, down_since=STARTED + 10, now=STARTED + 30, down_grace=20)
    assert reason is not None and "unreachable for 20 s" in reason


def test_down_tracker_keeps_the_first_moment_and_forgets_on_recovery() -> None:
    tracker = DownTracker()
    assert tracker.observe("a", False, 10.0) == 10.0
    assert tracker.observe("a", False, 15.0) == 10.0
    assert tracker.observe("a", True, 16.0) is None
    assert tracker.observe("a", False, 20.0) == 20.0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_await_participants_returns_once_every_node_is_ready_and_says_so() -> None:
    clock = FakeClock()
    lines: list[str] = []

    def probe(nodes: Sequence[str]) -> Mapping[str, str]:
        return {"127.0.0.3": "DN as seen from 127.0.0.4"} if clock.now < 42 else {}

    waited = await_participants(
        ["127.0.0.4", "127.0.0.3"], probe, limit=300, interval=5, clock=clock, sleep=clock.sleep, log=lines.append
    )
    assert waited == 45
    assert "127.0.0.3: DN as seen from 127.0.0.4" in lines[0]
    assert "ready" in lines[-1]


def test_await_participants_fails_naming_the_node_and_the_fix_after_the_limit() -> None:
    clock = FakeClock()
    with pytest.raises(ClusterError) as failure:
        await_participants(
            ["127.0.0.4", "127.0.0.3"], lambda nodes: {"127.0.0.3": "JMX refused"}, limit=60, interval=7,
            clock=clock, sleep=clock.sleep, log=lambda line: None,
        )  # fmt: skip
    assert clock.now == 60  # the last sleep is cut to the limit
    assert "127.0.0.3: JMX refused" in failure.value.problem
    assert "Bring 127.0.0.3 back to UN" in failure.value.fix


def test_await_participants_does_not_wait_when_all_are_up() -> None:
    clock = FakeClock()
    lines: list[str] = []
    assert await_participants(["a"], lambda nodes: {}, limit=5, clock=clock, sleep=clock.sleep, log=lines.append) == 0
    assert lines == []
