"""Data size per token range from `system.size_estimates`, for the size-based splitter.

Two forms of input, one index:
- `SizeEstimate`: one row per table and range, as the table stores it (the capacity report of a migration, small
  clusters);
- `NodeSizeEstimate`: one row per table and node, the node's rows summed by Cassandra itself (`GROUP BY
  table_name`). At fleet size this is what the nightly plan reads: 1000 nodes x 256 vnodes x 20 tables are
  5.1 M rows per keyspace, 20,000 once summed per node. A node's total is spread over the ranges it lists, its
  primary ranges (the ring ranges ending at its tokens, Cassandra 4.0+), in proportion to their width.

Either way the unit's tables are summed into one density step function over the ring, so a range costs one
bisection whatever the number of tables.
"""

from __future__ import annotations

import bisect
import itertools
import operator
from collections.abc import Iterable
from dataclasses import dataclass

from ringward.repair._arcs import unrolled
from ringward.ring import MIN_TOKEN, Ring, TokenRange

__all__ = ["NodeSizeEstimate", "SizeEstimate", "SizeIndex"]


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

    @property
    def data_bytes(self) -> int:
        return self.mean_partition_size * self.partitions_count


@dataclass(frozen=True)
class NodeSizeEstimate:
    """One table's system.size_estimates rows on one node, summed over the ranges it lists: partitions, and bytes
    (each range's partitions x mean partition size)."""

    keyspace: str
    table: str
    node: str
    partitions_count: int
    data_bytes: int


# A piece of the unrolled ring with the data estimated in it: (low, high, bytes, partitions), low < high.
_Piece = tuple[int, int, float, float]


