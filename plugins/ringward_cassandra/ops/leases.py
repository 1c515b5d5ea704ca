"""ringward_ops.leases on Cassandra: lightweight transactions, as Reaper's per-replica locks."""

from __future__ import annotations

from datetime import UTC, datetime

from ringward.migration_storage import Lease

from ringward_cassandra.ops._cql import OpsKeyspace
from ringward_cassandra.ops.layout import LEASE_TTL_SECONDS, lease_held

__all__ = ["CassandraLeases"]


class CassandraLeases:
    """`LeaseStorage` on Cassandra: a lease lives `lease_ttl_seconds` from its owner's last renewal."""

    def __init__(self, ops: OpsKeyspace, lease_ttl_seconds: int = LEASE_TTL_SECONDS) -> None:
        self.ops = ops
        self.lease_ttl_seconds = lease_ttl_seconds

    def acquire_lease(self, resource: str, owner: str, purpose: str) -> None:
        """Take `resource` for `owner` for `lease_ttl_seconds` from now, or raise naming who holds it.

        The owner's own lease is renewed: every cell is written again with a fresh TTL (`UPDATE … USING TTL …
        IF owner = …`; the row lives while a cell does, so the first write's expired row marker does not end
        it), and `acquired_at` becomes the time of the renewal. A lease that expired is taken afresh
        (`INSERT … IF NOT EXISTS`), unless someone else took it meanwhile. Both are lightweight transactions."""
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        keyspace, session = self.ops.keyspace, self.ops.session
        now = datetime.now(UTC)
        renewed = session.execute(
            SimpleStatement(
                f"UPDATE {keyspace}.leases USING TTL {self.lease_ttl_seconds} SET owner = %s, purpose = %s, "
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
            result = session.execute(
                SimpleStatement(
                    f"INSERT INTO {keyspace}.leases (resource, owner, purpose, acquired_at) "
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
        raise lease_held(keyspace, resource, str(result.owner), held.purpose if held else None,
                         held.acquired_at if held else None)  # fmt: skip

    def release_lease(self, resource: str, owner: str) -> None:
        from cassandra import ConsistencyLevel
        from cassandra.query import SimpleStatement

        self.ops.session.execute(
            SimpleStatement(
                f"DELETE FROM {self.ops.keyspace}.leases WHERE resource = %s IF owner = %s",
                consistency_level=ConsistencyLevel.QUORUM,
                serial_consistency_level=ConsistencyLevel.SERIAL,
            ),
            (resource, owner),
        )

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
