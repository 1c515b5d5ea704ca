"""Staged replication changes: a route of ALTERs on which no range ever loses all its data holders.

Each step is judged against the previous step's placement, range by range:
- at least one replica is kept (otherwise repair has nothing to copy from), and by default
- at most one replica is gained and one lost per datacenter (the rule ScyllaDB enforces for tablets,
  RF moves by at most 1 per datacenter per step), and a QUORUM (and per-DC LOCAL_QUORUM) read after
  the step still overlaps every QUORUM write made before it: `q(old) - lost + q(new) > |new|`.

The route is the shortest one found by a breadth-first search over replication settings near the
current one (factors +-1 per datacenter, SimpleStrategy factors +-1), which typically raises factors
until the old replicas are included and then lowers them to the target.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import compress, product, repeat

from ringward.alter import altered_replication
from ringward.consistency import quorum
from ringward.errors import UnsafeChangeError
from ringward.placement import ReplicaMap, replica_delta, replica_map
from ringward.replication import NETWORK_TOPOLOGY as NTS
from ringward.replication import SIMPLE, Replication
from ringward.ring import Ring, TokenRange

__all__ = ["MAX_SEARCHED_SETTINGS", "staged_steps", "unsafe_step_ranges"]

MAX_SEARCHED_SETTINGS = 2_000

_Key = tuple[str, tuple[tuple[str, int], ...]]
Replicas = tuple[str, ...]


def staged_steps(ring: Ring, old: Replication, new: Replication, *, keep_quorum: bool = True) -> list[Replication]:
    """The replication settings to apply one after another, ending at `new` (empty when old == new).

    Raises UnsafeChangeError when no route of safe steps exists.
    """
    if old == new:
        return []
    search = _Search(ring, old, new, keep_quorum)
    if search.key(search.old) == search.key(search.new):
        return [new]  # only the spelling changes (e.g. an explicit 'dc2': 0): one harmless ALTER
    path = search.shortest_path()
    if path is None:
        rule = "one replica change per datacenter and QUORUM overlap" if keep_quorum else "a kept replica"
        raise UnsafeChangeError(
            f"No staged route from {old.to_cql()} to {new.to_cql()} keeps {rule} on every range.",
            "Add nodes, or add the target datacenter first and rebuild it (nodetool rebuild), then plan again.",
        )
    steps = search.to_replications(path)
    before_last = steps[-2] if len(steps) > 1 else search.old
    if altered_replication(before_last, new, ring.datacenters()) != search.new:
        # The shorthand would resolve differently after the intermediate steps: spell the target out.
        steps[-1] = search.new
    return steps


def unsafe_step_ranges(
    ring: Ring, before: Replication, after: Replication, *, keep_quorum: bool = True
) -> list[TokenRange]:
    """The ranges on which applying `after` right after `before` breaks the step rules."""
    datacenter_of = {n.address: n.datacenter for n in ring.nodes}
    ranges = ring.ranges()
    olds, news = replica_map(ring, before), replica_map(ring, after)
    lost = replica_delta(ring, before, after).lost
    return [ranges[i] for i in _unsafe_positions(olds, news, lost, datacenter_of, keep_quorum)]


def _unsafe_positions(
    olds: ReplicaMap,
    news: ReplicaMap,
    lost: Sequence[int],
    datacenter_of: Mapping[str, str],
    keep_quorum: bool,
    first_only: bool = False,
) -> list[int]:
    """Positions of the ranges whose step from `olds` to `news` breaks the rules.

    Most ranges are decided by their shape alone (replica counts before and after, replicas lost),
    counted with builtins for all ranges at once (big rings have 256,000 of them); only shapes with
    two or more changes need the per-datacenter look at the replicas themselves.
    """
    shapes = list(zip(_replica_counts(olds), _replica_counts(news), lost, strict=True))
    verdicts = {shape: _shape_verdict(*shape, keep_quorum) for shape in set(shapes)}
    unsafe: list[int] = []
    for position in compress(range(len(shapes)), map(verdicts.__getitem__, shapes)):
        verdict = verdicts[shapes[position]]
        old, new = olds.replicas[position], news.replicas[position]
        if verdict == _UNSAFE or not _range_step_ok(old, new, datacenter_of, keep_quorum):
            unsafe.append(position)
            if first_only:
                break
    return unsafe


def _replica_counts(placement: ReplicaMap) -> Iterable[int]:
    if placement.replica_count is not None:
        return repeat(placement.replica_count, len(placement))
    return map(len, placement.replicas)


_UNSAFE, _LOOK_CLOSER = 1, 2  # truthy verdicts; 0 means the shape is safe


def _shape_verdict(old: int, new: int, lost: int, keep_quorum: bool) -> int:
    gained = new - (old - lost)  # replicas are distinct: new = kept + gained
    if not old or not (lost or gained):
        return 0
    if lost == old:
        return _UNSAFE  # no replica kept: repair has nothing to copy from
    if not keep_quorum:
        return 0
    if not _overlaps(old, new, lost):
        return _UNSAFE
    # A single replica gained or lost keeps its datacenter's quorum overlap; two changes may not.
    return 0 if lost + gained <= 1 else _LOOK_CLOSER


def _range_step_ok(old: Replicas, new: Replicas, datacenter_of: Mapping[str, str], keep_quorum: bool) -> bool:
    """One range's step rules; replica lists are short, so plain list scans beat building sets."""
    if not old:
        return True
    lost = [a for a in old if a not in new]
    if len(lost) == len(old):
        return False
    if not keep_quorum:
        return True
    if not _overlaps(len(old), len(new), len(lost)):
        return False
    gained = [a for a in new if a not in old]
    changed_dcs = {datacenter_of[a] for a in lost} | {datacenter_of[a] for a in gained}
    for dc in changed_dcs:
        lost_dc = sum(1 for a in lost if datacenter_of[a] == dc)
        gained_dc = sum(1 for a in gained if datacenter_of[a] == dc)
        if lost_dc > 1 or gained_dc > 1:
            return False
        old_dc = sum(1 for a in old if datacenter_of[a] == dc)
        new_dc = old_dc - lost_dc + gained_dc
        if old_dc and new_dc and not _overlaps(old_dc, new_dc, lost_dc):
            return False
    return True  # a datacenter without changes keeps its LOCAL_QUORUM overlap trivially


