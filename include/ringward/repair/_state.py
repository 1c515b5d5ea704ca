"""Segment states and repair history rules: what is due, retries, backoff, ring change detection."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from enum import Enum
from typing import NamedTuple

from ringward.errors import ConfigurationError
from ringward.repair._segments import Segment
from ringward.ring import Ring

__all__ = [
    "DueRecord",
    "SegmentRecord",
    "SegmentState",
    "backoff_delay",
    "due_segments",
    "is_due",
    "record_failure",
    "record_start",
    "record_success",
    "retries_exhausted",
    "ring_fingerprint",
]


class SegmentState(Enum):
    """Life of a segment within one run (Reaper's RepairSegment.State, plus POSTPONED and SKIPPED)."""

    NOT_STARTED = "NOT_STARTED"
    RUNNING = "RUNNING"
    DONE = "DONE"
    FAILED = "FAILED"  # last attempt failed; retried while attempts remain, else next run
    POSTPONED = "POSTPONED"  # a replica was down or the window closed: next run
    SKIPPED = "SKIPPED"  # nothing to repair (RF 1, ignored datacenters) or retries exhausted

    @property
    def is_terminal(self) -> bool:
        """No further work on the segment in this run."""
        return self in {SegmentState.DONE, SegmentState.SKIPPED, SegmentState.POSTPONED}

    @property
    def needs_run(self) -> bool:
        """The segment still wants a repair session in some run."""
        return self in {SegmentState.NOT_STARTED, SegmentState.FAILED, SegmentState.POSTPONED}


@dataclass(frozen=True)
class SegmentRecord:
    """Repair history of one segment. `attempts` counts sessions started in run `run_id`."""

    segment_id: str
    state: SegmentState = SegmentState.NOT_STARTED
    last_success: datetime | None = None  # any repair type: drives min_repair_interval
    last_full_success: datetime | None = None  # full repair only: drives gc_grace coverage
    attempts: int = 0
    last_error: str | None = None
    duration: float | None = None  # seconds of the last finished session
    run_id: str | None = None
    # The type whose history this is (its cadence): each type keeps its own records (`history_key`).
    repair_type: str = "full"

    def attempts_in(self, run_id: str) -> int:
        return self.attempts if self.run_id == run_id else 0


class DueRecord(NamedTuple):
    """What due selection reads of a segment's record (`SegmentHistory.due_records`): its last success (any
    repair of its type: the cadence), and its attempts with the run they count in (retries used up). The plan task
    reads these three cells of every planned segment, never a whole `SegmentRecord` (millions a fleet night)."""

    last_success: datetime | None
    attempts: int
    run_id: str | None


def record_start(
    record: SegmentRecord | None, segment_id: str, run_id: str, repair_type: str | None = None
) -> SegmentRecord:
    """The record as a session starts; attempts restart at each new run. A first record is of `repair_type`
    (None: full), so the session's success moves its cadence."""
    base = record or SegmentRecord(segment_id, repair_type=repair_type or "full")
    return replace(base, state=SegmentState.RUNNING, attempts=base.attempts_in(run_id) + 1, run_id=run_id)


def record_success(
    record: SegmentRecord, finished: datetime, duration: float, repair_type: str | None = "full"
) -> SegmentRecord:
    """A finished session of `repair_type` (None: full). Only a session of the record's own type moves its
    `last_success` (the type's cadence): a preview or paxos session recorded on a full record never delays the
    next full repair. Only a full repair moves `last_full_success` (the coverage the status pages show): a preview
    streams nothing and a paxos repair repairs no table data."""
    kind = repair_type or "full"
    last_full = finished if kind == "full" else record.last_full_success
    last = finished if kind == record.repair_type else record.last_success
    return replace(
        record,
        state=SegmentState.DONE,
        last_success=last,
        last_full_success=last_full,
        last_error=None,
        duration=duration,
    )


def record_failure(record: SegmentRecord, error: str, duration: float) -> SegmentRecord:
    return replace(record, state=SegmentState.FAILED, last_error=error, duration=duration)


def is_due(record: SegmentRecord | None, now: datetime, min_repair_interval: timedelta) -> bool:
    """Never repaired, or the last success is at least `min_repair_interval` old."""
    if record is None or record.last_success is None:
        return True
    return now - record.last_success >= min_repair_interval


def due_segments(
    segments: Iterable[Segment],
    records: Mapping[str, SegmentRecord],
    now: datetime,
    min_repair_interval: timedelta,
) -> list[Segment]:
    """Due segments, most urgent first: never repaired, then oldest last success (ties keep plan order)."""
    # One pass, one history lookup per segment (`is_due`'s rule inlined): a fleet night has 2.5M segments.
    never = datetime.min.replace(tzinfo=now.tzinfo)
    due: list[Segment] = []
    urgency: list[datetime] = []
    get = records.get
    for segment in segments:
        record = get(segment.segment_id)
        last = None if record is None else record.last_success
        if last is None:
            due.append(segment)
            urgency.append(never)
        elif now - last >= min_repair_interval:
            due.append(segment)
            urgency.append(last)
    order = sorted(range(len(due)), key=urgency.__getitem__)  # stable: ties keep plan order
    return [due[i] for i in order]


def retries_exhausted(record: SegmentRecord | None, run_id: str, max_retries: int) -> bool:
    """True once the first attempt and `max_retries` retries of this run have all been used."""
    return record is not None and record.attempts_in(run_id) > max_retries


def backoff_delay(attempt: int, base_seconds: float, cap_seconds: float | None = None) -> float:
    """Seconds to wait before attempt `attempt` (2 = first retry): base, 2*base, 4*base, ... capped."""
    if attempt < 1:
        raise ConfigurationError(f"Attempt number {attempt} is not positive.", "Count attempts from 1.")
    delay = 0.0 if attempt == 1 else base_seconds * 2 ** (attempt - 2)
    return delay if cap_seconds is None else min(delay, cap_seconds)


def ring_fingerprint(ring: Ring, replication: Mapping[str, object] | Sequence[object] | str) -> str:
    """A short stable hash of ring tokens, their owners and the replication settings.

    Stored with a plan: a different fingerprint on the next run means the topology or replication moved
    and the segments must be re-planned.
    """
    # A Ring never changes, so each of its fingerprints is computed once: the repair task looks once a minute
    # all night, and at 256,000 tokens one costs 0.4 s of CPU.
    key = json.dumps(replication, sort_keys=True, separators=(",", ":"), default=str)
    known: dict[str, str] = ring.__dict__.setdefault("_fingerprints", {})
    if key not in known:
        known[key] = _fingerprint(ring, replication)
    return known[key]


def _fingerprint(ring: Ring, replication: Mapping[str, object] | Sequence[object] | str) -> str:
    payload = {
        "tokens": [[token, ring.token_owner[token].address] for token in ring.sorted_tokens],
        "datacenters": {node.address: node.datacenter for node in ring.nodes},
        "replication": replication,
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
