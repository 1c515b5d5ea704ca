"""Repair units and segments: what one `nodetool repair -st -et` session covers.

A RepairUnit is a keyspace and a set of its tables repaired together (Reaper's RepairUnit). A Segment is
one non-wrapping token range of a unit with the replicas taking part; its id is a hash of keyspace,
tables and range, so the same segment is found again in repair history across runs.
"""

from __future__ import annotations

import hashlib
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import pairwise, repeat

from ringward.repair._config import RepairConfig, RepairType
from ringward.replication import Replication
from ringward.ring import Ring, TokenRange

__all__ = [
    "LOCAL_KEYSPACES",
    "RepairCommand",
    "RepairUnit",
    "Segment",
    "SkippedSegment",
    "bytes_per_replica_node",
    "group_segments",
    "segment_id_of",
    "select_units",
]

# LocalStrategy keyspaces hold per-node data: repairing them is meaningless and Cassandra refuses it.
LOCAL_KEYSPACES = frozenset({"system", "system_schema", "system_views", "system_virtual_schema"})


@dataclass(frozen=True)
class RepairUnit:
    """A keyspace and the tables repaired together; `tables == ()` means every table of the keyspace.

    `nodes`, when given, scopes the unit to ranges those nodes replicate (primary ranges only when the
    configuration says `primary_range_only`), like Reaper's node-scoped repair units.
    """

    keyspace: str
    tables: tuple[str, ...] = ()
    repair_type: RepairType = "full"
    nodes: frozenset[str] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "tables", tuple(sorted(set(self.tables))))

    @property
    def name(self) -> str:
        return f"{self.keyspace}.{{{','.join(self.tables)}}}" if self.tables else f"{self.keyspace}.*"


def _segment_id(keyspace: str, tables: tuple[str, ...], token_range: TokenRange) -> str:
    # The repair history is keyed by this: never change the text hashed or the digest's length.
    key = f"{keyspace}|{','.join(tables)}|{token_range.start}|{token_range.end}"
    return hashlib.sha256(key.encode()).digest()[:10].hex()  # == hexdigest()[:20], without the other 44 chars


def segment_id_of(keyspace: str, tables: Sequence[str], token_range: TokenRange) -> str:
    """`Segment(keyspace, tables, token_range, ...).segment_id` without building the segment (a history read
    computes millions of them)."""
    return _segment_id(keyspace, _normalised(tables), token_range)


def _normalised(tables: Sequence[str]) -> tuple[str, ...]:
    """Sorted and distinct, as a tuple; an already normal tuple is returned as is (the common case)."""
    if type(tables) is tuple and all(a < b for a, b in pairwise(tables)):
        return tables
    return tuple(sorted(set(tables)))


_set = object.__setattr__  # how a frozen dataclass fills its own fields


@dataclass(frozen=True, slots=True)
class Segment:
    """One repair session: a non-wrapping range of a unit, repaired among `replicas`.

    `segment_id` is computed on first use and kept: a fleet night plans 2.5 million segments, and their
    sha256 ids are a large share of planning. Slots, not an instance dict: half the objects the garbage
    collector scans and less memory per segment.
    """

    keyspace: str
    tables: tuple[str, ...]
    range: TokenRange
    replicas: tuple[str, ...]
    estimated_bytes: int | None = None
    _id: str | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        _set(self, "tables", _normalised(self.tables))

    @classmethod
    def _planned(
        cls,
        keyspace: str,
        tables: tuple[str, ...],
        token_range: TokenRange,
        replicas: tuple[str, ...],
        estimated_bytes: int | None,
    ) -> Segment:
        """A segment from values already in normal form (a unit's sorted tables): skips the checks."""
        return _segment_of(keyspace, tables, token_range, replicas, estimated_bytes)

    @classmethod
    def _planned_run(
        cls,
        keyspace: str,
        tables: tuple[str, ...],
        ranges: Iterable[TokenRange],
        replicas: Iterable[tuple[str, ...]],
        estimated_bytes: Iterable[int | None],
    ) -> list[Segment]:
        """`_planned` of each (range, replicas, bytes) of one unit, in order (a fleet unit is 256,000 of them)."""
        return list(map(_segment_of, repeat(keyspace), repeat(tables), ranges, replicas, estimated_bytes))

    @property
    def segment_id(self) -> str:
        """Stable id (a hash of keyspace, tables and range): the repair history finds the segment by it."""
        known = self._id
        if known is None:
            known = _segment_id(self.keyspace, self.tables, self.range)
            _set(self, "_id", known)
        return known

    @property
    def coordinator(self) -> str:
        """The replica that runs the session (first participating replica, in replica-map order)."""
        return self.replicas[0]

    def describe(self) -> str:
        tables = ",".join(self.tables) or "*"
        return f"{self.keyspace}.{{{tables}}} {self.range} on {', '.join(self.replicas)}"


