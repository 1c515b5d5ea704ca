"""Precomputed per-datacenter views of a ring, for fast replica placement.

Cassandra 5.0's NetworkTopologyStrategy walks the ring clockwise from a range's end token and
hands each token's owner to the tracker of the owner's datacenter. Trackers never look at other
datacenters, so a datacenter's replicas for a range depend only on where the walk enters that
datacenter's own token list. ringward therefore computes, per datacenter and factor, one selection
per entry point (derived from its neighbour in O(RF) when RF <= racks or the DC has one rack,
otherwise a short walk with early stop), and a range's replicas are the selections of its
datacenters merged by ring position: Cassandra adds each replica the moment its walk reaches it,
so its endpoint order is exactly ring-position order.

SimpleStrategy is the same walk over one group holding the whole ring, all in a single "rack": the
first node is a new rack and every later distinct node is an allowed rack repeat.
"""

from __future__ import annotations

import bisect
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field

from ringward.ring import Ring, TokenRange

__all__ = ["Group", "RingIndex", "Selection", "entry_position", "ring_index"]

# One replica set for one entry point: the unwrapped ring positions of the chosen tokens, in ring
# order. Positions past the last token continue into a second lap (`position + ring size`); a
# position names its owner, so merging groups is a sort of plain ints.
Selection = tuple[int, ...]


@dataclass
class Group:
    """The ring tokens of one datacenter (or of the whole ring, for SimpleStrategy)."""

    ring_size: int
    positions: list[int]  # indexes into the ring's sorted tokens, ascending
    nodes: list[int]  # node id owning each position
    racks: list[int]  # rack id of that node
    node_count: int
    rack_count: int
    _entry: list[int] | None = None
    _selections: dict[int, list[Selection]] = field(default_factory=dict)

    @property
    def entry(self) -> list[int]:
        """Ring position -> first group index at or after it; `len(positions)` means the walk wraps."""
        if self._entry is None:
            entry: list[int] = []
            previous = -1
            for index, position in enumerate(self.positions):
                entry.extend([index] * (position - previous))
                previous = position
            entry.extend([len(self.positions)] * (self.ring_size - 1 - previous))
            self._entry = entry
        return self._entry

    def select(self, start: int, factor: int) -> Selection:
        """The replicas Cassandra picks in this group when the walk enters at group index `start`."""
        size = len(self.positions)
        wanted = min(factor, self.node_count)
        rack_repeats = factor - self.rack_count  # Cassandra 5.0: repeats allowed when racks < RF
        chosen: set[int] = set()
        seen_racks: set[int] = set()
        picks: list[int] = []
        for step in range(size):
            index = start + step
            if index >= size:
                index -= size
            node = self.nodes[index]
            if node in chosen:
                continue
            rack = self.racks[index]
            if rack in seen_racks:
                if rack_repeats <= 0:
                    continue
                rack_repeats -= 1
            else:
                seen_racks.add(rack)
            chosen.add(node)
            position = self.positions[index] + (self.ring_size if start + step >= size else 0)
            picks.append(position)
            if len(picks) == wanted:
                break
        return tuple(picks)

    def selections(self, factor: int) -> list[Selection]:
        """`select` for every entry point, plus the wrapped entry (index 0 shifted one lap)."""
        cached = self._selections.get(factor)
        if cached is None:
            if self.rack_count == 1:  # every distinct node in walk order, up to the factor
                cached = self._first_distinct(self.nodes, min(factor, self.node_count))
            elif factor <= self.rack_count:  # the first node of each of the first `factor` racks
                cached = self._first_distinct(self.racks, factor)
            else:
                cached = [self.select(start, factor) for start in range(len(self.positions))]
                lap = self.ring_size
                cached.append(tuple(position + lap for position in cached[0]))
            self._selections[factor] = cached
        return cached

    def _first_distinct(self, keys: list[int], count: int) -> list[Selection]:
        """Per entry point: positions of the first occurrence of the first `count` distinct keys.

        When a selection is just "first occurrences of distinct keys" (one rack: distinct nodes;
        RF <= racks: distinct racks), it follows from the next entry point's: walking backwards,
        the new first token's key moves to the front, dropping its later occurrence or, if absent,
        the last entry. One lap of lookahead is all either walk sees, so this is exact.
        """
        size = len(self.positions)
        lap = self.ring_size
        picked_positions = [position + lap for position in self.select(0, count)]
        picked_keys = [keys[bisect.bisect_left(self.positions, p - lap)] for p in picked_positions]
        selections: list[Selection] = [()] * size
        selections.append(tuple(picked_positions))
        for start in range(size - 1, -1, -1):
            key = keys[start]
            if key in picked_keys:
                drop = picked_keys.index(key)
                del picked_keys[drop]
                del picked_positions[drop]
            else:
                picked_keys.pop()
                picked_positions.pop()
            picked_keys.insert(0, key)
            picked_positions.insert(0, self.positions[start])
            selections[start] = tuple(picked_positions)
        return selections

    def selection_at(self, ring_position: int, factor: int) -> Selection:
        start = self.entry[ring_position]
        wrapped = start == len(self.positions)
        picks = self.select(0 if wrapped else start, factor)
        if not wrapped:
            return picks
        return tuple(position + self.ring_size for position in picks)


