"""Replica placement exactly as Cassandra 5.0 computes it, and range arithmetic on top of it.

Order matters: `nodetool getendpoints` prints `getNaturalReplicasForToken`, which is the strategy's
own list unsorted, so the first replica is the one Cassandra's walk reaches first.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import chain, starmap
from operator import itemgetter, methodcaller

from ringward._placement_index import Group, RingIndex, Selection, entry_position, ring_index
from ringward.errors import ConfigurationError
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Ring, TokenRange

__all__ = [
    "ReplicaMap",
    "merge_adjacent",
    "ranges_of",
    "replica_map",
    "replicas_for_token",
    "split_range",
]

Replicas = tuple[str, ...]
_RING_SIZE = 2**64


class ReplicaMap(Mapping[TokenRange, Replicas]):
    """Replicas of every ring range, in ring order (first entry = the wrap-around range)."""

    def __init__(self, ranges: Sequence[TokenRange], replicas: Sequence[Replicas]) -> None:
        if len(ranges) != len(replicas):
            raise ValueError("ranges and replicas must have the same length")
        self._ranges = ranges
        self._replicas = replicas
        self._lookup: dict[TokenRange, Replicas] | None = None

    @property
    def ranges(self) -> Sequence[TokenRange]:
        return self._ranges

    @property
    def replicas(self) -> Sequence[Replicas]:
        """Replica tuples aligned with `ranges`."""
        return self._replicas

    def __getitem__(self, key: TokenRange) -> Replicas:
        if self._lookup is None:
            self._lookup = dict(zip(self._ranges, self._replicas, strict=True))
        return self._lookup[key]

    def __iter__(self) -> Iterator[TokenRange]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    def entries(self) -> list[tuple[TokenRange, Replicas]]:
        return list(zip(self._ranges, self._replicas, strict=True))

    def for_token(self, token: int) -> Replicas:
        """Replicas of the range containing `token`."""
        if len(self._ranges) == 1:
            return self._replicas[0]
        index = bisect.bisect_left(self._ranges, token, key=lambda r: r.end)
        return self._replicas[index % len(self._ranges)]

    def ranges_of(self, address: str) -> list[TokenRange]:
        """Ranges `address` holds a replica of, in ring order."""
        return [r for r, replicas in zip(self._ranges, self._replicas, strict=True) if address in replicas]


def replicas_for_token(ring: Ring, replication: Replication, token: int) -> Replicas:
    """Replica addresses for `token`, in Cassandra's order (what `nodetool getendpoints` prints)."""
    index = ring_index(ring)
    position = entry_position(index, token)
    parts = [group.selection_at(position, factor) for group, factor in _groups(index, ring, replication)]
    return tuple(map(index.address_at.__getitem__, sorted(chain.from_iterable(parts))))


def replica_map(ring: Ring, replication: Replication) -> ReplicaMap:
    """Replicas of every range of `ring` (`ring.ranges()` order) under `replication`."""
    index = ring_index(ring)
    per_group: list[list[Selection]] = []
    for group, factor in _groups(index, ring, replication):
        selections = group.selections(factor)
        per_group.append(list(map(selections.__getitem__, group.entry)))
    count = sum(len(selections[0]) for selections in per_group)
    if count == 0:
        return ReplicaMap(index.ranges, [()] * len(index.ranges))
    picks: Iterable[Sequence[int]] = per_group[0]
    if len(per_group) > 1:
        picks = map(sorted, map(chain.from_iterable, zip(*per_group, strict=True)))
    return ReplicaMap(index.ranges, _gather(index.address_at, picks, count))


def _gather(address_at: Sequence[str], picks: Iterable[Sequence[int]], count: int) -> list[Replicas]:
    """Owner addresses of each pick list; every list holds `count` positions.

    For two or more, `itemgetter(*positions)(address_at)` gathers a tuple entirely in C: this runs
    once per range (256,000 on big rings), so it is built from builtins only.
    """
    if count == 1:
        return [(address_at[positions[0]],) for positions in picks]
    return list(map(methodcaller("__call__", address_at), starmap(itemgetter, picks)))


def ranges_of(placement: ReplicaMap, address: str) -> list[TokenRange]:
    """Ranges `address` is a replica of under `placement`."""
    return placement.ranges_of(address)


def _groups(index: RingIndex, ring: Ring, replication: Replication) -> list[tuple[Group, int]]:
    """The groups Cassandra's walk fills, each with its factor; empty or zero-factor DCs are skipped."""
    if replication.is_simple:
        factor = replication.factor_for("")
        return [(index.whole_ring, factor)] if factor > 0 else []
    expanded = replication.expand(index.datacenters)
    return [
        (index.datacenters[dc], factor)
        for dc, factor in expanded.factors.items()
        if factor > 0 and dc in index.datacenters
    ]


def split_range(token_range: TokenRange, parts: int) -> list[TokenRange]:
    """`token_range` cut into `parts` contiguous subranges of near-equal width, in ring order.

    Wrap-around ranges are cut across the wrap point; a range narrower than `parts` tokens yields
    one subrange per token.
    """
    if parts < 1:
        raise ConfigurationError(f"Cannot split a range into {parts} parts.", "Ask for at least 1 part.")
    width = token_range.width()
    parts = min(parts, width)
    bounds = [_wrap(token_range.start + width * k // parts) for k in range(parts)]
    bounds.append(token_range.end)
    return [TokenRange(bounds[k], bounds[k + 1]) for k in range(parts)]


def _wrap(token: int) -> int:
    """Bring a token that ran past the maximum back into the signed 64-bit token space."""
    return (token - MIN_TOKEN) % _RING_SIZE + MIN_TOKEN


def merge_adjacent(
    entries: Sequence[tuple[TokenRange, Replicas]],
) -> list[tuple[TokenRange, Replicas]]:
    """Merge consecutive contiguous ranges whose replica *sets* are equal (keeps the first's order).

    The last and first entries are merged across the wrap point when they touch.
    """
    merged: list[tuple[TokenRange, Replicas]] = []
    for token_range, replicas in entries:
        if merged and _joinable(merged[-1], (token_range, replicas)):
            previous, kept = merged[-1]
            merged[-1] = (TokenRange(previous.start, token_range.end), kept)
        else:
            merged.append((token_range, replicas))
    if len(merged) > 1 and _joinable(merged[-1], merged[0]):
        last, kept = merged.pop()
        first = merged[0][0]
        merged[0] = (TokenRange(last.start, first.end), kept)
    return merged


def _joinable(left: tuple[TokenRange, Replicas], right: tuple[TokenRange, Replicas]) -> bool:
    return left[0].end == right[0].start and set(left[1]) == set(right[1])
