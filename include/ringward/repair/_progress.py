"""A progress line for long work (migration repair, nightly repair): done/total, rate and ETA."""

from __future__ import annotations

import time
from collections.abc import Callable

from ringward.errors import ConfigurationError
from ringward.repair._units import format_duration

__all__ = ["Progress"]


class Progress:
    """Counts finished items against a total; `line()` reads like
    `repair 12/40 segments (30.0%) elapsed 1m02s ETA 2m25s`."""

    def __init__(
        self,
        total: int,
        label: str = "repair",
        unit: str = "segments",
        clock: Callable[[], float] = time.monotonic,
        done: int = 0,
    ) -> None:
        """`done` items were finished before this counter started (e.g. by earlier tasks of the same run):
        they count towards the share, not towards the rate the ETA is computed from."""
        if total < 0 or done < 0:
            raise ConfigurationError(
                f"Progress total {total} or done {done} is negative.", "Give the numbers of items to do and done."
            )
        self.total = total
        self.label = label
        self.unit = unit
        self._clock = clock
        self._started = clock()
        self.done = min(total, done)
        self._done_before = self.done

    def advance(self, count: int = 1) -> None:
        """Record `count` more finished items (never beyond the total)."""
        self.done = min(self.total, self.done + count)

    @property
    def elapsed(self) -> float:
        return self._clock() - self._started

    @property
    def fraction(self) -> float:
        return self.done / self.total if self.total else 1.0

    @property
    def rate(self) -> float | None:
        """Items per second since this counter started; None before its first item or time has passed."""
        elapsed, counted = self.elapsed, self.done - self._done_before
        return counted / elapsed if counted and elapsed > 0 else None

    @property
    def eta_seconds(self) -> float | None:
        """Seconds left at the rate so far; 0 when finished, None when nothing finished yet."""
        if self.done >= self.total:
            return 0.0
        rate = self.rate
        return None if rate is None else (self.total - self.done) / rate

    def eta(self) -> str:
        seconds = self.eta_seconds
        return "?" if seconds is None else format_duration(seconds)

    def brief(self) -> str:
        """The short form that leads a log line: `[12/579 2.1% ETA 5m02s]`."""
        return f"[{self.done}/{self.total} {self.fraction * 100:.1f}% ETA {self.eta()}]"

    def line(self) -> str:
        return (
            f"{self.label} {self.done}/{self.total} {self.unit} ({self.fraction * 100:.1f}%) "
            f"elapsed {format_duration(self.elapsed)} ETA {self.eta()}"
        )