# Each slot's own setter, called directly: what `object.__setattr__` finds for the slot each time (a fleet night
# builds 3.3 million segments; a quarter less than `object.__setattr__` by name).
_SET_KEYSPACE, _SET_TABLES, _SET_RANGE, _SET_REPLICAS, _SET_BYTES, _SET_ID = (
    Segment.__dict__[name].__set__ for name in ("keyspace", "tables", "range", "replicas", "estimated_bytes", "_id")
)


def _segment_of(
    keyspace: str,
    tables: tuple[str, ...],
    token_range: TokenRange,
    replicas: tuple[str, ...],
    estimated_bytes: int | None,
    new: Callable[[type[Segment]], Segment] = object.__new__,
) -> Segment:
    segment = new(Segment)
    _SET_KEYSPACE(segment, keyspace)
    _SET_TABLES(segment, tables)
    _SET_RANGE(segment, token_range)
    _SET_REPLICAS(segment, replicas)
    _SET_BYTES(segment, estimated_bytes)
    _SET_ID(segment, None)
    return segment


@dataclass(frozen=True, slots=True)
class RepairCommand:
    """Segments of one keyspace and table set with the same replicas, sent as one `nodetool repair`.

    Cassandra repairs the ranges of one command that share their replicas in a single session (its
    CommonRange), so a node is still in one session at a time, while the per-session costs (a nodetool
    command, the session's set-up, Merkle-tree requests) are paid once instead of once per vnode range.
    Reaper groups the vnode ranges of a replica set into one segment for the same reason. The first
    segment's coordinator runs the command; any participant can coordinate a full repair of the others.
    """

    segments: tuple[Segment, ...]
    # The segments' replicas, kept as a field: the executor's scheduler reads them tens of millions of times
    # a fleet night (a property through the first segment cost a tenth of its CPU).
    replicas: tuple[str, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.segments:
            raise ValueError("a repair command needs at least one segment")
        first = _command_key(self.segments[0])
        if any(_command_key(s) != first for s in self.segments):
            raise ValueError("segments of one repair command must share keyspace, tables and replicas")
        object.__setattr__(self, "replicas", self.segments[0].replicas)

    @classmethod
    def _grouped(cls, segments: tuple[Segment, ...]) -> RepairCommand:
        """A command of segments `group_segments` has already keyed alike: skips re-checking each one."""
        command = object.__new__(cls)
        object.__setattr__(command, "segments", segments)
        object.__setattr__(command, "replicas", segments[0].replicas)
        return command

    @property
    def keyspace(self) -> str:
        return self.segments[0].keyspace

    @property
    def tables(self) -> tuple[str, ...]:
        return self.segments[0].tables

    @property
    def coordinator(self) -> str:
        return self.segments[0].coordinator

    @property
    def ranges(self) -> tuple[TokenRange, ...]:
        return tuple(s.range for s in self.segments)

    def describe(self) -> str:
        tables = ",".join(self.tables) or "*"
        ranges = ", ".join(map(str, self.ranges))
        return f"{self.keyspace}.{{{tables}}} {ranges} on {', '.join(self.replicas)}"


def _command_key(segment: Segment) -> tuple[str, tuple[str, ...], frozenset[str]]:
    return segment.keyspace, segment.tables, frozenset(segment.replicas)


def group_segments(segments: Iterable[Segment], max_ranges: int) -> list[RepairCommand]:
    """Segments grouped into commands of at most `max_ranges` ranges with the same keyspace, tables and
    set of replicas, in the order each group first appears.

    The replica *set* decides, not its order: with NetworkTopologyStrategy a range's replicas are listed
    in ring-walk order, so {a, x} is (a, x) for some ranges and (x, a) for others, yet repairing them is
    the same session among the same nodes. Keying on the order would double the sessions.
    """
    if max_ranges < 1:
        raise ValueError("max_ranges must be at least 1")
    # Hot on fleet rings (2.5 million segments a night, almost every replica set unique), so:
    # - a replica tuple's set is canonicalised (sorted, as a tuple) once per tuple object, found by
    #   identity: keyspaces sharing a replication share the replica map's tuples (kept alive in `held`);
    # - each unit (keyspace, tables) has its own dict from canonical set to group, so no key tuple is
    #   built per segment; `groups` keeps the order in which groups first appear, across units;
    # - a group of one segment is kept as the segment itself, not a one-element list.
    canonical: dict[int, tuple[str, ...]] = {}
    held: list[tuple[str, ...]] = []
    groups: list[Segment | list[Segment]] = []
    units: dict[tuple[str, tuple[str, ...]], dict[tuple[str, ...], int]] = {}
    unit: tuple[str, tuple[str, ...]] | None = None
    of_unit: dict[tuple[str, ...], int] = {}
    for segment in segments:
        keyspace, tables, replicas = segment.keyspace, segment.tables, segment.replicas
        if unit is None or keyspace is not unit[0] or tables is not unit[1]:
            unit = (keyspace, tables)
            of_unit = units.setdefault(unit, {})
        replica_set = canonical.get(id(replicas))
        if replica_set is None:
            replica_set = canonical[id(replicas)] = tuple(sorted(set(replicas)))
            held.append(replicas)
        index = of_unit.get(replica_set)
        if index is None:
            of_unit[replica_set] = len(groups)
            groups.append(segment)
            continue
        members = groups[index]
        if isinstance(members, list):
            members.append(segment)
        else:
            groups[index] = [members, segment]
    grouped = RepairCommand._grouped
    commands: list[RepairCommand] = []
    for members in groups:
        if isinstance(members, list):
            commands.extend(grouped(tuple(members[i : i + max_ranges])) for i in range(0, len(members), max_ranges))
        else:
            commands.append(grouped((members,)))
    return commands


@dataclass(frozen=True)
class SkippedSegment:
    """A range that needs no repair session, and why (reported, never silently dropped)."""

    keyspace: str
    tables: tuple[str, ...]
    range: TokenRange
    replicas: tuple[str, ...]
    reason: str


def _selected(name: str, include: Iterable[str], exclude: Iterable[str]) -> bool:
    return any(fnmatchcase(name, p) for p in include) and not any(fnmatchcase(name, p) for p in exclude)


def select_units(
    schema: Mapping[str, Sequence[str]], config: RepairConfig, table_bytes: Mapping[str, int] | None = None
) -> list[RepairUnit]:
    """One unit per keyspace with its selected tables, from `{keyspace: [table, ...]}`.

    Keyspaces and `keyspace.table` names are filtered by the include/exclude patterns; local system
    keyspaces and keyspaces left without tables are dropped. Units name their tables explicitly only
    when some were excluded, so a new table is repaired without a configuration change.

    With `table_bytes` (`{"keyspace.table": bytes on an average replica node}`, see `bytes_per_replica_node`)
    and `split_outlier_tables` > 0, a table bigger than that factor x the median size of its keyspace's
    selected tables (those with a size), and bigger than `split_outlier_min_size`, becomes its own unit after
    the unit of the other tables, which then names them explicitly: a huge table cannot hold the small ones
    back. A table big only next to tiny ones stays with them: its own unit would double the sessions.
    """
    units: list[RepairUnit] = []
    for keyspace in sorted(schema):
        if keyspace in LOCAL_KEYSPACES:
            continue
        if not _selected(keyspace, config.keyspaces.include, config.keyspaces.exclude):
            continue
        all_tables = sorted(set(schema[keyspace]))
        chosen = [t for t in all_tables if _selected(f"{keyspace}.{t}", config.tables.include, config.tables.exclude)]
        if not chosen:
            continue
        outliers = _outliers(keyspace, chosen, table_bytes, config.split_outlier_tables, config.split_outlier_min_size)
        if outliers:
            rest = tuple(t for t in chosen if t not in outliers)
            if rest:
                units.append(RepairUnit(keyspace, rest, config.session_type))
            units.extend(RepairUnit(keyspace, (table,), config.session_type) for table in outliers)
            continue
        tables = () if chosen == all_tables else tuple(chosen)
        units.append(RepairUnit(keyspace, tables, config.session_type))
    return units


def _outliers(
    keyspace: str, tables: list[str], table_bytes: Mapping[str, int] | None, factor: float, min_size: int
) -> list[str]:
    """Tables over `factor` x the median size of `tables` and over `min_size`; tables without a size never are."""
    if not table_bytes or factor <= 0 or len(tables) < 2:
        return []
    sizes = {t: table_bytes[f"{keyspace}.{t}"] for t in tables if f"{keyspace}.{t}" in table_bytes}
    if not sizes:
        return []
    median = statistics.median(sizes.values())
    if median <= 0:  # mostly empty tables: every table with data would be an "outlier"
        return []
    return [t for t in tables if t in sizes and sizes[t] > factor * median and sizes[t] > min_size]


def bytes_per_replica_node(one_copy: float, ring: Ring, replication: Replication) -> int:
    """The share of a table of `one_copy` bytes (one replica's copy, as the nodes' size estimates add up to)
    that an average node holding the keyspace stores: replicas / nodes in the datacenters that hold it."""
    if replication.is_simple:
        nodes = len(ring.addresses())
        replicas = min(replication.factor_for(""), nodes)
    else:
        held = {dc: len(members) for dc, members in ring.datacenters().items() if replication.factor_for(dc) > 0}
        nodes = sum(held.values())
        replicas = sum(min(replication.factor_for(dc), count) for dc, count in held.items())
    return round(one_copy * replicas / nodes) if nodes else 0
