"""An in-memory ringward_ops for the fleet simulator: the nightly path's subset of `OpsStore`, same layout.

Tables keep Cassandra's shape: partitions of rows ordered by clustering key, cells with their own expiry (an
INSERT ... USING TTL sets the TTL of the cells it writes and of the row; cells it leaves out keep theirs; a
None value deletes the cell). Time is the injected clock's, so TTLs hold in virtual time. Counters say what
the fleet benchmark reports: rows written and read per table and the largest partition per table.

Imports no Cassandra driver (the simulator runs without one); the row types are the core's
(`ringward.repair`, `ringward.migration_storage`) and the bucket arithmetic and the cells of each write are
`ringward_cassandra.ops.layout`'s, shared with the Cassandra stores, so both stores write the same cells. It
implements the storage Protocol of every record kind it holds (leases, repair history, run plans, run progress,
repair runs, preview findings, the pause switch, the migrations with their journal); not the controller pauses.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

from ringward.migration_progress import StageProgress
from ringward.migration_storage import JournalEntry, JournalSpan, Lease, MigrationRow, migration_run_keys
from ringward.repair import (
    DueRecord,
    PreviewFinding,
    RecordUpdate,
    RepairHistoryRow,
    RepairRunRow,
    Segment,
    SegmentRecord,
    SwitchEvent,
)
from ringward.ring import TokenRange

from ringward_cassandra.ops.layout import (
    DEFAULT_HISTORY_TTL,
    DUE_COLUMNS,
    LEASE_TTL_SECONDS,
    RECORD_COLUMNS,
    REPAIR_SWITCH,
    RecordKey,
    add_due_records,
    add_records,
    check_chunk,
    due_records_in_order,
    history_columns,
    history_row,
    history_table,
    lease_held,
    plan_pages,
    preview_columns,
    preview_finding,
    segment_records,
)

__all__ = ["MemoryOpsStore"]

Clock = Callable[[], datetime]
Key = tuple[Any, ...]
_MARKER = "\x00row"  # the row marker an INSERT writes: the row lives while it (or any cell) does


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _millis(moment: Any) -> Any:
    """Timestamps as Cassandra keeps them (milliseconds), so both stores answer the same values."""
    if isinstance(moment, datetime):
        return moment.replace(microsecond=moment.microsecond // 1000 * 1000)
    return moment


class _Table:
    """One table: partition key -> clustering key -> column -> (value, expires at or None)."""

    def __init__(self, name: str, descending: bool = False) -> None:
        self.name = name
        self.descending = descending
        self.partitions: dict[Key, dict[Key, dict[str, tuple[Any, datetime | None]]]] = {}

    def upsert(self, partition: Key, clustering: Key, cells: Mapping[str, Any], expires: datetime | None) -> None:
        row = self.partitions.setdefault(partition, {}).setdefault(clustering, {})
        row[_MARKER] = (True, expires)
        for column, value in cells.items():
            if value is None:
                row.pop(column, None)  # a null written is a tombstone
            else:
                row[column] = (_millis(value), expires)

    def rows(self, partition: Key, now: datetime) -> list[dict[str, Any]]:
        """The live rows of a partition in clustering order (expired rows are purged, as compaction would)."""
        stored = self.partitions.get(partition)
        if not stored:
            return []
        live: list[tuple[Key, dict[str, Any]]] = []
        for clustering in list(stored):
            cells = {c: v for c, (v, expires) in stored[clustering].items() if expires is None or expires > now}
            if not cells:
                del stored[clustering]
                continue
            cells.pop(_MARKER, None)
            live.append((clustering, cells))
        if not stored:
            del self.partitions[partition]
        live.sort(key=lambda item: item[0], reverse=self.descending)
        return [cells for _, cells in live]

    def slice(self, partition: Key, low: Key, high: Key, limit: int, now: datetime) -> list[dict[str, Any]]:
        """The live rows of a partition from clustering key `low` to `high` (both included), in clustering order,
        at most `limit` (a slice read: the other rows are not returned)."""
        stored = self.partitions.get(partition) or {}
        keys = sorted(key for key in stored if low <= key <= high)
        found: list[dict[str, Any]] = []
        for key in keys:
            cells = {c: v for c, (v, expires) in stored[key].items() if expires is None or expires > now}
            if not cells:
                continue  # expired
            cells.pop(_MARKER, None)
            found.append(cells)
            if len(found) >= limit:
                break
        return found

    def cells(self, partition: Key, now: datetime, columns: Sequence[str]) -> list[tuple[Any, ...]]:
        """The live rows of a partition as tuples of `columns` (None where a cell is absent or expired), in no
        particular order: the lean read `records_of` makes of millions of rows."""
        stored = self.partitions.get(partition)
        if not stored:
            return []
        found: list[tuple[Any, ...]] = []
        for row in stored.values():
            marker = row.get(_MARKER)
            if not (marker and (marker[1] is None or marker[1] > now)) and not any(
                expires is None or expires > now for _, expires in row.values()
            ):
                continue  # every cell expired: the row is gone
            found.append(tuple([
                None if (cell := row.get(c)) is None or (cell[1] is not None and cell[1] <= now) else cell[0]
                for c in columns
            ]))  # fmt: skip
        return found

    def delete(self, partition: Key) -> None:
        self.partitions.pop(partition, None)

    def largest(self, now: datetime) -> int:
        return max((len(self.rows(p, now)) for p in list(self.partitions)), default=0)


class MemoryOpsStore:
    """The nightly repair's ops store in memory (see `OpsStore` and the storage Protocols for what each method
    means)."""

    def __init__(self, *, clock: Clock = _utc_now, history_ttl_seconds: int = DEFAULT_HISTORY_TTL) -> None:
        self.clock = clock
        self.history_ttl_seconds = int(history_ttl_seconds)
        self._created = False
        self._tables = {
            name: _Table(name, descending=name == "repair_switch")
            for name in (
                "repair_segments",
                "repair_plan",
                "repair_progress",
                "repair_runs",
                "repair_switch",
                "repair_previews",
                "repair_type_segments",
                "migrations",
                "migration_runs",
                "migration_journal",
                "migration_pages",
                "migration_progress",
            )
        }
        self.lease_ttl_seconds = LEASE_TTL_SECONDS
        self._leases: dict[str, tuple[Lease, datetime | None]] = {}  # resource -> lease, expiry (None: never)
        self._written: Counter[str] = Counter()
        self._read: Counter[str] = Counter()

    # -- schema -----------------------------------------------------------------------------------------
    def ensure_schema(self, datacenters: Iterable[tuple[str, int]] = ()) -> None:
        self._created = True

    def exists(self) -> bool:
        return self._created

    # -- counters ---------------------------------------------------------------------------------------
    def stats(self) -> dict[str, dict[str, int]]:
        """Rows written and read per table, the largest live partition (rows) and the live partitions per table."""
        now = self.clock()
        return {
            "rows_written": dict(self._written),
            "rows_read": dict(self._read),
            "largest_partition": {name: t.largest(now) for name, t in self._tables.items() if t.partitions},
            "partitions": {name: len(t.partitions) for name, t in self._tables.items() if t.partitions},
        }

    def reset_stats(self) -> None:
        """Restart the written/read counters (a benchmark's seeded history is not the night's traffic)."""
        self._written.clear()
        self._read.clear()

    def _upsert(self, table: str, partition: Key, clustering: Key, cells: Mapping[str, Any], ttl: int | None) -> None:
        expires = self.clock() + timedelta(seconds=ttl) if ttl else None  # TTL 0: none, as in CQL
        self._tables[table].upsert(partition, clustering, cells, expires)
        self._written[table] += 1

    def _rows(self, table: str, partition: Key) -> list[dict[str, Any]]:
        rows = self._tables[table].rows(partition, self.clock())
        self._read[table] += len(rows)
        return rows

    # -- repair history ---------------------------------------------------------------------------------
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
        ttl = self.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        columns = history_columns(keyspace, tables, token_range, record, started_at, finished_at, replicas,
                                  self.clock())  # fmt: skip
        partition: Key = (columns["keyspace_name"], columns["table_names"], columns["bucket"])
        table = history_table(record)
        if table != "repair_segments":
            partition = (record.repair_type, *partition)
        self._upsert(table, partition, (token_range.start, token_range.end), columns, ttl)

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None:
        for u in updates:
            segment = u.segment
            self.record_repair(segment.keyspace, segment.tables, segment.range, u.record, started_at=u.started,
                               finished_at=u.finished, replicas=segment.replicas, ttl_seconds=ttl_seconds)  # fmt: skip

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]:
        if repair_type != "full":
            table = self._tables["repair_type_segments"]
            partitions = sorted(p for p in table.partitions if p[0] == repair_type and keyspace in (None, p[1]))
            return [history_row(SimpleNamespace(**row)) for p in partitions
                    for row in self._rows("repair_type_segments", p)]  # fmt: skip
        table = self._tables["repair_segments"]
        partitions = sorted(p for p in table.partitions if keyspace is None or p[0] == keyspace)
        return [history_row(SimpleNamespace(**row)) for p in partitions for row in self._rows("repair_segments", p)]

    def history_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], repair_type: str = "full"
    ) -> list[RepairHistoryRow]:
        names = ",".join(tables)
        if repair_type != "full":
            return [
                history_row(SimpleNamespace(**row))
                for bucket in sorted(set(buckets))
                for row in self._rows("repair_type_segments", (repair_type, keyspace, names, bucket))
            ]
        return [
            history_row(SimpleNamespace(**row))
            for bucket in sorted(set(buckets))
            for row in self._rows("repair_segments", (keyspace, names, bucket))
        ]

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
        """`columns` of the history partitions of (keyspace, tables, `repair_type`) in `buckets`, each partition's
        rows given to `add`, as the Cassandra store reads them."""
        names = ",".join(tables)
        table, prefix = ("repair_segments", ()) if repair_type == "full" else ("repair_type_segments", (repair_type,))
        now = self.clock()
        for bucket in sorted(set(buckets)):
            rows = self._tables[table].cells((*prefix, keyspace, names, bucket), now, columns)
            self._read[table] += len(rows)
            add(rows)

    # -- run plans --------------------------------------------------------------------------------------
    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int:
        ttl = self.history_ttl_seconds if ttl_seconds is None else int(ttl_seconds)
        count = 0
        for index, chunk in enumerate(chunks):
            commands = list(chunk)
            check_chunk(run_id, index, commands)
            self._tables["repair_plan"].delete((run_id, index))
            for page, text in enumerate(plan_pages(commands)):
                self._upsert("repair_plan", (run_id, index), (page,), {"command": text}, ttl)
            count += 1
        return count

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]:
        return [command for row in self._rows("repair_plan", (run_id, int(chunk))) for command in
                str(row["command"]).split("\n")]  # fmt: skip

    def drop_run_plan(self, run_id: str, chunks: int) -> None:
        for index in range(int(chunks)):
            self._tables["repair_plan"].delete((run_id, index))

    # -- runs and their progress ------------------------------------------------------------------------
    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None:
        now = self.clock()
        for name, value in progress.items():
            cells = {"name": str(name), "value": json.dumps(value, default=str), "updated_at": now}
            self._upsert("repair_progress", (run_id,), (str(name),), cells, self.history_ttl_seconds)

    def run_progress(self, run_id: str) -> dict[str, Any] | None:
        rows = self._rows("repair_progress", (run_id,))
        if not rows:
            return None
        return {row["name"]: json.loads(row["value"]) for row in rows}

    def progress_runs(self) -> dict[str, datetime | None]:
        found: dict[str, datetime | None] = {}
        for (run_id,) in list(self._tables["repair_progress"].partitions):
            times = [row["updated_at"] for row in self._rows("repair_progress", (run_id,)) if row.get("updated_at")]
            if times:
                found[run_id] = max(times)
        return found

    def record_repair_run(self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]) -> None:
        cells = {"state": state, "summary": json.dumps(summary, default=str), "config": json.dumps(config, default=str),
                 "updated_at": self.clock()}  # fmt: skip
        self._upsert("repair_runs", (run_id,), (), cells, None)

    def repair_runs(self) -> list[RepairRunRow]:
        runs = []
        for (run_id,) in list(self._tables["repair_runs"].partitions):
            for row in self._rows("repair_runs", (run_id,)):
                runs.append(RepairRunRow(run_id, row.get("state", ""), json.loads(row.get("summary") or "{}"),
                                         json.loads(row.get("config") or "{}"), row.get("updated_at")))  # fmt: skip
        return sorted(runs, key=lambda run: run.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def latest_repair_run(self) -> RepairRunRow | None:
        runs = self.repair_runs()
        return runs[0] if runs else None

    # -- preview findings -------------------------------------------------------------------------------
    def record_preview(self, finding: PreviewFinding, ttl_seconds: int | None = None) -> None:
        cells = preview_columns(finding)
        clustering = (cells["found_at"], cells["table_name"], cells["range_start"])
        ttl = self.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        self._upsert("repair_previews", (finding.keyspace,), clustering, cells, ttl)

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]:
        keys = [(keyspace,)] if keyspace is not None else list(self._tables["repair_previews"].partitions)
        found = [preview_finding(row) for key in keys for row in self._rows("repair_previews", key)]
        return sorted(found, key=lambda f: f.found_at, reverse=True)

    # -- migrations and their journal (as Cassandra's: the record stored as JSON text, read back decoded) -------
    def record_migration(
        self, migration_id: str, keyspace: str, old: str, new: str, state: str, plan: dict[str, object]
    ) -> None:
        now = self.clock()
        for dag_id, run_id in sorted(migration_run_keys(migration_id, plan)):
            index = {"migration_id": migration_id, "recorded_at": now}
            self._upsert("migration_runs", (dag_id, run_id), (migration_id,), index, None)
        cells = {"keyspace_name": keyspace, "old_replication": old, "new_replication": new, "state": state,
                 "plan": json.dumps(plan), "updated_at": now}  # fmt: skip
        self._upsert("migrations", (migration_id,), (), cells, None)

    def _migration_rows(self, partitions: Iterable[Key]) -> list[MigrationRow]:
        found = [MigrationRow(key[0], r.get("keyspace_name", ""), r.get("state", ""), r.get("updated_at"),
                              json.loads(r.get("plan") or "{}"))
                 for key in partitions for r in self._rows("migrations", key)]  # fmt: skip
        return sorted(found, key=lambda m: m.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def migration(self, migration_id: str) -> dict[str, object] | None:
        rows = self._migration_rows([(migration_id,)])
        return rows[0].record if rows else None

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]:
        return [(m.migration_id, m.state, m.updated_at, m.record) for m in self.migrations() if m.keyspace == keyspace]

    def migrations(self) -> list[MigrationRow]:
        return self._migration_rows(list(self._tables["migrations"].partitions))

    def run_migrations(self, dag_id: str, run_id: str) -> list[MigrationRow]:
        """One partition of migration_runs, then those rows of migrations (as the Cassandra store reads them)."""
        return self._migration_rows([(r["migration_id"],) for r in self._rows("migration_runs", (dag_id, run_id))])

    def record_migration_pages(self, migration_id: str, version: str, chunks: Sequence[bytes]) -> None:
        for index, chunk in enumerate(chunks):
            self._upsert("migration_pages", (migration_id, version), (index,), {"data": bytes(chunk)},
                         self.history_ttl_seconds)  # fmt: skip

    def migration_pages(self, migration_id: str, version: str) -> bytes | None:
        rows = self._rows("migration_pages", (migration_id, version))
        return b"".join(row["data"] for row in rows) if rows else None

    def migration_state(self, migration_id: str) -> str | None:
        rows = self._rows("migrations", (migration_id,))
        return str(rows[0].get("state")) if rows else None

    def set_migration_state(self, migration_id: str, state: str) -> None:
        self._upsert("migrations", (migration_id,), (), {"state": state, "updated_at": self.clock()}, None)

    def journal_of(self, migration_id: str) -> list[JournalEntry]:
        return [
            JournalEntry(r["step"], TokenRange(r["range_start"], r["range_end"]), r["status"], r.get("coordinator", ""),
                         r.get("attempts", 0), r.get("seconds", 0.0), r.get("detail", ""))
            for r in self._rows("migration_journal", (migration_id,))
        ]  # fmt: skip

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]:
        return {entry.range: entry for entry in self.journal_of(migration_id) if entry.step == step}

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None:
        cells = {"step": entry.step, "range_start": entry.range.start, "range_end": entry.range.end,
                 "status": entry.status, "coordinator": entry.coordinator, "attempts": entry.attempts,
                 "seconds": entry.seconds, "detail": entry.detail[-2000:], "updated_at": self.clock()}  # fmt: skip
        self._upsert("migration_journal", (migration_id,), (entry.step, entry.range.start, entry.range.end), cells,
                     None)  # fmt: skip

    def journal_spans(self, migration_id: str, step: str, spans: Sequence[JournalSpan]) -> list[JournalEntry]:
        """Each span a slice of the partition's clustering order with its limit (as the Cassandra store reads
        them): only the rows returned count as read."""
        found: list[JournalEntry] = []
        table = self._tables["migration_journal"]
        now = self.clock()
        for first, last, limit in spans:
            low, high = (step, *first), (step, *last)
            rows = table.slice((migration_id,), low, high, limit, now)
            self._read["migration_journal"] += len(rows)
            found += [
                JournalEntry(r["step"], TokenRange(r["range_start"], r["range_end"]), r["status"],
                             r.get("coordinator", ""), r.get("attempts", 0), r.get("seconds", 0.0), r.get("detail", ""))
                for r in rows
            ]  # fmt: skip
        return found

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None:
        cells = {"step": progress.step, "segments": progress.segments, "segment_count": progress.count,
                 "done": progress.done, "failed": progress.failed, "statuses": bytes(progress.statuses),
                 "updated_at": progress.updated_at or self.clock()}  # fmt: skip
        self._upsert("migration_progress", (migration_id,), (progress.step,), cells, None)

    def stage_progress(self, migration_id: str) -> list[StageProgress]:
        return [
            StageProgress(r["step"], r.get("segments", ""), r.get("segment_count", 0), r.get("done", 0),
                          r.get("failed", 0), r.get("statuses", b""), r.get("updated_at"))
            for r in self._rows("migration_progress", (migration_id,))
        ]  # fmt: skip

    # -- leases (none unless a test or the simulator adds one) --------------------------------------------
    def add_lease(self, keyspace: str, owner: str, purpose: str) -> Lease:
        """A keyspace lease that never expires (a test's or the simulator's)."""
        lease = Lease(f"keyspace:{keyspace}", owner, purpose, self.clock())
        self._leases[lease.resource] = (lease, None)
        return lease

    def release_keyspace_lease(self, keyspace: str) -> None:
        self._leases.pop(f"keyspace:{keyspace}", None)

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        """As `OpsStore.acquire_lease`: taken, or renewed by its owner, for `lease_ttl_seconds` from now."""
        held = self.lease(resource)
        if held is not None and held.owner != owner:
            raise lease_held("memory", resource, held.owner, held.purpose, held.acquired_at)
        now = self.clock()
        self._leases[resource] = (Lease(resource, owner, purpose, now), now + timedelta(seconds=self.lease_ttl_seconds))

    def release_lease(self, resource: str, owner: str) -> None:
        held = self.lease(resource)
        if held is not None and held.owner == owner:
            del self._leases[resource]

    def lease(self, resource: str) -> Lease | None:
        """The lease on `resource` unless it expired (as Cassandra's TTL drops the row)."""
        lease, expires = self._leases.get(resource, (None, None))
        if lease is None or (expires is not None and self.clock() >= expires):
            return None
        return lease

    def leased_keyspaces(self) -> dict[str, Lease]:
        return {
            resource.split(":", 1)[1]: lease
            for resource in list(self._leases)
            if resource.startswith("keyspace:") and (lease := self.lease(resource)) is not None
        }

    # -- the repair pause switch ------------------------------------------------------------------------
    def switch_events(self, name: str = REPAIR_SWITCH, limit: int = 20) -> list[SwitchEvent]:
        rows = self._rows("repair_switch", (name,))[: int(limit)]
        return [SwitchEvent(bool(r["paused"]), r["changed_at"], r.get("changed_by", ""), r.get("reason", ""))
                for r in rows]  # fmt: skip

    def repair_paused(self, name: str = REPAIR_SWITCH) -> bool:
        events = self.switch_events(name, limit=1)
        return bool(events and events[0].paused)

    def set_switch(self, paused: bool, changed_by: str, reason: str = "", name: str = REPAIR_SWITCH) -> SwitchEvent:
        event = SwitchEvent(paused, _millis(self.clock()), changed_by, reason[:500])
        cells = {"changed_at": event.changed_at, "paused": paused, "changed_by": changed_by, "reason": event.reason}
        self._upsert("repair_switch", (name,), (event.changed_at,), cells, None)
        return event
