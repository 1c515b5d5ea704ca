"""ringward's own state in Cassandra (keyspace `ringward_ops`): leases, the migration journal, repair history.

Keeping state in the cluster it describes means a retried, cleared or re-run task (on any worker) finds
it again, and leases use lightweight transactions, as Reaper's per-replica locks do.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from cassandra import ConsistencyLevel
from cassandra.cluster import Session
from cassandra.query import SimpleStatement
from ringward.errors import MigrationError
from ringward.permissions import OPS_KEYSPACE, ops_keyspace_statement
from ringward.repair import RecordUpdate, Segment, SegmentRecord, SegmentState
from ringward.ring import TokenRange

__all__ = [
    "OPS_KEYSPACE",
    "REPAIR_SWITCH",
    "JournalEntry",
    "Lease",
    "MigrationRow",
    "OpsStore",
    "RepairHistoryRow",
    "RepairRunRow",
    "SwitchEvent",
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
    """CREATE TABLE IF NOT EXISTS {ks}.repair_history (
        keyspace_name text, table_names text, range_start bigint, range_end bigint,
        last_success timestamp, last_full_success timestamp, last_attempt timestamp, attempts int,
        last_error text, seconds double, run_id text, state text,
        PRIMARY KEY ((keyspace_name), table_names, range_start, range_end))""",
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
]

_TABLES = {statement.split("{ks}.", 1)[1].split(" ", 1)[0] for statement in _SCHEMA}

REPAIR_SWITCH = "nightly_subrange_repair"

# Columns added to repair_history after its first release (ALTER TABLE ADD on existing clusters).
_REPAIR_HISTORY_EXTRA = {
    "started_at": "timestamp",  # bounds of the last session: proves no node ran two sessions at once
    "finished_at": "timestamp",
    "coordinator": "text",
    "replicas": "text",
}


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


def _utc(moment: datetime | None) -> datetime | None:
    """The driver returns naive UTC datetimes; ringward compares aware ones."""
    if moment is None or moment.tzinfo is not None:
        return moment
    return moment.replace(tzinfo=UTC)


class OpsStore:
    """Reads and writes ringward_ops through a driver session (writes at QUORUM, leases with Paxos)."""

    def __init__(self, session: Session, lease_ttl_seconds: int = 48 * 3600) -> None:
        self.session = session
        self.lease_ttl_seconds = lease_ttl_seconds

    def ensure_schema(self, datacenters: Iterable[tuple[str, int]]) -> None:
        """Create the keyspace (NTS, up to RF 3 per DC) and tables once; safe to call every time.

        The keyspace is created only when it is missing: on a cluster with authorization an administrator
        creates it (`ringward grants`) and ringward's role, which may not create keyspaces, only its tables.
        """
        if not self._keyspace_exists():
            self.session.execute(ops_keyspace_statement(dict(datacenters)).rstrip(";"))
        for statement in _SCHEMA:
            self.session.execute(statement.format(ks=OPS_KEYSPACE))
        self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        self._add_repair_history_columns()

    def _add_repair_history_columns(self) -> None:
        self.session.cluster.refresh_table_metadata(OPS_KEYSPACE, "repair_history")
        existing = self.session.cluster.metadata.keyspaces[OPS_KEYSPACE].tables["repair_history"].columns
        missing = {name: kind for name, kind in _REPAIR_HISTORY_EXTRA.items() if name not in existing}
        for name, kind in missing.items():
            self.session.execute(f"ALTER TABLE {OPS_KEYSPACE}.repair_history ADD {name} {kind}")
        if missing:
            self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)

    def exists(self) -> bool:
        """Whether ringward_ops and its tables have been created (reading it must not create it: refusals
        change nothing). The keyspace alone is not enough: an administrator creates it before the GRANTs,
        ringward its tables on first use."""
        rows = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s", (OPS_KEYSPACE,)
        )
        return {row.table_name for row in rows} >= _TABLES

    def _keyspace_exists(self) -> bool:
        rows = self.session.execute(
            "SELECT keyspace_name FROM system_schema.keyspaces WHERE keyspace_name = %s", (OPS_KEYSPACE,)
        )
        return bool(list(rows))

    def _write(self, cql: str, params: tuple[object, ...]) -> object:
        return self.session.execute(_quorum(cql), params)

    def _read(self, cql: str, params: tuple[object, ...]) -> list[object]:
        return list(self.session.execute(SimpleStatement(cql, consistency_level=ConsistencyLevel.QUORUM), params))

    # -- leases -------------------------------------------------------------------------------------------
    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        """Take `resource` for `owner`, or raise naming who holds it. Re-acquiring one's own lease is fine."""
        result = self.session.execute(
            SimpleStatement(
                f"INSERT INTO {OPS_KEYSPACE}.leases (resource, owner, purpose, acquired_at) VALUES (%s, %s, %s, %s) "
                f"IF NOT EXISTS USING TTL {self.lease_ttl_seconds}",
                consistency_level=ConsistencyLevel.QUORUM,
                serial_consistency_level=ConsistencyLevel.SERIAL,
            ),
            (resource, owner, purpose, datetime.now(UTC)),
        ).one()
        if result.applied or result.owner == owner:
            return
        raise MigrationError(
            f"{resource} is held by {result.owner} ({result.purpose}, since {result.acquired_at}).",
            "Wait for that run to finish, or, if it is dead, release it with "
            f"`DELETE FROM {OPS_KEYSPACE}.leases WHERE resource = '{resource}' IF owner = '{result.owner}'`.",
        )

    def release_lease(self, resource: str, owner: str) -> None:
        self.session.execute(
            SimpleStatement(
                f"DELETE FROM {OPS_KEYSPACE}.leases WHERE resource = %s IF owner = %s",
                consistency_level=ConsistencyLevel.QUORUM,
                serial_consistency_level=ConsistencyLevel.SERIAL,
            ),
            (resource, owner),
        )

    def lease(self, resource: str) -> Lease | None:
        rows = self._read(f"SELECT * FROM {OPS_KEYSPACE}.leases WHERE resource = %s", (resource,))
        if not rows:
            return None
        row = rows[0]
        return Lease(row.resource, row.owner, row.purpose, row.acquired_at)  # type: ignore[attr-defined]

    def leased_keyspaces(self) -> dict[str, Lease]:
        """Keyspaces under migration: keyspace -> lease (resources are `keyspace:<name>`)."""
        rows = self.session.execute(f"SELECT * FROM {OPS_KEYSPACE}.leases")
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
            f"INSERT INTO {OPS_KEYSPACE}.migrations (migration_id, keyspace_name, old_replication, new_replication, "
            "state, plan, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (migration_id, keyspace, old, new, state, json.dumps(plan), datetime.now(UTC)),
        )

    def migration(self, migration_id: str) -> dict[str, object] | None:
        """The record a migration's precheck stored, for a rerun of the same DAG run to resume with."""
        rows = self._read(f"SELECT plan FROM {OPS_KEYSPACE}.migrations WHERE migration_id = %s", (migration_id,))
        return json.loads(rows[0].plan) if rows else None  # type: ignore[attr-defined]

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]:
        """Every recorded migration of `keyspace`: (id, state, updated_at, record). The table is small (one
        row per migration), so it is read whole rather than indexed by keyspace."""
        rows = self._read(
            f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {OPS_KEYSPACE}.migrations", ()
        )
        return [
            (r.migration_id, r.state or "", _utc(r.updated_at), json.loads(r.plan or "{}"))  # type: ignore[attr-defined]
            for r in rows
            if r.keyspace_name == keyspace  # type: ignore[attr-defined]
        ]

    def migrations(self) -> list[MigrationRow]:
        """Every recorded migration, latest first (the table holds one small row per migration)."""
        rows = self._read(
            f"SELECT migration_id, keyspace_name, state, plan, updated_at FROM {OPS_KEYSPACE}.migrations", ()
        )
        found = [
            MigrationRow(r.migration_id, r.keyspace_name or "", r.state or "", _utc(r.updated_at),  # type: ignore[attr-defined]
                         json.loads(r.plan or "{}"))  # type: ignore[attr-defined]
            for r in rows
        ]  # fmt: skip
        return sorted(found, key=lambda m: m.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    def journal_of(self, migration_id: str) -> list[JournalEntry]:
        """Every journal entry of a migration, all stages, in (stage, range) order."""
        rows = self._read(f"SELECT * FROM {OPS_KEYSPACE}.migration_journal WHERE migration_id = %s", (migration_id,))
        return [
            JournalEntry(row.step, TokenRange(row.range_start, row.range_end), row.status, row.coordinator or "",  # type: ignore[attr-defined]
                         row.attempts or 0, row.seconds or 0.0, row.detail or "")  # type: ignore[attr-defined]
            for row in rows
        ]  # fmt: skip

    def migration_state(self, migration_id: str) -> str | None:
        rows = self._read(f"SELECT state FROM {OPS_KEYSPACE}.migrations WHERE migration_id = %s", (migration_id,))
        return str(rows[0].state) if rows else None  # type: ignore[attr-defined]

    def set_migration_state(self, migration_id: str, state: str) -> None:
        self._write(
            f"UPDATE {OPS_KEYSPACE}.migrations SET state = %s, updated_at = %s WHERE migration_id = %s",
            (state, datetime.now(UTC), migration_id),
        )

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]:
        rows = self._read(
            f"SELECT * FROM {OPS_KEYSPACE}.migration_journal WHERE migration_id = %s AND step = %s",
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
            f"INSERT INTO {OPS_KEYSPACE}.migration_journal (migration_id, step, range_start, range_end, status, "
            "coordinator, attempts, seconds, detail, updated_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (migration_id, entry.step, entry.range.start, entry.range.end, entry.status, entry.coordinator,
             entry.attempts, entry.seconds, entry.detail[-2000:], datetime.now(UTC)),
        )  # fmt: skip

    # -- other repair controllers, paused by a migration --------------------------------------------------
    def record_controller_pause(self, migration_id: str, controller: str, saved: object) -> None:
        """What `controller` looked like before the migration paused it (JSON), not yet restored."""
        self._write(
            f"INSERT INTO {OPS_KEYSPACE}.controller_pauses (migration_id, controller, saved, paused_at, restored_at) "
            "VALUES (%s, %s, %s, %s, null)",
            (migration_id, controller, json.dumps(saved), datetime.now(UTC)),
        )

    def controller_pause(self, migration_id: str, controller: str) -> tuple[Any, bool] | None:
        """(saved settings, restored yet) of a pause, None when the migration never paused `controller`."""
        rows = self._read(
            f"SELECT saved, restored_at FROM {OPS_KEYSPACE}.controller_pauses WHERE migration_id = %s "
            "AND controller = %s",
            (migration_id, controller),
        )
        if not rows:
            return None
        return json.loads(rows[0].saved), rows[0].restored_at is not None  # type: ignore[attr-defined]

    def mark_controller_restored(self, migration_id: str, controller: str) -> None:
        self._write(
            f"UPDATE {OPS_KEYSPACE}.controller_pauses SET restored_at = %s WHERE migration_id = %s AND controller = %s",
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
    ) -> None:
        """Upsert one segment's history; session bounds are written only when given (None keeps them)."""
        self._write(*_history_upsert(keyspace, tables, token_range, record, started_at, finished_at, replicas))

    def record_repairs(self, updates: Iterable[RecordUpdate]) -> None:
        """Upsert the history of several segments (one command's) with concurrent writes; any failure raises."""
        statements = [
            _history_upsert(u.segment.keyspace, u.segment.tables, u.segment.range, u.record, u.started, u.finished,
                            u.segment.replicas)
            for u in updates
        ]  # fmt: skip
        if len(statements) == 1:
            self._write(*statements[0])
            return
        futures = [self.session.execute_async(_quorum(cql), params) for cql, params in statements]
        for future in futures:
            future.result()

    def repair_history(self, keyspace: str | None = None) -> list[RepairHistoryRow]:
        """Every recorded segment (of one keyspace, or of all)."""
        if keyspace is None:
            rows = self._read(f"SELECT * FROM {OPS_KEYSPACE}.repair_history", ())
        else:
            rows = self._read(f"SELECT * FROM {OPS_KEYSPACE}.repair_history WHERE keyspace_name = %s", (keyspace,))
        return [_history_row(row) for row in rows]

    def record_repair_run(self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]) -> None:
        self._write(
            f"INSERT INTO {OPS_KEYSPACE}.repair_runs (run_id, state, summary, config, updated_at) "
            "VALUES (%s, %s, %s, %s, %s)",
            (run_id, state, json.dumps(summary, default=str), json.dumps(config, default=str), datetime.now(UTC)),
        )

    def repair_runs(self) -> list[RepairRunRow]:
        """Recorded runs, latest first."""
        rows = self._read(f"SELECT * FROM {OPS_KEYSPACE}.repair_runs", ())
        runs = [
            RepairRunRow(r.run_id, r.state, json.loads(r.summary or "{}"), json.loads(r.config or "{}"),  # type: ignore[attr-defined]
                         _utc(r.updated_at))  # type: ignore[attr-defined]
            for r in rows
        ]  # fmt: skip
        return sorted(runs, key=lambda run: run.updated_at or datetime.min.replace(tzinfo=UTC), reverse=True)

    # -- the repair pause switch --------------------------------------------------------------------------
    def switch_events(self, name: str = REPAIR_SWITCH, limit: int = 20) -> list[SwitchEvent]:
        """The latest presses of a switch, newest first; none (or no table yet) means never pressed: running."""
        if not self._has_table("repair_switch"):
            return []
        rows = self._read(f"SELECT * FROM {OPS_KEYSPACE}.repair_switch WHERE name = %s LIMIT {int(limit)}", (name,))
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
            self.session.execute(_SCHEMA[-1].format(ks=OPS_KEYSPACE))
            self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)
        event = SwitchEvent(paused, datetime.now(UTC), changed_by, reason[:500])
        self._write(
            f"INSERT INTO {OPS_KEYSPACE}.repair_switch (name, changed_at, paused, changed_by, reason) "
            "VALUES (%s, %s, %s, %s, %s)",
            (name, event.changed_at, paused, changed_by, event.reason),
        )
        return event

    def _has_table(self, table: str) -> bool:
        rows = self.session.execute(
            "SELECT table_name FROM system_schema.tables WHERE keyspace_name = %s AND table_name = %s",
            (OPS_KEYSPACE, table),
        )
        return bool(list(rows))


