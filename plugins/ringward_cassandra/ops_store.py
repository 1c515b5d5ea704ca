"""ringward's own state in Cassandra (keyspace `ringward_ops`): leases, the migration journal, repair history.

Keeping state in the cluster it describes means a retried, cleared or re-run task (on any worker) finds
it again, and leases use lightweight transactions, as Reaper's per-replica locks do.
"""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ringward.errors import MigrationError, RepairError
from ringward.permissions import OPS_KEYSPACE, ops_keyspace_statement
from ringward.repair import RecordUpdate, SegmentRecord, SegmentState, segment_id_of
from ringward.ring import TokenRange

if TYPE_CHECKING:
    from cassandra.cluster import Session

# The driver is imported where a statement is built, not here: the rows, the bucket arithmetic and the column
# layout are shared with the in-memory store (memory_ops_store), which must run without the driver.

__all__ = [
    "DEFAULT_HISTORY_TTL",
    "HISTORY_BUCKETS",
    "LEASE_TTL_SECONDS",
    "OPS_KEYSPACE",
    "PLAN_CHUNK_ROWS",
    "REPAIR_SWITCH",
    "JournalEntry",
    "Lease",
    "MigrationRow",
    "OpsStore",
    "PreviewFinding",
    "RepairHistoryRow",
    "RepairRunRow",
    "SwitchEvent",
    "bucket_bounds",
    "history_bucket",
]


_SCHEMA = [
    """CREATE TABLE IF NOT EXISTS {ks}.leases (
        resource text PRIMARY KEY, owner text, purpose text, acquired_at timestamp)""",
    """CREATE TABLE IF NOT EXISTS {ks}.migration_journal (
        migration_id text, step text, range_start bigint, range_end bigint,
        status text, coordinator text, attempts int, seconds double, detail text, updated_at timestamp,
        PRIMARY KEY ((migration_id), step, range_start, range_end))""",
    """CREATE TABLE IF NOT EXISTS {ks}.migrations (
        migration_id text PRIMARY KEY, keyspace_name text, old_replication text, new_replication text,
        state text, plan text, updated_at timestamp)""",
    """CREATE TABLE IF NOT EXISTS {ks}.repair_runs (
        run_id text PRIMARY KEY, state text, summary text, config text, updated_at timestamp)""",
    # The nightly repair's pause switch, pressed in the UI: every press is a row (who, when, why); the latest
    # row of a switch is its state. The repair task reads it between segments.
    """CREATE TABLE IF NOT EXISTS {ks}.repair_switch (
        name text, changed_at timestamp, paused boolean, changed_by text, reason text,
        PRIMARY KEY ((name), changed_at)) WITH CLUSTERING ORDER BY (changed_at DESC)""",
    # What a migration's pause found of another repair controller (AutoRepair settings, paused Reaper
    # schedules), written before it changes anything, so the restore sets back exactly that, even after a crash.
    """CREATE TABLE IF NOT EXISTS {ks}.controller_pauses (
        migration_id text, controller text, saved text, paused_at timestamp, restored_at timestamp,
        PRIMARY KEY ((migration_id), controller))""",
    # Repair history, one partition per (keyspace, tables, bucket): `bucket` is the top 8 bits of the range's
    # start token (history_bucket), so a 256k-range keyspace makes 256 partitions of ~1,000 rows per unit, and
    # a plan chunk reads only the partitions it touches. Every write carries a TTL (history_ttl): the rows of
    # ranges no longer planned (nodes that left) expire instead of piling up.
    """CREATE TABLE IF NOT EXISTS {ks}.repair_segments (
        keyspace_name text, table_names text, bucket int, range_start bigint, range_end bigint,
        last_success timestamp, last_full_success timestamp, last_attempt timestamp, attempts int,
        last_error text, seconds double, run_id text, state text, started_at timestamp, finished_at timestamp,
        coordinator text, replicas text, updated_at timestamp,
        PRIMARY KEY ((keyspace_name, table_names, bucket), range_start, range_end))""",
    # The history of the other repair types (incremental, preview, paxos): the same rows, the type in the partition
    # key, so each type has its own cadence and a preview never moves the full repair's.
    """CREATE TABLE IF NOT EXISTS {ks}.repair_type_segments (
        repair_type text, keyspace_name text, table_names text, bucket int, range_start bigint, range_end bigint,
        last_success timestamp, last_full_success timestamp, last_attempt timestamp, attempts int,
        last_error text, seconds double, run_id text, state text, started_at timestamp, finished_at timestamp,
        coordinator text, replicas text, updated_at timestamp,
        PRIMARY KEY ((repair_type, keyspace_name, table_names, bucket), range_start, range_end))""",
    # A nightly run's plan: its repair commands (opaque JSON) in priority order, PLAN_CHUNK_ROWS per partition,
    # PLAN_PAGE_COMMANDS per row (one line each); XCom carries only a reference (run id, chunk count).
    """CREATE TABLE IF NOT EXISTS {ks}.repair_plan (
        run_id text, chunk int, position int, command text,
        PRIMARY KEY ((run_id, chunk), position))""",
    # What preview repairs found: per keyspace, latest first, one row per (command, table) out of sync. The Repair
    # page shows them; a preview never counts as a repair (its history is its own type's).
    """CREATE TABLE IF NOT EXISTS {ks}.repair_previews (
        keyspace_name text, found_at timestamp, table_name text, range_start bigint, ranges text,
        out_of_sync_ranges int, run_id text, coordinator text,
        PRIMARY KEY ((keyspace_name), found_at, table_name, range_start))
        WITH CLUSTERING ORDER BY (found_at DESC, table_name ASC, range_start ASC)""",
    # A running run's live progress (one row per top-level key of the progress mapping, JSON values).
    """CREATE TABLE IF NOT EXISTS {ks}.repair_progress (
        run_id text, name text, value text, updated_at timestamp,
        PRIMARY KEY ((run_id), name))""",
]