def _nearby(factor: int, most: int) -> list[int]:
    """Factors one step from `factor` within [0, most], raise first."""
    return [f for f in (factor + 1, factor, factor - 1) if 0 <= f <= most] or [min(factor, most)]


def _overlaps(old_count: int, new_count: int, lost: int) -> bool:
    """Every quorum of the new replicas meets every quorum of the old ones that may have taken a write."""
    return quorum(old_count) - lost + quorum(new_count) > new_count


class _Search:
    """Breadth-first search over replication settings; placements are computed once per setting."""

    def __init__(self, ring: Ring, old: Replication, new: Replication, keep_quorum: bool) -> None:
        self.ring = ring
        self.target = new
        # Search on what Cassandra stores: shorthand and implicit forms resolved against the current map.
        self.old = old.expand(ring.datacenters())
        self.new = altered_replication(self.old, new, ring.datacenters())
        self.keep_quorum = keep_quorum
        self.datacenter_of = {n.address: n.datacenter for n in ring.nodes}
        nodes_per_dc = {dc: len(nodes) for dc, nodes in ring.datacenters().items()}
        named = [dc for r in (old, new) if r.strategy == NTS for dc in r.factors]
        self.datacenters = sorted(set(nodes_per_dc) | set(named))
        self.bounds = {dc: nodes_per_dc.get(dc, 0) for dc in self.datacenters}
        self.node_count = len(ring.nodes)
        self.settings: dict[_Key, Replication] = {self.key(old): old, self.key(new): new}

    def key(self, replication: Replication) -> _Key:
        if replication.strategy == NTS:
            factors = {dc: f for dc, f in replication.factors.items() if f > 0}
        else:
            factors = dict(replication.factors)
        return replication.strategy, tuple(sorted(factors.items()))

    def shortest_path(self) -> list[_Key] | None:
        start, goal = self.key(self.old), self.key(self.new)
        previous: dict[_Key, _Key | None] = {start: None}
        queue = deque([start])
        while queue and len(previous) <= MAX_SEARCHED_SETTINGS:
            current = queue.popleft()
            for candidate in self._neighbours(current, goal):
                if candidate in previous or not self._step_ok(current, candidate):
                    continue
                previous[candidate] = current
                if candidate == goal:
                    return self._unwind(previous, goal)
                queue.append(candidate)
        return None

    def to_replications(self, path: Sequence[_Key]) -> list[Replication]:
        """Settings for each step after the start; DCs that held replicas stay named (as 0)."""
        named = {dc for dc in self.datacenters if self._ever_named(dc)}
        steps: list[Replication] = []
        for key in path[1:]:
            if key == self.key(self.new):
                steps.append(self.target)
                continue
            strategy, factors = key
            values = dict(factors)
            if strategy == NTS:
                named |= {dc for dc, f in values.items() if f > 0}
                values = {dc: values.get(dc, 0) for dc in self.datacenters if dc in named}
            steps.append(Replication(strategy, values))
        return steps

    def _ever_named(self, dc: str) -> bool:
        if SIMPLE in (self.old.strategy, self.new.strategy):
            return True
        return any(dc in r.factors for r in (self.old, self.new))

    def _unwind(self, previous: Mapping[_Key, _Key | None], goal: _Key) -> list[_Key]:
        path = [goal]
        while (before := previous[path[-1]]) is not None:
            path.append(before)
        return path[::-1]

    def _step_ok(self, before: _Key, after: _Key) -> bool:
        old_map, new_map = self._placement_of(before), self._placement_of(after)
        lost = replica_delta(self.ring, self._setting(before), self._setting(after)).lost
        return not _unsafe_positions(old_map, new_map, lost, self.datacenter_of, self.keep_quorum, first_only=True)

    def _placement_of(self, key: _Key) -> ReplicaMap:
        return replica_map(self.ring, self._setting(key))  # cached per ring and setting

    def _setting(self, key: _Key) -> Replication:
        if key not in self.settings:
            self.settings[key] = Replication(key[0], dict(key[1]))
        return self.settings[key]

    def _neighbours(self, key: _Key, goal: _Key) -> Iterator[_Key]:
        """The goal first, then raises before lowers (raising first keeps the data where it is)."""
        yield goal
        around = self._dc_counts(key)
        total = sum(f for _, f in key[1]) if key[0] == SIMPLE else sum(around.values())
        for factor in (total + 1, total - 1):
            if 1 <= factor <= self.node_count:
                yield SIMPLE, (("replication_factor", factor),)
        choices = [_nearby(around[dc], self.bounds[dc]) for dc in self.datacenters]
        for factors in product(*choices):
            candidate = (
                NTS,
                tuple((dc, f) for dc, f in zip(self.datacenters, factors, strict=True) if f > 0),
            )
            if candidate != key and any(factors):
                yield candidate

    def _dc_counts(self, key: _Key) -> dict[str, int]:
        """Replicas per datacenter of a setting: its NTS factors, or the most a range holds (Simple)."""
        if key[0] == NTS:
            factors = dict(key[1])
            return {dc: factors.get(dc, 0) for dc in self.datacenters}
        counts = dict.fromkeys(self.datacenters, 0)
        for replicas in self._placement_of(key).replicas:
            per_dc: dict[str, int] = {}
            for address in replicas:
                dc = self.datacenter_of[address]
                per_dc[dc] = per_dc.get(dc, 0) + 1
            for dc, n in per_dc.items():
                counts[dc] = max(counts[dc], n)
        return counts
