"""The ops store contract (tests/ops_store_contract.py) on the in-memory store, plus what only it has: the
counters the fleet benchmark reports, leases added by hand, and no Cassandra driver."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from ringward.errors import RepairError
from ringward.repair import Segment, SegmentRecord, SegmentState
from ringward.ring import TokenRange
from ringward_cassandra.memory_ops_store import MemoryOpsStore
from ringward_cassandra.ops_store import PLAN_CHUNK_ROWS, bucket_bounds, history_bucket

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from ops_store_contract import CHECKS, Harness  # noqa: E402


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 11, 23, 2, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


@pytest.fixture(params=["memory"])
def harness(request: pytest.FixtureRequest) -> Harness:
    """Stores the contract runs on here (the real OpsStore's run is the integration twin's)."""
    clock = Clock()
    store = MemoryOpsStore(clock=clock)
    store.ensure_schema([("dc1", 3)])
    return Harness(store, clock.advance, "contract")


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__ for c in CHECKS])
def test_contract(harness: Harness, check: Any) -> None:
    check(harness)


def test_counters_count_rows_per_table_and_the_largest_partition() -> None:
    clock = Clock()
    store = MemoryOpsStore(clock=clock)
    assert not store.exists()
    store.ensure_schema()
    assert store.exists() and store.stats()["rows_written"] == {}
    first, _ = bucket_bounds(3)
    for i in range(10):  # ten ranges in bucket 3, two in bucket 200
        token_range = TokenRange(first + 10 * i, first + 10 * i + 10)
        store.record_repair("app", ("t",), token_range, SegmentRecord("x", SegmentState.DONE, clock(), clock()))
    for start in bucket_bounds(200):
        store.record_repair("app", ("t",), TokenRange(start, start + 1), SegmentRecord("x"), ttl_seconds=60)
    store.save_run_plan("r", [["a"] * 150, ["b"]], ttl_seconds=60)  # rows of 100 commands (PLAN_PAGE_COMMANDS)
    assert store.history_of("app", ["t"], [3]) and len(store.run_plan_chunk("r", 0)) == 150
    stats = store.stats()
    assert stats["rows_written"] == {"repair_segments": 12, "repair_plan": 3}
    assert stats["rows_read"] == {"repair_segments": 10, "repair_plan": 2}
    assert stats["largest_partition"] == {"repair_segments": 10, "repair_plan": 2}
    assert stats["partitions"] == {"repair_segments": 2, "repair_plan": 2}
    clock.advance(61)  # bucket 200's rows and the plan expire; expired partitions are not counted
    assert store.stats()["partitions"] == {"repair_segments": 1}


def test_a_fleet_keyspace_makes_256_partitions_of_about_a_thousand_rows() -> None:
    """256k evenly spread ranges of one unit: the layout the design promises (~1,000 rows per partition)."""
    store = MemoryOpsStore()
    step = 2**64 // 256_000
    record = SegmentRecord("x", SegmentState.DONE)
    for i in range(0, 256_000, 100):  # every 100th range: 2,560 rows, the same spread
        start = -(2**63) + i * step
        store.record_repair("big", ("t",), TokenRange(start, start + step), record)
    stats = store.stats()
    assert stats["partitions"]["repair_segments"] == 256 and stats["largest_partition"]["repair_segments"] in (10, 11)
    assert {history_bucket(r.range.start) for r in store.history_of("big", ["t"], [0, 255])} == {0, 255}


def test_leases_only_when_added() -> None:
    store = MemoryOpsStore()
    assert store.leased_keyspaces() == {}
    lease = store.add_lease("shop", "migration-1", "keyspace_migration")
    assert store.leased_keyspaces() == {"shop": lease} and lease.resource == "keyspace:shop"
    store.release_keyspace_lease("shop")
    assert store.leased_keyspaces() == {}
    store.add_lease("shop", "migration-1", "keyspace_migration")
    store.clock = lambda: datetime(2030, 1, 1, tzinfo=UTC)  # an added lease never expires
    assert set(store.leased_keyspaces()) == {"shop"}


def test_a_segment_record_keeps_its_id_through_the_store() -> None:
    store = MemoryOpsStore()
    segment = Segment("app", (), TokenRange(0, 100), ("a", "b"))
    store.record_repair("app", (), segment.range, SegmentRecord(segment.segment_id, SegmentState.RUNNING))
    (row,) = store.repair_history("app")
    assert row.record.segment_id == segment.segment_id and row.tables == ()
    assert row.replicas == () and row.started_at is None


def test_the_memory_store_runs_without_the_cassandra_driver() -> None:
    code = (
        "import sys; import ringward_cassandra.memory_ops_store as m; m.MemoryOpsStore().ensure_schema(); "
        "bad = sorted(n for n in sys.modules if n == 'cassandra' or n.startswith('cassandra.')); "
        "assert not bad, bad"
    )
    paths = [str(ROOT / "include"), str(ROOT / "plugins")]
    result = subprocess.run([sys.executable, "-c", f"import sys; sys.path[:0] = {paths!r}; {code}"],
                            capture_output=True, text=True, check=False)  # fmt: skip
    assert result.returncode == 0, result.stderr


def test_a_plan_chunk_too_long_or_not_text_is_refused_before_it_is_written() -> None:
    store = MemoryOpsStore()
    with pytest.raises(RepairError, match="a chunk holds at most") as refused:
        store.save_run_plan("r", [["x"], ["y"] * (PLAN_CHUNK_ROWS + 1)])
    assert "Cut the plan into chunks of at most PLAN_CHUNK_ROWS" in refused.value.fix
    # The chunk is refused before it is written (chunks are checked as they stream in: an earlier valid
    # chunk is stored, and the plan task's retry empties it before writing it again).
    assert store.run_plan_chunk("r", 0) == ["x"] and store.run_plan_chunk("r", 1) == []
    with pytest.raises(RepairError, match=r"is a dict, not a string") as refused:
        store.save_run_plan("s", [[{"not": "text"}]])  # type: ignore[list-item]
    assert "json.dumps" in refused.value.fix
    assert store.run_plan_chunk("s", 0) == []


def test_a_preview_on_a_never_repaired_segment_does_not_delay_its_full_repair() -> None:
    """Issue 24: a preview's success is kept in its own history and does not move the full repair's cadence."""
    from ringward.repair import RecordUpdate, parse_config, record_start, record_success, select_due
    from ringward_cassandra.cluster_repairs import records_by_segment

    clock = Clock()
    store = MemoryOpsStore(clock=clock)
    segment = Segment("app", ("t",), TokenRange(0, 10), ("n1", "n2"))
    started = record_start(None, segment.segment_id, "night-1", "preview")
    store.record_repairs([RecordUpdate(segment, started, clock())])
    store.record_repairs([RecordUpdate(segment, record_success(started, clock(), 1.0, "preview"))])
    records = records_by_segment(store.repair_history())
    assert segment.segment_id not in records  # the preview's history is its own
    (previewed,) = store.repair_history(repair_type="preview")
    assert previewed.record.last_success == clock()  # and moves its own cadence
    due = select_due([segment], records, run_id="night-2", now=clock() + timedelta(hours=1), config=parse_config({}))
    assert due.due == (segment,)


def test_due_records_are_made_from_the_cells_as_the_driver_hands_them() -> None:
    """`add_due_records` (both stores' rows): the driver's naive timestamps made UTC, a missing attempts cell 0, rows
    of ranges not asked for left out; rows whose cells are already the records (aware or no last success, attempts
    present, every range asked for: what the in-memory store hands) are taken at once, with the same result."""
    from ringward.repair import DueRecord
    from ringward_cassandra.ops.layout import add_due_records

    aware = datetime(2026, 11, 22, 1, 0, tzinfo=UTC)
    naive = aware.replace(tzinfo=None)
    ids = {(0, 10): "a", (10, 20): "b", (20, 30): "c"}
    plain = [(0, 10, aware, 1, "r1"), (10, 20, None, 2, "r2"), (20, 30, aware, 0, None)]
    expected = {"a": DueRecord(aware, 1, "r1"), "b": DueRecord(None, 2, "r2"), "c": DueRecord(aware, 0, None)}
    for given in (plain, iter(plain)):
        records: dict[str, DueRecord] = {}
        add_due_records(records, given, ids)
        assert records == expected and all(type(r) is DueRecord for r in records.values())
    row_by_row: list[list[tuple[int, int, datetime | None, int | None, str | None]]] = [
        [(0, 10, naive, 1, "r1"), (10, 20, None, 2, "r2"), (20, 30, aware, 0, None)],  # a naive timestamp
        [(0, 10, aware, 1, "r1"), (10, 20, None, 2, "r2"), (20, 30, aware, None, None)],  # attempts missing
        # A range not asked for.
        [(0, 10, aware, 1, "r1"), (5, 10, naive, 7, "x"), (10, 20, None, 2, "r2"), (20, 30, aware, 0, None)],
    ]
    for rows in row_by_row:
        records = {}
        add_due_records(records, rows, ids)
        assert records == expected
        assert records["a"].last_success is not None and records["a"].last_success.tzinfo is UTC
    assert records == expected
