"""Staged replication changes: a route of ALTERs on which no range ever loses all its data holders.

Each step is judged against the previous step's placement, range by range:
- at least one replica is kept (otherwise repair has nothing to copy from), and by default
- at most one replica is gained and one lost per datacenter (the rule ScyllaDB enforces for tablets,
  RF moves by at most 1 per datacenter per step), and a QUORUM (and per-DC LOCAL_QUORUM) read after
  the step still overlaps every QUORUM write made before it: `q(old) - lost + q(new) > |new|`.

A route is what an operator would write:
- between two NetworkTopologyStrategy settings it stays NetworkTopologyStrategy; from or to
  SimpleStrategy it passes through NetworkTopologyStrategy settings only (SimpleStrategy to
  SimpleStrategy through SimpleStrategy factors);
- every datacenter's factor moves monotonically from its start to its target, and a datacenter whose
  factor does not change is not touched;
- it has the fewest ALTERs these rules allow (a breadth-first search over the factor vectors between
  start and target, moving every datacenter that still has to move in the same step where the step
  rules allow it).

The search judges NetworkTopologyStrategy steps per datacenter: a datacenter's replicas depend on its
own factor only, so "one replica change per datacenter" and LOCAL_QUORUM overlap are decided once per
(datacenter, factor, factor) on that datacenter's entry points, and the ring-wide rules (a replica kept,
QUORUM overlap) from the per-range loss counts, only when the per-datacenter bounds do not settle them.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import compress, product, repeat

from ringward._placement_index import ring_index
from ringward.cassandra_release import CASSANDRA_5_0, CassandraRelease
from ringward.consistency import quorum
from ringward.errors import UnsafeChangeError
from ringward.placement import ReplicaMap, replica_delta, replica_map, replicas_for_token
from ringward.replication import NETWORK_TOPOLOGY as NTS
from ringward.replication import REPLICATION_FACTOR, SIMPLE, Replication
from ringward.ring import Ring, TokenRange
from ringward.stored_replication import altered_replication

__all__ = ["Route", "staged_route", "staged_steps", "unsafe_step_ranges"]

Replicas = tuple[str, ...]
_Vector = tuple[int, ...]

# Why a step is refused, in the words the refusal uses.
_NOT_KEPT = "a range keeps none of its replicas"
_TWO_IN_DC = "two replicas of a range change in one datacenter"
_QUORUM = "a QUORUM read after the step can miss a QUORUM write made before it"
_LOCAL_QUORUM = "a LOCAL_QUORUM read after the step can miss a LOCAL_QUORUM write made before it"


@dataclass(frozen=True)
class Route:
    """The ALTERs to apply one after another (`steps`, ending at the requested setting) and one line per
    step saying what changes, on which ranges, and why the step exists (`notes`)."""

    steps: tuple[Replication, ...]
    notes: tuple[str, ...]


def staged_steps(
    ring: Ring,
    old: Replication,
    new: Replication,
    *,
    keep_quorum: bool = True,
    default_keyspace_rf: int = 1,
    release: CassandraRelease = CASSANDRA_5_0,
) -> list[Replication]:
    """The replication settings to apply one after another, ending at `new` (empty when old == new).

    Raises UnsafeChangeError when no route of safe steps exists.
    """
    route = staged_route(
        ring, old, new, keep_quorum=keep_quorum, default_keyspace_rf=default_keyspace_rf, release=release
    )
    return list(route.steps)


def staged_route(
    ring: Ring,
    old: Replication,
    new: Replication,
    *,
    keep_quorum: bool = True,
    default_keyspace_rf: int = 1,
    release: CassandraRelease = CASSANDRA_5_0,
) -> Route:
    """`staged_steps` with a one-line explanation of each step."""
    if old == new:
        return Route((), ())
    datacenters = ring.datacenters()
    stored_old = altered_replication(None, old, datacenters, default_keyspace_rf, release=release)
    stored_new = altered_replication(stored_old, new, datacenters, default_keyspace_rf, release=release)
    router = _Router(ring, stored_old, stored_new, keep_quorum)
    target = _spelled_out(new, stored_new)
    if router.same_setting(stored_old, stored_new):
        return Route((target,), ("only the spelling of the setting changes: no range changes replicas",))
    path = router.shortest_path()
    if path is None:
        raise router.refusal(old, new, default_keyspace_rf)
    steps = router.settings_of(path)
    steps[-1] = target
    return Route(tuple(steps), tuple(router.notes(path)))


def _spelled_out(requested: Replication, stored: Replication) -> Replication:
    """The target as Cassandra stores it, with the datacenters the request names as 0 kept (as 0): every step
    of a route is spelled out, so what the ALTER stores, what the placement checks expect and what a retry
    compares are one setting (a shorthand, bare NTS or SimpleStrategy without factor depends on the setting
    it is applied to)."""
    if stored.is_simple:
        return stored
    named = {dc: f for dc, f in requested.factors.items() if dc != REPLICATION_FACTOR}
    return Replication(NTS, {**named, **stored.factors})


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
        if verdict == _UNSAFE or _range_step_problem(old, new, datacenter_of, keep_quorum):
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


def _range_step_problem(old: Replicas, new: Replicas, datacenter_of: Mapping[str, str], keep_quorum: bool) -> str:
    """The rule one range's step breaks ("" when none); replica lists are short, so plain list scans."""
    if not old:
        return ""
    lost = [a for a in old if a not in new]
    if len(lost) == len(old):
        return _NOT_KEPT
    if not keep_quorum:
        return ""
    if not _overlaps(len(old), len(new), len(lost)):
        return _QUORUM
    gained = [a for a in new if a not in old]
    changed_dcs = {datacenter_of[a] for a in lost} | {datacenter_of[a] for a in gained}
    for dc in changed_dcs:
        lost_dc = sum(1 for a in lost if datacenter_of[a] == dc)
        gained_dc = sum(1 for a in gained if datacenter_of[a] == dc)
        if lost_dc > 1 or gained_dc > 1:
            return _TWO_IN_DC
        old_dc = sum(1 for a in old if datacenter_of[a] == dc)
        new_dc = old_dc - lost_dc + gained_dc
        if old_dc and new_dc and not _overlaps(old_dc, new_dc, lost_dc):
            return _LOCAL_QUORUM
    return ""  # a datacenter without changes keeps its LOCAL_QUORUM overlap trivially


