"""A repair stage's progress in one small row: what the Migration page reads instead of the stage's journal.

The journal (ringward_ops.migration_journal) holds one entry per (stage, range): a fleet migration's stage has
256,000. The page shows each stage's counts and one window of its segments, ring order or the triage order
(failed, then not done yet, then done). Both depend on every entry; a window's rows on only theirs. So the worker
that writes a stage's journal also keeps its `StageProgress`: one status byte per segment of the stage, in the
stage's order (what the page's `PageStage` lists, `repair_segments`), zlib-compressed (a few hundred bytes for a
stage mostly done or mostly pending; 256 KB at most for 256,000 segments), with the done and failed counts and a
digest of the segments it is of. From it the page finds its counts and the window's segments, then reads the
journal entries of those only.

Pure: no storage here (`ringward.migration_storage` stores it).
"""

from __future__ import annotations

import hashlib
import re
import sys
import zlib
from array import array
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from itertools import islice

from ringward.ring import TokenRange

__all__ = [
    "DONE",
    "FAILED",
    "OTHER",
    "PENDING",
    "ProgressTally",
    "StageCodes",
    "StageProgress",
    "segments_digest",
    "stage_progress",
]

PENDING, DONE, FAILED, OTHER = 0, 1, 2, 3  # a segment's code: no entry; done; failed; an entry of another status
_CODES = {"done": DONE, "failed": FAILED}
_KINDS = {
    "failed": re.compile(re.escape(bytes((FAILED,)))),
    "done": re.compile(re.escape(bytes((DONE,)))),
    "others": re.compile(b"[^" + re.escape(bytes((DONE, FAILED))) + b"]"),
}
_BLOCK = 4096  # segments per block of the codes' index (counts per block: a window is found without a full pass)


def segments_digest(starts: Sequence[int], ends: Sequence[int]) -> str:
    """What identifies a stage's segments, in their order: sha256 of their bounds as little-endian int64."""
    first, last = _int64(starts), _int64(ends)
    if sys.byteorder == "big":
        first, last = array("q", first), array("q", last)
        first.byteswap()
        last.byteswap()
    digest = hashlib.sha256(len(first).to_bytes(8, "little"))
    digest.update(first.tobytes())
    digest.update(last.tobytes())
    return digest.hexdigest()


def _int64(values: Sequence[int]) -> array[int]:
    """`values` as an int64 array (the page's arrays as they are: no copy)."""
    if isinstance(values, array) and values.typecode == "q":
        return values
    return array("q", values)


@dataclass(frozen=True)
class StageProgress:
    """One stage's row of ringward_ops.migration_progress: `statuses` one code per segment (`PENDING`, `DONE`,
    `FAILED`, `OTHER`), zlib-compressed, of the stage's `count` segments whose `segments_digest` is `segments`."""

    step: str
    segments: str
    count: int
    done: int
    failed: int
    statuses: bytes
    updated_at: datetime | None = None

    def codes(self) -> StageCodes:
        """The codes, checked against the row's counts; ValueError when they do not agree (cut short, another
        format, written by hand)."""
        try:
            raw = zlib.decompress(self.statuses)
        except zlib.error as error:
            raise ValueError(f"the statuses of {self.step} cannot be decompressed ({error})") from error
        codes = StageCodes(raw)
        if len(raw) != self.count or codes.done != self.done or codes.failed != self.failed:
            raise ValueError(f"the statuses of {self.step} do not agree with its counts")
        if raw.translate(None, bytes((PENDING, DONE, FAILED, OTHER))):
            raise ValueError(f"the statuses of {self.step} hold an unknown code")
        return codes


def _code(status: str | None) -> int:
    return PENDING if status is None else _CODES.get(status, OTHER)


def stage_progress(step: str, ranges: Sequence[TokenRange], statuses: Mapping[TokenRange, str]) -> StageProgress:
    """The progress of stage `step` whose segments are `ranges` (in the stage's order), from its journal's
    statuses by range (`Journal.journal`): an entry counts for the segment of exactly its range."""
    return ProgressTally(step, ranges, statuses).progress()


class ProgressTally:
    """A stage's codes kept current by the worker that writes its journal: `update` with each entry it writes,
    `progress` for the row to store."""

    def __init__(self, step: str, ranges: Sequence[TokenRange], statuses: Mapping[TokenRange, str]) -> None:
        self.step = step
        self.digest = segments_digest([r.start for r in ranges], [r.end for r in ranges])
        self._index = {token_range: i for i, token_range in enumerate(ranges)}
        self._codes = bytearray(_code(statuses.get(token_range)) for token_range in ranges)

    def update(self, token_range: TokenRange, status: str) -> None:
        """The entry of `token_range` now says `status` (a range not of the stage is not counted: the page
        matches entries with its segments the same way)."""
        i = self._index.get(token_range)
        if i is not None:
            self._codes[i] = _code(status)

    def progress(self, updated_at: datetime | None = None) -> StageProgress:
        codes = bytes(self._codes)
        return StageProgress(self.step, self.digest, len(codes), codes.count(DONE), codes.count(FAILED),
                             zlib.compress(codes, 6), updated_at)  # fmt: skip


class StageCodes:
    """A stage's codes, decompressed, with counts per block: a window of the triage order (failed, then pending
    or another status, then done; ring order within each) found in C passes over a few blocks."""

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        blocks = [raw[i : i + _BLOCK] for i in range(0, len(raw), _BLOCK)]
        self._done = [block.count(DONE) for block in blocks]
        self._failed = [block.count(FAILED) for block in blocks]
        self._sizes = [len(block) for block in blocks]
        self.done = sum(self._done)
        self.failed = sum(self._failed)

    def __len__(self) -> int:
        return len(self.raw)

    def code(self, index: int) -> int:
        return self.raw[index]

    def triaged(self, offset: int, limit: int) -> list[int]:
        """The segments at `offset`..`offset + limit` of the triage order."""
        found: list[int] = []
        failed, others = self.failed, len(self.raw) - self.failed - self.done
        for kind, size in (("failed", failed), ("others", others), ("done", self.done)):
            if limit <= 0:
                break
            if offset >= size:
                offset -= size
                continue
            taken = self._select(kind, offset, limit)
            found += taken
            limit -= len(taken)
            offset = 0
        return found

    def _count(self, kind: str, block: int) -> int:
        if kind == "failed":
            return self._failed[block]
        if kind == "done":
            return self._done[block]
        return self._sizes[block] - self._failed[block] - self._done[block]

    def _select(self, kind: str, skip: int, limit: int) -> list[int]:
        """Up to `limit` indexes of `kind`, in ring order, after the first `skip` of them."""
        block = 0
        while block < len(self._sizes) and skip >= self._count(kind, block):
            skip -= self._count(kind, block)
            block += 1
        found: list[int] = []
        while block < len(self._sizes) and len(found) < limit:
            if not self._count(kind, block):
                block += 1
                continue
            base = block * _BLOCK
            matching = self._matching(kind, base, base + self._sizes[block])
            found += islice(matching, skip, skip + limit - len(found))
            skip = 0
            block += 1
        return found

    def _matching(self, kind: str, start: int, stop: int) -> Iterable[int]:
        return (match.start() for match in _KINDS[kind].finditer(self.raw, start, stop))

    def entries_between(self, first: int, last: int) -> int:
        """Segments with a journal entry (any code but `PENDING`) from index `first` to `last`, both included."""
        span = self.raw[first : last + 1]
        return len(span) - span.count(PENDING)