def _quorum(cql: str) -> SimpleStatement:
    return SimpleStatement(cql, consistency_level=ConsistencyLevel.QUORUM)


def _history_upsert(
    keyspace: str,
    tables: tuple[str, ...],
    token_range: TokenRange,
    record: SegmentRecord,
    started_at: datetime | None,
    finished_at: datetime | None,
    replicas: tuple[str, ...],
) -> tuple[str, tuple[object, ...]]:
    columns: dict[str, object] = {
        "keyspace_name": keyspace, "table_names": ",".join(tables), "range_start": token_range.start,
        "range_end": token_range.end, "last_success": record.last_success,
        "last_full_success": record.last_full_success, "attempts": record.attempts,
        "last_error": (record.last_error or "")[-2000:] or None, "seconds": record.duration,
        "run_id": record.run_id, "state": record.state.value,
    }  # fmt: skip
    if record.state is SegmentState.RUNNING:
        columns["last_attempt"] = started_at or datetime.now(UTC)
    if started_at is not None:
        columns.update(started_at=started_at, finished_at=finished_at, coordinator=replicas[0] if replicas else None)
    if replicas:
        columns["replicas"] = ",".join(replicas)
    names = ", ".join(columns)
    marks = ", ".join(["%s"] * len(columns))
    return f"INSERT INTO {OPS_KEYSPACE}.repair_history ({names}) VALUES ({marks})", tuple(columns.values())


def _history_row(row: Any) -> RepairHistoryRow:
    def get(name: str) -> Any:
        return getattr(row, name, None)

    tables = tuple(t for t in (get("table_names") or "").split(",") if t)
    token_range = TokenRange(get("range_start"), get("range_end"))
    # The id is the segment's own, recomputed from keyspace, tables and range.
    segment_id = Segment(get("keyspace_name"), tables, token_range, ()).segment_id
    record = SegmentRecord(
        segment_id=segment_id,
        state=SegmentState(get("state") or SegmentState.NOT_STARTED.value),
        last_success=_utc(get("last_success")),
        last_full_success=_utc(get("last_full_success")),
        attempts=get("attempts") or 0,
        last_error=get("last_error"),
        duration=get("seconds"),
        run_id=get("run_id"),
    )
    return RepairHistoryRow(
        keyspace=get("keyspace_name"), tables=tables, range=token_range, record=record,
        started_at=_utc(get("started_at")), finished_at=_utc(get("finished_at")),
        coordinator=get("coordinator"),
        replicas=tuple(r for r in (get("replicas") or "").split(",") if r),
    )  # fmt: skip


def new_owner_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
