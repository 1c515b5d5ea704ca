"""What a replication or topology change does to replica placement, range by range and node by node.

A range is *affected* when its replica set changes: new replicas must be repaired before reads
can trust them, and former replicas hold data that only `nodetool cleanup` removes.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import compress, repeat
from operator import eq, ne
from typing import NamedTuple

from ringward._placement_index import ring_index
from ringward.placement import ReplicaDelta, ReplicaMap, delta_of_maps, replica_delta, replica_map
from ringward.replication import Replication
from ringward.ring import Ring, TokenRange

__all__ = ["NodeTotals", "PlacementDiff", "RangeChange", "diff_maps", "diff_replication", "diff_rings"]

Replicas = tuple[str, ...]


class RangeChange(NamedTuple):
    """Replicas of one range before (`old`) and after (`new`), each in Cassandra's order.

    A named tuple: a diff of a big ring builds one per range (256,000), and tuples build fastest.
    """

    range: TokenRange
    old: Replicas
    new: Replicas

    @property
    def gained(self) -> Replicas:
        """Nodes that become replicas (order of `new`): they need the data streamed or repaired in."""
        return tuple(a for a in self.new if a not in self.old)

    @property
    def lost(self) -> Replicas:
        """Nodes that stop being replicas (order of `old`): their copies are left for cleanup."""
        return tuple(a for a in self.old if a not in self.new)

    @property
    def kept(self) -> Replicas:
        """Nodes that stay replicas (order of `new`)."""
        return tuple(a for a in self.new if a in self.old)

    @property
    def affected(self) -> bool:
        """The replica set changed (a mere reordering moves no data)."""
        return len(self.old) != len(self.new) or set(self.old) != set(self.new)


@dataclass(frozen=True)
class NodeTotals:
    """One node's share of a placement change.

    Byte estimates assume data is spread evenly over the tokens a node replicates: a range of
    width w on a node owning W tokens holds `load * w / W`. Streamed-in bytes are estimated from
    the range's former replicas. None when no relevant load is known.
    """

    address: str
    ranges_gained: int = 0
    ranges_lost: int = 0
    tokens_gained: int = 0
    tokens_lost: int = 0
    bytes_in: int | None = None
    bytes_out: int | None = None


@dataclass(frozen=True)
class PlacementDiff:
    """Two placements of the same ranges, and what changes between them.

    `changes` lists the ranges whose replicas differ (set or order), in ring order; it is built on
    demand, like the counts: big rings have 256,000 ranges, and a summary needs only `counts`.
    `loads` (bytes per node) and `owned_width` (tokens each node replicated before the change)
    feed the byte estimates of `node_totals`; both are empty when no load is known.
    """

    before: ReplicaMap
    after: ReplicaMap
    loads: Mapping[str, int] = field(default_factory=dict)
    owned_width: Mapping[str, int] = field(default_factory=dict)
    # The counted change per range of `before`, when the caller has it already (see `counts`).
    delta: ReplicaDelta | None = field(default=None, repr=False, compare=False)

    @cached_property
    def changes(self) -> tuple[RangeChange, ...]:
        old, new = self.before.replicas, self.after.replicas
        differs = list(map(ne, old, new))
        return tuple(map(RangeChange, *(compress(column, differs) for column in (self.before.ranges, old, new))))

    @cached_property
    def counts(self) -> ReplicaDelta:
        """Replicas lost and gained per range (aligned with `before.ranges`), and ranges per node."""
        return self.delta if self.delta is not None else delta_of_maps(self.before, self.after)

    def affected_count(self) -> int:
        """How many ranges change their replica set."""
        return sum(self.counts.changed())

    def affected(self) -> list[RangeChange]:
        """Changes that move data (replica set changed), in ring order."""
        return self._changes_at(compress(range(len(self.before)), self.counts.changed()))

    def gaining(self) -> list[RangeChange]:
        """Changes in which some node becomes a replica (it holds no data until repair), in ring order."""
        return self._changes_at(compress(range(len(self.before)), self.counts.gained))

    def keeping_none(self) -> list[RangeChange]:
        """Changes in which every old replica is lost (the range had replicas before)."""
        count = self.before.replica_count
        old_counts = repeat(count) if count is not None else map(len, self.before.replicas)
        all_lost = map(eq, self.counts.lost, old_counts)
        return [c for c in self._changes_at(compress(range(len(self.before)), all_lost)) if c.old]

    def _changes_at(self, positions: Iterable[int]) -> list[RangeChange]:
        """RangeChanges of the given range positions, built only for them."""
        positions = list(positions)
        if not positions:
            return []
        ranges, old, new = self.before.ranges, self.before.replicas, self.after.replicas
        return [RangeChange(ranges[i], old[i], new[i]) for i in positions]

    def affected_ranges(self) -> list[TokenRange]:
        return [change.range for change in self.changes if change.affected]

    def node_totals(self) -> dict[str, NodeTotals]:
        """Per node: ranges and tokens gained and lost, and estimated bytes in / to clean up."""
        densities = self.densities()
        counts: dict[str, list[int]] = {}
        bytes_in: dict[str, float] = {}
        bytes_out: dict[str, float] = {}
        for change in self.changes:
            old, new = set(change.old), set(change.new)
            if old == new:
                continue
            width = change.range.width()
            source_density = _mean_density(change.old, densities) if densities else None
            for address in new - old:
                entry = counts.setdefault(address, [0, 0, 0, 0])
                entry[0] += 1
                entry[2] += width
                if source_density is not None:
                    bytes_in[address] = bytes_in.get(address, 0.0) + source_density * width
            for address in old - new:
                entry = counts.setdefault(address, [0, 0, 0, 0])
                entry[1] += 1
                entry[3] += width
                if address in densities:
                    bytes_out[address] = bytes_out.get(address, 0.0) + densities[address] * width
        return {
            address: NodeTotals(
                address,
                ranges_gained=entry[0],
                ranges_lost=entry[1],
                tokens_gained=entry[2],
                tokens_lost=entry[3],
                bytes_in=_rounded(bytes_in.get(address)),
                bytes_out=_rounded(bytes_out.get(address)),
            )
            for address, entry in sorted(counts.items())
        }

    def densities(self) -> dict[str, float]:
        """Bytes per token of each node whose load and former ownership are known."""
        return {
            address: load / self.owned_width[address]
            for address, load in self.loads.items()
            if self.owned_width.get(address)
        }


def _mean_density(sources: Replicas, densities: Mapping[str, float]) -> float | None:
    known = [densities[a] for a in sources if a in densities]
    return sum(known) / len(known) if known else None


def _rounded(value: float | None) -> int | None:
    return None if value is None else round(value)


def diff_maps(
    old: ReplicaMap, new: ReplicaMap, loads: Mapping[str, int] | None = None, delta: ReplicaDelta | None = None
) -> PlacementDiff:
    """Diff two placements of the same token boundaries (or of different ones, refined to both).

    `delta` is the counted change of the same two placements, per range of `old` (see `replica_delta`).
    """
    if not (old.ranges is new.ranges or [r.end for r in old.ranges] == [r.end for r in new.ranges]):
        old, new, delta = *_refine(old, new), None
    loads = dict(loads or {})
    return PlacementDiff(old, new, loads, _owned_width(old) if loads else {}, delta)


def diff_replication(ring: Ring, old: Replication, new: Replication) -> PlacementDiff:
    """Placement change of an `ALTER KEYSPACE` from `old` to `new` replication on `ring`.

    Cached with the ring's placements (the safety analysis and the plan ask for the same diff).
    """
    old_map, new_map = replica_map(ring, old), replica_map(ring, new)
    memo = ring_index(ring).memo
    key = ("diff", id(old_map), id(new_map))  # both maps live in the same memo: their ids stay unique
    cached = memo.get(key)
    if cached is None:
        cached = memo[key] = diff_maps(old_map, new_map, _loads(ring), replica_delta(ring, old, new))
    assert isinstance(cached, PlacementDiff)
    return cached


def diff_rings(before: Ring, after: Ring, replication: Replication) -> PlacementDiff:
    """Placement change when the ring itself changes under one replication setting.

    Token moves, added or removed nodes, and rack or datacenter relabels (a snitch change) all
    move ownership; ranges are refined to the token boundaries of both rings.
    """
    return diff_maps(replica_map(before, replication), replica_map(after, replication), _loads(before))


def _loads(ring: Ring) -> dict[str, int]:
    return {node.address: node.load_bytes for node in ring.nodes if node.load_bytes is not None}


def _owned_width(placement: ReplicaMap) -> dict[str, int]:
    owned: dict[str, int] = {}
    for token_range, replicas in zip(placement.ranges, placement.replicas, strict=True):
        width = token_range.width()
        for address in replicas:
            owned[address] = owned.get(address, 0) + width
    return owned


def _refine(old: ReplicaMap, new: ReplicaMap) -> tuple[ReplicaMap, ReplicaMap]:
    """Both placements on the union of their token boundaries."""
    ends = sorted({r.end for r in old.ranges} | {r.end for r in new.ranges})
    ranges = [TokenRange(ends[i - 1], end) for i, end in enumerate(ends)]
    return ReplicaMap(ranges, _replicas_at(old, ends)), ReplicaMap(ranges, _replicas_at(new, ends))


def _replicas_at(placement: ReplicaMap, ends: Sequence[int]) -> list[Replicas]:
    own_ends = [r.end for r in placement.ranges]
    size = len(own_ends)
    return [placement.replicas[bisect.bisect_left(own_ends, end) % size] for end in ends]
