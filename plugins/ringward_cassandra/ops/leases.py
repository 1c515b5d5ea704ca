"""ringward_ops.leases on Cassandra: lightweight transactions, as Reaper's per-replica locks."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from ringward.migration_storage import Lease

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import LEASE_TTL_SECONDS, lease_held

__all__ = ["CAS_TRIES", "CassandraLeases"]

# A lightweight transaction that times out (WriteTimeout, write type CAS) has an unknown outcome: Paxos may or
# may not have applied it. Every lease statement here can be sent again with the same outcome (renewing one's own
# lease, taking a free one, releasing one's own), so a timeout is retried, CAS_TRIES times in all, a second
# apart and then two: a replica down while another is busy (a migration's repair under load) must not fail the
# stage that renews the lease.
CAS_TRIES = 3


class CassandraLeases:
    """`LeaseStorage` on Cassandra: a lease lives `lease_ttl_seconds` from its owner's last renewal."""

    def __init__(
        self, ops: OpsKeyspace, lease_ttl_seconds: int = LEASE_TTL_SECONDS, sleep: Callable[[float], None] = time.sleep
    ) -> None:
        self.ops = ops
        self.lease_ttl_seconds = lease_ttl_seconds
        self._sleep = sleep

    def _cas(self, query: str, params: tuple[Any, ...]) -> Any:
        """Run the lightweight transaction `query` (QUORUM, SERIAL), again after a timeout (`CAS_TRIES`)."""
        from cassandra import ConsistencyLevel, WriteTimeout
        from cassandra.query import SimpleStatement

        statement = SimpleStatement(
            query, consistency_level=ConsistencyLevel.QUORUM, serial_consistency_level=ConsistencyLevel.SERIAL
        )
        for attempt in range(1, CAS_TRIES):
            try:
                return self.ops.session.execute(statement, params)
            except WriteTimeout:
                self._sleep(float(attempt))
        return self.ops.session.execute(statement, params)  # the last try: its timeout is the caller's

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        """Take `resource` for `owner` for `lease_ttl_seconds` from now, or raise naming who holds it.

        The owner's own lease is renewed: every cell is written again with a fresh TTL (`UPDATE … USING TTL …
        IF owner = …`; the row lives while a cell does, so the first write's expired row marker does not end
        it), and `acquired_at` becomes the time of the renewal. A lease that expired is taken afresh
        (`INSERT … IF NOT EXISTS`), unless someone else took it meanwhile. Both are lightweight transactions."""
        keyspace = self.ops.keyspace
        now = datetime.now(UTC)
        renewed = self._cas(
            f"UPDATE {keyspace}.leases USING TTL {self.lease_ttl_seconds} SET owner = %s, purpose = %s, "
            "acquired_at = %s WHERE resource = %s IF owner = %s",
            (owner, purpose, now, resource, owner),
        ).one()
        if renewed.applied:
            return
        result = renewed
        if getattr(renewed, "owner", None) is None:  # no lease (never taken, released or expired): take it
            result = self._cas(
                f"INSERT INTO {keyspace}.leases (resource, owner, purpose, acquired_at) "
                f"VALUES (%s, %s, %s, %s) IF NOT EXISTS USING TTL {self.lease_ttl_seconds}",
                (resource, owner, purpose, now),
            ).one()
            if result.applied or result.owner == owner:
                return
        # A failed `IF owner = …` returns the owner only; the lease's other cells are read for the message.
        held = self.lease(resource)
        raise lease_held(keyspace, resource, str(result.owner), held.purpose if held else None,
                         held.acquired_at if held else None)  # fmt: skip

    def release_lease(self, resource: str, owner: str) -> None:
        self._cas(f"DELETE FROM {self.ops.keyspace}.leases WHERE resource = %s IF owner = %s", (resource, owner))

    def lease(self, resource: str) -> Lease | None:
        rows = self.ops.read(f"SELECT * FROM {self.ops.keyspace}.leases WHERE resource = %s", (resource,))
        if not rows:
            return None
        row = rows[0]
        return Lease(row.resource, row.owner, row.purpose, row.acquired_at)

    def leased_keyspaces(self) -> dict[str, Lease]:
        """Keyspaces under migration: keyspace -> lease (resources are `keyspace:<name>`)."""
        rows = self.ops.session.execute(f"SELECT * FROM {self.ops.keyspace}.leases")
        return {
            row.resource.split(":", 1)[1]: Lease(row.resource, row.owner, row.purpose, row.acquired_at)
            for row in rows
            if row.resource.startswith("keyspace:")
        }
