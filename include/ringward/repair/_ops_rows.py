"""The nightly repair's rows in ringward_ops as the stores hand them back: plain dataclasses, the types the
storage Protocols of `_ports` (and so the night) read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ringward.repair._state import SegmentRecord
from ringward.ring import TokenRange

__all__ = ["PreviewFinding", "RepairHistoryRow", "RepairRunRow", "SwitchEvent"]


@dataclass(frozen=True)
class RepairHistoryRow:
    """One segment's repair history: `tables == ()` means every table of the keyspace."""

    keyspace: str
    tables: tuple[str, ...]
    range: TokenRange
    record: SegmentRecord
    started_at: datetime | None
    finished_at: datetime | None
    coordinator: str | None
    replicas: tuple[str, ...]
    updated_at: datetime | None = None  # when the row was last written (None: a row of the legacy table)


@dataclass(frozen=True)
class SwitchEvent:
    """One press of the repair pause switch."""

    paused: bool
    changed_at: datetime | None
    changed_by: str
    reason: str


@dataclass(frozen=True)
class RepairRunRow:
    run_id: str
    state: str
    summary: dict[str, object]
    config: dict[str, object]
    updated_at: datetime | None


@dataclass(frozen=True)
class PreviewFinding:
    """A preview repair's finding: of the command's `ranges`, `out_of_sync_ranges` differ among the replicas of
    `keyspace.table` (nodetool's summary counts them; it does not say which ones)."""

    keyspace: str
    table: str
    ranges: tuple[TokenRange, ...]
    out_of_sync_ranges: int
    found_at: datetime
    run_id: str | None = None
    coordinator: str | None = None
