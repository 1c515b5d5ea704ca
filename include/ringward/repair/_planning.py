"""From ring and replica map to the segments of one repair unit.

Steps: scope ranges to the unit's nodes (primary ranges only if configured) -> drop replicas in ignored
datacenters -> skip ranges with fewer than two participating replicas -> merge adjacent ranges with the
same replica set -> split (fixed count or by size) -> unwrap at MIN_TOKEN (nodetool -st/-et needs
non-wrapping ranges) -> segments.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import chain
from typing import cast

from ringward.errors import ConfigurationError, RingError
from ringward.placement import replica_map
from ringward.repair._arcs import split_evenly
from ringward.repair._config import FixedSplitter, RepairConfig, SizeSplitter
from ringward.repair._estimates import NodeSizeEstimate, SizeEstimate, SizeIndex
from ringward.repair._segments import RepairUnit, Segment, SkippedSegment
from ringward.replication import Replication
from ringward.ring import Ring, TokenRange

__all__ = [
    "CheckedReplicaMap",
    "ReplicaMapCache",
    "ReplicaMapEntries",
    "SegmentPlan",
    "checked_replica_map",
    "plan_segments",
]

ReplicaMapEntries = Sequence[tuple[TokenRange, tuple[str, ...]]]
_RANGE, _REPLICAS = operator.itemgetter(0), operator.itemgetter(1)


class ReplicaMapCache:
    """`plan_segments`' replica-map entries for one ring snapshot, built once per distinct replication.

    Keyspaces usually share a few replication settings; on a fleet ring one entry list is 256,000
    ranges, so a night of 10 keyspaces would otherwise rebuild the same list ten times. Spellings that
    place replicas identically (shorthand and expanded NTS) share one list too.
    """

    def __init__(self, ring: Ring) -> None:
        self.ring = ring
        self._by_setting: dict[Replication, ReplicaMapEntries] = {}
        self._by_placement: dict[int, ReplicaMapEntries] = {}

    def entries(self, replication: Replication) -> ReplicaMapEntries:
        """Replicas of every ring range under `replication`, in ring order (the list is shared: do not modify)."""
        cached = self._by_setting.get(replication)
        if cached is None:
            placement = replica_map(self.ring, replication)  # memoised per effective setting on the ring
            cached = self._by_placement.get(id(placement))
            if cached is None:
                cached = self._by_placement[id(placement)] = tuple(placement.entries())
            self._by_setting[replication] = cached
        return cached


@dataclass(frozen=True)
class SegmentPlan:
    """The segments of one unit, and the ranges that need no session with the reason."""

    unit: RepairUnit
    segments: tuple[Segment, ...]
    skipped: tuple[SkippedSegment, ...]


def _check_matches_ring(ring: Ring, replica_map: ReplicaMapEntries) -> None:
    if [entry[0] for entry in replica_map] != ring.ranges():
        raise RingError(
            "The replica map does not list the ring's ranges in ring order.",
            "Compute the replica map from the same ring snapshot (one entry per ring range, in order).",
        )
    known = set(ring.addresses())
    replica_lists = [entry[1] for entry in replica_map]
    # The common case, checked with builtins (2.3 million addresses on a fleet ring); the loop names the culprit.
    if all(replica_lists) and known.issuperset(chain.from_iterable(replica_lists)):
        return
    for token_range, replicas in replica_map:
        unknown = [r for r in replicas if r not in known]
        if unknown or not replicas:
            raise RingError(
                f"Range {token_range} has replicas {list(replicas)} not all in the ring.",
                "Compute the replica map from the same ring snapshot.",
            )


class CheckedReplicaMap(tuple[tuple[TokenRange, tuple[str, ...]], ...]):
    """Replica map entries already checked against one ring (`checked_replica_map`): `plan_segments` takes them
    without checking them again for each unit (a fleet night plans 13 units on one map of 256,000 entries). A tuple,
    so the entries cannot change after the check."""

    ring: Ring
    plain: bool


def checked_replica_map(ring: Ring, replica_map: ReplicaMapEntries) -> CheckedReplicaMap:
    """`replica_map` checked against `ring` once, for every unit planned on it (RingError as `plan_segments`)."""
    if isinstance(replica_map, CheckedReplicaMap) and replica_map.ring is ring:
        return replica_map
    checked = CheckedReplicaMap(replica_map)
    _check_matches_ring(ring, checked)
    checked.ring = ring
    checked.plain = _plain(checked)
    return checked


def _plain(replica_map: ReplicaMapEntries) -> bool:
    """Whether every entry is a (range, replicas) tuple pair with a replicas tuple of two or more: kept as it is."""
    if not isinstance(replica_map, list | tuple):
        return False
    entries = cast("list[tuple[object, ...]]", replica_map)
    replicas = list(map(operator.itemgetter(1), entries)) if entries else []
    return (
        set(map(type, entries)) <= {tuple}
        and set(map(len, entries)) <= {2}
        and set(map(type, replicas)) <= {tuple}
        and min(map(len, replicas), default=2) >= 2
    )


def _in_scope(ring: Ring, unit: RepairUnit, entry: tuple[TokenRange, tuple[str, ...]], pr: bool) -> bool:
    if unit.nodes is None:
        return True
    token_range, replicas = entry
    if pr:
        return ring.token_owner[token_range.end].address in unit.nodes
    return any(r in unit.nodes for r in replicas)


def _skip_reason(replicas: tuple[str, ...], participants: tuple[str, ...]) -> str | None:
    if len(replicas) == 1:
        return "single replica (RF 1): nothing to compare"
    if not participants:
        return "every replica is in an ignored datacenter"
    if len(participants) == 1:
        return "only one replica outside the ignored datacenters: nothing to compare"
    return None


def _merge_adjacent(
    entries: list[tuple[TokenRange, tuple[str, ...]]],
) -> list[tuple[TokenRange, tuple[str, ...]]]:
    """Join ring-adjacent ranges with the same replica set, including across the wrap-around point."""
    merged: list[tuple[TokenRange, tuple[str, ...]]] = []
    for token_range, replicas in entries:
        if merged and merged[-1][0].end == token_range.start and set(merged[-1][1]) == set(replicas):
            merged[-1] = (TokenRange(merged[-1][0].start, token_range.end), merged[-1][1])
        else:
            merged.append((token_range, replicas))
    if len(merged) > 1:
        (first, first_replicas), (last, last_replicas) = merged[0], merged[-1]
        if last.end == first.start and set(last_replicas) == set(first_replicas):
            merged[0] = (TokenRange(last.start, first.end), last_replicas)
            merged.pop()
    return merged


def _pieces_needed(data: tuple[float, float], splitter: SizeSplitter) -> int:
    data_bytes, partitions = data
    count = 1
    if splitter.max_bytes_per_segment is not None:
        count = max(count, math.ceil(data_bytes / splitter.max_bytes_per_segment))
    if splitter.max_partitions_per_segment is not None:
        count = max(count, math.ceil(partitions / splitter.max_partitions_per_segment))
    return count


class _Budget:
    """The segments a plan may still hold (`max_segments_per_plan` minus those planned already): checked before
    a range is split, so a plan that would outgrow it is refused before its pieces are built."""

    def __init__(self, remaining: int, config: RepairConfig) -> None:
        self.remaining = remaining
        self.config = config

    def take(self, count: int) -> None:
        self.remaining -= count
        if self.remaining < 0:
            raise too_many_segments(self.config)


def too_many_segments(config: RepairConfig) -> ConfigurationError:
    """The refusal of a plan beyond `max_segments_per_plan`, naming the cap and the settings that decide it."""
    splitter = config.splitter
    if isinstance(splitter, FixedSplitter):
        sizes = f"splitter.subranges_per_range is {splitter.subranges_per_range}"
    else:
        sizes = (
            f"splitter.max_bytes_per_segment is {splitter.max_bytes_per_segment}, "
            f"splitter.max_partitions_per_segment is {splitter.max_partitions_per_segment}"
        )
    return ConfigurationError(
        f"The repair plan would hold more than max_segments_per_plan = {config.max_segments_per_plan} segments "
        f"({sizes}); it was refused before the plan task built them.",
        "Use larger segments (raise splitter.max_bytes_per_segment / max_partitions_per_segment, or lower "
        "splitter.subranges_per_range), select fewer keyspaces or tables, or, if the ring really needs that many, "
        "raise max_segments_per_plan in the configuration file (the plan task's memory grows with it).",
    )


def _split_by_size(
    token_range: TokenRange, splitter: SizeSplitter, sizes: SizeIndex, budget: _Budget
) -> list[tuple[TokenRange, float]]:
    """Equal-width pieces, refined where data is uneven until each piece fits (or is one token wide), each with
    the bytes estimated in it (the estimate that decided it fits: the plan does not estimate it again)."""
    pending = [token_range]
    done: list[tuple[TokenRange, float]] = []
    while pending:
        piece = pending.pop()
        data = sizes.estimate(piece)
        count = _pieces_needed(data, splitter)
        if count == 1 or piece.width() == 1:
            done.append((piece, data[0]))
        else:
            count = min(count, piece.width())
            budget.take(count - 1)  # the piece is replaced by `count` pieces
            pending.extend(reversed(split_evenly(piece, count)))
    return done


def plan_segments(
    ring: Ring,
    replica_map: ReplicaMapEntries,
    unit: RepairUnit,
    config: RepairConfig,
    size_estimates: Iterable[SizeEstimate | NodeSizeEstimate] = (),
    max_segments: int | None = None,
) -> SegmentPlan:
    """Segments of `unit` on `ring`, given the keyspace's replica map (one entry per ring range, in order).

    Segment `replicas` keep replica-map order minus nodes of ignored datacenters. More than `max_segments`
    (default: config.max_segments_per_plan) is refused with a ConfigurationError before the segments are built.
    """
    if isinstance(replica_map, CheckedReplicaMap) and replica_map.ring is ring:
        plain = replica_map.plain
    else:
        _check_matches_ring(ring, replica_map)
        plain = _plain(replica_map)
    datacenter = {node.address: node.datacenter for node in ring.nodes}
    ignored = set(config.ignore_dcs)
    # Datacenters present only matter when one of them is ignored; otherwise replicas pass through as they
    # are (the same tuple objects, which `group_segments` recognises by identity).
    filtering = not ignored.isdisjoint(datacenter.values())
    sizes = SizeIndex(size_estimates, unit.keyspace, unit.tables, ring)
    kept: list[tuple[TokenRange, tuple[str, ...]]] = []
    skipped: list[SkippedSegment] = []
    for entry in replica_map if unit.nodes is not None else ():
        if not _in_scope(ring, unit, entry, config.primary_range_only):
            continue
        _keep_or_skip(unit, entry, datacenter, ignored, kept, skipped)
    whole_ring = False  # `kept` is every ring range in ring order, each with its replica map entry's replicas
    if unit.nodes is None and not filtering and plain:
        # The whole ring, every range kept as it is (the hot path on fleet rings: 256,000 ranges per unit): the
        # entries themselves, checked at C speed instead of one by one.
        kept.extend(replica_map)
        whole_ring = True
    elif unit.nodes is None:
        for entry in replica_map:
            if filtering or len(entry[1]) < 2 or type(entry[1]) is not tuple:
                _keep_or_skip(unit, entry, datacenter, ignored, kept, skipped)
            else:
                kept.append((entry[0], entry[1]))
    if config.merge_ranges_with_same_replicas:
        kept = _merge_adjacent(kept)
        whole_ring = False
    make = Segment._planned
    keyspace, tables = unit.keyspace, unit.tables
    budget = _Budget(config.max_segments_per_plan if max_segments is None else max_segments, config)
    # Known before splitting: n pieces per range for the fixed splitter, at least one for the size splitter (which
    # takes the rest as it refines); the wrapping range's second piece is not counted.
    per_range = config.splitter.subranges_per_range if isinstance(config.splitter, FixedSplitter) else 1
    budget.take(len(kept) * per_range)
    if sizes.empty and isinstance(config.splitter, SizeSplitter):
        # Without estimates every range is one piece of unknown size (what `_split_by_size` returns then).
        segments = [
            make(keyspace, tables, piece, replicas, None)
            for token_range, replicas in kept
            for piece in ((token_range,) if token_range.start < token_range.end else token_range.unwrap())
        ]
    elif isinstance(config.splitter, SizeSplitter):
        segments = []
        append = segments.append
        splitter = config.splitter
        most_bytes, most_partitions = splitter.max_bytes_per_segment, splitter.max_partitions_per_segment
        columns = sizes.ring_estimates(ring) if whole_ring else None
        bulk: tuple[list[float], ReplicaMapEntries] | None = None
        if columns is None:
            estimates: Iterable[tuple[float, float]] = sizes.estimates([token_range for token_range, _ in kept])
            looped: Iterable[tuple[TokenRange, tuple[str, ...]]] = kept
        else:
            # The ring's ranges (`_check_matches_ring`), estimated at once. Only the first, the wrap-around range,
            # can wrap. When every other range fits as it is (a fleet night: each is one segment of its own
            # bytes), the loop below takes the first alone and the rest are made in one go, as the loop would.
            # A range fits exactly when neither quotient exceeds 1, and the largest quotient is the largest
            # value's (dividing by the same positive number keeps the order).
            byte_column, partition_column = columns
            rest_fits = (
                len(kept) > 1
                and (most_bytes is None or max(byte_column[1:]) / most_bytes <= 1.0)
                and (most_partitions is None or max(partition_column[1:]) / most_partitions <= 1.0)
            )
            looped = kept[:1] if rest_fits else kept
            if rest_fits:
                bulk = (byte_column, replica_map)
            estimates = zip(byte_column, partition_column, strict=True)
        # `looped` may be the first range alone (the rest made in one go below).
        for (token_range, replicas), (data_bytes, partitions) in zip(looped, estimates, strict=False):
            # Most ranges fit as they are: `_split_by_size`'s first step, without its work list. `_pieces_needed`
            # is 1 exactly when neither ceiling exceeds 1, that is when neither quotient does.
            if (most_bytes is None or data_bytes / most_bytes <= 1.0) and (
                most_partitions is None or partitions / most_partitions <= 1.0
            ):
                if token_range.start < token_range.end:  # the common case: one segment, the range's own bytes
                    append(make(keyspace, tables, token_range, replicas, round(data_bytes)))
                    continue
                fitted: Iterable[tuple[TokenRange, float]] = ((token_range, data_bytes),)
            elif token_range.width() == 1:
                fitted = ((token_range, data_bytes),)
            else:
                fitted = _split_by_size(token_range, splitter, sizes, budget)
            for split, piece_bytes in fitted:
                if split.start < split.end:  # `unwrap` is the piece itself: its bytes are the split's estimate
                    append(make(keyspace, tables, split, replicas, round(piece_bytes)))
                else:
                    for piece in split.unwrap():
                        append(make(keyspace, tables, piece, replicas, _estimated_bytes(sizes, piece)))
        if bulk is not None:  # the ring's other ranges, each one segment of its own bytes
            byte_column, entries = bulk
            rest = entries[1:]
            segments.extend(Segment._planned_run(keyspace, tables, map(_RANGE, rest), map(_REPLICAS, rest),
                                                 map(round, byte_column[1:])))  # fmt: skip
    else:
        subranges = config.splitter.subranges_per_range
        segments = [
            make(keyspace, tables, piece, replicas, _estimated_bytes(sizes, piece))
            for token_range, replicas in kept
            for split in split_evenly(token_range, subranges)
            for piece in split.unwrap()
        ]
    return SegmentPlan(unit, tuple(segments), tuple(skipped))


def _keep_or_skip(
    unit: RepairUnit,
    entry: tuple[TokenRange, tuple[str, ...]],
    datacenter: dict[str, str],
    ignored: set[str],
    kept: list[tuple[TokenRange, tuple[str, ...]]],
    skipped: list[SkippedSegment],
) -> None:
    token_range, replicas = entry
    participants = tuple(r for r in replicas if datacenter[r] not in ignored)
    reason = _skip_reason(replicas, participants)
    if reason is None:
        kept.append((token_range, participants))
    else:
        skipped.append(SkippedSegment(unit.keyspace, unit.tables, token_range, participants, reason))


def _estimated_bytes(sizes: SizeIndex, piece: TokenRange) -> int | None:
    return None if sizes.empty else round(sizes.estimate(piece)[0])
