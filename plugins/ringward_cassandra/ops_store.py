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

from cassandra import ConsistencyLevel
from cassandra.cluster import Session
from cassandra.query import SimpleStatement
from ringward.errors import MigrationError
from ringward.ring import TokenRange

__all__ = ["OPS_KEYSPACE", "JournalEntry", "Lease", "OpsStore"]

OPS_KEYSPACE = "ringward_ops"

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
]


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


class OpsStore:
    """Reads and writes ringward_ops through a driver session (writes at QUORUM, leases with Paxos)."""

    def __init__(self, session: Session, lease_ttl_seconds: int = 48 * 3600) -> None:
        self.session = session
        self.lease_ttl_seconds = lease_ttl_seconds

    def ensure_schema(self, datacenters: Iterable[tuple[str, int]]) -> None:
        """Create the keyspace (NTS, up to RF 3 per DC) and tables once; safe to call every time."""
        factors = ", ".join(f"'{dc}': {min(3, count)}" for dc, count in sorted(datacenters))
        self.session.execute(
            f"CREATE KEYSPACE IF NOT EXISTS {OPS_KEYSPACE} WITH replication = "
            f"{{'class': 'NetworkTopologyStrategy', {factors}}}"
        )
        for statement in _SCHEMA:
            self.session.execute(statement.format(ks=OPS_KEYSPACE))
        self.session.cluster.control_connection.wait_for_schema_agreement(wait_time=30)

    def _write(self, cql: str, params: tuple[object, ...]) -> object:
        return self.session.execute(SimpleStatement(cql, consistency_level=ConsistencyLevel.QUORUM), params)

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


def new_owner_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"