@dataclass
class RingIndex:
    """Everything placement needs about one ring, computed once."""

    ranges: list[TokenRange]
    range_ends: Sequence[int]
    address_at: list[str]  # unwrapped ring position (two laps) -> owner address
    datacenters: dict[str, Group]
    whole_ring: Group
    # Results derived from this ring (e.g. replica maps per replication), keyed by their caller.
    memo: dict[object, object] = field(default_factory=dict)


def _build(ring: Ring) -> RingIndex:
    tokens = ring.sorted_tokens
    size = len(tokens)
    owner_of: dict[int, int] = {}
    for node_id, node in enumerate(ring.nodes):
        owner_of.update(dict.fromkeys(node.tokens, node_id))
    owner_ids = list(map(owner_of.__getitem__, tokens))
    dc_names = list(dict.fromkeys(node.datacenter for node in ring.nodes))
    dc_number = {dc: i for i, dc in enumerate(dc_names)}
    dc_of_node = [dc_number[node.datacenter] for node in ring.nodes]
    dc_at = list(map(dc_of_node.__getitem__, owner_ids))
    # A stable sort groups positions by datacenter while keeping each group in ring order.
    by_dc = sorted(range(size), key=dc_at.__getitem__)
    datacenters: dict[str, Group] = {}
    offset = 0
    for number, dc in enumerate(dc_names):
        count = dc_at.count(number)
        positions = by_dc[offset : offset + count]
        offset += count
        members = [n for n, d in enumerate(dc_of_node) if d == number]
        rack_id = {name: i for i, name in enumerate(dict.fromkeys(ring.nodes[n].rack for n in members))}
        node_rack = {n: rack_id[ring.nodes[n].rack] for n in members}
        nodes = list(map(owner_ids.__getitem__, positions))
        racks = list(map(node_rack.__getitem__, nodes))
        datacenters[dc] = Group(size, positions, nodes, racks, len(members), len(rack_id))
    whole_ring = Group(size, list(range(size)), owner_ids, [0] * size, len(ring.nodes), 1)
    ranges = ring.ranges()
    addresses = [node.address for node in ring.nodes]
    address_at = list(map(addresses.__getitem__, owner_ids)) * 2
    return RingIndex(ranges, tokens, address_at, datacenters, whole_ring)


_CACHE: dict[int, RingIndex] = {}


def ring_index(ring: Ring) -> RingIndex:
    """The index of `ring`, cached for the ring object's lifetime (rings are immutable)."""
    key = id(ring)
    index = _CACHE.get(key)
    if index is None:
        index = _build(ring)
        _CACHE[key] = index
        weakref.finalize(ring, _CACHE.pop, key, None)
    return index


def entry_position(index: RingIndex, token: int) -> int:
    """Position of the ring token whose range contains `token` (where Cassandra's walk starts)."""
    return bisect.bisect_left(index.range_ends, token) % len(index.range_ends)