class SizeIndex:
    """Estimated bytes and partitions of any token range, for the tables of one unit.

    Estimates spread evenly over each row's range (Murmur3 spreads partitions uniformly). Rows reported by
    several nodes for the same range (or twice for the same node) are counted once: the last one wins. Node
    rows need the `ring` (which ranges each node lists); a node the ring does not hold is ignored.
    """

    def __init__(
        self,
        rows: Iterable[SizeEstimate | NodeSizeEstimate],
        keyspace: str,
        tables: tuple[str, ...],
        ring: Ring | None = None,
    ) -> None:
        wanted = frozenset(tables)
        self._ring_bounds: tuple[int, ...] | None = None  # the ring's bounds, when built on them
        per_range: dict[tuple[str, int | str, int | str], SizeEstimate] = {}
        per_node: dict[tuple[str, str], NodeSizeEstimate] = {}
        for row in rows:
            if row.keyspace != keyspace or (wanted and row.table not in wanted):
                continue
            if isinstance(row, NodeSizeEstimate):
                per_node[(row.table, row.node)] = row
            else:
                per_range[(row.table, row.range_start, row.range_end)] = row
        if per_node and ring is None:
            raise ValueError("NodeSizeEstimate rows need the ring: pass ring= to SizeIndex")
        if per_node and not per_range and ring is not None and self._build_from_ring(per_node.values(), ring):
            return
        pieces = _range_pieces(per_range.values())
        if per_node and ring is not None:
            pieces.extend(_node_pieces(per_node.values(), ring))
        self._build(sorted(pieces))

    def _build_from_ring(self, rows: Iterable[NodeSizeEstimate], ring: Ring) -> bool:
        """`_build` of the node rows' pieces when every node of the ring reported (the nightly plan's case): the
        pieces are the ring's ranges in token order, the wrap-around range's two parts first and last, so their
        bounds and widths are the ring's (`Ring.unrolled_bounds`, once per ring) and only each piece's numbers are
        the unit's own: the same numbers as sorting the pieces and building from them. False (nothing built)
        when some node is silent or the ring is unusual; `_build` then does it."""
        data, partitions = _node_totals(rows)
        ranges = ring.ranges()
        if not ranges or not ranges[0].wraps or ranges[0].end == MIN_TOKEN:
            return False
        if not data.keys() >= dict(ring.primary_widths).keys():
            return False
        owners, shares = ring.primary_owners, ring.primary_shares
        wrapped: list[_Piece] = []  # the wrap-around range's two parts, as `_node_pieces` makes them
        _split_wrapping(ranges[0], data[owners[0]] * shares[0], partitions[owners[0]] * shares[0], wrapped)
        (_, _, last_bytes, last_partitions), (_, _, first_bytes, first_partitions) = wrapped
        bounds, widths = ring.unrolled_bounds
        self._ring_bounds = bounds
        sizes = [first_bytes, *map(operator.mul, map(data.__getitem__, owners[1:]), shares[1:]), last_bytes]
        counts = [first_partitions, *map(operator.mul, map(partitions.__getitem__, owners[1:]), shares[1:]),
                  last_partitions]  # fmt: skip
        self._bounds = list(bounds)
        zero: float = 0  # as `_build_contiguous`
        self._bytes = (list(itertools.accumulate(sizes, initial=zero)), [*map(operator.truediv, sizes, widths), 0.0])
        self._partitions = (list(itertools.accumulate(counts, initial=zero)),
                            [*map(operator.truediv, counts, widths), 0.0])  # fmt: skip
        return True

    def _build(self, pieces: list[_Piece]) -> None:
        lows = [piece[0] for piece in pieces]
        highs = [piece[1] for piece in pieces]
        if pieces and lows[1:] == highs[:-1]:  # one piece after another (a ring's node rows): built at once
            self._build_contiguous(pieces, lows[0], highs)
            return
        if any(pieces[i][1] > pieces[i + 1][0] for i in range(len(pieces) - 1)):
            pieces = _elementary(pieces)
        bounds: list[int] = []
        total_bytes: list[float] = []  # the integral from the first bound to each bound
        total_partitions: list[float] = []
        bytes_rate: list[float] = []  # density from each bound to the next (0 in a gap and past the last)
        partitions_rate: list[float] = []
        data: float = 0  # whole numbers stay whole (exact) while every piece's are
        partitions: float = 0
        for low, high, piece_bytes, piece_partitions in pieces:
            if not bounds or bounds[-1] != low:
                if bounds:
                    bytes_rate.append(0.0)
                    partitions_rate.append(0.0)
                bounds.append(low)
                total_bytes.append(data)
                total_partitions.append(partitions)
            width = high - low
            bytes_rate.append(piece_bytes / width)
            partitions_rate.append(piece_partitions / width)
            # Sums of whole pieces stay exact: a range that is a row's range gets that row's numbers back.
            data += piece_bytes
            partitions += piece_partitions
            bounds.append(high)
            total_bytes.append(data)
            total_partitions.append(partitions)
        bytes_rate.append(0.0)
        partitions_rate.append(0.0)
        self._bounds = bounds
        self._bytes = (total_bytes, bytes_rate)
        self._partitions = (total_partitions, partitions_rate)

    def _build_contiguous(self, pieces: list[_Piece], first: int, highs: list[int]) -> None:
        """`_build` of pieces without gaps: the same sums in the same order (the same numbers), without the loop."""
        self._bounds = [first, *highs]
        widths = [high - low for low, high, _, _ in pieces]
        sizes = [piece[2] for piece in pieces]
        counts = [piece[3] for piece in pieces]
        zero: float = 0  # whole numbers stay whole (exact) while every piece's are, as in `_build`
        self._bytes = (list(itertools.accumulate(sizes, initial=zero)),
                       [*map(operator.truediv, sizes, widths), 0.0])  # fmt: skip
        self._partitions = (list(itertools.accumulate(counts, initial=zero)),
                            [*map(operator.truediv, counts, widths), 0.0])  # fmt: skip

    @property
    def empty(self) -> bool:
        return not self._bounds

    def _integral(self, position: int) -> tuple[float, float]:
        index = bisect.bisect_right(self._bounds, position) - 1
        if index < 0:
            return 0.0, 0.0
        offset = position - self._bounds[index]
        (data, data_rate), (partitions, partitions_rate) = self._bytes, self._partitions
        if offset == 0:
            return data[index], partitions[index]
        return data[index] + offset * data_rate[index], partitions[index] + offset * partitions_rate[index]

    def estimate(self, token_range: TokenRange) -> tuple[float, float]:
        """(bytes, partitions) expected in `token_range` across the unit's tables."""
        total_bytes = total_partitions = 0.0
        if not self._bounds:
            return total_bytes, total_partitions
        low, high = token_range.start, token_range.end
        if low < high:  # `unrolled`'s one interval, inlined (millions of calls a fleet night)
            bounds = self._bounds
            (data, data_rate), (partitions, partitions_rate) = self._bytes, self._partitions
            values = []
            for position in (high, low):  # `_integral`, inlined
                index = bisect.bisect_right(bounds, position) - 1
                if index < 0:
                    values.append((0.0, 0.0))
                elif position == bounds[index]:
                    values.append((data[index], partitions[index]))
                else:
                    offset = position - bounds[index]
                    values.append((data[index] + offset * data_rate[index],
                                   partitions[index] + offset * partitions_rate[index]))  # fmt: skip
            (high_bytes, high_partitions), (low_bytes, low_partitions) = values
            return total_bytes + (high_bytes - low_bytes), total_partitions + (high_partitions - low_partitions)
        for low, high in unrolled(token_range):
            high_bytes, high_partitions = self._integral(high)
            low_bytes, low_partitions = self._integral(low)
            total_bytes += high_bytes - low_bytes
            total_partitions += high_partitions - low_partitions
        return total_bytes, total_partitions

    def ring_estimates(self, ring: Ring) -> tuple[list[float], list[float]] | None:
        """`estimate` of each of `ring.ranges()`, in order, as two columns (bytes, partitions): the same numbers as
        `estimates`. None unless the index was built on this ring's bounds (`_build_from_ring`): then each ring
        range but the wrap-around one is one piece of the index, and its estimate is the difference of two running
        sums at its bounds (what `estimate`'s bisections find), taken for the whole ring at once."""
        bounds = self._ring_bounds
        if bounds is None or ring.unrolled_bounds[0] is not bounds:
            return None
        ranges = ring.ranges()
        count = len(ranges)
        (data, _), (partitions, _) = self._bytes, self._partitions
        first_bytes, first_partitions = self.estimate(ranges[0])  # wraps: two pieces
        # Range k > 0 is (bounds[k], bounds[k + 1]]: `estimate` gives 0.0 + (data[k + 1] - data[k]).
        zeros = itertools.repeat(0.0)
        byte_column = [first_bytes, *map(operator.add, zeros, map(operator.sub, data[2 : count + 1], data[1:count]))]
        counts = map(operator.sub, partitions[2 : count + 1], partitions[1:count])
        partition_column = [first_partitions, *map(operator.add, zeros, counts)]
        return byte_column, partition_column

    def estimates(self, ranges: Iterable[TokenRange]) -> list[tuple[float, float]]:
        """`estimate` of each of `ranges`, in order: the same numbers, without a call per range (a fleet night
        estimates 3.3 million ring ranges)."""
        if not self._bounds:
            return [(0.0, 0.0) for _ in ranges]
        bounds, bisect_right = self._bounds, bisect.bisect_right
        (data, data_rate), (partitions, partitions_rate) = self._bytes, self._partitions
        found: list[tuple[float, float]] = []
        append = found.append
        for token_range in ranges:
            low, high = token_range.start, token_range.end
            if low >= high:  # wraps (or the whole ring): `estimate`'s two intervals
                append(self.estimate(token_range))
                continue
            # `estimate`'s one interval, as it computes it: the integral at `high`, then at `low`.
            index = bisect_right(bounds, high) - 1
            if index < 0:
                high_bytes, high_partitions = 0.0, 0.0
            elif high == bounds[index]:
                high_bytes, high_partitions = data[index], partitions[index]
            else:
                offset = high - bounds[index]
                high_bytes = data[index] + offset * data_rate[index]
                high_partitions = partitions[index] + offset * partitions_rate[index]
            index = bisect_right(bounds, low) - 1
            if index < 0:
                low_bytes, low_partitions = 0.0, 0.0
            elif low == bounds[index]:
                low_bytes, low_partitions = data[index], partitions[index]
            else:
                offset = low - bounds[index]
                low_bytes = data[index] + offset * data_rate[index]
                low_partitions = partitions[index] + offset * partitions_rate[index]
            append((0.0 + (high_bytes - low_bytes), 0.0 + (high_partitions - low_partitions)))
        return found


