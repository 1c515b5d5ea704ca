"""Counting the rows of token ranges, one Spark task per group of subranges (no pyspark import here).

A task reads its subranges through python-driver sessions (one per coordinator pinning, kept for the life of the
Python worker, which Spark reuses from task to task) and pages through
`SELECT token(pk), writetime(col)... WHERE token(pk) > ? AND token(pk) <= ?`, counting client-side, so
memory stays flat whatever the table's size. A row is dated by the newest writetime of its regular
columns; rows written after the cutoff are counted apart, rows with no regular column set (undated)
are counted as written before it.
"""

from __future__ import annotations

import atexit
import itertools
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from ringward.errors import ConfigurationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, TokenRange

__all__ = [
    "CONSISTENCY_LEVELS",
    "RangeTally",
    "ScanSettings",
    "Subrange",
    "count_pieces",
    "count_subranges",
    "plan_subranges",
    "row_written_at",
    "scan_query",
    "shutdown_sessions",
    "tally_ranges",
    "task_ssl_options",
]

CONSISTENCY_LEVELS = ("ALL", "QUORUM", "LOCAL_QUORUM", "ONE", "LOCAL_ONE")


@dataclass(frozen=True)
class Subrange:
    """A non-wrapping piece `(start, end]` of the requested range number `index`."""

    index: int
    start: int
    end: int


@dataclass(frozen=True)
class ScanSettings:
    """What every task needs to connect and read (plain values: it is pickled to the executors)."""

    hosts: tuple[str, ...]
    port: int
    keyspace: str
    table: str
    consistency: str
    pinned_host: str | None = None
    cutoff_us: int | None = None
    fetch_size: int = 5000
    timeout_s: float = 60.0
    local_dc: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    # ssl_options of the `cassandra` connection; its file entries (ca_certs, ...) are names of files shipped
    # with the job (spark-submit --files) when no such path exists where the task runs.
    ssl_options: tuple[tuple[str, Any], ...] = ()


