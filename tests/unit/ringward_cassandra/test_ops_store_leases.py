"""`OpsStore`'s lease statements against a model of Cassandra's TTL semantics: every cell expires on its own
(`USING TTL` from its write), an INSERT also writes a row marker, an UPDATE does not, and a row lives while any
of its cells does. The real cluster runs the same contract check (tests/integration/test_ops_store_on_cluster)."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest
from ringward.errors import MigrationError
from ringward_cassandra.ops_store import LEASE_TTL_SECONDS, OpsStore

_MARKER = "<row marker>"


class _Result(list[Any]):
    def one(self) -> Any:
        return self[0] if self else None


class LeaseTable:
    """`ringward_ops.leases` as the lightweight transactions of OpsStore see it, at `now` seconds."""

    def __init__(self) -> None:
        self.now = 0.0
        self.cells: dict[str, dict[str, tuple[Any, float]]] = {}  # resource -> column -> (value, expires at)

    def row(self, resource: str) -> dict[str, Any] | None:
        live = {c: v for c, (v, expires) in self.cells.get(resource, {}).items() if self.now < expires}
        return {c: v for c, v in live.items() if c != _MARKER} | {"resource": resource} if live else None

    def _write(self, resource: str, values: dict[str, Any], ttl: int) -> None:
        self.cells.setdefault(resource, {}).update({c: (v, self.now + ttl) for c, v in values.items()})

    def execute(self, statement: Any, params: tuple[Any, ...] = ()) -> _Result:
        text = getattr(statement, "query_string", str(statement))
        ttl = int(match.group(1)) if (match := re.search(r"USING TTL (\d+)", text)) else 0
        if text.startswith("UPDATE"):
            owner, purpose, acquired_at, resource, expected = params
            row = self.row(resource)
            if row is None or row.get("owner") != expected:  # a failed condition returns the owner, if any
                return _Result([SimpleNamespace(applied=False, **({"owner": row.get("owner")} if row else {}))])
            self._write(resource, {"owner": owner, "purpose": purpose, "acquired_at": acquired_at}, ttl)
            return _Result([SimpleNamespace(applied=True)])
        if text.startswith("INSERT"):
            resource, owner, purpose, acquired_at = params
            row = self.row(resource)
            if row is not None:
                return _Result([SimpleNamespace(applied=False, **row)])
            self.cells.pop(resource, None)
            self._write(resource, {_MARKER: None, "owner": owner, "purpose": purpose, "acquired_at": acquired_at}, ttl)
            return _Result([SimpleNamespace(applied=True)])
        if text.startswith("SELECT"):
            row = self.row(params[0])
            return _Result([SimpleNamespace(**{"purpose": None, "acquired_at": None, **row})] if row else [])
        if text.startswith("DELETE"):
            resource, owner = params
            if (row := self.row(resource)) is not None and row.get("owner") == owner:
                del self.cells[resource]
            return _Result([])
        raise AssertionError(f"unexpected statement {text}")


def test_the_owner_renews_its_lease_for_a_whole_ttl_from_the_renewal() -> None:
    table = LeaseTable()
    store = OpsStore(table, lease_ttl_seconds=100)  # type: ignore[arg-type]
    store.acquire_lease("keyspace:ks", "m1", "keyspace_migration")
    table.now = 90
    store.acquire_lease("keyspace:ks", "m1", "keyspace_migration")  # renewed: 100 s from now
    table.now = 150  # the INSERT's cells and row marker are gone; the renewal's cells keep the row
    held = store.lease("keyspace:ks")
    assert held is not None and (held.owner, held.purpose) == ("m1", "keyspace_migration")
    with pytest.raises(MigrationError, match=r"held by m1 \(keyspace_migration, taken or last renewed"):
        store.acquire_lease("keyspace:ks", "m2", "keyspace_migration")
    table.now = 191
    assert store.lease("keyspace:ks") is None
    store.acquire_lease("keyspace:ks", "m2", "keyspace_migration")  # lapsed: another migration may take it
    store.release_lease("keyspace:ks", "m1")
    assert store.lease("keyspace:ks").owner == "m2"  # type: ignore[union-attr]


def test_the_lease_outlasts_the_approvals_wait() -> None:
    assert LEASE_TTL_SECONDS > 48 * 3600  # the approval's response timeout (ringward_airflow.dag_factory)
    table = LeaseTable()
    OpsStore(table).acquire_lease("keyspace:ks", "m1", "keyspace_migration")  # type: ignore[arg-type]
    table.now = 48 * 3600 + 600  # the latest approval, and the first stage after it
    assert table.row("keyspace:ks") is not None


class TimingOut:
    """The lease table behind a coordinator whose lightweight transactions time out (`WriteTimeout`, write type
    CAS) the first `times` times; `applied`: the timed-out ones were applied all the same (Paxos finished, the
    coordinator's answer did not arrive in time), else not at all."""

    def __init__(self, times: int, applied: bool) -> None:
        self.table, self.times, self.applied = LeaseTable(), times, applied

    def execute(self, statement: Any, params: tuple[Any, ...] = ()) -> _Result:
        from cassandra import WriteTimeout, WriteType

        text = getattr(statement, "query_string", str(statement))
        if " IF " in text and self.times > 0:
            self.times -= 1
            if self.applied:
                self.table.execute(statement, params)
            raise WriteTimeout("CAS operation timed out: received 1 of 3 required responses", write_type=WriteType.CAS)
        return self.table.execute(statement, params)


def _leases(session: TimingOut, sleeps: list[float]) -> OpsStore:
    from ringward_cassandra.ops.leases import CassandraLeases

    store = OpsStore(session)  # type: ignore[arg-type]
    store.lease_store = CassandraLeases(store.lease_store.ops, sleep=sleeps.append)
    return store


@pytest.mark.parametrize("applied", [False, True], ids=["not-applied", "applied-then-timed-out"])
def test_a_lease_transaction_that_times_out_is_sent_again(applied: bool) -> None:
    # Seen in CI's recovery test: a replica down, another busy, and the repair's renewal of its lease failed.
    sleeps: list[float] = []
    session = TimingOut(times=2, applied=applied)
    store = _leases(session, sleeps)
    store.acquire_lease("keyspace:ks", "m1", "keyspace_migration")
    held = store.lease("keyspace:ks")
    assert held is not None and held.owner == "m1"
    assert sleeps == [1.0, 2.0]
    store.acquire_lease("keyspace:ks", "m1", "keyspace_migration")  # renewed: its own lease, sent again or not
    session.times = 1
    store.release_lease("keyspace:ks", "m1")
    assert store.lease("keyspace:ks") is None


def test_a_lease_transaction_that_keeps_timing_out_fails_after_its_tries() -> None:
    from cassandra import WriteTimeout
    from ringward_cassandra.ops.leases import CAS_TRIES

    sleeps: list[float] = []
    store = _leases(TimingOut(times=CAS_TRIES, applied=False), sleeps)
    with pytest.raises(WriteTimeout):
        store.acquire_lease("keyspace:ks", "m1", "keyspace_migration")
    assert sleeps == [1.0, 2.0]  # CAS_TRIES tries, waits between them only