_TABLE_ORDER = [statement.split("{ks}.", 1)[1].split(" ", 1)[0] for statement in _SCHEMA]
_TABLES = set(_TABLE_ORDER)
# Tables added after the first release: a keyspace without them is still ringward's (an older version's); they
# are created by the next ensure_schema, and readers of them treat their absence as "nothing recorded".
_ADDED_LATER = {
    "repair_switch", "controller_pauses", "repair_segments", "repair_plan", "repair_progress", "repair_previews",
    "repair_type_segments",
}  # fmt: skip
# The history table of the first layout (one partition per keyspace, never pruned). No longer created or written;
# on a cluster upgraded from that layout it is read until its rows are rewritten in repair_segments.
LEGACY_HISTORY = "repair_history"

REPAIR_SWITCH = "nightly_subrange_repair"
# A migration's keyspace lease lives this long from its last renewal (each migration task renews it): longer
# than the approval's 48 h wait, so the lease taken by the precheck is still held when a late approval starts
# the ALTER; a migration abandoned half done frees its keyspace for the nightly repair 3 days after its last task.
LEASE_TTL_SECONDS = 72 * 3600
DEFAULT_HISTORY_TTL = 30 * 24 * 3600  # seconds: a range not repaired (nor planned) for 30 days is forgotten
PLAN_CHUNK_ROWS = 5000  # repair commands per repair_plan partition
# Commands per repair_plan row, one per line: a fleet night's plan is 2.5 million commands, and one INSERT each
# would cost the plan task minutes of driver CPU; 100 a row is 25,600 writes of ~20 KB.
PLAN_PAGE_COMMANDS = 100
HISTORY_BUCKETS = 256
_BUCKET_SHIFT = 56  # 64-bit tokens, top 8 bits
_READ_CONCURRENCY = 32
_WRITE_CONCURRENCY = 64


def history_bucket(token: int) -> int:
    """The history partition of a range starting at `token`: its top 8 bits as an unsigned value (0..255)."""
    return (token + 2**63) >> _BUCKET_SHIFT


def bucket_bounds(bucket: int) -> tuple[int, int]:
    """[first, last] start token of `bucket` (both inclusive)."""
    first = (bucket << _BUCKET_SHIFT) - 2**63
    return first, first + (1 << _BUCKET_SHIFT) - 1


@dataclass(frozen=True)
class Lease:
    resource: str
    owner: str
    purpose: str
    acquired_at: datetime | None


@dataclass(frozen=True)
class JournalEntry:
    step: str
    range: TokenRange
    status: str
    coordinator: str
    attempts: int
    seconds: float
    detail: str


@dataclass(frozen=True)
class RepairHistoryRow:
    """One segment's repair history: `tables == ()` means every table of the keyspace."""

    keyspace: str
    tables: tuple[str, ...]
    range: TokenRange
    record: SegmentRecord
    started_at: datetime | None
    finished_at: datetime | None
    coordinator: str | None
    replicas: tuple[str, ...]
    updated_at: datetime | None = None  # when the row was last written (None: a row of the legacy table)


@dataclass(frozen=True)
class MigrationRow:
    """One row of ringward_ops.migrations: the precheck's record (`record`) and the state reached."""

    migration_id: str
    keyspace: str
    state: str
    updated_at: datetime | None
    record: dict[str, Any]


@dataclass(frozen=True)
class SwitchEvent:
    """One press of the repair pause switch."""

    paused: bool
    changed_at: datetime | None
    changed_by: str
    reason: str


@dataclass(frozen=True)
class RepairRunRow:
    run_id: str
    state: str
    summary: dict[str, object]
    config: dict[str, object]
    updated_at: datetime | None


@dataclass(frozen=True)
class PreviewFinding:
    """A preview repair's finding: of the command's `ranges`, `out_of_sync_ranges` differ among the replicas of
    `keyspace.table` (nodetool's summary counts them; it does not say which ones)."""

    keyspace: str
    table: str
    ranges: tuple[TokenRange, ...]
    out_of_sync_ranges: int
    found_at: datetime
    run_id: str | None = None
    coordinator: str | None = None


def preview_columns(finding: PreviewFinding) -> dict[str, object]:
    """The repair_previews cells of one finding (shared with the in-memory store)."""
    return {
        "keyspace_name": finding.keyspace, "found_at": finding.found_at, "table_name": finding.table,
        "range_start": finding.ranges[0].start if finding.ranges else 0,
        "ranges": ",".join(f"{r.start}:{r.end}" for r in finding.ranges),
        "out_of_sync_ranges": finding.out_of_sync_ranges, "run_id": finding.run_id, "coordinator": finding.coordinator,
    }  # fmt: skip


def preview_finding(row: Mapping[str, Any]) -> PreviewFinding:
    pairs = [part.split(":") for part in (row.get("ranges") or "").split(",") if part]
    return PreviewFinding(
        keyspace=row["keyspace_name"], table=row["table_name"],
        ranges=tuple(TokenRange(int(start), int(end)) for start, end in pairs),
        out_of_sync_ranges=int(row.get("out_of_sync_ranges") or 0), found_at=_utc(row["found_at"]) or row["found_at"],
        run_id=row.get("run_id"), coordinator=row.get("coordinator"),
    )  # fmt: skip


