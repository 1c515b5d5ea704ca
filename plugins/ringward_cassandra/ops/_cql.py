"""What the Cassandra stores of one `OpsStore` share: the session and keyspace, the tables known to exist (read
once, kept current by ensure_schema), the statements prepared once, QUORUM reads and writes, and concurrent reads.

The driver is imported where a statement is built, not at import: importing the `ops` package must not need it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from cassandra.cluster import Session

__all__ = ["READ_CONCURRENCY", "WRITE_CONCURRENCY", "OpsKeyspace", "quorum"]

READ_CONCURRENCY = 32
WRITE_CONCURRENCY = 64
_Row = TypeVar("_Row")


def quorum(cql: str) -> Any:
    """`cql` as a statement at QUORUM."""
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    return SimpleStatement(cql, consistency_level=ConsistencyLevel.QUORUM)


class OpsKeyspace:
    """The ops keyspace through a driver session, as every record kind's store of one `OpsStore` reads it.

    `history_ttl_seconds` is the TTL of the repair history rows, the run plans, the run progress, the run rows and
    the preview findings (each write renews it)."""

    def __init__(self, session: Session, keyspace: str, history_ttl_seconds: int) -> None:
        self.session = session
        self.keyspace = keyspace
        self.history_ttl_seconds = int(history_ttl_seconds)
        self.known_tables: set[str] | None = None
        self._prepared: dict[str, Any] = {}

    def table_names(self) -> set[str]:
        rows = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (self.keyspace,)
        )
        return {row.table_name for row in rows}

    def tables(self) -> set[str]:
        """The store's tables, read once per store (ensure_schema keeps it current)."""
        if self.known_tables is None:
            self.known_tables = self.table_names()
        return self.known_tables

    def has_table(self, table: str) -> bool:
        """Whether `table` exists; a table seen once is not looked up again (the switch is read often)."""
        if self.known_tables is not None and table in self.known_tables:
            return True
        rows = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (self.keyspace, table),
        )
        found = bool(list(rows))
        if found and self.known_tables is not None:
            self.known_tables.add(table)
        return found

    def keyspace_exists(self) -> bool:
        rows = self.session.execute(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (self.keyspace,)
        )
        return bool(list(rows))

    def write(self, cql: str, params: tuple[object, ...]) -> object:
        return self.session.execute(quorum(cql), params)

    def read(self, cql: str, params: tuple[object, ...]) -> list[Any]:
        """The rows of `cql` read at QUORUM (the driver's rows: attributes named after the columns)."""
        return list(self.session.execute(quorum(cql), params))

    def statement(self, cql: str) -> Any:
        """`cql` prepared once per store (QUORUM)."""
        from cassandra import ConsistencyLevel

        prepared = self._prepared.get(cql)
        if prepared is None:
            prepared = self.session.prepare(cql)
            prepared.consistency_level = ConsistencyLevel.QUORUM
            self._prepared[cql] = prepared
        return prepared

    def concurrent_read(
        self, cql: str, params: Sequence[tuple[object, ...]], each: Callable[[Any], _Row]
    ) -> list[_Row]:
        """`each` of the rows of prepared `cql` run once per parameter tuple, `READ_CONCURRENCY` at a time."""
        from cassandra.concurrent import execute_concurrent_with_args

        if not params:
            return []
        statement = self.statement(cql)
        rows: list[_Row] = []
        results = execute_concurrent_with_args(
            self.session, statement, params, concurrency=READ_CONCURRENCY, raise_on_first_error=True
        )
        for _, result in results:
            rows.extend(each(r) for r in result)
        return rows
