"""Why a repair session must not start now: node back-pressure, and a unit's repair-time budget.

Pure rules over numbers the worker reads (nodetool compactionstats / tablestats / netstats, the ring's
pending ranges) and the time it has spent; the executor decides what to do with a reason.
"""

from __future__ import annotations

from dataclasses import dataclass

from ringward.repair._config import RepairConfig
from ringward.repair._units import format_duration

__all__ = ["NodeBacklog", "back_pressure_reason", "unit_time_exceeded"]


@dataclass(frozen=True)
class NodeBacklog:
    """What one node is busy with, as far as repair cares (CEP-37 checks the same before it starts)."""

    pending_compactions: int = 0
    max_sstables_per_table: int = 0
    streaming: bool = False
    cleanup_running: bool = False
    pending_ranges: bool = False
    # Not back-pressure: the node's data size (nodetool status' Load, read with the rest), which incremental
    # repair's disk-headroom guard measures against the disk's capacity. None when not read.
    load_bytes: int | None = None


def back_pressure_reason(node: str, backlog: NodeBacklog, config: RepairConfig) -> str | None:
    """Why no repair session may start on `node` now, or None when it may.

    Repair adds validation compactions and streamed SSTables to a node: on one already behind on
    compaction, or moving data for a topology change or cleanup, it makes both slower and riskier.
    """
    limits = config.back_pressure
    if backlog.pending_ranges:
        return f"{node} has pending ranges (joining/leaving/moving)"
    if backlog.streaming:
        return f"{node} is streaming (bootstrap, decommission or repair)"
    if backlog.cleanup_running:
        return f"{node} is running cleanup"
    if backlog.pending_compactions > limits.max_pending_compactions:
        return (
            f"{node} has {backlog.pending_compactions} pending compactions "
            f"(limit {limits.max_pending_compactions}, back_pressure.max_pending_compactions)"
        )
    if backlog.max_sstables_per_table > limits.sstable_upper_threshold:
        return (
            f"{node} has {backlog.max_sstables_per_table} SSTables in one table "
            f"(limit {limits.sstable_upper_threshold}, back_pressure.sstable_upper_threshold)"
        )
    return None


def unit_time_exceeded(spent_seconds: float, config: RepairConfig) -> str | None:
    """Why a unit must stop starting sessions in this run (its repair time is used up), or None.

    The unit's remaining segments stay due and are repaired first in the next run, so one slow table
    cannot keep the rest of the cluster waiting night after night.
    """
    limit = config.table_max_repair_time
    if limit is None or spent_seconds <= limit.total_seconds():
        return None
    return (
        f"repairing for {format_duration(spent_seconds)}, over table_max_repair_time "
        f"({format_duration(limit.total_seconds())}): the rest of the unit is left for the next run"
    )