def _utc(moment: datetime | None) -> datetime | None:
    """The driver returns naive UTC datetimes; ringward compares aware ones."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


class OpsStore:
    """Reads and writes ringward_ops through a driver session (writes at QUORUM, leases with Paxos).

    `keyspace` is ringward_ops unless a test gives a scratch keyspace; `history_ttl_seconds` is the TTL of the
    repair history rows, the run plans and the run progress (each write renews it)."""

    def __init__(
        self,
        session: Session,
        lease_ttl_seconds: int = LEASE_TTL_SECONDS,
        *,
        history_ttl_seconds: int = DEFAULT_HISTORY_TTL,
        keyspace: str = OPS_KEYSPACE,
    ) -> None:
        self.session = session
        self.lease_ttl_seconds = lease_ttl_seconds
        self.history_ttl_seconds = int(history_ttl_seconds)
        self.keyspace = keyspace
        self._known_tables: set[str] | None = None
        self._prepared: dict[str, Any] = {}

    def ensure_schema(self, datacenters: Iterable[tuple[str, int]]) -> None:
        """Create the keyspace (NTS, up to RF 3 per DC) and the missing tables; cheap to call every time.

        One read of system_schema when nothing is missing (no DDL, no schema agreement wait). The keyspace is
        created only when it is missing: on a cluster with authorization an administrator creates it
        (`ringward grants`) and ringward's role, which may not create keyspaces, only its tables.
        """
        tables = self._table_names()
        if not tables and not self._keyspace_exists():
            statement = ops_keyspace_statement(dict(datacenters)).rstrip(";")
            self.session.execute(statement.replace(f" {OPS_KEYSPACE} ", f" {self.keyspace} ", 1))
        missing = [(name, statement) for name, statement in zip(_TABLE_ORDER, _SCHEMA, strict=True)
                   if name not in tables]  # fmt: skip
        for _, statement in missing:
            self.session.execute(statement.format(ks=self.keyspace))
        if missing:
            self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        self._known_tables = tables | {name for name, _ in missing}

    def exists(self) -> bool:
        """Whether ringward_ops and its tables have been created (reading it must not create it: refusals
        change nothing). The keyspace alone is not enough: an administrator creates it before the GRANTs,
        ringward its tables on first use. Tables added by later versions are not required (an upgraded
        cluster's store exists before its next ensure_schema)."""
        self._known_tables = None
        return self._tables() >= _TABLES - _ADDED_LATER

    def _table_names(self) -> set[str]:
        rows = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (self.keyspace,)
        )
        return {row.table_name for row in rows}

    def _tables(self) -> set[str]:
        """The store's tables, read once per store (ensure_schema keeps it current)."""
        if self._known_tables is None:
            self._known_tables = self._table_names()
        return self._known_tables

    def _keyspace_exists(self) -> bool:
        rows = self.session.execute(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (self.keyspace,)
        )
        return bool(list(rows))

    def _write(self, cql: str, params: tuple[object, ...]) -> object:
        return self.session.execute(_quorum(cql), params)

    def _read(self, cql: str, params: tuple[object, ...]) -> list[object]:
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        return list(self.session.execute(SimpleStatement(cql, consistency_level=ConsistencyLevel.QUORUM), params))

    # -- leases -------------------------------------------------------------------------------------------
    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        """Take `resource` for `owner` for `lease_ttl_seconds` from now, or raise naming who holds it.

        The owner's own lease is renewed: every cell is written again with a fresh TTL (`UPDATE … USING TTL …
        IF owner = …`; the row lives while a cell does, so the first write's expired row marker does not end
        it), and `acquired_at` becomes the time of the renewal. A lease that expired is taken afresh
        (`INSERT … IF NOT EXISTS`), unless someone else took it meanwhile. Both are lightweight transactions."""
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        now = datetime.now(UTC)
        renewed = self.session.execute(
            SimpleStatement(
                f"UPDATE {self.keyspace}.leases USING TTL {self.lease_ttl_seconds} SET owner = %s, purpose = %s, "
                "acquired_at = %s WHERE resource = %s IF owner = %s",
                consistency_level=ConsistencyLevel.QUORUM,
                serial_consistency_level=ConsistencyLevel.SERIAL,
            ),
            (owner, purpose, now, resource, owner),
        ).one()
        if renewed.applied:
            return
        result = renewed
        if getattr(renewed, "owner", None) is None:  # no lease (never taken, released or expired): take it
            result = self.session.execute(
                SimpleStatement(
                    f"INSERT INTO {self.keyspace}.leases (resource, owner, purpose, acquired_at) "
                    f"VALUES (%s, %s, %s, %s) IF NOT EXISTS USING TTL {self.lease_ttl_seconds}",
                    consistency_level=ConsistencyLevel.QUORUM,
                    serial_consistency_level=ConsistencyLevel.SERIAL,
                ),
                (resource, owner, purpose, now),
            ).one()
            if result.applied or result.owner == owner:
                return
        # A failed `IF owner = …` returns the owner only; the lease's other cells are read for the message.
        held = self.lease(resource)
        raise lease_held(self.keyspace, resource, str(result.owner), held.purpose if held else None,
                         held.acquired_at if held else None)  # fmt: skip

    def release_lease(self, resource: str, owner: str) -> None:
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        self.session.execute(
            SimpleStatement(
                f"DELETE FROM {self.keyspace}.leases WHERE resource = %s IF owner = %s",
                consistency_level=ConsistencyLevel.QUORUM,
                serial_consistency_level=ConsistencyLevel.SERIAL,
            ),
            (resource, owner),
        )

    def lease(self, resource: str) -> Lease | None:
        rows = self._read(f"SELECT * FROM {self.keyspace}.leases WHERE resource = %s", (resource,))
        if not rows:
            return None
        row = rows[0]
        return Lease(row.resource, row.owner, row.purpose, row.acquired_at)  # type: ignore[attr-defined]

    def leased_keyspaces(self) -> dict[str, Lease]:
        """Keyspaces under migration: keyspace -> lease (resources are `keyspace:<name>`)."""
        rows = self.session.execute(f"SELECT * FROM {self.keyspace}.leases")
        return {
            row.resource.split(":", 1)[1]: Lease(row.resource, row.owner, row.purpose, row.acquired_at)
            for row in rows
            if row.resource.startswith("keyspace:")
        }

    # -- migration journal ------------------------------------------------------------------------------
    def record_migration(
        self, migration_id: str, keyspace: str, old: str, new: str, state: str, plan: dict[str, object]
    ) -> None:
        self._write(
            f"INSERT INTO {self.keyspace}.migrations (migration_id, keyspace_name, old_replication, new_replication, "
            "state, plan, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (migration_id, keyspace, old, new, state, json.dumps(plan), datetime.now(UTC)),
        )

    def migration(self, migration_id: str) -> dict[str, object] | None:
        """The record a migration's precheck stored, for a rerun of the same DAG run to resume with."""
        rows = self._read(f"SELECT plan FROM {self.keyspace}.migrations WHERE migration_id = %s", (migration_id,))
        return json.loads(rows[0].plan) if rows else None  # type: ignore[attr-defined]

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]:
        """Every recorded migration of `keyspace`: (id, state, updated_at, record). The table is small (one
        row per migration), so it is read whole rather than indexed by keyspace."""
        rows = self._read(
            f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {self.keyspace}.migrations", ()
        )
        return [
            (r.migration_id, r.state or "", _utc(r.updated_at), json.loads(r.plan or "{}"))  # type: ignore[attr-defined]
            for r in rows
            if r.keyspace_name == keyspace  # type: ignore[attr-defined]
        ]

    def migrations(self) -> list[MigrationRow]:
        """Every recorded migration, latest first (the table holds one small row per migration)."""
        rows = self._read(
            f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {self.keyspace}.migrations", ()
        )
        found = [
            MigrationRow(r.migration_id, r.keyspace_name or "", r.state or "", _utc(r.updated_at),  # type: ignore[attr-defined]
                         json.loads(r.plan or "{}"))  # type: ignore[attr-defined]
            for r in rows
        ]  # fmt: skip
        return sorted(found, key=lambda m: m.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def journal_of(self, migration_id: str) -> list[JournalEntry]:
        """Every journal entry of a migration, all stages, in (stage, range) order."""
        rows = self._read(f"SELECT * FROM {self.keyspace}.migration_journal WHERE migration_id = %s", (migration_id,))
        return [
            JournalEntry(row.step, TokenRange(row.range_start, row.range_end), row.status, row.coordinator or "",  # type: ignore[attr-defined]
                         row.attempts or 0, row.seconds or 0.0, row.detail or "")  # type: ignore[attr-defined]
            for row in rows
        ]  # fmt: skip

    def migration_state(self, migration_id: str) -> str | None:
        rows = self._read(f"SELECT state FROM {self.keyspace}.migrations WHERE migration_id = %s", (migration_id,))
        return str(rows[0].state) if rows else None  # type: ignore[attr-defined]

    def set_migration_state(self, migration_id: str, state: str) -> None:
        self._write(
            f"UPDATE {self.keyspace}.migrations SET state = %s, updated_at = %s WHERE migration_id = %s",
            (state, datetime.now(UTC), migration_id),
        )

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]:
        rows = self._read(
            f"SELECT * FROM {self.keyspace}.migration_journal WHERE migration_id = %s AND step = %s",
            (migration_id, step),
        )
        entries = {}
        for row in rows:
            token_range = TokenRange(row.range_start, row.range_end)  # type: ignore[attr-defined]
            entries[token_range] = JournalEntry(
                step, token_range, row.status, row.coordinator, row.attempts or 0,  # type: ignore[attr-defined]
                row.seconds or 0.0, row.detail or "",  # type: ignore[attr-defined]
            )  # fmt: skip
        return entries

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None:
        self._write(
            f"INSERT INTO {self.keyspace}.migration_journal (migration_id, step, range_start, range_end, status, "
            "coordinator, attempts, seconds, detail, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (migration_id, entry.step, entry.range.start, entry.range.end, entry.status, entry.coordinator,
             entry.attempts, entry.seconds, entry.detail[-2000:], datetime.now(UTC)),
        )  # fmt: skip

    # -- other repair controllers, paused by a migration --------------------------------------------------
    def record_controller_pause(self, migration_id: str, controller: str, saved: object) -> None:
        """What `controller` looked like before the migration paused it (JSON), not yet restored."""
        self._write(
            f"INSERT INTO {self.keyspace}.controller_pauses (migration_id, controller, saved, paused_at, restored_at) "
            "VALUES (%s, %s, %s, %s, null)",
            (migration_id, controller, json.dumps(saved), datetime.now(UTC)),
        )

    def controller_pause(self, migration_id: str, controller: str) -> tuple[Any, bool] | None:
        """(saved settings, restored yet) of a pause, None when the migration never paused `controller`."""
        rows = self._read(
            f"SELECT saved, restored_at FROM {self.keyspace}.controller_pauses WHERE migration_id = %s "
            "AND controller = %s",
            (migration_id, controller),
        )
        if not rows:
            return None
        return json.loads(rows[0].saved), rows[0].restored_at is not None  # type: ignore[attr-defined]

    def mark_controller_restored(self, migration_id: str, controller: str) -> None:
        self._write(
            f"UPDATE {self.keyspace}.controller_pauses SET restored_at = %s WHERE migration_id = %s "
            "AND controller = %s",
            (datetime.now(UTC), migration_id, controller),
        )

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
        """Upsert one segment's history; session bounds are written only when given (None keeps them).

        The row lives `ttl_seconds` (default: the store's history TTL) from this write. Cells not written keep
        the TTL of the write that set them: session bounds older than the TTL are forgotten, the row is not."""
        ttl = self.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        statement = _history_upsert(self.keyspace, keyspace, tables, token_range, record, started_at, finished_at,
                                    replicas, ttl, datetime.now(UTC))  # fmt: skip
        self._write(*statement)

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None:
        """Upsert the history of several segments (one command's) with concurrent writes; any failure raises."""
        ttl = self.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        now = datetime.now(UTC)
        statements = [
            _history_upsert(self.keyspace, u.segment.keyspace, u.segment.tables, u.segment.range, u.record,
                            u.started, u.finished, u.segment.replicas, ttl, now)
            for u in updates
        ]  # fmt: skip
        if len(statements) == 1:
            self._write(*statements[0])
            return
        futures = [self.session.execute_async(_quorum(cql), params) for cql, params in statements]
        for future in futures:
            future.result()

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]:
        """Every recorded segment (of one keyspace, or of all): a scan, for status pages and tools, not for the
        nightly path (which reads `history_of` the partitions it needs).

        On a cluster upgraded from the first layout the legacy table is read too, until its rows are rewritten:
        a row of repair_segments wins over the legacy row of the same (keyspace, tables, range)."""
        if repair_type != "full":
            return self._type_history(repair_type, keyspace)
        rows: list[RepairHistoryRow] = []
        if "repair_segments" in self._tables():
            if keyspace is None:
                rows = [_history_row(r) for r in self._read(f"SELECT * FROM {self.keyspace}.repair_segments", ())]
            else:
                keys = self._read(f"SELECT DISTINCT keyspace_name, table_names, bucket FROM {self.keyspace}."
                                  "repair_segments", ())  # fmt: skip
                partitions = [(k.table_names, k.bucket) for k in keys if k.keyspace_name == keyspace]  # type: ignore[attr-defined]
                rows = self._read_partitions(keyspace, partitions)
        return _merged(rows, self._legacy_history(keyspace))

    def history_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], repair_type: str = "full"
    ) -> list[RepairHistoryRow]:
        """The history of the segments of (keyspace, tables) whose ranges start in `buckets`: only those
        partitions, read concurrently (and, on an upgraded cluster, the same token slices of the legacy table).
        A type other than full reads its own history (repair_type_segments)."""
        names = ",".join(tables)
        wanted = sorted(set(buckets))
        if repair_type != "full":
            if "repair_type_segments" not in self._tables():
                return []
            cql = (f"SELECT * FROM {self.keyspace}.repair_type_segments WHERE repair_type = ? AND keyspace_name = ? "
                   "AND table_names = ? AND bucket = ?")  # fmt: skip
            return self._concurrent_read(cql, [(repair_type, keyspace, names, b) for b in wanted])
        rows = self._read_partitions(keyspace, [(names, b) for b in wanted]) if "repair_segments" in self._tables() \
            else []  # fmt: skip
        legacy: list[RepairHistoryRow] = []
        if LEGACY_HISTORY in self._tables() and wanted:
            cql = (f"SELECT * FROM {self.keyspace}.{LEGACY_HISTORY} WHERE keyspace_name = ? AND table_names = ? "
                   "AND range_start >= ? AND range_start <= ?")  # fmt: skip
            legacy = self._concurrent_read(cql, [(keyspace, names, *bucket_bounds(b)) for b in wanted])
        return _merged(rows, legacy)

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
        if LEGACY_HISTORY in self._tables():  # an upgraded cluster, until its legacy rows are rewritten
            rows = self.history_of(keyspace, tables, buckets, repair_type)
            return {ids[key]: r.record for r in rows if (key := (r.range.start, r.range.end)) in ids}
        table = "repair_segments" if repair_type == "full" else "repair_type_segments"
        if table not in self._tables():
            return {}
        names = ",".join(tables)
        where = "keyspace_name = ? AND table_names = ? AND bucket = ?"
        params: list[tuple[object, ...]] = [(keyspace, names, b) for b in sorted(set(buckets))]
        if repair_type != "full":
            where = f"repair_type = ? AND {where}"
            params = [(repair_type, *p) for p in params]
        statement = self._statement(f"SELECT {', '.join(RECORD_COLUMNS)} FROM {self.keyspace}.{table} WHERE {where}")
        from cassandra.concurrent import execute_concurrent_with_args

        records: dict[str, SegmentRecord] = {}
        if not params:
            return records
        results = execute_concurrent_with_args(
            self.session, statement, params, concurrency=_READ_CONCURRENCY, raise_on_first_error=True
        )
        for _, result in results:
            add_records(records, result, ids, repair_type)
        return records

    def _read_partitions(self, keyspace: str, partitions: Sequence[tuple[str, int]]) -> list[RepairHistoryRow]:
        cql = (
            f"SELECT * FROM {self.keyspace}.repair_segments WHERE keyspace_name = ? AND table_names = ? AND bucket = ?"
        )
        return self._concurrent_read(cql, [(keyspace, names, bucket) for names, bucket in partitions])

    def _concurrent_read(self, cql: str, params: Sequence[tuple[object, ...]]) -> list[RepairHistoryRow]:
        from cassandra.concurrent import execute_concurrent_with_args

        if not params:
            return []
        statement = self._statement(cql)
        rows: list[RepairHistoryRow] = []
        results = execute_concurrent_with_args(
            self.session, statement, params, concurrency=_READ_CONCURRENCY, raise_on_first_error=True
        )
        for _, result in results:
            rows.extend(_history_row(r) for r in result)
        return rows

    def _type_history(self, repair_type: str, keyspace: str | None) -> list[RepairHistoryRow]:
        """Every recorded segment of one non-full type (a scan: status pages and tools)."""
        if "repair_type_segments" not in self._tables():
            return []
        rows = [_history_row(r) for r in self._read(f"SELECT * FROM {self.keyspace}.repair_type_segments", ())]
        return [r for r in rows if r.record.repair_type == repair_type and (keyspace is None or r.keyspace == keyspace)]

    def _legacy_history(self, keyspace: str | None) -> list[RepairHistoryRow]:
        # The first layout's table is read until every row of it has been rewritten in repair_segments (one
        # cycle of the nightly repair after the upgrade); then an operator drops it (docs/operators-guide.md §6.5).
        if LEGACY_HISTORY not in self._tables():
            return []
        if keyspace is None:
            rows = self._read(f"SELECT * FROM {self.keyspace}.{LEGACY_HISTORY}", ())
        else:
            rows = self._read(f"SELECT * FROM {self.keyspace}.{LEGACY_HISTORY} WHERE keyspace_name = %s", (keyspace,))
        return [_history_row(row) for row in rows]

    def forget_repair_history(self, keyspace: str) -> None:
        """Delete every history row of `keyspace` (tests and tools; the nightly path lets rows expire)."""
        if "repair_segments" in self._tables():
            keys = self._read(f"SELECT DISTINCT keyspace_name, table_names, bucket FROM {self.keyspace}."
                              "repair_segments", ())  # fmt: skip
            for key in keys:
                if key.keyspace_name == keyspace:  # type: ignore[attr-defined]
                    self._write(f"DELETE FROM {self.keyspace}.repair_segments WHERE keyspace_name = %s AND "
                                "table_names = %s AND bucket = %s", (keyspace, key.table_names, key.bucket))  # type: ignore[attr-defined]  # fmt: skip
        if "repair_type_segments" in self._tables():
            keys = self._read(f"SELECT DISTINCT repair_type, keyspace_name, table_names, bucket FROM {self.keyspace}."
                              "repair_type_segments", ())  # fmt: skip
            for key in keys:
                if key.keyspace_name == keyspace:  # type: ignore[attr-defined]
                    self._write(f"DELETE FROM {self.keyspace}.repair_type_segments WHERE repair_type = %s AND "
                                "keyspace_name = %s AND table_names = %s AND bucket = %s",
                                (key.repair_type, keyspace, key.table_names, key.bucket))  # type: ignore[attr-defined]  # fmt: skip
        if LEGACY_HISTORY in self._tables():
            self._write(f"DELETE FROM {self.keyspace}.{LEGACY_HISTORY} WHERE keyspace_name = %s", (keyspace,))

    # -- run plans --------------------------------------------------------------------------------------
    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int:
        """Store a run's plan: chunk i's commands (opaque strings, in order) in partition (run_id, i), at most
        PLAN_CHUNK_ROWS each, with concurrent inserts. Returns the chunk count (what the XCom reference holds).

        A chunk is emptied before it is written, so a retried plan task never leaves rows of an earlier,
        longer plan behind."""
        from cassandra.concurrent import execute_concurrent_with_args

        ttl = self.history_ttl_seconds if ttl_seconds is None else int(ttl_seconds)
        insert = self._statement(f"INSERT INTO {self.keyspace}.repair_plan (run_id, chunk, position, command) "
                                 f"VALUES (?, ?, ?, ?) USING TTL {ttl}")  # fmt: skip
        clear = self._statement(f"DELETE FROM {self.keyspace}.repair_plan WHERE run_id = ? AND chunk = ?")
        count = 0
        for index, chunk in enumerate(chunks):
            commands = list(chunk)
            _check_chunk(run_id, index, commands)
            self.session.execute(clear, (run_id, index))
            rows = [(run_id, index, page, text) for page, text in enumerate(plan_pages(commands))]
            if rows:
                execute_concurrent_with_args(self.session, insert, rows, concurrency=_WRITE_CONCURRENCY,
                                             raise_on_first_error=True)  # fmt: skip
            count += 1
        return count

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]:
        """The commands of chunk `chunk` of run `run_id`'s plan, in position order ([] when none is stored)."""
        rows = self.session.execute(
            self._statement(f"SELECT command FROM {self.keyspace}.repair_plan WHERE run_id = ? AND chunk = ?"),
            (run_id, int(chunk)),
        )
        return [command for row in rows for command in str(row.command).split("\n")]

    def drop_run_plan(self, run_id: str, chunks: int) -> None:
        """Delete chunks 0..`chunks`-1 of run `run_id`'s plan (the run is over: its plan is not read again)."""
        delete = self._statement(f"DELETE FROM {self.keyspace}.repair_plan WHERE run_id = ? AND chunk = ?")
        for index in range(int(chunks)):
            self.session.execute(delete, (run_id, index))

    # -- runs and their progress ------------------------------------------------------------------------
    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None:
        """The live progress of a run: one row per top-level key (JSON), written in one single-partition batch
        (atomic), expiring with the history. Keys missing from `progress` keep their last value."""
        from cassandra import ConsistencyLevel
        from cassandra.query import BatchStatement, BatchType

        if not progress:
            return
        now = datetime.now(UTC)
        insert = self._statement(f"INSERT INTO {self.keyspace}.repair_progress (run_id, name, value, updated_at) "
                                 f"VALUES (?, ?, ?, ?) USING TTL {self.history_ttl_seconds}")  # fmt: skip
        batch = BatchStatement(batch_type=BatchType.UNLOGGED, consistency_level=ConsistencyLevel.QUORUM)
        for name, value in progress.items():
            batch.add(insert, (run_id, str(name), json.dumps(value, default=str), now))
        self.session.execute(batch)

    def run_progress(self, run_id: str) -> dict[str, Any] | None:
        """The last progress recorded for `run_id`; None when none was (or the table does not exist yet)."""
        if "repair_progress" not in self._tables():
            return None
        rows = self._read(f"SELECT name, value FROM {self.keyspace}.repair_progress WHERE run_id = %s", (run_id,))
        if not rows:
            return None
        return {r.name: json.loads(r.value) for r in rows}  # type: ignore[attr-defined]

    def progress_runs(self) -> dict[str, datetime | None]:
        """Run id -> when its progress was last stored, for every run with stored progress (a few rows per run,
        expiring with the history): how a reader without Airflow finds the run under way."""
        if "repair_progress" not in self._tables():
            return {}
        found: dict[str, datetime | None] = {}
        for row in self._read(f"SELECT run_id, updated_at FROM {self.keyspace}.repair_progress", ()):
            run_id, when = row.run_id, _utc(row.updated_at)  # type: ignore[attr-defined]
            known = found.get(run_id)
            found[run_id] = when if known is None or (when is not None and when > known) else known
        return found

    def record_repair_run(self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]) -> None:
        self._write(
            f"INSERT INTO {self.keyspace}.repair_runs (run_id, state, summary, config, updated_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (run_id, state, json.dumps(summary, default=str), json.dumps(config, default=str), datetime.now(UTC)),
        )

    def repair_runs(self) -> list[RepairRunRow]:
        """Recorded runs, latest first."""
        rows = self._read(f"SELECT * FROM {self.keyspace}.repair_runs", ())
        runs = [
            RepairRunRow(r.run_id, r.state, json.loads(r.summary or "{}"), json.loads(r.config or "{}"),  # type: ignore[attr-defined]
                         _utc(r.updated_at))  # type: ignore[attr-defined]
            for r in rows
        ]  # fmt: skip
        return sorted(runs, key=lambda run: run.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def latest_repair_run(self) -> RepairRunRow | None:
        """The latest recorded run (the table holds one small row per run)."""
        runs = self.repair_runs()
        return runs[0] if runs else None

    # -- preview findings -------------------------------------------------------------------------------
    def record_preview(self, finding: PreviewFinding, ttl_seconds: int | None = None) -> None:
        """Keep what a preview found (for `history_ttl`, like the history)."""
        ttl = self.history_ttl_seconds if ttl_seconds is None else ttl_seconds
        columns = preview_columns(finding)
        names, marks = ", ".join(columns), ", ".join(["%s"] * len(columns))
        self._write(f"INSERT INTO {self.keyspace}.repair_previews ({names}) VALUES ({marks}) USING TTL {int(ttl)}",
                    tuple(columns.values()))  # fmt: skip

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]:
        """Preview findings (of one keyspace, or all), latest first; none before the table exists."""
        if "repair_previews" not in self._tables():
            return []
        if keyspace is None:
            rows = self._read(f"SELECT * FROM {self.keyspace}.repair_previews", ())
        else:
            rows = self._read(f"SELECT * FROM {self.keyspace}.repair_previews WHERE keyspace_name = %s", (keyspace,))
        names = ("keyspace_name", "found_at", "table_name", "ranges", "out_of_sync_ranges", "run_id", "coordinator")
        found = [preview_finding({name: getattr(row, name, None) for name in names}) for row in rows]
        return sorted(found, key=lambda f: f.found_at, reverse=True)

    def _statement(self, cql: str) -> Any:
        """`cql` prepared once per store (QUORUM)."""
        from cassandra import ConsistencyLevel

        prepared = self._prepared.get(cql)
        if prepared is None:
            prepared = self.session.prepare(cql)
            prepared.consistency_level = ConsistencyLevel.QUORUM
            self._prepared[cql] = prepared
        return prepared

    # -- the repair pause switch --------------------------------------------------------------------------
    def switch_events(self, name: str = REPAIR_SWITCH, limit: int = 20) -> list[SwitchEvent]:
        """The latest presses of a switch, newest first; none (or no table yet) means never pressed: running."""
        if not self._has_table("repair_switch"):
            return []
        rows = self._read(f"SELECT * FROM {self.keyspace}.repair_switch WHERE name = %s LIMIT {int(limit)}", (name,))
        return [
            SwitchEvent(bool(r.paused), _utc(r.changed_at), r.changed_by or "", r.reason or "")  # type: ignore[attr-defined]
            for r in rows
        ]

    def repair_paused(self, name: str = REPAIR_SWITCH) -> bool:
        """Whether the switch's latest press paused the repair."""
        events = self.switch_events(name, limit=1)
        return bool(events and events[0].paused)

    def set_switch(self, paused: bool, changed_by: str, reason: str = "", name: str = REPAIR_SWITCH) -> SwitchEvent:
        """Record a press (creating the table on a cluster whose ringward_ops predates it)."""
        if not self._has_table("repair_switch"):
            self.session.execute(_SCHEMA[_TABLE_ORDER.index("repair_switch")].format(ks=self.keyspace))
            self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        event = SwitchEvent(paused, datetime.now(UTC), changed_by, reason[:500])
        self._write(
            f"INSERT INTO {self.keyspace}.repair_switch (name, changed_at, paused, changed_by, reason) "
            "VALUES (%s, %s, %s, %s, %s)",
            (name, event.changed_at, paused, changed_by, event.reason),
        )
        return event

    def _has_table(self, table: str) -> bool:
        """Whether `table` exists; a table seen once is not looked up again (the switch is read often)."""
        if self._known_tables is not None and table in self._known_tables:
            return True
        rows = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (self.keyspace, table),
        )
        found = bool(list(rows))
        if found and self._known_tables is not None:
            self._known_tables.add(table)
        return found


