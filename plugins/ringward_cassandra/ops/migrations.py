"""ringward_ops.migrations and migration_journal on Cassandra."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from ringward.migration_progress import StageProgress
from ringward.migration_storage import JournalEntry, JournalSpan, MigrationRow, migration_run_keys
from ringward.ring import TokenRange

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import utc

__all__ = ["CassandraMigrations"]

PAGE_WRITE_CONCURRENCY = 4  # rows of a page view (1 MB each) written at once
PAGE_ROWS_PER_FETCH = 8  # rows of a page view read per page of results (8 MB)


class CassandraMigrations:
    """`MigrationStorage` on Cassandra: one row per migration (its precheck's record and state reached), one
    journal entry per (stage, range); migration_runs finds a DAG run's migrations without reading the others."""

    def __init__(self, ops: OpsKeyspace) -> None:
        self.ops = ops

    def record_migration(
        self, migration_id: str, keyspace: str, old: str, new: str, state: str, plan: dict[str, object]
    ) -> None:
        self._index(migration_id, plan)  # first: a lookup row without its migration row finds nothing, harmlessly
        self.ops.write(
            f"INSERT INTO {self.ops.keyspace}.migrations (migration_id, keyspace_name, old_replication, "
            "new_replication, state, plan, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (migration_id, keyspace, old, new, state, json.dumps(plan), datetime.now(UTC)),
        )

    def migration(self, migration_id: str) -> dict[str, object] | None:
        """The record a migration's precheck stored, for a rerun of the same DAG run to resume with."""
        rows = self.ops.read(f"SELECT plan FROM {self.ops.keyspace}.migrations WHERE migration_id = %s",
                             (migration_id,))  # fmt: skip
        if not rows:
            return None
        record: dict[str, object] = json.loads(rows[0].plan)
        return record

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]:
        """Every recorded migration of `keyspace`: (id, state, updated_at, record). The table is small (one
        row per migration), so it is read whole rather than indexed by keyspace."""
        rows = self.ops.read(
            f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {self.ops.keyspace}.migrations", ()
        )
        return [
            (r.migration_id, r.state or "", utc(r.updated_at), json.loads(r.plan or "{}"))
            for r in rows
            if r.keyspace_name == keyspace
        ]

    def migrations(self) -> list[MigrationRow]:
        """Every recorded migration, latest first (the table holds one small row per migration)."""
        rows = self.ops.read(
            f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {self.ops.keyspace}.migrations", ()
        )
        return _latest_first([_migration_row(r) for r in rows])

    def run_migrations(self, dag_id: str, run_id: str) -> list[MigrationRow]:
        """The migrations stored under run `run_id` of `dag_id`: one partition of migration_runs, then those rows.
        A store from before migration_runs (not yet upgraded by a precheck's ensure_schema) is read whole."""
        ops = self.ops
        if not ops.has_table("migration_runs"):
            return [row for row in self.migrations() if (dag_id, run_id) in migration_run_keys(row.migration_id,
                                                                                               row.record)]  # fmt: skip
        ids = ops.read(f"SELECT migration_id FROM {ops.keyspace}.migration_runs WHERE dag_id = %s AND run_id = %s",
                       (dag_id, run_id))  # fmt: skip
        found: list[MigrationRow] = []
        for id_row in ids:
            rows = ops.read(
                f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {ops.keyspace}.migrations "
                "WHERE migration_id = %s",
                (id_row.migration_id,),
            )
            found += [_migration_row(r) for r in rows]
        return _latest_first(found)

    def index_runs(self) -> None:
        """Index every stored migration in migration_runs (once, when the table is created on an upgraded store)."""
        for row in self.migrations():
            self._index(row.migration_id, row.record)

    def _index(self, migration_id: str, record: dict[str, Any]) -> None:
        if not self.ops.has_table("migration_runs"):  # an older store, until its next ensure_schema
            return
        for dag_id, run_id in sorted(migration_run_keys(migration_id, record)):
            self.ops.write(
                f"INSERT INTO {self.ops.keyspace}.migration_runs (dag_id, run_id, migration_id, recorded_at) "
                "VALUES (%s, %s, %s, %s)",
                (dag_id, run_id, migration_id, datetime.now(UTC)),
            )

    def record_migration_pages(self, migration_id: str, version: str, chunks: Sequence[bytes]) -> None:
        """Store the page's view of a migration's plan (`view_chunks` of its bytes) under its record's `version`,
        with the history TTL; a store from before migration_pages (until its next ensure_schema) keeps none."""
        from cassandra.concurrent import execute_concurrent_with_args

        ops = self.ops
        if not ops.has_table("migration_pages"):
            return
        insert = ops.statement(f"INSERT INTO {ops.keyspace}.migration_pages (migration_id, version, chunk, data) "
                               f"VALUES (?, ?, ?, ?) USING TTL {ops.history_ttl_seconds}")  # fmt: skip
        rows = [(migration_id, version, index, bytes(chunk)) for index, chunk in enumerate(chunks)]
        execute_concurrent_with_args(ops.session, insert, rows, concurrency=PAGE_WRITE_CONCURRENCY,
                                     raise_on_first_error=True)  # fmt: skip

    def migration_pages(self, migration_id: str, version: str) -> bytes | None:
        """The stored view of a migration's plan for its record's `version` (its rows joined), None when none is."""
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        ops = self.ops
        if not ops.has_table("migration_pages"):
            return None
        statement = SimpleStatement(
            f"SELECT data FROM {ops.keyspace}.migration_pages WHERE migration_id = %s AND version = %s",
            consistency_level=ConsistencyLevel.QUORUM, fetch_size=PAGE_ROWS_PER_FETCH,
        )  # fmt: skip
        chunks = [bytes(row.data or b"") for row in ops.session.execute(statement, (migration_id, version))]
        return b"".join(chunks) if chunks else None

    def migration_state(self, migration_id: str) -> str | None:
        rows = self.ops.read(f"SELECT state FROM {self.ops.keyspace}.migrations WHERE migration_id = %s",
                             (migration_id,))  # fmt: skip
        return str(rows[0].state) if rows else None

    def set_migration_state(self, migration_id: str, state: str) -> None:
        self.ops.write(
            f"UPDATE {self.ops.keyspace}.migrations SET state = %s, updated_at = %s WHERE migration_id = %s",
            (state, datetime.now(UTC), migration_id),
        )

    def journal_of(self, migration_id: str) -> list[JournalEntry]:
        """Every journal entry of a migration, all stages, in (stage, range) order."""
        rows = self.ops.read(f"SELECT * FROM {self.ops.keyspace}.migration_journal WHERE migration_id = %s",
                             (migration_id,))  # fmt: skip
        return [
            JournalEntry(row.step, TokenRange(row.range_start, row.range_end), row.status, row.coordinator or "",
                         row.attempts or 0, row.seconds or 0.0, row.detail or "")
            for row in rows
        ]  # fmt: skip

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]:
        rows = self.ops.read(
            f"SELECT * FROM {self.ops.keyspace}.migration_journal WHERE migration_id = %s AND step = %s",
            (migration_id, step),
        )
        entries = {}
        for row in rows:
            token_range = TokenRange(row.range_start, row.range_end)
            entries[token_range] = JournalEntry(
                step, token_range, row.status, row.coordinator, row.attempts or 0, row.seconds or 0.0, row.detail or ""
            )
        return entries

    def journal_spans(self, migration_id: str, step: str, spans: Sequence[JournalSpan]) -> list[JournalEntry]:
        """Each span a slice of the partition's clustering order (step, range_start, range_end), with its LIMIT;
        the spans read concurrently."""
        ops = self.ops
        return ops.concurrent_read(
            f"SELECT step, range_start, range_end, status, coordinator, attempts, seconds, detail "
            f"FROM {ops.keyspace}.migration_journal WHERE migration_id = ? "
            "AND (step, range_start, range_end) >= (?, ?, ?) AND (step, range_start, range_end) <= (?, ?, ?) LIMIT ?",
            [(migration_id, step, *first, step, *last, limit) for first, last, limit in spans],
            lambda row: JournalEntry(row.step, TokenRange(row.range_start, row.range_end), row.status,
                                     row.coordinator or "", row.attempts or 0, row.seconds or 0.0, row.detail or ""),
        )  # fmt: skip

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None:
        """One row per stage, replaced whole; a store from before migration_progress (until its next ensure_schema)
        keeps none (the page then reads the journal)."""
        ops = self.ops
        if not ops.has_table("migration_progress"):
            return
        ops.write(
            f"INSERT INTO {ops.keyspace}.migration_progress (migration_id, step, segments, segment_count, done, "
            "failed, statuses, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
            (migration_id, progress.step, progress.segments, progress.count, progress.done, progress.failed,
             progress.statuses, progress.updated_at or datetime.now(UTC)),
        )  # fmt: skip

    def stage_progress(self, migration_id: str) -> list[StageProgress]:
        ops = self.ops
        if not ops.has_table("migration_progress"):
            return []
        rows = ops.read(
            f"SELECT step, segments, segment_count, done, failed, statuses, updated_at "
            f"FROM {ops.keyspace}.migration_progress WHERE migration_id = %s",
            (migration_id,),
        )
        return [StageProgress(row.step, row.segments or "", row.segment_count or 0, row.done or 0, row.failed or 0,
                              bytes(row.statuses or b""), utc(row.updated_at)) for row in rows]  # fmt: skip

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None:
        self.ops.write(
            f"INSERT INTO {self.ops.keyspace}.migration_journal (migration_id, step, range_start, range_end, status, "
            "coordinator, attempts, seconds, detail, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (migration_id, entry.step, entry.range.start, entry.range.end, entry.status, entry.coordinator,
             entry.attempts, entry.seconds, entry.detail[-2000:], datetime.now(UTC)),
        )  # fmt: skip


def _migration_row(row: Any) -> MigrationRow:
    """A `migrations` row (migration_id, keyspace_name, state, plan, updated_at) as the store returns it."""
    return MigrationRow(row.migration_id, row.keyspace_name or "", row.state or "", utc(row.updated_at),
                        json.loads(row.plan or "{}"))  # fmt: skip


def _latest_first(rows: list[MigrationRow]) -> list[MigrationRow]:
    return sorted(rows, key=lambda m: m.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)
