"""The Migration page's view of a plan (`MigrationPages`) as bytes, and back: what a worker that built it stores
so that an API server serves the page without building the plan again.

A fleet's view (1000 nodes x 256 tokens, three steps: 256,000 ranges, 1.5 million repair segments) is about
50 MB: its token bounds as raw 64-bit arrays, its replica sets as node numbers (one array per distinct
placement, shared as the view shares them), its texts and findings as JSON. Reading it back copies the arrays
(`array.frombytes`) and builds no object per range or segment: replica tuples are made for the rows a page shows.

Safe to read from a store others may write: JSON and flat arrays, nothing executed; anything malformed is a
`ValueError`. Pure: no Airflow, no driver.
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from array import array
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, chain
from typing import Any, overload

from ringward._svg import checked_document
from ringward.migration_pages import (
    PLACEMENT_ARCS,
    MigrationPages,
    PageRanges,
    PageStage,
    PageStep,
    Participants,
    pages_of_plan,
)
from ringward.plan import MigrationPlan, build_plan
from ringward.ring import Ring, TokenRange
from ringward.ring_sources import ring_from_json

__all__ = [
    "PAGES_FORMAT",
    "PAGE_CHUNK_BYTES",
    "pages_format",
    "pages_from_bytes",
    "pages_of_record",
    "pages_to_bytes",
    "plan_of_record",
    "stored_view",
    "view_chunks",
    "view_version",
]

# Bumped whenever `pages_of_plan`'s output or this encoding changes: a view stored by another format (an older
# worker's) is not read, the page builds its own.
PAGES_FORMAT = 1
PAGE_CHUNK_BYTES = 1_000_000  # a stored view's bytes per row (a fleet's view: about 55 rows)
_MAGIC = b"RWPG"
_HEAD = struct.Struct("<4sII")  # magic, format, header length

Replicas = tuple[str, ...]


class NodeTuples(Sequence[Replicas]):
    """Replica tuples kept as node numbers (`flat`, into `names`): tuple i is `flat[offsets[i]:offsets[i + 1]]`,
    or, with a fixed `width`, `flat[i * width:(i + 1) * width]`. A tuple is built when asked for."""

    def __init__(self, names: Sequence[str], flat: array[int], width: int | None, offsets: array[int] | None,
                 length: int) -> None:  # fmt: skip
        self.names, self.flat, self.width, self.offsets, self.length = names, flat, width, offsets, length

    def __len__(self) -> int:
        return self.length

    @overload
    def __getitem__(self, i: int) -> Replicas: ...

    @overload
    def __getitem__(self, i: slice) -> list[Replicas]: ...

    def __getitem__(self, i: int | slice) -> Replicas | list[Replicas]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.length))]
        if i < 0:
            i += self.length
        if not 0 <= i < self.length:
            raise IndexError(i)
        if self.width is not None:
            first, last = i * self.width, (i + 1) * self.width
        else:
            assert self.offsets is not None
            first, last = self.offsets[i], self.offsets[i + 1]
        return tuple(map(self.names.__getitem__, self.flat[first:last]))


class TokenRanges(Sequence[TokenRange]):
    """Token ranges kept as two arrays of bounds; a `TokenRange` is built when asked for."""

    def __init__(self, starts: array[int], ends: array[int]) -> None:
        self.starts, self.ends = starts, ends

    def __len__(self) -> int:
        return len(self.starts)

    @overload
    def __getitem__(self, i: int) -> TokenRange: ...

    @overload
    def __getitem__(self, i: slice) -> list[TokenRange]: ...

    def __getitem__(self, i: int | slice) -> TokenRange | list[TokenRange]:
        if isinstance(i, slice):
            return list(map(TokenRange, self.starts[i], self.ends[i]))
        return TokenRange(self.starts[i], self.ends[i])

    def __iter__(self) -> Iterator[TokenRange]:
        return map(TokenRange, self.starts, self.ends)


class _Writer:
    """The arrays of one encoding, each stored once (by identity) and named by its number."""

    def __init__(self) -> None:
        self.arrays: list[array[Any]] = []
        self.names: list[str] = []
        self._name_index: dict[str, int] = {}
        self._seen: dict[int, Any] = {}
        self._kept: list[object] = []  # what `_seen` keys are the ids of: alive until the encoding is written

    def array(self, values: array[Any]) -> int:
        self.arrays.append(values)
        return len(self.arrays) - 1

    def tuples(self, replicas: Sequence[Replicas]) -> Any:
        """A sequence of replica tuples: encoded once however often the view shares it."""
        key = id(replicas)
        if key in self._seen:
            return self._seen[key]
        self._kept.append(replicas)
        index = self._name_index
        for name in set(chain.from_iterable(replicas)) - index.keys():
            index[name] = len(self.names)
            self.names.append(name)
        lengths = set(map(len, replicas))
        code = "H" if len(self.names) <= 0xFFFF else "I"
        flat = array(code, map(index.__getitem__, chain.from_iterable(replicas)))
        if len(lengths) <= 1:
            encoded: dict[str, Any] = {"flat": self.array(flat), "count": lengths.pop() if lengths else 0}
        else:
            offsets = array("q", accumulate(map(len, replicas), initial=0))
            encoded = {"flat": self.array(flat), "offsets": self.array(offsets)}
        encoded["length"] = len(replicas)
        self._seen[key] = encoded
        return encoded


def pages_to_bytes(pages: MigrationPages) -> bytes:
    """`pages` as bytes (`pages_from_bytes` reads them back)."""
    out = _Writer()
    ranges = pages.ranges
    steps = []
    for step in pages.steps:
        stages = []
        for stage in step.stages:
            shown: dict[str, Any] = {
                "stage": stage.stage, "name": stage.name, "starts": out.array(array("q", stage.starts)),
                "ends": out.array(array("q", stage.ends)),
            }  # fmt: skip
            replicas = stage.replicas
            if isinstance(replicas, Participants):
                shown["participants"] = {"of": out.array(_indexes(replicas.of)), "old": out.tuples(replicas.old),
                                         "new": out.tuples(replicas.new), "pre": replicas.pre}  # fmt: skip
            else:
                shown["replicas"] = out.tuples(replicas)
            stages.append(shown)
        steps.append({"index": step.index, "count": step.count, "before": step.before, "after": step.after,
                      "after_shown": step.after_shown, "stages": stages})  # fmt: skip
    findings = [
        {"json": finding, "starts": out.array(array("q", (r.start for r in shown))),
         "ends": out.array(array("q", (r.end for r in shown)))}
        for finding, shown in pages.findings
    ]  # fmt: skip
    header = {
        "keyspace": pages.keyspace, "old": pages.old, "new": pages.new, "old_shown": pages.old_shown,
        "new_shown": pages.new_shown, "safe": pages.safe, "affected": pages.affected, "total": pages.total,
        "svg": pages.svg, "findings": findings,
        "ranges": {"starts": out.array(array("q", ranges.starts)), "ends": out.array(array("q", ranges.ends)),
                   "old": out.tuples(ranges.old), "new": out.tuples(ranges.new),
                   "triaged": out.array(_indexes(ranges.triaged))},
        "steps": steps, "names": out.names, "byteorder": sys.byteorder,
        "arrays": [[values.typecode, len(values)] for values in out.arrays],
    }  # fmt: skip
    text = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([_HEAD.pack(_MAGIC, PAGES_FORMAT, len(text)), text, *(values.tobytes() for values in out.arrays)])


def _indexes(values: Sequence[int]) -> array[int]:
    """Indexes into a list (non-negative, fewer than 2**32 at any ring size) in 4 bytes each."""
    return array("I", values)


def pages_format(data: bytes) -> int | None:
    """The format `data` was written in (None: not an encoded view)."""
    if len(data) < _HEAD.size:
        return None
    magic, version, _ = _HEAD.unpack_from(data)
    return int(version) if magic == _MAGIC else None


def pages_from_bytes(data: bytes) -> MigrationPages:
    """The view `pages_to_bytes` wrote; `ValueError` when `data` is not one of this format."""
    if pages_format(data) != PAGES_FORMAT:
        raise ValueError(f"not a Migration page view of format {PAGES_FORMAT}")
    _, _, size = _HEAD.unpack_from(data)
    try:
        header = json.loads(bytes(data[_HEAD.size : _HEAD.size + size]))
        arrays = _arrays(data, _HEAD.size + size, header)
        pages = _pages(header, arrays)
        checked_document(pages.svg)  # the page inlines it: only markup ringward draws (`checked_document`)
        return pages
    except (KeyError, TypeError, IndexError, AssertionError) as error:
        raise ValueError(f"malformed Migration page view ({type(error).__name__}: {error})") from error


def _arrays(data: bytes, at: int, header: dict[str, Any]) -> list[array[Any]]:
    arrays = []
    view = memoryview(data)
    swap = header["byteorder"] != sys.byteorder
    for code, length in header["arrays"]:
        if code not in ("q", "H", "I"):
            raise ValueError(f"malformed Migration page view (array type {code!r})")
        values = array(code)
        end = at + int(length) * values.itemsize
        if end > len(data):
            raise ValueError("malformed Migration page view (truncated)")
        values.frombytes(view[at:end])
        if swap:
            values.byteswap()
        arrays.append(values)
        at = end
    if at != len(data):
        raise ValueError("malformed Migration page view (trailing bytes)")
    return arrays


def _pages(header: dict[str, Any], arrays: list[array[Any]]) -> MigrationPages:
    names: list[str] = [str(name) for name in header["names"]]
    tuples: dict[int, NodeTuples] = {}

    def replicas(encoded: dict[str, Any]) -> NodeTuples:
        key = int(encoded["flat"])  # a shared sequence was encoded once: decoded once, shared again
        if key not in tuples:
            count = encoded.get("count")
            offsets = arrays[int(encoded["offsets"])] if count is None else None
            tuples[key] = NodeTuples(names, arrays[key], None if count is None else int(count), offsets,
                                     int(encoded["length"]))  # fmt: skip
        return tuples[key]

    steps = []
    for step in header["steps"]:
        stages = []
        for stage in step["stages"]:
            shown: Sequence[Replicas]
            if "participants" in stage:
                of = stage["participants"]
                shown = Participants(arrays[of["of"]], replicas(of["old"]), replicas(of["new"]), bool(of["pre"]))
            else:
                shown = replicas(stage["replicas"])
            stages.append(PageStage(str(stage["stage"]), str(stage["name"]), arrays[stage["starts"]],
                                    arrays[stage["ends"]], shown))  # fmt: skip
        steps.append(PageStep(int(step["index"]), int(step["count"]), str(step["before"]), str(step["after"]),
                              str(step["after_shown"]), tuple(stages)))  # fmt: skip
    findings = tuple((dict(f["json"]), TokenRanges(arrays[f["starts"]], arrays[f["ends"]]))
                     for f in header["findings"])  # fmt: skip
    shown_ranges = header["ranges"]
    ranges = PageRanges(arrays[shown_ranges["starts"]], arrays[shown_ranges["ends"]], replicas(shown_ranges["old"]),
                        replicas(shown_ranges["new"]), arrays[shown_ranges["triaged"]])  # fmt: skip
    return MigrationPages(
        str(header["keyspace"]), str(header["old"]), str(header["new"]), str(header["old_shown"]),
        str(header["new_shown"]), bool(header["safe"]), int(header["affected"]), int(header["total"]), findings,
        ranges, tuple(steps), str(header["svg"]),
    )  # fmt: skip


# -- the view of a stored migration record -------------------------------------------------------------------


def plan_of_record(record: Mapping[str, Any], ring: Ring | None = None) -> MigrationPlan:
    """The plan the Migration page shows of a stored record (`MigrationRecord.to_json`): built again from its ring
    (`ring`: the record's, already parsed), settings and keyspace."""
    ring = ring_from_json(record["ring"]) if ring is None else ring
    return build_plan(ring, record["old"], record["new"], keyspace=record["keyspace"])


def pages_of_record(record: Mapping[str, Any], ring: Ring | None = None) -> MigrationPages:
    """The Migration page's view of a stored record's plan, exactly as the page builds it."""
    return pages_of_plan(plan_of_record(record, ring), max_arcs=PLACEMENT_ARCS)


def view_version(record: Mapping[str, Any]) -> str:
    """What a stored view of `record` is filed under: the format and the record as stored, but its state (which the
    view does not depend on). Any other change of the record (a resume's, a hand edit) names another version, whose
    view is not stored: the page then builds its own from the record, checking it as it does."""
    body = {key: value for key, value in record.items() if key != "state"}
    text = json.dumps([PAGES_FORMAT, PLACEMENT_ARCS, body], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def stored_view(record: Mapping[str, Any]) -> tuple[str, bytes]:
    """(its version, the view as bytes) of a record as the store holds it (what `json.loads` gives back of the
    stored JSON): what the worker that stored the record stores beside it."""
    stored = json.loads(json.dumps(record))
    return view_version(stored), pages_to_bytes(pages_of_record(stored))


def view_chunks(data: bytes, size: int = PAGE_CHUNK_BYTES) -> list[bytes]:
    """`data` in rows of at most `size` bytes (their concatenation is `data`)."""
    return [data[at : at + size] for at in range(0, len(data), size)]