def lease_held(keyspace: str, resource: str, owner: str, purpose: str | None, since: datetime | None) -> MigrationError:
    """The refusal when `resource` is leased to another owner (shared with the in-memory store)."""
    return MigrationError(
        f"{resource} is held by {owner} ({purpose}, taken or last renewed at {since}).",
        "Wait for that run to finish, or, if it is dead, release it with "
        f"`DELETE FROM {keyspace}.leases WHERE resource = '{resource}' IF owner = '{owner}'`.",
    )


def _quorum(cql: str) -> Any:
    from cassandra import ConsistencyLevel
    from cassandra.query import SimpleStatement

    return SimpleStatement(cql, consistency_level=ConsistencyLevel.QUORUM)


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


def history_table(record: SegmentRecord) -> str:
    """Where a record's history is kept: repair_segments for full, repair_type_segments for the other types."""
    return "repair_segments" if record.repair_type == "full" else "repair_type_segments"


def history_columns(
    keyspace: str,
    tables: tuple[str, ...],
    token_range: TokenRange,
    record: SegmentRecord,
    started_at: datetime | None,
    finished_at: datetime | None,
    replicas: tuple[str, ...],
    now: datetime,
) -> dict[str, object]:
    """The repair_segments columns one history write sets (columns left out keep their value): shared with the
    in-memory store, so both write the same cells."""
    columns: dict[str, object] = {
        "keyspace_name": keyspace, "table_names": ",".join(tables), "bucket": history_bucket(token_range.start),
        "range_start": token_range.start, "range_end": token_range.end, "last_success": record.last_success,
        "last_full_success": record.last_full_success, "attempts": record.attempts,
        "last_error": (record.last_error or "")[-2000:] or None, "seconds": record.duration,
        "run_id": record.run_id, "state": record.state.value, "updated_at": now,
    }  # fmt: skip
    if record.repair_type != "full":  # its own history (repair_type_segments): a preview never moves full's
        columns["repair_type"] = record.repair_type
    if record.state is SegmentState.RUNNING:
        columns["last_attempt"] = started_at or now
    if started_at is not None:
        columns.update(started_at=started_at, finished_at=finished_at, coordinator=replicas[0] if replicas else None)
    if replicas:
        columns["replicas"] = ",".join(replicas)
    return columns