@dataclass(frozen=True)
class RangeTally:
    """Rows of one requested range: `rows` written at or before the cutoff (all rows without one)."""

    index: int
    rows: int = 0
    later_rows: int = 0
    undated_rows: int = 0

    def __add__(self, other: RangeTally) -> RangeTally:
        return RangeTally(
            self.index,
            self.rows + other.rows,
            self.later_rows + other.later_rows,
            self.undated_rows + other.undated_rows,
        )

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def plan_subranges(
    ranges: Sequence[TokenRange], splits_per_range: int = 1, max_width: int | None = None
) -> list[Subrange]:
    """Every range unwrapped at the minimum token and cut into about equal non-wrapping pieces: at least
    `splits_per_range` per piece of the range, and more where a piece is wider than `max_width` tokens."""
    if splits_per_range < 1:
        raise ConfigurationError(f"splits_per_range is {splits_per_range}.", "Give 1 or more.")
    if max_width is not None and max_width < 1:
        raise ConfigurationError(f"max_width is {max_width}.", "Give 1 token or more (or none).")
    pieces: list[Subrange] = []
    for index, token_range in enumerate(ranges):
        for part in token_range.unwrap():
            # `end == MIN_TOKEN` runs to the end of the ring: no key hashes to MIN_TOKEN itself.
            end = MAX_TOKEN if part.end == MIN_TOKEN else part.end
            width = end - part.start
            splits = splits_per_range if max_width is None else max(splits_per_range, -(-width // max_width))
            bounds = [part.start + width * i // splits for i in range(splits + 1)]
            pieces.extend(Subrange(index, lo, hi) for lo, hi in itertools.pairwise(bounds) if hi > lo)
    return pieces


def row_written_at(writetimes: Iterable[object]) -> int | None:
    """The newest writetime of a row (microseconds), or None when no regular column is set.

    Cassandra 5.0 returns a list of cell timestamps for a non-frozen collection.
    """
    newest: int | None = None
    for value in writetimes:
        cells = value if isinstance(value, list | tuple) else [value]
        for cell in cells:
            if isinstance(cell, int) and (newest is None or cell > newest):
                newest = cell
    return newest


def scan_query(keyspace: str, table: str, partition_key: Sequence[str], dated_columns: Sequence[str]) -> str:
    from ringward_cassandra.cql import quote_identifier

    token = "token(" + ", ".join(quote_identifier(c) for c in partition_key) + ")"
    written = [f"writetime({quote_identifier(c)})" for c in dated_columns]
    return (
        f"SELECT {', '.join([token, *written])} FROM {quote_identifier(keyspace)}.{quote_identifier(table)} "
        f"WHERE {token} > %s AND {token} <= %s"
    )


def tally_ranges(count: int, tallies: Iterable[RangeTally]) -> list[RangeTally]:
    """Per requested range, the sum of its subranges' tallies (ranges without rows included)."""
    totals = [RangeTally(index) for index in range(count)]
    for tally in tallies:
        totals[tally.index] = totals[tally.index] + tally
    return totals


def count_subranges(subranges: Iterable[Subrange], settings: ScanSettings) -> Iterator[RangeTally]:
    """The tally of each subrange of one scan: the body of a Spark task."""
    for _, tally in count_pieces(((0, piece) for piece in subranges), (settings,)):
        yield tally


def count_pieces(
    pieces: Iterable[tuple[int, Subrange]], scans: Sequence[ScanSettings]
) -> Iterator[tuple[int, RangeTally]]:
    """`(scan number, tally)` of each `(scan number, subrange)`: the body of a Spark task that counts for several
    scans (tables, pinned replicas) at once. Sessions are shared by the scans that connect alike."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    statements: dict[int, Any] = {}
    for scan_index, piece in pieces:
        settings = scans[scan_index]
        session = _session(settings)
        if scan_index not in statements:
            partition_key, dated = _table_columns(session, settings.keyspace, settings.table)
            statements[scan_index] = SimpleStatement(
                scan_query(settings.keyspace, settings.table, partition_key, dated),
                consistency_level=ConsistencyLevel.name_to_value[settings.consistency],
                fetch_size=settings.fetch_size,
            )
        rows = session.execute(statements[scan_index], (piece.start, piece.end))
        yield scan_index, _tally(piece.index, rows, settings.cutoff_us)


# Sessions of this Python process by how they connect: a reused Spark Python worker keeps them from one task
# to the next (connecting and reading the schema costs more than counting a small table's range).
_SESSIONS: dict[tuple[Any, ...], Any] = {}


def _session(settings: ScanSettings) -> Any:
    from cassandra.query import tuple_factory
    from ringward_cassandra.cql import build_cluster

    key = (settings.hosts, settings.port, settings.pinned_host, settings.local_dc, settings.username,
           settings.password, settings.ssl_options, settings.timeout_s)  # fmt: skip
    session = _SESSIONS.get(key)
    if session is None or session.is_shutdown:
        cluster = build_cluster(
            settings.hosts, settings.port, coordinator=settings.pinned_host, timeout=settings.timeout_s,
            local_dc=settings.local_dc, username=settings.username, password=settings.password,
            ssl_options=task_ssl_options(settings.ssl_options),
        )  # fmt: skip
        session = cluster.connect()
        cluster.profile_manager.default.row_factory = tuple_factory
        if not _SESSIONS:
            atexit.register(shutdown_sessions)
        _SESSIONS[key] = session
    return session


def shutdown_sessions() -> None:
    """Close every kept session (the job's driver calls it; a worker's exit does too)."""
    while _SESSIONS:
        _, session = _SESSIONS.popitem()
        session.cluster.shutdown()


_SSL_FILE_OPTIONS = ("ca_certs", "certfile", "keyfile")


def task_ssl_options(options: Iterable[tuple[str, Any]]) -> dict[str, Any] | None:
    """ssl_options with every file entry that is not a path here taken from the files Spark shipped."""
    resolved = dict(options)
    for key in _SSL_FILE_OPTIONS:
        value = resolved.get(key)
        if value and not os.path.exists(value):
            from pyspark import SparkFiles

            resolved[key] = SparkFiles.get(os.path.basename(value))
    return resolved or None


def _tally(index: int, rows: Iterable[Sequence[Any]], cutoff_us: int | None) -> RangeTally:
    counted = later = undated = 0
    for row in rows:
        written = row_written_at(row[1:])
        if written is None:
            undated += 1
            counted += 1
        elif cutoff_us is not None and written > cutoff_us:
            later += 1
        else:
            counted += 1
    return RangeTally(index, counted, later, undated)


def _table_columns(session: Any, keyspace: str, table: str) -> tuple[list[str], list[str]]:
    """Partition key columns and the regular columns a writetime can be read from (not counters)."""
    table_meta = _table_meta(session, keyspace, table)
    if table_meta is None:  # created after the kept session read the schema
        session.cluster.refresh_schema_metadata()
        table_meta = _table_meta(session, keyspace, table)
    if table_meta is None:
        raise ConfigurationError(f"Table {keyspace}.{table} does not exist.", "Name an existing table.")
    from ringward_cassandra.cql import any_below_5

    keys = {c.name for c in table_meta.primary_key}
    below_5 = any_below_5(session.cluster.metadata.all_hosts())
    keyspace_meta = session.cluster.metadata.keyspaces.get(keyspace)
    user_types = set(getattr(keyspace_meta, "user_types", {}) or {})
    dated = [
        column.name
        for column in table_meta.columns.values()
        if column.name not in keys and not column.is_static
        and writetime_readable(column.cql_type, below_5=below_5, user_types=user_types)
    ]  # fmt: skip
    return [c.name for c in table_meta.partition_key], dated


def writetime_readable(cql_type: str, *, below_5: bool, user_types: Iterable[str] = ()) -> bool:
    """Whether `SELECT writetime(column)` is accepted for a column of `cql_type`: never for counters; below
    Cassandra 5.0 not for a non-frozen collection or user type either (5.0 returns their cells' timestamps).
    Rows dated by no readable column count as undated: always counted, whatever the cutoff."""
    if cql_type == "counter":
        return False
    if not below_5 or cql_type.startswith("frozen<"):
        return True
    return not cql_type.startswith(("list<", "set<", "map<")) and cql_type not in set(user_types)


def _table_meta(session: Any, keyspace: str, table: str) -> Any:
    keyspace_meta = session.cluster.metadata.keyspaces.get(keyspace)
    return keyspace_meta.tables.get(table) if keyspace_meta else None