def _keeps_none(old: Replicas, new: Replicas) -> bool:
    return bool(old) and set(old).isdisjoint(new)


def _overlaps(old_count: int, new_count: int, lost: int) -> bool:
    """Every quorum of the new replicas meets every quorum of the old ones that may have taken a write."""
    return quorum(old_count) - lost + quorum(new_count) > new_count


_PROBES = 64  # ranges a class-changing step is tried on before its placements are built
_START = (-1,)  # the state of a SimpleStrategy start on the way to NetworkTopologyStrategy
_SIMPLE_STATE = -2  # (-2, factor): a SimpleStrategy setting after leaving NetworkTopologyStrategy


def _is_simple_state(state: _Vector) -> bool:
    return len(state) == 2 and state[0] == _SIMPLE_STATE


class _Router:
    """Breadth-first search over factor vectors between the start and the target.

    A state is a vector of effective factors (a datacenter's factor capped at its node count), one per
    datacenter, or one ring-wide factor when start and target are both SimpleStrategy. Moves go
    towards the target only, so every factor is monotone along any route found.
    """

    def __init__(self, ring: Ring, old: Replication, new: Replication, keep_quorum: bool) -> None:
        self.ring = ring
        self.index = ring_index(ring)
        self.old, self.new = old, new
        self.keep_quorum = keep_quorum
        self.datacenter_of = {n.address: n.datacenter for n in ring.nodes}
        self.simple_only = old.is_simple and new.is_simple
        ring_dcs = {dc: len(nodes) for dc, nodes in ring.datacenters().items()}
        self.problems: dict[str, int] = {}
        self._verdicts: dict[tuple[_Vector, _Vector], str] = {}
        self._dc_profiles: dict[tuple[str, int, int], tuple[int, int]] = {}
        self._sets: dict[tuple[str, int], list[set[int]]] = {}
        self.spelled: set[str] = set()
        self.simple_target = min(new.factor_for(""), len(ring.nodes)) if new.is_simple else 0
        if self.simple_only:
            self.dims: tuple[str, ...] = (REPLICATION_FACTOR,)
            self.caps = {REPLICATION_FACTOR: len(ring.nodes)}
            self.start: _Vector = (min(old.factor_for(""), len(ring.nodes)),)
            self.target: _Vector = (min(new.factor_for(""), len(ring.nodes)),)
            return
        named = [dc for r in (old, new) if not r.is_simple for dc in r.factors]
        self.dims = tuple(dict.fromkeys([*ring_dcs, *named]))
        self.caps = {dc: ring_dcs.get(dc, 0) for dc in self.dims}
        self.start = self._vector_of(old)
        self.target = self._vector_of(new)
        # Datacenters spelled out in intermediate settings: those the start or the target name (as 0
        # once they hold no replicas), every datacenter of the ring when SimpleStrategy is involved.
        self.spelled = set(self.dims) if SIMPLE in (old.strategy, new.strategy) else set(named)

    # --- states and settings ------------------------------------------------------------------------

    def _vector_of(self, replication: Replication) -> _Vector:
        if replication.is_simple:  # the most replicas a range has in each datacenter
            return tuple(self._dc_counts(replication).get(dc, (0, 0))[1] for dc in self.dims)
        return tuple(min(replication.factor_for(dc), self.caps[dc]) for dc in self.dims)

    def same_setting(self, a: Replication, b: Replication) -> bool:
        if a.strategy != b.strategy:
            return False
        if a.is_simple:
            return min(a.factor_for(""), len(self.ring.nodes)) == min(b.factor_for(""), len(self.ring.nodes))
        return self._vector_of(a) == self._vector_of(b)

    def setting(self, state: _Vector) -> Replication:
        if state == _START:
            return self.old
        if _is_simple_state(state):
            return self.new if state[1] == self.simple_target else Replication.simple(state[1])
        if self.simple_only:
            return self.new if state == self.target else Replication.simple(state[0])
        if state == self.target and not self.new.is_simple:
            return self.new
        factors: dict[str, int] = {}
        for dc, value in zip(self.dims, state, strict=True):
            factor = self._spelling(dc, value)
            if factor or dc in self.spelled:
                factors[dc] = factor
        return Replication(NTS, factors)

    def _spelling(self, dc: str, value: int) -> int:
        """The factor to write for effective factor `value`: the target's or the start's own number when
        it means the same (a datacenter whose factor does not change keeps its spelling)."""
        for replication in (self.new, self.old):
            if not replication.is_simple and min(replication.factor_for(dc), self.caps[dc]) == value:
                return replication.factor_for(dc)
        return value

    def settings_of(self, path: Sequence[_Vector]) -> list[Replication]:
        steps = [self.setting(state) for state in path[1:]]
        if self._leaves_nts and not _is_simple_state(path[-1]):
            steps.append(self.new)
        return steps

    @property
    def _leaves_nts(self) -> bool:
        return self.new.is_simple and not self.simple_only

    # --- search -------------------------------------------------------------------------------------

    def shortest_path(self) -> list[_Vector] | None:
        if not self.old.is_simple or self.simple_only:
            return self._breadth_first(self.start)
        # SimpleStrategy -> NTS: the first step (judged range by range) is the costly one, the NTS steps
        # after it are cheap. So the NTS distance from every candidate first setting to the target comes
        # first, and the first steps are judged in order of the whole route's length: the first that keeps
        # the rules gives a shortest route.
        onwards = {first: self._breadth_first(first) for first in self._moves(_START)}
        reachable = [(len(path), first) for first, path in onwards.items() if path is not None]
        for _, first in sorted(reachable, key=lambda item: item[0]):  # stable: nearest the target first
            if self._step_ok(_START, first):
                path = onwards[first]
                assert path is not None
                return [_START, *path]
        return None

    def _breadth_first(self, first: _Vector) -> list[_Vector] | None:
        """The shortest path of allowed steps from `first` to a goal (`first` included)."""
        if self._is_goal(first):
            return [first]
        previous: dict[_Vector, _Vector | None] = {first: None}
        frontier = [first]
        while frontier:
            following: list[_Vector] = []
            for state in frontier:
                for candidate in self._moves(state):
                    if candidate in previous or not self._step_ok(state, candidate):
                        continue
                    previous[candidate] = state
                    if self._is_goal(candidate):
                        return self._unwind(previous, candidate)
                    following.append(candidate)
            frontier = following
        return None

    def _is_goal(self, state: _Vector) -> bool:
        if state == _START:
            return False
        if _is_simple_state(state):
            return state[1] == self.simple_target
        if self._leaves_nts:  # the last step leaves NTS for the SimpleStrategy target
            return self._exact_ok(self.setting(state), self.new)
        return state == self.target

    def _unwind(self, previous: Mapping[_Vector, _Vector | None], goal: _Vector) -> list[_Vector]:
        path = [goal]
        while (before := previous[path[-1]]) is not None:
            path.append(before)
        return path[::-1]

    def _moves(self, state: _Vector) -> list[_Vector]:
        """States one step on, towards the target only; the ones moving most datacenters first."""
        if state == _START:
            choices = [self._between(a, b) for a, b in zip(self.start, self.target, strict=True)]
            candidates = [c for c in product(*choices) if self._may_follow_simple(c)]
        elif _is_simple_state(state):  # after the switch: the SimpleStrategy factor towards the target
            return [(_SIMPLE_STATE, f) for f in self._onwards(state[1], self.simple_target) if f != state[1]]
        else:
            choices = [self._onwards(value, goal) for value, goal in zip(state, self.target, strict=True)]
            candidates = [c for c in product(*choices) if c != state]
        if not self.simple_only:  # an NTS setting without replicas is no step
            candidates = [c for c in candidates if any(c)]
        ordered = sorted(candidates, key=lambda c: -self._progress(state, c))
        if self._leaves_nts and state != _START:  # or switch to SimpleStrategy now, the class changing once
            total = sum(state)
            low, high = sorted((min(total, len(self.ring.nodes)), self.simple_target))
            ordered += [(_SIMPLE_STATE, f) for f in range(high, low - 1, -1) if f != self.simple_target]
        return ordered

    def _between(self, a: int, b: int) -> list[int]:
        return list(range(min(a, b), max(a, b) + 1))

    def _onwards(self, value: int, goal: int) -> list[int]:
        if value == goal:
            return [value]
        direction = 1 if goal > value else -1
        if self.keep_quorum:  # two replicas more or fewer in a datacenter change two of a range's replicas
            return [value + direction, value]
        return [*range(value + direction, goal + direction, direction), value]

    def _progress(self, state: _Vector, candidate: _Vector) -> int:
        if state == _START:
            return -sum(abs(c - t) for c, t in zip(candidate, self.target, strict=True))
        return sum(abs(c - s) for c, s in zip(candidate, state, strict=True))

    def _may_follow_simple(self, candidate: _Vector) -> bool:
        """Necessary conditions for a first NTS step after SimpleStrategy (cheap; the exact check follows)."""
        if not self.keep_quorum:
            return True
        counts = self._dc_counts(self.old)
        for dc, value in zip(self.dims, candidate, strict=True):
            least, most = counts.get(dc, (0, 0))
            if value > least + 1 or value < most - 1:  # some range would gain or lose two in `dc`
                return self._rejected(_TWO_IN_DC)
        old_count = min(self.old.factor_for(""), len(self.ring.nodes))
        return _overlaps(old_count, sum(candidate), 0) or self._rejected(_QUORUM)

    def _rejected(self, problem: str) -> bool:
        self.problems[problem] = self.problems.get(problem, 0) + 1
        return False

    # --- step rules ---------------------------------------------------------------------------------

    def _step_ok(self, before: _Vector, after: _Vector) -> bool:
        key = (before, after)
        if key not in self._verdicts:
            if before == _START or self.simple_only or _is_simple_state(after) or _is_simple_state(before):
                problem = self._exact_problem(self.setting(before), self.setting(after))
            else:
                problem = self._nts_problem(before, after)
            self._verdicts[key] = problem
            if problem:
                self.problems[problem] = self.problems.get(problem, 0) + 1
        return not self._verdicts[key]

    def _exact_ok(self, before: Replication, after: Replication) -> bool:
        problem = self._exact_problem(before, after)
        if problem:
            self.problems[problem] = self.problems.get(problem, 0) + 1
        return not problem

    def _exact_problem(self, before: Replication, after: Replication) -> str:
        """The first rule a step breaks, range by range (steps that leave or enter SimpleStrategy).

        Most steps tried are refused on one of the first ranges, so the ranges are walked with an early
        exit instead of counting every range's change first."""
        ranges = self.index.ranges
        for probe in ranges[:: max(1, len(ranges) // _PROBES)]:  # a few ranges first: most refusals show there
            old = replicas_for_token(self.ring, before, probe.end)
            problem = _range_step_problem(old, replicas_for_token(self.ring, after, probe.end), self.datacenter_of,
                                          self.keep_quorum)  # fmt: skip
            if problem:
                return problem
        olds, news = replica_map(self.ring, before).replicas, replica_map(self.ring, after).replicas
        if not self.keep_quorum:  # only a kept replica is asked for: one pass of builtins
            return _NOT_KEPT if any(map(_keeps_none, olds, news)) else ""
        seen: set[tuple[Replicas, Replicas]] = set()
        for pair in zip(olds, news, strict=True):
            if pair[0] == pair[1] or pair in seen:
                continue
            seen.add(pair)
            problem = _range_step_problem(pair[0], pair[1], self.datacenter_of, self.keep_quorum)
            if problem:
                return problem
        return ""

    def _nts_problem(self, before: _Vector, after: _Vector) -> str:
        """The step rules for an NTS -> NTS step, per datacenter first, ring-wide only where needed.

        A range has the same number of replicas in a datacenter under every NTS setting, so a datacenter
        that lowers its factor loses at least one replica on every range: the ring-wide rules are settled
        by the least and the most any range can lose, and only in between looked at range by range.
        """
        changed = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if a != b]
        old_count, new_count = sum(before), sum(after)
        most_lost = least_lost = 0
        for i in changed:
            dc, a, b = self.dims[i], before[i], after[i]
            lost, gained = self._dc_profile(dc, a, b)
            most_lost += lost
            least_lost += a > b
            if not self.keep_quorum:
                continue
            if lost > 1 or gained > 1:
                return _TWO_IN_DC
            if a and b and not _overlaps(a, b, lost):
                return _LOCAL_QUORUM
        if not old_count or not changed:
            return ""
        if least_lost >= old_count:
            return _NOT_KEPT
        if self.keep_quorum and not _overlaps(old_count, new_count, least_lost):
            return _QUORUM
        if most_lost < old_count and (not self.keep_quorum or _overlaps(old_count, new_count, most_lost)):
            return ""  # even the range that loses most keeps a replica and the QUORUM overlap
        lost_counts = set(replica_delta(self.ring, self.setting(before), self.setting(after)).lost)
        if old_count in lost_counts:
            return _NOT_KEPT
        if self.keep_quorum and not all(_overlaps(old_count, new_count, lost) for lost in lost_counts):
            return _QUORUM
        return ""

    def _dc_profile(self, dc: str, before: int, after: int) -> tuple[int, int]:
        """The most replicas any range loses and gains in `dc` when its factor goes `before` -> `after`.

        A range has `before` replicas in `dc` before and `after` after, so it gains what it loses plus
        the difference: only the losses are counted, per entry point of the datacenter's walk.
        """
        key = (dc, before, after)
        group = self.index.datacenters.get(dc)
        # The walk's first k racks (or, on one rack, first k nodes) are a prefix of its first k + 1: one
        # replica more or fewer is gained or lost on every range, and nothing else changes.
        prefix = group is not None and (group.rack_count == 1 or max(before, after) <= group.rack_count)
        if key not in self._dc_profiles and prefix and before and after and abs(before - after) == 1:
            self._dc_profiles[key] = (0, 1) if after > before else (1, 0)
        if key not in self._dc_profiles:
            lost = before
            if before and after:
                lost = max(map(len, map(set.difference, self._dc_sets(dc, before), self._dc_selections(dc, after))))
            elif not after:
                lost = before
            else:
                lost = 0
            self._dc_profiles[key] = (lost, lost + after - before)
        return self._dc_profiles[key]

    def _dc_selections(self, dc: str, factor: int) -> Sequence[Sequence[int]]:
        group = self.index.datacenters.get(dc)
        return group.selections(factor) if group is not None else [()]

    def _dc_sets(self, dc: str, factor: int) -> list[set[int]]:
        key = (dc, factor)
        if key not in self._sets:
            self._sets[key] = list(map(set, self._dc_selections(dc, factor)))
        return self._sets[key]

    def _dc_counts(self, replication: Replication) -> dict[str, tuple[int, int]]:
        """Per datacenter, the fewest and the most replicas a range has there (kept with the ring's
        placements: refusals search again from other settings)."""
        placement = replica_map(self.ring, replication)
        key = ("dc_counts", id(placement))
        cached = self.index.memo.get(key)
        if not (isinstance(cached, tuple) and cached[0] is placement):
            dc_of = self.datacenter_of.__getitem__
            shapes = set(map(tuple, map(map, repeat(dc_of), placement.replicas)))  # datacenters in ring order
            counts: dict[str, tuple[int, int]] = {}
            for dc in self.index.datacenters:
                per_range = [shape.count(dc) for shape in shapes]
                counts[dc] = (min(per_range, default=0), max(per_range, default=0))
            cached = self.index.memo[key] = (placement, counts)
        result = cached[1]
        assert isinstance(result, dict)
        return result

    # --- explanations -------------------------------------------------------------------------------

    def notes(self, path: Sequence[_Vector]) -> Iterator[str]:
        settings = [self.old, *self.settings_of(path)]
        states = list(path) + [(-3,)] * (len(settings) - len(path))  # the final switch has no state of its own
        count = len(settings) - 1
        for number in range(1, count + 1):
            before, after = settings[number - 1], settings[number]
            gaining, losing = self._changed_ranges(before, after)
            ranges = f"{gaining} of {len(self.index.ranges)} ranges gain a replica, {losing} lose one"
            why = self._why(settings, states, number)
            yield f"{self._what_changes(before, after)}; {ranges}; {why}"

    def _changed_ranges(self, before: Replication, after: Replication) -> tuple[int, int]:
        """How many ranges gain a replica and how many lose one in this step.

        Between NTS settings a datacenter that raises its factor gains on every range and one that lowers
        it loses on every range; a raise that also swaps a replica (racks) needs the per-range count.
        """
        size = len(self.index.ranges)
        if not before.is_simple and not after.is_simple:
            a, b = self._factors(before), self._factors(after)
            raising = [dc for dc in a if b[dc] > a[dc]]
            lowering = [dc for dc in a if b[dc] < a[dc]]
            swaps = any(self._dc_profile(dc, a[dc], b[dc])[0] > (a[dc] - b[dc] if dc in lowering else 0)
                        for dc in raising + lowering)  # fmt: skip
            if not swaps:
                return (size if raising else 0), (size if lowering else 0)
        delta = replica_delta(self.ring, before, after)
        return sum(1 for n in delta.gained if n), sum(1 for n in delta.lost if n)

    def _factors(self, replication: Replication) -> dict[str, int]:
        if replication.is_simple:
            return {REPLICATION_FACTOR: min(replication.factor_for(""), len(self.ring.nodes))}
        return {dc: min(replication.factor_for(dc), self.caps.get(dc, 0)) for dc in self.dims}

    def _what_changes(self, before: Replication, after: Replication) -> str:
        if before.strategy != after.strategy:
            return f"{before.strategy} -> {after.strategy}"
        a, b = self._factors(before), self._factors(after)
        moves = [f"{name} {a[name]} -> {b[name]}" for name in a if a[name] != b[name]]
        return ", ".join(moves) or "only the spelling changes"

    def _why(self, settings: Sequence[Replication], states: Sequence[_Vector], number: int) -> str:
        count = len(settings) - 1
        if count == 1:
            return "one ALTER keeps the step rules"
        before, after = settings[number - 1], settings[number]
        if before.strategy != after.strategy:
            if after.is_simple:
                return "the class changes once, here; the other steps keep their class"
            return "leaves SimpleStrategy first, keeping a replica of every range; the later steps stay NTS"
        phase = [s for s in settings if s.strategy == after.strategy]
        first, last = self._factors(phase[0]), self._factors(phase[-1])
        a, b = self._factors(before), self._factors(after)
        reasons = []
        for name in a:
            total = abs(last[name] - first[name])
            if a[name] != b[name] and total > 1 and self.keep_quorum:
                reasons.append(f"{name} moves one replica per step ({first[name]} -> {last[name]} in all)")
            elif a[name] == b[name] and b[name] != last[name]:
                reasons.append(f"{name} waits{self._wait_reason(states[number - 1], states[number], name)}")
        if reasons:
            return "; ".join(reasons)
        if number == count:
            return "completes the route: the steps before it keep this one within the step rules"
        return "a step of the shortest route that keeps the step rules"

    def _wait_reason(self, before: _Vector, after: _Vector, name: str) -> str:
        """Why `name` does not move in this step too, when the search tried that and it broke a rule."""
        if name not in self.dims or before == _START or _is_simple_state(before) or _is_simple_state(after):
            return " for a later step"
        i = self.dims.index(name)
        if len(after) != len(self.dims) or before[i] == self.target[i]:
            return " for a later step"
        direction = 1 if self.target[i] > before[i] else -1
        merged = (*after[:i], before[i] + direction, *after[i + 1 :])
        problem = self._verdicts.get((before, merged))
        return f": moving it in the same ALTER breaks a rule ({problem})" if problem else " for a later step"

    # --- refusal ------------------------------------------------------------------------------------

    def refusal(self, old: Replication, new: Replication, default_keyspace_rf: int) -> UnsafeChangeError:
        rule = "one replica change per datacenter and QUORUM overlap" if self.keep_quorum else "a kept replica"
        why = "; ".join(f"{problem} ({n} settings)" for problem, n in sorted(self.problems.items()))
        problem = (
            f"No staged route from {old.to_cql()} to {new.to_cql()} keeps {rule} on every range "
            f"(factors moving monotonically, one ALTER at a time)"
            + (f": every step tried fails because {why}." if why else ".")
        )
        return UnsafeChangeError(problem, self._fix(default_keyspace_rf))

    def _fix(self, default_keyspace_rf: int) -> str:
        """A way forward that this planner has checked works, or the honest lack of one."""
        fixes: list[str] = []
        if self.keep_quorum:
            relaxed = _Router(self.ring, self.old, self.new, keep_quorum=False)
            path = relaxed.shortest_path()
            if path is not None:
                route = " -> ".join(s.to_cql() for s in relaxed.settings_of(path))
                fixes.append(
                    "If the clients can accept QUORUM and LOCAL_QUORUM reads that miss writes until each step's "
                    "repair finishes (or pause those reads), plan without the QUORUM rules "
                    "(`ringward plan --allow-quorum-gap`, the migration DAG's `allow_quorum_gap` param): a route "
                    f"that keeps a replica of every range is {route}."
                )
        if self.old.is_simple and not fixes:  # one working fix is enough: each detour is another search
            fixes += self._simple_detours()
        if not fixes:
            fixes.append(
                "No route exists on this ring within the step rules: add nodes (or racks) to the datacenters "
                "that change, or change the keyspace by hand outside ringward."
            )
        return " ".join(fixes)

    def _simple_detours(self) -> list[str]:
        """A SimpleStrategy factor one above or below the current one to change to first (its own
        migration: one replica more or fewer per range is always a safe single ALTER), checked to lead on
        to the target."""
        current = min(self.old.factor_for(""), len(self.ring.nodes))
        for factor in (current + 1, current - 1):
            if not 1 <= factor <= len(self.ring.nodes):
                continue
            middle = Replication.simple(factor)
            onwards = _Router(self.ring, middle, self.new, self.keep_quorum)
            path = onwards.shortest_path()
            if path is not None:
                steps = len(onwards.settings_of(path))
                return [
                    f"Or first change to {json.dumps(middle.as_json())} (its own migration, one ALTER), then plan "
                    f"this change again: from there it takes {steps} ALTER{'s' if steps > 1 else ''}."
                ]
        return []
