"""The migration's records in ringward_ops and one storage Protocol per record kind (Reaper's one storage
interface per record kind): leases, migrations with their journal, and the pauses of other repair controllers.

Pure: the records are plain dataclasses; `ringward_cassandra.ops` implements the Protocols on Cassandra (and
`MemoryOpsStore` the leases in memory). The stages' own narrower views (`migration_stages.Journal`, ...) are
subsets of these.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from ringward.migration_progress import StageProgress
from ringward.ring import TokenRange

__all__ = [
    "ControllerPauseStorage",
    "JournalEntry",
    "JournalSpan",
    "Lease",
    "LeaseReader",
    "LeaseStorage",
    "MigrationRow",
    "MigrationStorage",
    "migration_run_keys",
]


@dataclass(frozen=True)
class Lease:
    resource: str
    owner: str
    purpose: str
    acquired_at: datetime | None


JournalSpan = tuple[tuple[int, int], tuple[int, int], int]  # (first range, last range, limit): `journal_spans`


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
class MigrationRow:
    """One row of ringward_ops.migrations: the precheck's record (`record`) and the state reached."""

    migration_id: str
    keyspace: str
    state: str
    updated_at: datetime | None
    record: dict[str, Any]


def migration_run_keys(migration_id: str, record: dict[str, Any]) -> set[tuple[str, str]]:
    """The (dag_id, run_id) keys a stored migration is found by (ringward_ops.migration_runs): the run its record
    names, and the run that started it (its id is `{keyspace}@{run_id}`: a run whose migration another run took
    over finds it, to say which). None for a record without a DAG (nothing is shown for it)."""
    dag_id, run_id = record.get("dag_id"), record.get("run_id")
    if not isinstance(dag_id, str) or not dag_id:
        return set()
    keys = {(dag_id, run_id)} if isinstance(run_id, str) and run_id else set()
    keyspace = record.get("keyspace")
    if isinstance(keyspace, str) and migration_id.startswith(f"{keyspace}@"):
        keys.add((dag_id, migration_id[len(keyspace) + 1 :]))
    return keys


class LeaseReader(Protocol):
    """The leases as the nightly repair sees them: which keyspaces a migration holds (it leaves those alone and
    never takes or releases a lease)."""

    def leased_keyspaces(self) -> dict[str, Lease]: ...


class LeaseStorage(LeaseReader, Protocol):
    """ringward_ops.leases: a resource (`keyspace:<name>`) held by one owner for `lease_ttl_seconds` from its
    last renewal. `acquire_lease` takes or renews it, or raises MigrationError naming the holder."""

    lease_ttl_seconds: int

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None: ...

    def release_lease(self, resource: str, owner: str) -> None: ...

    def lease(self, resource: str) -> Lease | None: ...


class MigrationStorage(Protocol):
    """ringward_ops.migrations (one row per migration: its record and state) and migration_journal (one entry
    per stage and range)."""

    def record_migration(
        self, migration_id: str, keyspace: str, old: str, new: str, state: str, plan: dict[str, object]
    ) -> None: ...

    def migration(self, migration_id: str) -> dict[str, object] | None: ...

    def migrations_of(self, keyspace: str) -> list[tuple[str, str, datetime | None, dict[str, Any]]]: ...

    def migrations(self) -> list[MigrationRow]: ...

    def run_migrations(self, dag_id: str, run_id: str) -> list[MigrationRow]:
        """The migrations stored under run `run_id` of `dag_id` (`migration_run_keys`), latest first: one
        lookup and those rows, not the whole table. A row's record may since name another run (taken over):
        the caller checks what the record names."""
        ...

    def migration_state(self, migration_id: str) -> str | None: ...

    def set_migration_state(self, migration_id: str, state: str) -> None: ...

    def journal_of(self, migration_id: str) -> list[JournalEntry]: ...

    def journal(self, migration_id: str, step: str) -> dict[TokenRange, JournalEntry]: ...

    def record_journal(self, migration_id: str, entry: JournalEntry) -> None: ...

    def journal_spans(self, migration_id: str, step: str, spans: Sequence[JournalSpan]) -> list[JournalEntry]:
        """The entries of `step` in each of `spans` (first, last, limit): those whose (range start, range end) is
        from `first` to `last` (both included), at most `limit` of them, in that order; the spans' in the order
        given. One bounded read of the journal's slice per span (the Migration page's window)."""
        ...

    def record_stage_progress(self, migration_id: str, progress: StageProgress) -> None:
        """Store a repair stage's progress (`ringward.migration_progress`), written by the worker that writes its
        journal, replacing the stage's previous one."""
        ...

    def stage_progress(self, migration_id: str) -> list[StageProgress]:
        """The stored progress of each of the migration's stages (one small partition), by stage name."""
        ...

    def record_migration_pages(self, migration_id: str, version: str, chunks: Sequence[bytes]) -> None:
        """Store the Migration page's view of a migration's plan (`ringward.migration_page_codec`), its bytes in
        `chunks`, under the `version` of the record it is of (`view_version`); kept for the history TTL."""
        ...

    def migration_pages(self, migration_id: str, version: str) -> bytes | None:
        """The stored view of a migration's plan for its record's `version` (its chunks joined), None when none is."""
        ...


class ControllerPauseStorage(Protocol):
    """ringward_ops.controller_pauses: what a migration's pause found of another repair controller (JSON), so
    the restore sets back exactly that."""

    def record_controller_pause(self, migration_id: str, controller: str, saved: object) -> None: ...

    def controller_pause(self, migration_id: str, controller: str) -> tuple[Any, bool] | None: ...

    def mark_controller_restored(self, migration_id: str, controller: str) -> None: ...
