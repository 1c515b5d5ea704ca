"""Noticing repair sessions that can no longer finish, and waiting for a session's participants to be up.

A repair coordinator records its session in `system_distributed.parent_repair_history` and writes the
outcome there when it ends. A coordinator that dies (SIGKILL, OOM, power) never writes the outcome, so a
watcher that waits for it waits until its timeout (an hour by default) while the new replicas still serve
no rows. These rules decide, from what every node gossips, when a session is dead:

- the coordinator restarted after the session began (its gossip *generation* is its start time, in
  seconds since the epoch, and grows with every start): repair sessions do not survive a restart;
- the coordinator is no longer in the ring (its gossip state is gone);
- the coordinator has been unreachable for longer than a grace period (a brief blip is not a death).

Pure: the caller reads the cluster and the clock; see `ringward_airflow.triggers.RepairSessionTrigger`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from ringward.errors import ClusterError

__all__ = [
    "DOWN_GRACE_SECONDS",
    "CoordinatorView",
    "DownTracker",
    "await_participants",
    "dead_session_reason",
]

# How long a coordinator may be unreachable before its session counts as dead. Long enough for a GC pause
# or a dropped connection, short enough that a dead node fails the task within a minute.
DOWN_GRACE_SECONDS = 20.0


@dataclass(frozen=True)
class CoordinatorView:
    """What the cluster says of a session's coordinator at one moment.

    `generation` is the coordinator's gossip generation (its start, epoch seconds), None when no node
    gossips about it any more (it left the ring); `reachable` whether the watcher can reach it now.
    """

    address: str
    generation: int | None
    reachable: bool


class DownTracker:
    """Remembers since when each node has been unreachable, across polls."""

    def __init__(self) -> None:
        self._since: dict[str, float] = {}

    def observe(self, address: str, reachable: bool, now: float) -> float | None:
        """Record one observation; return since when `address` has been down (None while it is up)."""
        if reachable:
            self._since.pop(address, None)
            return None
        return self._since.setdefault(address, now)


def dead_session_reason(
    view: CoordinatorView,
    session_started: float,
    down_since: float | None,
    now: float,
    down_grace: float = DOWN_GRACE_SECONDS,
) -> str | None:
    """Why the session coordinated by `view.address` (begun at `session_started`, epoch seconds) can no
    longer finish, or None while it may still finish."""
    if view.generation is None:
        return f"its coordinator {view.address} is no longer in the ring (no node gossips about it)"
    # Generations are whole seconds and set at start-up, before the node could coordinate anything:
    # a generation later than the session's start is a restart after it.
    if view.generation > int(session_started):
        restarted = datetime.fromtimestamp(view.generation, UTC).strftime("%H:%M:%S UTC")
        began = datetime.fromtimestamp(session_started, UTC).strftime("%H:%M:%S UTC")
        return (
            f"its coordinator {view.address} restarted at {restarted}, after the session began at {began}; "
            "a repair session does not survive a restart of its coordinator"
        )
    if down_since is not None and now - down_since >= down_grace:
        return f"its coordinator {view.address} has been unreachable for {now - down_since:.0f} s"
    return None


def await_participants(
    nodes: Sequence[str],
    probe: Callable[[Sequence[str]], Mapping[str, str]],
    *,
    limit: float,
    interval: float = 5.0,
    clock: Callable[[], float],
    sleep: Callable[[float], None],
    log: Callable[[str], None],
    purpose: str = "the repair",
) -> float:
    """Wait until `probe(nodes)` finds no problem, at most `limit` seconds; return the seconds waited.

    `probe` returns node -> what is wrong with it (e.g. "DN as seen from 127.0.0.4", "JMX refused"),
    leaving out the nodes that are ready. Logs what it waits for when the set of problems changes and
    every ~30 s; raises ClusterError naming each node still not ready once `limit` has passed.
    """
    started = clock()
    last_logged = ""
    last_log_at = started
    while True:
        problems = dict(probe(nodes))
        if not problems:
            waited = clock() - started
            if last_logged:
                log(f"{', '.join(nodes)} ready for {purpose} after {waited:.0f} s.")
            return waited
        now = clock()
        described = "; ".join(f"{node}: {problem}" for node, problem in sorted(problems.items()))
        if now - started >= limit:
            raise ClusterError(
                f"{purpose.capitalize()} needs {', '.join(nodes)}, but after {now - started:.0f} s of waiting "
                f"(limit {limit:.0f} s) not every one is ready: {described}.",
                f"Bring {', '.join(sorted(problems))} back to UN (nodetool status; check its system.log), then "
                "clear this task: ranges already repaired are skipped. Raise node_wait_seconds to wait longer.",
            )
        if described != last_logged or now - last_log_at >= 30:
            log(f"Waiting for {purpose} ({now - started:.0f} s of at most {limit:.0f} s): {described}.")
            last_logged, last_log_at = described, now
        sleep(min(interval, max(0.0, limit - (now - started))))