def plan_pages(commands: Sequence[str]) -> list[str]:
    """A chunk's commands as repair_plan rows: PLAN_PAGE_COMMANDS a row, one a line (`run_plan_chunk` splits)."""
    return ["\n".join(commands[i : i + PLAN_PAGE_COMMANDS]) for i in range(0, len(commands), PLAN_PAGE_COMMANDS)]


def _check_chunk(run_id: str, index: int, commands: Sequence[str]) -> None:
    if len(commands) > PLAN_CHUNK_ROWS:
        raise RepairError(
            f"Chunk {index} of run {run_id}'s plan has {len(commands)} commands; a chunk holds at most "
            f"{PLAN_CHUNK_ROWS}.",
            "Cut the plan into chunks of at most PLAN_CHUNK_ROWS commands before saving it.",
        )
    for position, command in enumerate(commands):
        if not isinstance(command, str):
            raise RepairError(
                f"Command {position} of chunk {index} of run {run_id}'s plan is a {type(command).__name__}, "
                "not a string.",
                "Save each command as its JSON string (json.dumps) and decode it after run_plan_chunk.",
            )
        if "\n" in command:
            raise RepairError(
                f"Command {position} of chunk {index} of run {run_id}'s plan has a line break.",
                "Save each command as one line of JSON (json.dumps escapes line breaks).",
            )


