"""Which segments run together: per-replica locks, parallelism, waves, window and intensity.

As in Reaper, a node takes part in at most one repair session at a time (validation compactions are
heavy); at most `parallelism` sessions run at once.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, time, timedelta
from typing import Protocol, TypeVar

from ringward.errors import ConfigurationError
from ringward.repair._config import RepairConfig, RepairWindow

__all__ = [
    "ReplicaLocks",
    "allowed_parallelism",
    "intensity_pause",
    "next_runnable",
    "plan_waves",
    "window_allows_start",
]


class _Replicated(Protocol):
    @property
    def replicas(self) -> tuple[str, ...]: ...


_Job = TypeVar("_Job", bound=_Replicated)


def allowed_parallelism(config: RepairConfig, node_count: int) -> int:
    """max(parallel_repair_count, ceil(percentage% of nodes)), at least 1 (CEP-37: the larger wins)."""
    by_share = math.ceil(config.parallel_repair_percentage * node_count / 100)
    return max(1, config.parallel_repair_count, by_share)


class ReplicaLocks:
    """Per-node locks: a segment may start only when none of its replicas is busy."""

    def __init__(self, busy: Iterable[str] = ()) -> None:
        self._busy: set[str] = set(busy)

    @property
    def busy(self) -> frozenset[str]:
        return frozenset(self._busy)

    def can_take(self, segment: _Replicated) -> bool:
        return self._busy.isdisjoint(segment.replicas)

    def acquire(self, segment: _Replicated) -> bool:
        """Lock every replica of `segment`; False (and nothing locked) when one is busy."""
        if not self.can_take(segment):
            return False
        self._busy.update(segment.replicas)
        return True

    def release(self, segment: _Replicated) -> None:
        self._busy.difference_update(segment.replicas)


def next_runnable(segments: Sequence[_Job], busy_nodes: Iterable[str], limit: int) -> list[_Job]:
    """Up to `limit` segments (or commands), in order, whose replicas are free of `busy_nodes` and of each other."""
    locks = ReplicaLocks(busy_nodes)
    chosen: list[_Job] = []
    for segment in segments:
        if len(chosen) >= limit:
            break
        if locks.acquire(segment):
            chosen.append(segment)
    return chosen


def plan_waves(segments: Sequence[_Job], parallelism: int) -> list[list[_Job]]:
    """Batches of at most `parallelism` segments with disjoint replicas, covering each segment once.

    Greedy in the given order (put the most urgent first): wave 1 takes every segment that fits, in
    order, then wave 2 from the rest, and so on. Built as "each segment into the earliest wave it fits",
    which gives the same waves in near-linear time for tens of thousands of vnode segments.
    """
    if parallelism < 1:
        raise ConfigurationError(f"Parallelism {parallelism} is below 1.", "Allow at least one session.")
    waves: list[list[_Job]] = []
    wave_nodes: list[set[str]] = []
    # Waves below free_from[node] all hold that node; waves below first_open are all full.
    free_from: dict[str, int] = {}
    first_open = 0
    for segment in segments:
        wave = max([first_open, *(free_from.get(node, 0) for node in segment.replicas)])
        while wave < len(waves) and (
            len(waves[wave]) >= parallelism or not wave_nodes[wave].isdisjoint(segment.replicas)
        ):
            wave += 1
        if wave == len(waves):
            waves.append([])
            wave_nodes.append(set())
        waves[wave].append(segment)
        wave_nodes[wave].update(segment.replicas)
        for node in segment.replicas:
            index = free_from.get(node, 0)
            while index < len(waves) and node in wave_nodes[index]:
                index += 1
            free_from[node] = index
        while first_open < len(waves) and len(waves[first_open]) >= parallelism:
            first_open += 1
    return waves


def _in_daily_window(moment: time, start: time, end: time) -> bool:
    if start < end:
        return start <= moment < end
    return moment >= start or moment < end  # crosses midnight


def window_allows_start(now: datetime, window: RepairWindow | None, run_started: datetime | None = None) -> bool:
    """May a new segment start at `now` (UTC)? Both the daily window and the run's max duration must agree."""
    if window is None:
        return True
    if window.start is not None and window.end is not None:
        utc = now.astimezone(UTC) if now.tzinfo is not None else now
        if not _in_daily_window(utc.time(), window.start, window.end):
            return False
    if window.max_duration is not None and run_started is not None:
        return now - run_started < window.max_duration
    return True


def intensity_pause(segment_seconds: float, intensity: float) -> timedelta:
    """Pause after a segment, as Reaper does: segment time * (1/intensity - 1); 0 at intensity 1."""
    if not 0 < intensity <= 1:
        raise ConfigurationError(f"Intensity {intensity} is outside (0, 1].", "Use a value in (0, 1].")
    return timedelta(seconds=max(0.0, segment_seconds) * (1 / intensity - 1))