def _split_wrapping(token_range: TokenRange, data: float, partitions: float, out: list[_Piece]) -> None:
    """The two unrolled parts of a wrapping range, each with its share of the range's data; whole numbers stay
    whole and the two shares add up to the range's numbers exactly."""
    (low, high), rest = unrolled(token_range)
    width, first = token_range.width(), high - low
    if isinstance(data, int) and isinstance(partitions, int):
        first_data: float = data * first // width
        first_partitions: float = partitions * first // width
    else:
        first_data, first_partitions = data * first / width, partitions * first / width
    out.append((low, high, first_data, first_partitions))
    out.append((rest[0], rest[1], data - first_data, partitions - first_partitions))


def _range_pieces(rows: Iterable[SizeEstimate]) -> list[_Piece]:
    """The tables' rows summed per range (the tables of a keyspace list the same ranges), then unrolled."""
    sums: dict[tuple[int | str, int | str], list[int]] = {}
    for row in rows:
        key = (row.range_start, row.range_end)
        found = sums.get(key)
        if found is None:
            sums[key] = [row.data_bytes, row.partitions_count]
        else:
            found[0] += row.data_bytes
            found[1] += row.partitions_count
    pieces: list[_Piece] = []
    for (start, end), (data, partitions) in sums.items():
        token_range = TokenRange(int(start), int(end))
        if token_range.wraps:
            _split_wrapping(token_range, data, partitions, pieces)
        else:
            pieces.append((token_range.start, token_range.end, data, partitions))
    return pieces


