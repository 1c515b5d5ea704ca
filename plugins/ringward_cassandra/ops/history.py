"""The repair history on Cassandra: repair_segments (full), repair_type_segments (the other types) and, on a
cluster upgraded from the first layout, the legacy repair_history read until its rows are rewritten."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from ringward.repair import DueRecord, RecordUpdate, RepairHistoryRow, Segment, SegmentRecord
from ringward.ring import TokenRange

from ringward_cassandra.ops._cql import READ_CONCURRENCY, OpsKeyspace, quorum
from ringward_cassandra.ops.layout import (
    DUE_COLUMNS,
    RECORD_COLUMNS,
    RecordKey,
    add_due_records,
    add_records,
    bucket_bounds,
    due_records_in_order,
    history_columns,
    history_row,
    history_table,
    merged,
    segment_records,
)
from ringward_cassandra.ops.schema import LEGACY_HISTORY

__all__ = ["CassandraRepairHistory"]


class CassandraRepairHistory:
    """`RepairHistoryStorage` on Cassandra: one partition per (keyspace, tables, bucket), every write with a TTL."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def record_repair(
        self,
        keyspace: str,
        tables: tuple[str, ...],
        token_range: TokenRange,
        record: SegmentRecord,
        *,
        started_at: datetime | None = None,
        finished_at: datetime | None = None,
        replicas: tuple[str, ...] = (),
        ttl_seconds: int | None = None,
    ) -> None:
        """Upsert one segment's history; session bounds are written only when given (None keeps them).

        The row lives `ttl_seconds` (default: the store's history TTL) from this write. Cells not written keep
        the TTL of the write that set them: session bounds older than the TTL are forgotten, the row is not."""
        ttl = self.ops.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        statement = _history_upsert(self.ops.keyspace, keyspace, tables, token_range, record, started_at, finished_at,
                                    replicas, ttl, datetime.now(UTC))  # fmt: skip
        self.ops.write(*statement)

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None:
        """Upsert the history of several segments (one command's) with concurrent writes; any failure raises."""
        ttl = self.ops.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        now = datetime.now(UTC)
        statements = [
            _history_upsert(self.ops.keyspace, u.segment.keyspace, u.segment.tables, u.segment.range, u.record,
                            u.started, u.finished, u.segment.replicas, ttl, now)
            for u in updates
        ]  # fmt: skip
        if len(statements) == 1:
            self.ops.write(*statements[0])
            return
        futures = [self.ops.session.execute_async(quorum(cql), params) for cql, params in statements]
        for future in futures:
            future.result()

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]:
        """Every recorded segment (of one keyspace, or of all): a scan, for status pages and tools, not for the
        nightly path (which reads `history_of` the partitions it needs).

        On a cluster upgraded from the first layout the legacy table is read too, until its rows are rewritten:
        a row of repair_segments wins over the legacy row of the same (keyspace, tables, range)."""
        if repair_type != "full":
            return self._type_history(repair_type, keyspace)
        ops = self.ops
        rows: list[RepairHistoryRow] = []
        if "repair_segments" in ops.tables():
            if keyspace is None:
                rows = [history_row(r) for r in ops.read(f"SELECT * FROM {ops.keyspace}.repair_segments", ())]
            else:
                keys = ops.read(f"SELECT DISTINCT keyspace_name, table_names, bucket FROM {ops.keyspace}."
                                "repair_segments", ())  # fmt: skip
                partitions = [(k.table_names, k.bucket) for k in keys if k.keyspace_name == keyspace]
                rows = self._read_partitions(keyspace, partitions)
        return merged(rows, self._legacy_history(keyspace))

    def history_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], repair_type: str = "full"
    ) -> list[RepairHistoryRow]:
        """The history of the segments of (keyspace, tables) whose ranges start in `buckets`: only those
        partitions, read concurrently (and, on an upgraded cluster, the same token slices of the legacy table).
        A type other than full reads its own history (repair_type_segments)."""
        ops = self.ops
        names = ",".join(tables)
        wanted = sorted(set(buckets))
        if repair_type != "full":
            if "repair_type_segments" not in ops.tables():
                return []
            cql = (f"SELECT * FROM {ops.keyspace}.repair_type_segments WHERE repair_type = ? AND keyspace_name = ? "
                   "AND table_names = ? AND bucket = ?")  # fmt: skip
            return ops.concurrent_read(cql, [(repair_type, keyspace, names, b) for b in wanted], history_row)
        rows = self._read_partitions(keyspace, [(names, b) for b in wanted]) if "repair_segments" in ops.tables() \
            else []  # fmt: skip
        legacy: list[RepairHistoryRow] = []
        if LEGACY_HISTORY in ops.tables() and wanted:
            cql = (f"SELECT * FROM {ops.keyspace}.{LEGACY_HISTORY} WHERE keyspace_name = ? AND table_names = ? "
                   "AND range_start >= ? AND range_start <= ?")  # fmt: skip
            legacy = ops.concurrent_read(cql, [(keyspace, names, *bucket_bounds(b)) for b in wanted], history_row)
        return merged(rows, legacy)

    def segment_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, SegmentRecord]:
        """The records of `segments` (keyed by segment id) from the history partitions their ranges fall in."""
        return segment_records(segments, repair_type, self.records_of)

    def due_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, DueRecord]:
        """What due selection reads of `segments`' records (keyed by segment id), from the same partitions."""
        return segment_records(segments, repair_type, self.due_records_of)

    def due_records_in_order(self, segments: Sequence[Segment], repair_type: str) -> list[DueRecord | None]:
        """`due_records` by position (the i-th is `segments[i]`'s), without computing segment ids."""
        return due_records_in_order(segments, repair_type, self.due_records_of)

    def due_records_of(
        self,
        keyspace: str,
        tables: Sequence[str],
        buckets: Iterable[int],
        ids: Mapping[tuple[int, int], RecordKey],
        repair_type: str = "full",
    ) -> dict[RecordKey, DueRecord]:
        """`records_of`, reading only the cells due selection needs (`DUE_COLUMNS`: last success, attempts, run
        id), as `DueRecord`s: the plan task's read of every planned segment's history each night."""
        if LEGACY_HISTORY in self.ops.tables():  # an upgraded cluster, until its legacy rows are rewritten
            rows = self.history_of(keyspace, tables, buckets, repair_type)  # `records_of`'s legacy read
            return {ids[key]: DueRecord(r.record.last_success, r.record.attempts, r.record.run_id) for r in rows
                    if (key := (r.range.start, r.range.end)) in ids}  # fmt: skip
        records: dict[RecordKey, DueRecord] = {}
        self._read_cells(keyspace, tables, buckets, repair_type, DUE_COLUMNS,
                         lambda rows: add_due_records(records, rows, ids))  # fmt: skip
        return records

    def records_of(
        self,
        keyspace: str,
        tables: Sequence[str],
        buckets: Iterable[int],
        ids: Mapping[tuple[int, int], str],
        repair_type: str = "full",
    ) -> dict[str, SegmentRecord]:
        """The records of the segments `ids` names (`{(range_start, range_end): segment_id}`) in the history
        partitions of (keyspace, tables) in `buckets`, keyed by segment id: `history_of` for due selection.
        Only a record's columns are read and no history row is built: the plan task reads every planned
        segment's record each night (millions at fleet size)."""
        if LEGACY_HISTORY in self.ops.tables():  # an upgraded cluster, until its legacy rows are rewritten
            rows = self.history_of(keyspace, tables, buckets, repair_type)
            return {ids[key]: r.record for r in rows if (key := (r.range.start, r.range.end)) in ids}
        records: dict[str, SegmentRecord] = {}
        self._read_cells(keyspace, tables, buckets, repair_type, RECORD_COLUMNS,
                         lambda rows: add_records(records, rows, ids, repair_type))  # fmt: skip
        return records

    def _read_cells(
        self,
        keyspace: str,
        tables: Sequence[str],
        buckets: Iterable[int],
        repair_type: str,
        columns: Sequence[str],
        add: Callable[[Iterable[Sequence[Any]]], None],
    ) -> None:
        """Read `columns` of the history partitions of (keyspace, tables, `repair_type`) in `buckets`, concurrently,
        and give each partition's rows to `add` (nothing when the table does not exist yet)."""
        ops = self.ops
        table = "repair_segments" if repair_type == "full" else "repair_type_segments"
        if table not in ops.tables():
            return
        names = ",".join(tables)
        where = "keyspace_name = ? AND table_names = ? AND bucket = ?"
        params: list[tuple[object, ...]] = [(keyspace, names, b) for b in sorted(set(buckets))]
        if repair_type != "full":
            where = f"repair_type = ? AND {where}"
            params = [(repair_type, *p) for p in params]
        if not params:
            return
        statement = ops.statement(f"SELECT {', '.join(columns)} FROM {ops.keyspace}.{table} WHERE {where}")
        from cassandra.concurrent import execute_concurrent_with_args

        results = execute_concurrent_with_args(
            ops.session, statement, params, concurrency=READ_CONCURRENCY, raise_on_first_error=True
        )
        for _, result in results:
            add(result)

    def forget_repair_history(self, keyspace: str) -> None:
        """Delete every history row of `keyspace` (tests and tools; the nightly path lets rows expire)."""
        ops = self.ops
        if "repair_segments" in ops.tables():
            keys = ops.read(f"SELECT DISTINCT keyspace_name, table_names, bucket FROM {ops.keyspace}."
                            "repair_segments", ())  # fmt: skip
            for key in keys:
                if key.keyspace_name == keyspace:
                    ops.write(f"DELETE FROM {ops.keyspace}.repair_segments WHERE keyspace_name = %s AND "
                              "table_names = %s AND bucket = %s", (keyspace, key.table_names, key.bucket))  # fmt: skip
        if "repair_type_segments" in ops.tables():
            keys = ops.read(f"SELECT DISTINCT repair_type, keyspace_name, table_names, bucket FROM {ops.keyspace}."
                            "repair_type_segments", ())  # fmt: skip
            for key in keys:
                if key.keyspace_name == keyspace:
                    ops.write(f"DELETE FROM {ops.keyspace}.repair_type_segments WHERE repair_type = %s AND "
                              "keyspace_name = %s AND table_names = %s AND bucket = %s",
                              (key.repair_type, keyspace, key.table_names, key.bucket))  # fmt: skip
        if LEGACY_HISTORY in ops.tables():
            ops.write(f"DELETE FROM {ops.keyspace}.{LEGACY_HISTORY} WHERE keyspace_name = %s", (keyspace,))

    def _read_partitions(self, keyspace: str, partitions: Sequence[tuple[str, int]]) -> list[RepairHistoryRow]:
        cql = (
            f"SELECT * FROM {self.ops.keyspace}.repair_segments WHERE keyspace_name = ? AND table_names = ? "
            "AND bucket = ?"
        )
        return self.ops.concurrent_read(cql, [(keyspace, names, bucket) for names, bucket in partitions], history_row)

    def _type_history(self, repair_type: str, keyspace: str | None) -> list[RepairHistoryRow]:
        """Every recorded segment of one non-full type (a scan: status pages and tools)."""
        if "repair_type_segments" not in self.ops.tables():
            return []
        rows = [history_row(r) for r in self.ops.read(f"SELECT * FROM {self.ops.keyspace}.repair_type_segments", ())]
        return [r for r in rows if r.record.repair_type == repair_type and (keyspace is None or r.keyspace == keyspace)]

    def _legacy_history(self, keyspace: str | None) -> list[RepairHistoryRow]:
        # The first layout's table is read until every row of it has been rewritten in repair_segments (one
        # cycle of the nightly repair after the upgrade); then an operator drops it (docs/operators-guide.md §6.5).
        ops = self.ops
        if LEGACY_HISTORY not in ops.tables():
            return []
        if keyspace is None:
            rows = ops.read(f"SELECT * FROM {ops.keyspace}.{LEGACY_HISTORY}", ())
        else:
            rows = ops.read(f"SELECT * FROM {ops.keyspace}.{LEGACY_HISTORY} WHERE keyspace_name = %s", (keyspace,))
        return [history_row(row) for row in rows]


def _history_upsert(
    ops_keyspace: str,
    keyspace: str,
    tables: tuple[str, ...],
    token_range: TokenRange,
    record: SegmentRecord,
    started_at: datetime | None,
    finished_at: datetime | None,
    replicas: tuple[str, ...],
    ttl_seconds: int,
    now: datetime,
) -> tuple[str, tuple[object, ...]]:
    columns = history_columns(keyspace, tables, token_range, record, started_at, finished_at, replicas, now)
    names = ", ".join(columns)
    marks = ", ".join(["%s"] * len(columns))
    table = history_table(record)
    return (f"INSERT INTO {ops_keyspace}.{table} ({names}) VALUES ({marks}) USING TTL {int(ttl_seconds)}",
            tuple(columns.values()))  # fmt: skip
