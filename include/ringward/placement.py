"""Replica placement exactly as Cassandra 5.0 computes it, and range arithmetic on top of it.

Order matters: `nodetool getendpoints` prints `getNaturalReplicasForToken`, which is the strategy's
own list unsorted, so the first replica is the one Cassandra's walk reaches first.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain, compress, starmap
from operator import add, itemgetter, methodcaller, or_, sub

from ringward._placement_index import Group, RingIndex, Selection, entry_position, ring_index
from ringward.errors import ConfigurationError
from ringward.replication import Replication
from ringward.ring import MIN_TOKEN, Ring, TokenRange

__all__ = [
    "ReplicaDelta",
    "ReplicaMap",
    "delta_of_maps",
    "merge_adjacent",
    "ranges_of",
    "replica_delta",
    "replica_map",
    "replicas_for_token",
    "split_range",
]

Replicas = tuple[str, ...]
_RING_SIZE = 2**64


class ReplicaMap(Mapping[TokenRange, Replicas]):
    """Replicas of every ring range, in ring order (first entry = the wrap-around range).

    `replicas` may be given as a function that builds them: big rings have 256,000 ranges, and a
    summary needs only the counted change (`replica_delta`), never the address tuples.
    `replica_count` is the number of replicas every range has, when the placement knows it.
    """

    def __init__(
        self,
        ranges: Sequence[TokenRange],
        replicas: Sequence[Replicas] | Callable[[], Sequence[Replicas]],
        replica_count: int | None = None,
    ) -> None:
        if not callable(replicas) and len(ranges) != len(replicas):
            raise ValueError("ranges and replicas must have the same length")
        self._ranges = ranges
        self._replicas: Sequence[Replicas] | None = None if callable(replicas) else replicas
        self._build = replicas if callable(replicas) else None
        self.replica_count = replica_count
        self._lookup: dict[TokenRange, Replicas] | None = None

    @property
    def ranges(self) -> Sequence[TokenRange]:
        return self._ranges

    @property
    def replicas(self) -> Sequence[Replicas]:
        """Replica tuples aligned with `ranges`."""
        if self._replicas is None:
            assert self._build is not None
            self._replicas = self._build()
            self._build = None
        return self._replicas

    def __getitem__(self, key: TokenRange) -> Replicas:
        if self._lookup is None:
            self._lookup = dict(zip(self._ranges, self.replicas, strict=True))
        return self._lookup[key]

    def __iter__(self) -> Iterator[TokenRange]:
        return iter(self._ranges)

    def __len__(self) -> int:
        return len(self._ranges)

    def entries(self) -> list[tuple[TokenRange, Replicas]]:
        return list(zip(self._ranges, self.replicas, strict=True))

    def for_token(self, token: int) -> Replicas:
        """Replicas of the range containing `token`."""
        if len(self._ranges) == 1:
            return self.replicas[0]
        index = bisect.bisect_left(self._ranges, token, key=lambda r: r.end)
        return self.replicas[index % len(self._ranges)]

    def ranges_of(self, address: str) -> list[TokenRange]:
        """Ranges `address` holds a replica of, in ring order."""
        return [r for r, replicas in zip(self._ranges, self.replicas, strict=True) if address in replicas]


def replicas_for_token(ring: Ring, replication: Replication, token: int) -> Replicas:
    """Replica addresses for `token`, in Cassandra's order (what `nodetool getendpoints` prints)."""
    index = ring_index(ring)
    position = entry_position(index, token)
    parts = [group.selection_at(position, factor) for group, factor in _groups(index, ring, replication)]
    return tuple(map(index.address_at.__getitem__, sorted(chain.from_iterable(parts))))


def replica_map(ring: Ring, replication: Replication) -> ReplicaMap:
    """Replicas of every range of `ring` (`ring.ranges()` order) under `replication`.

    Computed once per ring and effective setting: a plan asks for the same placements many times
    (shorthand and expanded spellings of one setting place replicas identically).
    """
    index = ring_index(ring)
    groups = _groups(index, ring, replication)
    key = ("replica_map", tuple((id(group), factor) for group, factor in groups))
    cached = index.memo.get(key)
    if cached is None:
        cached = index.memo[key] = _compute_replica_map(index, groups)
    assert isinstance(cached, ReplicaMap)
    return cached


def _compute_replica_map(index: RingIndex, groups: list[tuple[Group, int]]) -> ReplicaMap:
    per_group: list[list[Selection]] = []
    for group, factor in groups:
        selections = group.selections(factor)
        per_group.append(list(map(selections.__getitem__, group.entry)))
    count = sum(len(selections[0]) for selections in per_group)  # every selection of a group is as long
    if count == 0:
        return ReplicaMap(index.ranges, [()] * len(index.ranges), 0)

    def build() -> list[Replicas]:
        picks: Iterable[Sequence[int]] = per_group[0]
        if len(per_group) > 1:
            picks = map(sorted, map(chain.from_iterable, zip(*per_group, strict=True)))
        return _gather(index.address_at, picks, count)

    return ReplicaMap(index.ranges, build, count)


