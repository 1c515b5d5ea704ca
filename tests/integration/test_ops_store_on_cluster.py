"""The ops store contract (tests/ops_store_contract.py) on the real cluster: the same assertions the unit
tests run on MemoryOpsStore, here on `OpsStore` in a scratch keyspace (`OpsStore(keyspace=...)`), dropped at
the end, so ringward_ops and the other tests' rows are not touched. Also what only the real store has: the
legacy repair_history table of an upgraded cluster, read until its rows are rewritten, and an ensure_schema
that changes nothing the second time."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from ringward.repair import SegmentRecord, SegmentState
from ringward.ring import TokenRange
from ringward_cassandra.cql import connect
from ringward_cassandra.localcluster import LocalCluster
from ringward_cassandra.ops_store import OpsStore, bucket_bounds
from schema_agreement import settle_schema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))
from ops_store_contract import CHECKS, Harness  # noqa: E402

pytestmark = pytest.mark.integration

NODES = ["127.0.0.2", "127.0.0.3", "127.0.0.4"]
SCRATCH = "ringward_ops_contract"
LEGACY_DDL = f"""CREATE TABLE IF NOT EXISTS {SCRATCH}.repair_history (
    keyspace_name text, table_names text, range_start bigint, range_end bigint,
    last_success timestamp, last_full_success timestamp, last_attempt timestamp, attempts int,
    last_error text, seconds double, run_id text, state text,
    PRIMARY KEY ((keyspace_name), table_names, range_start, range_end))"""  # the first release's layout


@pytest.fixture(scope="module")
def scratch_module(cluster_manager: Any) -> Iterator[Any]:
    """One scratch keyspace for the module (on the seed cluster, which every test asks for as well: the suite
    orders tests by the cluster fixture they name)."""
    cluster_manager.ensure("seed")
    with connect(NODES) as session:
        session.execute(f"DROP KEYSPACE IF EXISTS {SCRATCH}")
        settle_schema(session)
        store = OpsStore(session, keyspace=SCRATCH)
        store.ensure_schema([("dc1", 3)])  # creates the scratch keyspace as ringward_ops is created
        settle_schema(session)
        try:
            yield session
        finally:
            session.execute(f"DROP KEYSPACE IF EXISTS {SCRATCH}")


@pytest.fixture
def scratch_session(seed_cluster: LocalCluster, scratch_module: Any) -> Any:
    return scratch_module


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_contract(scratch_session: Any, check: Any) -> None:
    store = OpsStore(scratch_session, keyspace=SCRATCH)
    check(Harness(store, time.sleep, check.__name__.removeprefix("check_")[:40]))


def test_a_run_row_expires_with_the_history_ttl(scratch_session: Any) -> None:
    """repair_runs is read whole (the Repair page, the report): its rows must not outlive the history window."""
    store = OpsStore(scratch_session, keyspace=SCRATCH, history_ttl_seconds=3600)
    store.record_repair_run("ttl-run", "SUCCESS", {"segments": 1}, {})
    row = scratch_session.execute(f"SELECT TTL(state) AS ttl FROM {SCRATCH}.repair_runs WHERE run_id = 'ttl-run'").one()
    assert row is not None and 3500 < row.ttl <= 3600, row


def test_ensure_schema_again_changes_nothing(scratch_session: Any) -> None:
    executed: list[str] = []
    real = scratch_session.execute

    def spy(statement: Any, *args: Any, **kwargs: Any) -> Any:
        executed.append(str(statement))
        return real(statement, *args, **kwargs)

    scratch_session.execute = spy
    try:
        OpsStore(scratch_session, keyspace=SCRATCH).ensure_schema([("dc1", 3)])
    finally:
        del scratch_session.execute  # the instance attribute; the class's method again
    assert len(executed) == 1 and "system_schema.tables" in executed[0], executed


def test_an_upgraded_clusters_legacy_history_is_read_until_rewritten(scratch_session: Any) -> None:
    scratch_session.execute(LEGACY_DDL)
    settle_schema(scratch_session)
    low, _ = bucket_bounds(0)
    mid, _ = bucket_bounds(128)
    old = datetime(2026, 11, 1, tzinfo=UTC)
    insert = (
        f"INSERT INTO {SCRATCH}.repair_history (keyspace_name, table_names, range_start, range_end, "
        "last_success, last_full_success, attempts, run_id, state) VALUES (%s, %s, %s, %s, %s, %s, 1, %s, %s)"
    )
    for start in (low, mid):  # written by the first layout, before the upgrade
        scratch_session.execute(insert, ("legacy_ks", "t", start, start + 10, old, old, "old-run", "DONE"))
    store = OpsStore(scratch_session, keyspace=SCRATCH)  # a new store: it sees the legacy table
    rows = {r.range.start: r for r in store.repair_history("legacy_ks")}
    assert set(rows) == {low, mid} and rows[low].record.last_full_success == old
    assert [r.range.start for r in store.history_of("legacy_ks", ["t"], [128])] == [mid]
    # The nightly repair rewrites one range: the new row wins, the other is still read from the legacy table.
    new = datetime(2026, 11, 23, tzinfo=UTC)
    store.record_repair("legacy_ks", ("t",), TokenRange(low, low + 10),
                        SegmentRecord("x", SegmentState.DONE, new, new, 1, None, 2.0, "new-run"))  # fmt: skip
    rows = {r.range.start: r for r in store.repair_history("legacy_ks")}
    assert rows[low].record.run_id == "new-run" and rows[low].record.last_full_success == new
    assert rows[mid].record.run_id == "old-run"
    both = store.history_of("legacy_ks", ["t"], [0, 128])
    assert sorted((r.range.start, r.record.run_id) for r in both) == [(low, "new-run"), (mid, "old-run")]
    # The plan task's lean read merges the legacy rows the same way.
    ids = {(low, low + 10): "a", (mid, mid + 10): "b"}
    lean = store.records_of("legacy_ks", ["t"], [0, 128], ids)
    assert {k: r.run_id for k, r in lean.items()} == {"a": "new-run", "b": "old-run"}
    store.forget_repair_history("legacy_ks")
    assert store.repair_history("legacy_ks") == []
    scratch_session.execute(f"DROP TABLE {SCRATCH}.repair_history")
    settle_schema(scratch_session)
