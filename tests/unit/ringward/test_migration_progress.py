"""A stage's stored progress: its codes, counts and triage order as the Migration page's pass over the journal
makes them (failed, then pending or another status, then done; ring order within each), and a row that does not
agree with itself refused."""

from __future__ import annotations

import random
import zlib
from dataclasses import replace

import pytest
from ringward.migration_progress import DONE, FAILED, OTHER, PENDING, ProgressTally, segments_digest, stage_progress
from ringward.ring import TokenRange

RANGES = [TokenRange(i * 10, i * 10 + 10) for i in range(10_000)]  # more than two blocks of the codes' index


def _statuses(seed: int) -> dict[TokenRange, str]:
    rng = random.Random(seed)
    return {r: rng.choice(["done", "done", "failed", "running"]) for r in RANGES if rng.random() < 0.7}


def _triage(statuses: dict[TokenRange, str]) -> list[int]:
    """The page's order, one segment at a time (`views._stage_journal`)."""
    status = [statuses.get(r) for r in RANGES]
    return ([i for i, s in enumerate(status) if s == "failed"] + [i for i, s in enumerate(status)
            if s not in ("failed", "done")] + [i for i, s in enumerate(status) if s == "done"])  # fmt: skip


@pytest.mark.parametrize("seed", [1, 2])
def test_codes_count_and_order_the_segments_as_the_page_does(seed: int) -> None:
    statuses = _statuses(seed)
    progress = stage_progress("post_repair:1", RANGES, statuses)
    codes = progress.codes()
    assert (codes.done, codes.failed) == (progress.done, progress.failed)
    assert progress.done == sum(1 for s in statuses.values() if s == "done") and progress.count == len(RANGES)
    assert [codes.code(i) for i in (0, 1, 2)] == [
        {"done": DONE, "failed": FAILED, None: PENDING}.get(statuses.get(RANGES[i]), OTHER) for i in (0, 1, 2)
    ]
    order = _triage(statuses)
    for offset in (0, 1, 999, 4095, 4096, 5000, progress.failed, progress.failed + 3, 9_990, 10_000, 12_000):
        for limit in (1, 7, 200):
            assert codes.triaged(offset, limit) == order[offset : offset + limit], (offset, limit)
    assert codes.entries_between(0, len(RANGES) - 1) == len(statuses)


def test_the_tally_follows_the_entries_written_and_ignores_ranges_of_no_segment() -> None:
    tally = ProgressTally("pre_repair:1", RANGES[:5], {RANGES[0]: "done"})
    tally.update(RANGES[3], "failed")
    tally.update(TokenRange(1, 10), "done")  # not a segment: a start that differs
    tally.update(RANGES[0], "failed")  # rewritten
    progress = tally.progress()
    assert (progress.done, progress.failed) == (0, 2) and progress.codes().triaged(0, 5) == [0, 3, 1, 2, 4]
    assert progress.segments == segments_digest([r.start for r in RANGES[:5]], [r.end for r in RANGES[:5]])
    assert progress.segments != segments_digest([r.start for r in RANGES[1:6]], [r.end for r in RANGES[1:6]])


def test_a_row_that_does_not_agree_with_itself_is_refused() -> None:
    progress = stage_progress("post_repair:1", RANGES[:100], {RANGES[0]: "done"})
    unknown = zlib.compress(b"\x01" + b"\x07" * 99)  # the counts agree, a code does not exist
    for broken in (replace(progress, statuses=progress.statuses[:-2]), replace(progress, done=2),
                   replace(progress, count=101), replace(progress, statuses=unknown)):  # fmt: skip
        with pytest.raises(
            ValueError, match=r"statuses of post_repair:1 (do not agree|hold an unknown code|cannot be decompressed)"
        ):
            broken.codes()