def _merged(rows: Iterable[RepairHistoryRow], legacy: Iterable[RepairHistoryRow]) -> list[RepairHistoryRow]:
    """`rows` plus the legacy rows of (keyspace, tables, range)s `rows` does not hold: the new table wins."""
    found = list(rows)
    seen = {(r.keyspace, r.tables, r.range) for r in found}
    return found + [r for r in legacy if (r.keyspace, r.tables, r.range) not in seen]


@functools.lru_cache(maxsize=1024)
def _tables_of(names: str | None) -> tuple[str, ...]:
    """The tables of a `table_names` cell, in normal form: a partition's rows all share one (cached)."""
    return tuple(sorted({t for t in (names or "").split(",") if t}))


_STATES = {state.value: state for state in SegmentState}


# The columns `records_of` reads, in the order `record_of_cells` takes them.
RECORD_COLUMNS = ("range_start", "range_end", "state", "last_success", "last_full_success", "attempts", "last_error",
                  "seconds", "run_id")  # fmt: skip


def add_records(
    records: dict[str, SegmentRecord],
    rows: Iterable[Sequence[Any]],
    ids: Mapping[tuple[int, int], str],
    repair_type: str,
) -> None:
    """Add to `records` the rows of `RECORD_COLUMNS` whose range `ids` names (shared with the in-memory store)."""
    for row in rows:
        segment_id = ids.get((row[0], row[1]))
        if segment_id is not None:
            records[segment_id] = record_of_cells(segment_id, row, repair_type)