@dataclass(frozen=True)
class ReplicaDelta:
    """What a placement change does, counted: per ring range (ring order) the replicas it loses and
    gains, and per node the number of ranges it stops and starts replicating."""

    lost: Sequence[int]
    gained: Sequence[int]
    ranges_lost: Counter[str]
    ranges_gained: Counter[str]

    def changed(self) -> list[bool]:
        """Per ring range (ring order): its replica set changes, that is it loses or gains a replica."""
        return list(map(bool, map(or_, self.lost, self.gained)))


def replica_delta(ring: Ring, before: Replication, after: Replication) -> ReplicaDelta:
    """The counted change from `before` to `after` on `ring`, computed once per pair of placements.

    Datacenters whose factor is unchanged keep every selection, so the change is computed only for the
    datacenters whose factor changes, once per entry point of theirs, on ring positions (a node is
    always picked at its first token from an entry point, so equal positions mean equal nodes).
    """
    index = ring_index(ring)
    old_groups, new_groups = _groups(index, ring, before), _groups(index, ring, after)
    key = ("delta", tuple((id(g), f) for g, f in old_groups), tuple((id(g), f) for g, f in new_groups))
    cached = index.memo.get(key)
    if cached is None:
        simple_before, simple_after = (any(g is index.whole_ring for g, _ in gs) for gs in (old_groups, new_groups))
        if simple_before != simple_after:
            cached = delta_of_maps(replica_map(ring, before), replica_map(ring, after))  # Simple <-> NTS
        else:
            cached = _delta_of_groups(index, old_groups, new_groups)
        index.memo[key] = cached
    assert isinstance(cached, ReplicaDelta)
    return cached


def _delta_of_groups(
    index: RingIndex, old_groups: list[tuple[Group, int]], new_groups: list[tuple[Group, int]]
) -> ReplicaDelta:
    old_factor = {id(g): f for g, f in old_groups}
    new_factor = {id(g): f for g, f in new_groups}
    size = len(index.ranges)
    lost: list[int] = [0] * size
    gained: list[int] = [0] * size
    ranges_lost: Counter[str] = Counter()
    ranges_gained: Counter[str] = Counter()
    for group in {id(g): g for g, _ in (*old_groups, *new_groups)}.values():
        before, after = old_factor.get(id(group), 0), new_factor.get(id(group), 0)
        if before == after:
            continue
        old_picks, new_picks = _selections_or_none(group, before), _selections_or_none(group, after)
        for picks_from, picks_to, per_range, per_node in (
            (old_picks, new_picks, lost, ranges_lost),
            (new_picks, old_picks, gained, ranges_gained),
        ):
            dropped = list(map(set.difference, map(set, picks_from), picks_to))  # per entry point
            counts = list(map(len, dropped))
            if not any(counts):
                continue
            per_range[:] = map(add, per_range, map(counts.__getitem__, group.entry))
            ranges_per_entry = Counter(group.entry)
            for entry in compress(range(len(dropped)), counts):
                for position in dropped[entry]:
                    per_node[index.address_at[position]] += ranges_per_entry[entry]
    return ReplicaDelta(lost, gained, ranges_lost, ranges_gained)


def _selections_or_none(group: Group, factor: int) -> Sequence[Selection]:
    return group.selections(factor) if factor > 0 else [()] * (len(group.positions) + 1)


def delta_of_maps(before: ReplicaMap, after: ReplicaMap) -> ReplicaDelta:
    """The counted change between two placements of the same ranges, range by range.

    Only one side is compared set by set, the side with fewer replicas per range; the other follows from
    the counts (a range's replicas are distinct: gained - lost = |new| - |old|, and per node gained - lost
    = ranges in new - ranges in old). This spares building a set of every range's larger replica tuple
    (256,000 ranges on big rings)."""
    olds, news = before.replicas, after.replicas
    difference = list(map(sub, map(len, news), map(len, olds)))  # gained - lost, per range
    in_new, in_old = Counter(chain.from_iterable(news)), Counter(chain.from_iterable(olds))
    if _typical_count(after) < _typical_count(before):
        gained_sets = list(map(set.difference, map(set, news), olds))
        gained = list(map(len, gained_sets))
        lost = list(map(sub, gained, difference))
        ranges_gained = Counter(chain.from_iterable(gained_sets))
        ranges_lost = _other_side(ranges_gained, in_old, in_new)
    else:
        lost_sets = list(map(set.difference, map(set, olds), news))
        lost = list(map(len, lost_sets))
        gained = list(map(add, difference, lost))
        ranges_lost = Counter(chain.from_iterable(lost_sets))
        ranges_gained = _other_side(ranges_lost, in_new, in_old)
    return ReplicaDelta(lost, gained, ranges_lost, ranges_gained)


def _typical_count(placement: ReplicaMap) -> int:
    if placement.replica_count is not None:
        return placement.replica_count
    return len(placement.replicas[0]) if len(placement) else 0


def _other_side(counted: Counter[str], ranges_in: Counter[str], ranges_in_other: Counter[str]) -> Counter[str]:
    """Per node, the ranges it starts (or stops) replicating, from those it stops (or starts) replicating."""
    other = {node: n - ranges_in_other[node] + counted[node] for node, n in ranges_in.items()}
    return Counter({node: n for node, n in other.items() if n})


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
    if not replication.factors:  # stored with no datacenter (every factor 0): no replicas anywhere
        return []
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
