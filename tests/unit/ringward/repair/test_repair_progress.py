from __future__ import annotations

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import Progress, format_duration


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_line_shows_done_share_elapsed_and_eta_from_the_rate_so_far() -> None:
    clock = FakeClock()
    progress = Progress(40, clock=clock)
    assert progress.line() == "repair 0/40 segments (0.0%) elapsed 0s ETA ?"
    clock.now += 62
    progress.advance(12)
    assert progress.rate == pytest.approx(12 / 62)
    assert progress.eta_seconds == pytest.approx(28 * 62 / 12)
    assert progress.line() == "repair 12/40 segments (30.0%) elapsed 1m02s ETA 2m25s"


def test_finished_and_empty_work_have_zero_eta_and_advance_stops_at_total() -> None:
    clock = FakeClock()
    progress = Progress(3, label="migration repair", unit="ranges", clock=clock)
    clock.now += 3725
    progress.advance(5)
    assert progress.done == 3
    assert progress.line() == "migration repair 3/3 ranges (100.0%) elapsed 1h02m05s ETA 0s"
    assert Progress(0, clock=clock).line().endswith("(100.0%) elapsed 0s ETA 0s")
    with pytest.raises(ConfigurationError):
        Progress(-1)


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "0s"), (59.4, "59s"), (60, "1m00s"), (3600, "1h00m00s"), (90061, "1d01h")]
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(seconds) == text


def test_work_done_before_counts_in_the_share_not_in_the_rate() -> None:
    clock = FakeClock()
    progress = Progress(579, clock=clock, done=256)
    assert progress.brief() == "[256/579 44.2% ETA ?]"
    clock.now += 10
    progress.advance(10)  # 1 segment a second in this task: 313 left take 313 s
    assert progress.rate == pytest.approx(1.0)
    assert progress.brief() == "[266/579 45.9% ETA 5m13s]"
    with pytest.raises(ConfigurationError):
        Progress(3, done=-1)