def record_of_cells(segment_id: str, cells: Sequence[Any], repair_type: str = "full") -> SegmentRecord:
    """A SegmentRecord from a row of `RECORD_COLUMNS`."""
    _, _, state, last_success, last_full_success, attempts, last_error, seconds, run_id = cells
    return SegmentRecord(segment_id, _STATES[state] if state else SegmentState.NOT_STARTED, _utc(last_success),
                         _utc(last_full_success), attempts or 0, last_error, seconds, run_id, repair_type)  # fmt: skip


def _history_row(row: Any) -> RepairHistoryRow:
    # Millions of rows a night at fleet size: one getattr per cell, the tables and the state looked up.
    keyspace = row.keyspace_name
    tables = _tables_of(getattr(row, "table_names", None))
    token_range = TokenRange(row.range_start, row.range_end)
    state = getattr(row, "state", None)
    replicas = getattr(row, "replicas", None)
    record = SegmentRecord(
        segment_id=segment_id_of(keyspace, tables, token_range),  # the segment's own id, from its key
        state=_STATES[state] if state else SegmentState.NOT_STARTED,
        last_success=_utc(getattr(row, "last_success", None)),
        last_full_success=_utc(getattr(row, "last_full_success", None)),
        attempts=getattr(row, "attempts", None) or 0,
        last_error=getattr(row, "last_error", None),
        duration=getattr(row, "seconds", None),
        run_id=getattr(row, "run_id", None),
        repair_type=getattr(row, "repair_type", None) or "full",
    )
    return RepairHistoryRow(
        keyspace=keyspace, tables=tables, range=token_range, record=record,
        started_at=_utc(getattr(row, "started_at", None)), finished_at=_utc(getattr(row, "finished_at", None)),
        coordinator=getattr(row, "coordinator", None),
        replicas=tuple(r for r in replicas.split(",") if r) if replicas else (),
        updated_at=_utc(getattr(row, "updated_at", None)),
    )  # fmt: skip


def new_owner_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
