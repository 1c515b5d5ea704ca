"""Data size per token range from system.size_estimates rows, for the size-based splitter."""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass

from ringward.repair._arcs import unrolled
from ringward.ring import TokenRange

__all__ = ["SizeEstimate", "SizeIndex"]


@dataclass(frozen=True)
class SizeEstimate:
    """One system.size_estimates row; range bounds may come as text, as the table stores them."""

    keyspace: str
    table: str
    range_start: int | str
    range_end: int | str
    mean_partition_size: int
    partitions_count: int

    @property
    def range(self) -> TokenRange:
        return TokenRange(int(self.range_start), int(self.range_end))


@dataclass(frozen=True)
class _Interval:
    low: int
    high: int
    bytes_per_token: float
    partitions_per_token: float


class SizeIndex:
    """Estimated bytes and partitions of any token range, for the tables of one unit.

    Estimates spread evenly over each row's range (Murmur3 spreads partitions uniformly). Rows reported
    by several nodes for the same range are counted once.
    """

    def __init__(self, rows: Iterable[SizeEstimate], keyspace: str, tables: tuple[str, ...]) -> None:
        unique: dict[tuple[str, TokenRange], SizeEstimate] = {}
        for row in rows:
            if row.keyspace == keyspace and (not tables or row.table in tables):
                unique[(row.table, row.range)] = row
        per_table: dict[str, list[_Interval]] = {}
        for (table, token_range), row in unique.items():
            width = token_range.width()
            total = row.mean_partition_size * row.partitions_count
            for low, high in unrolled(token_range):
                interval = _Interval(low, high, total / width, row.partitions_count / width)
                per_table.setdefault(table, []).append(interval)
        self._tables = {t: sorted(iv, key=lambda i: i.low) for t, iv in per_table.items()}
        self._lows = {t: [i.low for i in iv] for t, iv in self._tables.items()}

    @property
    def empty(self) -> bool:
        return not self._tables

    def estimate(self, token_range: TokenRange) -> tuple[float, float]:
        """(bytes, partitions) expected in `token_range` across the unit's tables."""
        total_bytes = total_partitions = 0.0
        for table, intervals in self._tables.items():
            lows = self._lows[table]
            for low, high in unrolled(token_range):
                # Rows of one table do not overlap: start from the last interval beginning before `low`.
                index = max(0, bisect.bisect_right(lows, low) - 1)
                while index < len(intervals) and intervals[index].low < high:
                    shared = min(high, intervals[index].high) - max(low, intervals[index].low)
                    if shared > 0:
                        total_bytes += shared * intervals[index].bytes_per_token
                        total_partitions += shared * intervals[index].partitions_per_token
                    index += 1
        return total_bytes, total_partitions