def _node_totals(rows: Iterable[NodeSizeEstimate]) -> tuple[dict[str, float], dict[str, float]]:
    """Each node's bytes and partitions over the unit's tables."""
    data: dict[str, float] = {}
    partitions: dict[str, float] = {}
    for row in rows:
        data[row.node] = data.get(row.node, 0.0) + row.data_bytes
        partitions[row.node] = partitions.get(row.node, 0.0) + row.partitions_count
    return data, partitions


def _node_pieces(rows: Iterable[NodeSizeEstimate], ring: Ring) -> list[_Piece]:
    """Each node's totals spread over its primary ranges in proportion to their width."""
    data, partitions = _node_totals(rows)
    ranges = ring.ranges()
    owners = ring.primary_owners
    everyone = dict(ring.primary_widths)
    if data.keys() >= everyone.keys():  # every node reported: its shares are the ring's, computed once per ring
        shares = ring.primary_shares
        pieces: list[_Piece] = []
        start = 0
        if ranges and ranges[0].wraps:  # only the first range of the ring can wrap (tokens are sorted)
            share = shares[0]
            _split_wrapping(ranges[0], data[owners[0]] * share, partitions[owners[0]] * share, pieces)
            start = 1
        pieces.extend(
            (token_range.start, token_range.end, data[address] * share, partitions[address] * share)
            for token_range, address, share in zip(ranges[start:], owners[start:], shares[start:], strict=True)
        )
        return pieces
    owned: dict[str, int] = {}
    for token_range, address in zip(ranges, owners, strict=True):
        if address in data:
            owned[address] = owned.get(address, 0) + token_range.width()
    pieces = []
    for token_range, address in zip(ranges, owners, strict=True):
        if address not in owned:
            continue
        width = token_range.width()
        share = width / owned[address]
        range_data, range_partitions = data[address] * share, partitions[address] * share
        if token_range.wraps:
            _split_wrapping(token_range, range_data, range_partitions, pieces)
        else:
            pieces.append((token_range.start, token_range.end, range_data, range_partitions))
    return pieces


def _elementary(pieces: list[_Piece]) -> list[_Piece]:
    """Overlapping pieces (rows of different ranges for the same tokens: a ring that changed between two
    estimates) summed into disjoint ones."""
    events: dict[int, list[float]] = {}
    for low, high, data, partitions in pieces:
        width = high - low
        for position, sign in ((low, 1.0), (high, -1.0)):
            delta = events.setdefault(position, [0.0, 0.0])
            delta[0] += sign * data / width
            delta[1] += sign * partitions / width
    out: list[_Piece] = []
    data_rate = partitions_rate = 0.0
    positions = sorted(events)
    for position, following in itertools.pairwise(positions):
        data_rate += events[position][0]
        partitions_rate += events[position][1]
        if data_rate > 0 or partitions_rate > 0:
            width = following - position
            out.append((position, following, data_rate * width, partitions_rate * width))
    return out
