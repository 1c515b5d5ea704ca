"""ringward's own state in Cassandra (keyspace `ringward_ops`): leases, the migration journal, repair history.

Keeping state in the cluster it describes means a retried, cleared or re-run task (on any worker) finds
it again, and leases use lightweight transactions, as Reaper's per-replica locks do.

One store per record kind lives in `ringward_cassandra.ops` (each implementing its storage Protocol of
`ringward.migration_storage` or `ringward.repair`); `OpsStore` composes them over one session and keeps every
method name callers use. The record types and the layout helpers are importable from here as before.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from ringward.migration_progress import StageProgress
from ringward.migration_storage import JournalEntry, JournalSpan, Lease, MigrationRow
from ringward.permissions import OPS_KEYSPACE
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

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.controller_pauses import CassandraControllerPauses
from ringward_cassandra.ops.history import CassandraRepairHistory
from ringward_cassandra.ops.layout import (
    DEFAULT_HISTORY_TTL,
    HISTORY_BUCKETS,
    LEASE_TTL_SECONDS,
    PLAN_CHUNK_ROWS,
    PLAN_PAGE_COMMANDS,
    RECORD_COLUMNS,
    REPAIR_SWITCH,
    RecordKey,
    add_records,
    bucket_bounds,
    history_bucket,
    history_columns,
    history_table,
    lease_held,
    plan_pages,
    preview_columns,
    preview_finding,
    record_of_cells,
)
from ringward_cassandra.ops.leases import CassandraLeases
from ringward_cassandra.ops.migrations import CassandraMigrations
from ringward_cassandra.ops.plans import CassandraRunPlans
from ringward_cassandra.ops.previews import CassandraPreviews
from ringward_cassandra.ops.progress import CassandraRunProgress
from ringward_cassandra.ops.runs import CassandraRepairRuns
from ringward_cassandra.ops.schema import LEGACY_HISTORY, CassandraOpsSchema
from ringward_cassandra.ops.switch import CassandraSwitch

if TYPE_CHECKING:
    from cassandra.cluster import Session

__all__ = [
    "DEFAULT_HISTORY_TTL",
    "HISTORY_BUCKETS",
    "LEASE_TTL_SECONDS",
    "LEGACY_HISTORY",
    "OPS_KEYSPACE",
    "PLAN_CHUNK_ROWS",
    "PLAN_PAGE_COMMANDS",
    "RECORD_COLUMNS",
    "REPAIR_SWITCH",
    "JournalEntry",
    "Lease",
    "MigrationRow",
    "OpsStore",
    "PreviewFinding",
    "RepairHistoryRow",
    "RepairRunRow",
    "SwitchEvent",
    "add_records",
    "bucket_bounds",
    "history_bucket",
    "history_columns",
    "history_table",
    "lease_held",
    "new_owner_id",
    "plan_pages",
    "preview_columns",
    "preview_finding",
    "record_of_cells",
]


class OpsStore:
    """Reads and writes ringward_ops through a driver session (writes at QUORUM, leases with Paxos).

    `keyspace` is ringward_ops unless a test gives a scratch keyspace; `history_ttl_seconds` is the TTL of the
    repair history rows, the run plans and the run progress (each write renews it).

    One store per record kind (`lease_store`, `migration_store`, `controller_pause_store`, `history_store`,
    `plan_store`, `progress_store`, `run_store`, `preview_store`, `switch_store`, `schema_store`), all sharing the
    session, the known tables and the prepared statements (`ops`); the methods below hand each call to its
    kind's store."""

    def __init__(
        self,
        session: Session,
        lease_ttl_seconds: int = LEASE_TTL_SECONDS,
        *,
        history_ttl_seconds: int = DEFAULT_HISTORY_TTL,
        keyspace: str = OPS_KEYSPACE,
    ) -> None:
        self.ops = OpsKeyspace(session, keyspace, history_ttl_seconds)
        self.schema_store = CassandraOpsSchema(self.ops)
        self.lease_store = CassandraLeases(self.ops, lease_ttl_seconds)
        self.migration_store = CassandraMigrations(self.ops)
        self.controller_pause_store = CassandraControllerPauses(self.ops)
        self.history_store = CassandraRepairHistory(self.ops)
        self.plan_store = CassandraRunPlans(self.ops)
        self.progress_store = CassandraRunProgress(self.ops)
        self.run_store = CassandraRepairRuns(self.ops)
        self.preview_store = CassandraPreviews(self.ops)
        self.switch_store = CassandraSwitch(self.ops)

    @property
    def session(self) -> Session:
        return self.ops.session

    @property
    def keyspace(self) -> str:
        return self.ops.keyspace

    @property
    def history_ttl_seconds(self) -> int:
        return self.ops.history_ttl_seconds

    @history_ttl_seconds.setter
    def history_ttl_seconds(self, seconds: int) -> None:
        self.ops.history_ttl_seconds = int(seconds)

    @property
    def lease_ttl_seconds(self) -> int:
        return self.lease_store.lease_ttl_seconds

    @lease_ttl_seconds.setter
    def lease_ttl_seconds(self, seconds: int) -> None:
        self.lease_store.lease_ttl_seconds = seconds

    # -- schema -------------------------------------------------------------------------------------------
    def ensure_schema(self, datacenters: Iterable[tuple[str, int]]) -> None:
        created = self.schema_store.ensure_schema(datacenters)
        if "migration_runs" in created:  # an upgraded store: the migrations recorded before are indexed once
            self.migration_store.index_runs()

    def exists(self) -> bool:
        return self.schema_store.exists()

    # -- leases -------------------------------------------------------------------------------------------
    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        self.lease_store.acquire_lease(resource, owner, purpose)

    def release_lease(self, resource: str, owner: str) -> None:
        self.lease_store.release_lease(resource, owner)

    def lease(self, resource: str) -> Lease | None:
        return self.lease_store.lease(resource)

    def leased_keyspaces(self) -> dict[str, Lease]:
        return self.lease_store.leased_keyspaces()

    # -- migrations and their journal ---------------------------------------------------------------------
    def record_migration(
        self, migration_id: str, keyspace: str, old: str, new: str, state: str, plan: dict[str, object]
    ) -> None:
        self.migration_store.record_migration(migration_id, keyspace, old, new, state, plan)

    def migration(self, migration_id: str) -> dict[str, object] | None:
        return self.migration_store.migration(migration_id)

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]:
        return self.migration_store.migrations_of(keyspace)

    def migrations(self) -> list[MigrationRow]:
        return self.migration_store.migrations()

    def run_migrations(self, dag_id: str, run_id: str) -> list[MigrationRow]:
        return self.migration_store.run_migrations(dag_id, run_id)

    def record_migration_pages(self, migration_id: str, version: str, chunks: Sequence[bytes]) -> None:
        self.migration_store.record_migration_pages(migration_id, version, chunks)

    def migration_pages(self, migration_id: str, version: str) -> bytes | None:
        return self.migration_store.migration_pages(migration_id, version)

    def migration_state(self, migration_id: str) -> str | None:
        return self.migration_store.migration_state(migration_id)

    def set_migration_state(self, migration_id: str, state: str) -> None:
        self.migration_store.set_migration_state(migration_id, state)

    def journal_of(self, migration_id: str) -> list[JournalEntry]:
        return self.migration_store.journal_of(migration_id)

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]:
        return self.migration_store.journal(migration_id, step)

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None:
        self.migration_store.record_journal(migration_id, entry)

    def journal_spans(self, migration_id: str, step: str, spans: Sequence[JournalSpan]) -> list[JournalEntry]:
        return self.migration_store.journal_spans(migration_id, step, spans)

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None:
        self.migration_store.record_stage_progress(migration_id, progress)

    def stage_progress(self, migration_id: str) -> list[StageProgress]:
        return self.migration_store.stage_progress(migration_id)

    # -- other repair controllers, paused by a migration --------------------------------------------------
    def record_controller_pause(self, migration_id: str, controller: str, saved: object) -> None:
        self.controller_pause_store.record_controller_pause(migration_id, controller, saved)

    def controller_pause(self, migration_id: str, controller: str) -> tuple[Any, bool] | None:
        return self.controller_pause_store.controller_pause(migration_id, controller)

    def mark_controller_restored(self, migration_id: str, controller: str) -> None:
        self.controller_pause_store.mark_controller_restored(migration_id, controller)

    # -- repair history -----------------------------------------------------------------------------------
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
        self.history_store.record_repair(keyspace, tables, token_range, record, started_at=started_at,
                                   finished_at=finished_at, replicas=replicas, ttl_seconds=ttl_seconds)  # fmt: skip

    def segment_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, SegmentRecord]:
        return self.history_store.segment_records(segments, repair_type)

    def due_records(self, segments: Sequence[Segment], repair_type: str) -> dict[str, DueRecord]:
        return self.history_store.due_records(segments, repair_type)

    def due_records_in_order(self, segments: Sequence[Segment], repair_type: str) -> list[DueRecord | None]:
        return self.history_store.due_records_in_order(segments, repair_type)

    def due_records_of(
        self,
        keyspace: str,
        tables: Sequence[str],
        buckets: Iterable[int],
        ids: Mapping[tuple[int, int], RecordKey],
        repair_type: str = "full",
    ) -> dict[RecordKey, DueRecord]:
        return self.history_store.due_records_of(keyspace, tables, buckets, ids, repair_type)

    def record_repairs(self, updates: Iterable[RecordUpdate], ttl_seconds: int | None = None) -> None:
        self.history_store.record_repairs(updates, ttl_seconds)

    def repair_history(self, keyspace: str | None = None, repair_type: str = "full") -> list[RepairHistoryRow]:
        return self.history_store.repair_history(keyspace, repair_type)

    def history_of(
        self, keyspace: str, tables: Sequence[str], buckets: Iterable[int], repair_type: str = "full"
    ) -> list[RepairHistoryRow]:
        return self.history_store.history_of(keyspace, tables, buckets, repair_type)

    def records_of(
        self,
        keyspace: str,
        tables: Sequence[str],
        buckets: Iterable[int],
        ids: Mapping[tuple[int, int], str],
        repair_type: str = "full",
    ) -> dict[str, SegmentRecord]:
        return self.history_store.records_of(keyspace, tables, buckets, ids, repair_type)

    def forget_repair_history(self, keyspace: str) -> None:
        self.history_store.forget_repair_history(keyspace)

    # -- run plans ----------------------------------------------------------------------------------------
    def save_run_plan(self, run_id: str, chunks: Iterable[Sequence[str]], ttl_seconds: int | None = None) -> int:
        return self.plan_store.save_run_plan(run_id, chunks, ttl_seconds)

    def run_plan_chunk(self, run_id: str, chunk: int) -> list[str]:
        return self.plan_store.run_plan_chunk(run_id, chunk)

    def drop_run_plan(self, run_id: str, chunks: int) -> None:
        self.plan_store.drop_run_plan(run_id, chunks)

    # -- runs and their progress --------------------------------------------------------------------------
    def record_run_progress(self, run_id: str, progress: Mapping[str, Any]) -> None:
        self.progress_store.record_run_progress(run_id, progress)

    def run_progress(self, run_id: str) -> dict[str, Any] | None:
        return self.progress_store.run_progress(run_id)

    def progress_runs(self) -> dict[str, datetime | None]:
        return self.progress_store.progress_runs()

    def record_repair_run(self, run_id: str, state: str, summary: dict[str, object], config: dict[str, object]) -> None:
        self.run_store.record_repair_run(run_id, state, summary, config)

    def repair_runs(self) -> list[RepairRunRow]:
        return self.run_store.repair_runs()

    def latest_repair_run(self) -> RepairRunRow | None:
        return self.run_store.latest_repair_run()

    # -- preview findings ---------------------------------------------------------------------------------
    def record_preview(self, finding: PreviewFinding, ttl_seconds: int | None = None) -> None:
        self.preview_store.record_preview(finding, ttl_seconds)

    def preview_findings(self, keyspace: str | None = None) -> list[PreviewFinding]:
        return self.preview_store.preview_findings(keyspace)

    # -- the repair pause switch --------------------------------------------------------------------------
    def switch_events(self, name: str = REPAIR_SWITCH, limit: int = 20) -> list[SwitchEvent]:
        return self.switch_store.switch_events(name, limit)

    def repair_paused(self, name: str = REPAIR_SWITCH) -> bool:
        return self.switch_store.repair_paused(name)

    def set_switch(self, paused: bool, changed_by: str, reason: str = "", name: str = REPAIR_SWITCH) -> SwitchEvent:
        return self.switch_store.set_switch(paused, changed_by, reason, name)


def new_owner_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
