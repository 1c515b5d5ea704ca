"""Counting the rows of token ranges, one Spark task per group of subranges (no pyspark import here).

Each task opens one python-driver session (pinned to a coordinator when asked) and pages through
`SELECT token(pk), writetime(col)... WHERE token(pk) > ? AND token(pk) <= ?`, counting client-side, so
memory stays flat whatever the table's size. A row is dated by the newest writetime of its regular
columns; rows written after the cutoff are counted apart, rows with no regular column set (undated)
are counted as written before it.
"""

from __future__ import annotations

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
    "count_subranges",
    "plan_subranges",
    "row_written_at",
    "scan_query",
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


def plan_subranges(ranges: Sequence[TokenRange], splits_per_range: int = 1) -> list[Subrange]:
    """Every range unwrapped at the minimum token and cut into about equal non-wrapping pieces."""
    if splits_per_range < 1:
        raise ConfigurationError(f"splits_per_range is {splits_per_range}.", "Give 1 or more.")
    pieces: list[Subrange] = []
    for index, token_range in enumerate(ranges):
        for part in token_range.unwrap():
            # `end == MIN_TOKEN` runs to the end of the ring: no key hashes to MIN_TOKEN itself.
            end = MAX_TOKEN if part.end == MIN_TOKEN else part.end
            width = end - part.start
            bounds = [part.start + width * i // splits_per_range for i in range(splits_per_range + 1)]
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
    """The tally of each subrange, read through one session: the body of a Spark task."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement, tuple_factory
    from ringward_cassandra.cql import connect

    pieces = list(subranges)
    if not pieces:
        return
    with connect(
        settings.hosts, settings.port, coordinator=settings.pinned_host, timeout=settings.timeout_s,
        local_dc=settings.local_dc, username=settings.username, password=settings.password,
        ssl_options=task_ssl_options(settings.ssl_options),
    ) as session:  # fmt: skip
        session.cluster.profile_manager.default.row_factory = tuple_factory
        partition_key, dated = _table_columns(session, settings.keyspace, settings.table)
        statement = SimpleStatement(
            scan_query(settings.keyspace, settings.table, partition_key, dated),
            consistency_level=ConsistencyLevel.name_to_value[settings.consistency],
            fetch_size=settings.fetch_size,
        )
        for piece in pieces:
            yield _tally(piece.index, session.execute(statement, (piece.start, piece.end)), settings.cutoff_us)


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
    keyspace_meta = session.cluster.metadata.keyspaces.get(keyspace)
    table_meta = keyspace_meta.tables.get(table) if keyspace_meta else None
    if table_meta is None:
        raise ConfigurationError(f"Table {keyspace}.{table} does not exist.", "Name an existing table.")
    keys = {c.name for c in table_meta.primary_key}
    dated = [
        column.name
        for column in table_meta.columns.values()
        if column.name not in keys and not column.is_static and column.cql_type != "counter"
    ]
    return [c.name for c in table_meta.partition_key], dated
