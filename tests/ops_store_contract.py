"""The ops store contract of the nightly path: the same assertions for `OpsStore` (on the real cluster, in
tests/integration/test_ops_store_on_cluster.py) and `MemoryOpsStore`
(tests/unit/ringward_cassandra/test_ops_store_contract.py).

Each check takes a `Harness`: the store (typed by the storage Protocols of the record kinds both stores hold,
so mypy checks that every check uses only what the Protocols promise), a way to let time pass (the memory
store's clock moves; the real store's test sleeps) and a prefix that makes the check's keyspace names and run
ids its own. Timestamps given to the store are whole seconds (Cassandra keeps milliseconds).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Protocol

import pytest
from ringward.errors import MigrationError, RepairError
from ringward.migration_progress import stage_progress
from ringward.migration_storage import JournalEntry, LeaseStorage, MigrationStorage
from ringward.repair import (
    DueRecord,
    PreviewFinding,
    PreviewStorage,
    RecordUpdate,
    RepairHistoryStorage,
    RepairRunStorage,
    RunPlanStorage,
    RunProgressStorage,
    Segment,
    SegmentRecord,
    SegmentState,
    SwitchStorage,
)
from ringward.ring import TokenRange
from ringward_cassandra.ops.layout import PLAN_CHUNK_ROWS, bucket_bounds, history_bucket


class ContractStore(
    LeaseStorage, MigrationStorage, RepairHistoryStorage, RunPlanStorage, RunProgressStorage, RepairRunStorage,
    PreviewStorage, SwitchStorage, Protocol,
):  # fmt: skip
    """The record kinds both stores hold: what the contract checks (OpsStore also holds the controller pauses)."""


@dataclass
class Harness:
    store: ContractStore  # OpsStore or MemoryOpsStore
    advance: Callable[[float], None]  # let `seconds` pass for the store
    prefix: str  # unique per check: keyspace names and run ids start with it

    def name(self, suffix: str) -> str:
        return f"{self.prefix}_{suffix}"


STARTED = datetime(2026, 11, 23, 2, 0, 0, tzinfo=UTC)
FINISHED = datetime(2026, 11, 23, 2, 0, 42, tzinfo=UTC)
REPLICAS = ("127.0.0.2", "127.0.0.3", "127.0.0.4")
TABLES = ("events", "users")


def _segment(keyspace: str, start: int, end: int, tables: tuple[str, ...] = TABLES) -> Segment:
    return Segment(keyspace, tables, TokenRange(start, end), REPLICAS)


def _done(segment: Segment, run_id: str) -> SegmentRecord:
    return SegmentRecord(segment.segment_id, SegmentState.DONE, FINISHED, FINISHED, 1, None, 42.0, run_id)


# Ranges starting in three buckets: the first two share bucket 0; one wraps around the ring.
def _ranges() -> list[tuple[int, int]]:
    low, _ = bucket_bounds(0)
    mid, _ = bucket_bounds(128)
    _, top = bucket_bounds(255)
    return [(low, low + 1000), (low + 1000, low + 2000), (mid + 5, mid + 900), (top - 10, low)]


def check_history_round_trip_and_partitions(h: Harness) -> None:
    keyspace, run_id = h.name("ks"), h.name("run")
    segments = [_segment(keyspace, start, end) for start, end in _ranges()]
    for segment in segments:
        h.store.record_repair(keyspace, segment.tables, segment.range, _done(segment, run_id), started_at=STARTED,
                              finished_at=FINISHED, replicas=segment.replicas)  # fmt: skip
    rows = {row.range: row for row in h.store.repair_history(keyspace)}
    assert set(rows) == {s.range for s in segments}
    for segment in segments:
        row = rows[segment.range]
        assert row.keyspace == keyspace and row.tables == TABLES and row.replicas == REPLICAS
        assert row.record == _done(segment, run_id)  # segment id recomputed from keyspace, tables and range
        assert (row.started_at, row.finished_at, row.coordinator) == (STARTED, FINISHED, REPLICAS[0])
        assert row.updated_at is not None
    # Only the partitions asked for: bucket 0 holds the first two ranges, 255 the wrap-around one.
    assert {r.range for r in h.store.history_of(keyspace, TABLES, [0])} == {segments[0].range, segments[1].range}
    assert {r.range for r in h.store.history_of(keyspace, TABLES, [255, 128])} == {s.range for s in segments[2:]}
    assert h.store.history_of(keyspace, TABLES, [7]) == []
    assert h.store.history_of(keyspace, ("events",), [0]) == []  # another unit (tables) is another partition
    assert h.store.history_of(keyspace, list(TABLES), []) == []
    assert all(history_bucket(r.range.start) in (0, 128, 255) for r in rows.values())
    assert h.store.repair_history(h.name("other")) == []
    assert {r.range for r in h.store.repair_history() if r.keyspace == keyspace} == set(rows)


def check_upsert_keeps_what_it_does_not_write(h: Harness) -> None:
    """Session bounds given once stay when a later write leaves them out; a cleared error is gone."""
    keyspace, run_id = h.name("ks"), h.name("run")
    segment = _segment(keyspace, *_ranges()[2])
    failed = SegmentRecord(segment.segment_id, SegmentState.FAILED, None, None, 1, "boom", 3.0, run_id)
    h.store.record_repair(keyspace, segment.tables, segment.range, failed, started_at=STARTED, finished_at=FINISHED,
                          replicas=segment.replicas)  # fmt: skip
    postponed = SegmentRecord(segment.segment_id, SegmentState.POSTPONED, None, None, 1, None, 3.0, run_id)
    h.store.record_repair(keyspace, segment.tables, segment.range, postponed)
    (row,) = h.store.history_of(keyspace, TABLES, [history_bucket(segment.range.start)])
    assert row.record == postponed and row.record.last_error is None
    assert (row.started_at, row.finished_at, row.coordinator, row.replicas) == (STARTED, FINISHED, REPLICAS[0],
                                                                                 REPLICAS)  # fmt: skip


def check_record_repairs_writes_every_update(h: Harness) -> None:
    keyspace, run_id = h.name("ks"), h.name("run")
    segments = [_segment(keyspace, start, end, ("t",)) for start, end in _ranges()]
    h.store.record_repairs([RecordUpdate(s, _done(s, run_id), STARTED, FINISHED) for s in segments])
    h.store.record_repairs([RecordUpdate(segments[0], _done(segments[0], run_id))])  # one update: one write
    rows = h.store.history_of(keyspace, ("t",), range(256))
    assert sorted(r.range.start for r in rows) == sorted(s.range.start for s in segments)
    assert all(r.record.state is SegmentState.DONE and r.started_at == STARTED for r in rows)


def check_history_rows_expire(h: Harness) -> None:
    """A row not rewritten within its TTL is gone (a node that left stops being planned); a rewrite renews it."""
    keyspace, run_id = h.name("ks"), h.name("run")
    gone, kept, renewed = (_segment(keyspace, s, e) for s, e in _ranges()[:3])
    for segment in (gone, renewed):
        h.store.record_repair(keyspace, segment.tables, segment.range, _done(segment, run_id), ttl_seconds=2)
    h.store.record_repair(keyspace, kept.tables, kept.range, _done(kept, run_id), ttl_seconds=3600)
    h.advance(1)
    h.store.record_repair(keyspace, renewed.tables, renewed.range, _done(renewed, run_id), ttl_seconds=3600)
    h.advance(2.5)
    assert {r.range for r in h.store.repair_history(keyspace)} == {kept.range, renewed.range}
    assert {r.range for r in h.store.history_of(keyspace, TABLES, [0])} == {kept.range}
    ids = {(s.range.start, s.range.end): s.segment_id for s in (gone, kept, renewed)}
    assert set(h.store.records_of(keyspace, TABLES, [0, 128], ids)) == {kept.segment_id, renewed.segment_id}


def check_run_plan_round_trip(h: Harness) -> None:
    run_id = h.name("run")
    chunks = [[f'{{"c": {i}}}' for i in range(7)], ['{"c": "only"}'], []]
    assert h.store.save_run_plan(run_id, iter(chunks), ttl_seconds=3600) == 3
    assert [h.store.run_plan_chunk(run_id, i) for i in range(3)] == chunks
    assert h.store.run_plan_chunk(run_id, 3) == [] and h.store.run_plan_chunk(h.name("other"), 0) == []
    # A retried plan task saves a shorter plan: nothing of the earlier one is left in a chunk it rewrites.
    assert h.store.save_run_plan(run_id, [["a", "b"]], ttl_seconds=3600) == 1
    assert h.store.run_plan_chunk(run_id, 0) == ["a", "b"]
    with pytest.raises(RepairError, match="at most 5000") as refused:
        h.store.save_run_plan(h.name("big"), [["x"] * (PLAN_CHUNK_ROWS + 1)], ttl_seconds=3600)
    assert "chunks of at most PLAN_CHUNK_ROWS" in refused.value.fix
    with pytest.raises(RepairError, match="has a line break") as refused:  # commands are stored a line each
        h.store.save_run_plan(h.name("lines"), [["x", "a\nb"]], ttl_seconds=3600)
    assert "one line of JSON" in refused.value.fix
    assert h.store.run_plan_chunk(h.name("lines"), 0) == []  # refused before anything was written
    # A full chunk spans several rows (PLAN_PAGE_COMMANDS commands a row); empty commands survive.
    full = [f'{{"c": {i}}}' for i in range(PLAN_CHUNK_ROWS - 1)] + [""]
    assert h.store.save_run_plan(h.name("full"), [full, ["", "y"]], ttl_seconds=3600) == 2
    assert h.store.run_plan_chunk(h.name("full"), 0) == full and h.store.run_plan_chunk(h.name("full"), 1) == ["", "y"]
    # Plans expire with their TTL.
    h.store.save_run_plan(h.name("short"), [["x"]], ttl_seconds=1)
    h.advance(2)
    assert h.store.run_plan_chunk(h.name("short"), 0) == []


def check_a_dropped_run_plan_is_gone_and_others_stay(h: Harness) -> None:
    run_id, other = h.name("dropped"), h.name("kept")
    assert h.store.save_run_plan(run_id, [["a", "b"], ["c"]], ttl_seconds=3600) == 2
    assert h.store.save_run_plan(other, [["d"]], ttl_seconds=3600) == 1
    h.store.drop_run_plan(run_id, 2)
    assert [h.store.run_plan_chunk(run_id, i) for i in range(2)] == [[], []]
    assert h.store.run_plan_chunk(other, 0) == ["d"]
    h.store.drop_run_plan(h.name("never-saved"), 3)  # nothing stored: nothing to do, no error


def check_run_progress_round_trip(h: Harness) -> None:
    run_id = h.name("run")
    assert h.store.run_progress(run_id) is None
    progress = {
        "done": 10, "failed": 1, "postponed": 2, "total": 40, "running": {"127.0.0.2": 1},
        "per_node": {"127.0.0.2": {"done": 10, "failed": 1}}, "eta_seconds": 120.5,
        "updated_at": "2026-11-23T02:10:00+00:00",
    }  # fmt: skip
    h.store.record_run_progress(run_id, progress)
    assert h.store.run_progress(run_id) == progress
    h.store.record_run_progress(run_id, {**progress, "done": 11, "running": {}, "eta_seconds": None})
    assert h.store.run_progress(run_id) == {**progress, "done": 11, "running": {}, "eta_seconds": None}
    assert h.store.run_progress(h.name("other")) is None
    # Which runs have stored progress, and when each last did (how the CLI finds the run under way).
    before = h.store.progress_runs()[run_id]
    assert before is not None and h.name("other") not in h.store.progress_runs()
    h.advance(1.1)
    h.store.record_run_progress(run_id, {"done": 12})
    after = h.store.progress_runs()[run_id]
    assert after is not None and after > before


def check_repair_runs_latest_first(h: Harness) -> None:
    first, second = h.name("run1"), h.name("run2")
    h.store.record_repair_run(first, "DONE", {"tables": {"app.events": "40.0%"}}, {"enabled": True})
    h.advance(1.1)
    h.store.record_repair_run(second, "PARTIAL", {"tables": {"app.events": "55.5%"}, "metrics": {"x": 1}}, {})
    mine = [r for r in h.store.repair_runs() if r.run_id in (first, second)]
    assert [r.run_id for r in mine] == [second, first]
    latest = h.store.latest_repair_run()
    assert latest is not None and latest.run_id == second and latest.state == "PARTIAL"
    assert latest.summary == {"tables": {"app.events": "55.5%"}, "metrics": {"x": 1}} and latest.config == {}
    assert latest.updated_at is not None and mine[1].config == {"enabled": True}


def check_pause_switch(h: Harness) -> None:
    name = h.name("switch")
    assert h.store.switch_events(name) == [] and not h.store.repair_paused(name)
    h.store.set_switch(True, "alice", "disk full", name=name)
    h.advance(1.1)
    h.store.set_switch(False, "bob", name=name)
    events = h.store.switch_events(name)
    assert [(e.paused, e.changed_by, e.reason) for e in events] == [(False, "bob", ""), (True, "alice", "disk full")]
    assert not h.store.repair_paused(name) and len(h.store.switch_events(name, limit=1)) == 1


def check_each_repair_type_keeps_its_own_history(h: Harness) -> None:
    keyspace = h.name("types")
    segment = _segment(keyspace, 100, 200)
    full = _done(segment, h.name("r1"))
    preview = SegmentRecord(segment.segment_id, SegmentState.DONE, STARTED, None, 1, None, 3.0, h.name("r2"),
                            repair_type="preview")  # fmt: skip
    h.store.record_repairs([RecordUpdate(segment, full, STARTED, FINISHED)])
    h.store.record_repairs([RecordUpdate(segment, preview, STARTED, STARTED)])
    bucket = [history_bucket(100)]
    (full_row,) = h.store.history_of(keyspace, TABLES, bucket)
    (preview_row,) = h.store.history_of(keyspace, TABLES, bucket, repair_type="preview")
    assert full_row.record == full  # the preview did not touch the full repair's history
    assert preview_row.record == preview and preview_row.record.repair_type == "preview"
    assert [r.record for r in h.store.repair_history(keyspace, repair_type="preview")] == [preview]
    assert h.store.history_of(keyspace, TABLES, bucket, repair_type="paxos") == []
    assert [r.record for r in h.store.repair_history(keyspace)] == [full]
    ids = {(100, 200): segment.segment_id}
    assert h.store.records_of(keyspace, TABLES, bucket, ids) == {segment.segment_id: full}
    assert h.store.records_of(keyspace, TABLES, bucket, ids, repair_type="preview") == {segment.segment_id: preview}
    assert h.store.records_of(keyspace, TABLES, bucket, ids, repair_type="paxos") == {}


def check_records_of_reads_the_named_segments_records(h: Harness) -> None:
    """The plan task's read: the records of the segments it names, from the partitions it names, as
    history_of would give them (a failed attempt's error too); ranges it does not name are left out."""
    keyspace, run_id = h.name("ks"), h.name("run")
    segments = [_segment(keyspace, start, end) for start, end in _ranges()]
    failed = SegmentRecord(segments[1].segment_id, SegmentState.FAILED, None, None, 2, "boom", 3.0, run_id)
    h.store.record_repairs([RecordUpdate(segments[0], _done(segments[0], run_id), STARTED, FINISHED),
                            RecordUpdate(segments[1], failed, STARTED, FINISHED),
                            *(RecordUpdate(s, _done(s, run_id), STARTED, FINISHED) for s in segments[2:])])  # fmt: skip
    ids = {(s.range.start, s.range.end): s.segment_id for s in segments}
    everything = h.store.records_of(keyspace, TABLES, range(256), ids)
    assert everything == {r.record.segment_id: r.record for r in h.store.history_of(keyspace, TABLES, range(256))}
    assert everything[segments[1].segment_id] == failed
    assert h.store.records_of(keyspace, TABLES, [0], ids) == {s.segment_id: everything[s.segment_id]
                                                               for s in segments[:2]}  # fmt: skip
    third = segments[2]
    named = {(third.range.start, third.range.end): third.segment_id}
    assert h.store.records_of(keyspace, TABLES, [0, 128, 255], named) == {third.segment_id: _done(third, run_id)}
    assert h.store.records_of(keyspace, ("events",), range(256), ids) == {}  # another unit's partitions
    assert h.store.records_of(keyspace, TABLES, [], ids) == {}


def check_segment_records_reads_the_segments_of_every_unit(h: Harness) -> None:
    """The night's read (`segment_records`): the records of the segments it names, whatever their (keyspace,
    tables) and buckets, of one type, keyed by segment id; a segment never repaired has none."""
    keyspace, other, run_id = h.name("segs"), h.name("segs2"), h.name("run")
    segments = [_segment(keyspace, start, end) for start, end in _ranges()]
    elsewhere = _segment(other, *_ranges()[2], tables=())
    repaired = [*segments[:3], elsewhere]
    h.store.record_repairs([RecordUpdate(s, _done(s, run_id), STARTED, FINISHED) for s in repaired])
    paxos = SegmentRecord(segments[0].segment_id, SegmentState.DONE, STARTED, FINISHED, 1, None, 1.0, run_id,
                          repair_type="paxos")  # fmt: skip
    h.store.record_repairs([RecordUpdate(segments[0], paxos, STARTED, FINISHED)])
    assert h.store.segment_records([*segments, elsewhere], "full") == {s.segment_id: _done(s, run_id)
                                                                      for s in repaired}  # fmt: skip
    assert h.store.segment_records(segments, "paxos") == {segments[0].segment_id: paxos}
    assert h.store.segment_records([segments[3]], "full") == {}  # the wrapping range was never repaired
    assert h.store.segment_records([], "full") == {}


def check_due_records_are_what_due_selection_reads_of_the_records(h: Harness) -> None:
    """The plan task's read (`due_records`): of the segments it names, whatever their unit, of one type, the last
    success, attempts and run of each record, as `segment_records` gives them (a failed first attempt too); a
    segment never repaired has none, and another type's history is not read."""
    keyspace, other, run_id = h.name("due"), h.name("due2"), h.name("run")
    segments = [_segment(keyspace, start, end) for start, end in _ranges()]
    elsewhere = _segment(other, *_ranges()[2], tables=())
    failed = SegmentRecord(segments[1].segment_id, SegmentState.FAILED, None, None, 2, "boom", 3.0, h.name("old"))
    h.store.record_repairs([RecordUpdate(segments[0], _done(segments[0], run_id), STARTED, FINISHED),
                            RecordUpdate(segments[1], failed, STARTED, FINISHED),
                            RecordUpdate(elsewhere, _done(elsewhere, run_id), STARTED, FINISHED)])  # fmt: skip
    preview = SegmentRecord(segments[2].segment_id, SegmentState.DONE, FINISHED, None, 1, None, 1.0, run_id,
                            repair_type="preview")  # fmt: skip
    h.store.record_repairs([RecordUpdate(segments[2], preview, STARTED, FINISHED)])
    planned = [*segments, elsewhere]
    whole = h.store.segment_records(planned, "full")
    assert set(whole) == {segments[0].segment_id, segments[1].segment_id, elsewhere.segment_id}
    assert h.store.due_records(planned, "full") == {
        sid: DueRecord(r.last_success, r.attempts, r.run_id) for sid, r in whole.items()
    }
    assert h.store.due_records(planned, "full")[segments[1].segment_id] == DueRecord(None, 2, h.name("old"))
    assert h.store.due_records(planned, "full")[segments[0].segment_id] == DueRecord(FINISHED, 1, run_id)
    assert h.store.due_records(planned, "preview") == {segments[2].segment_id: DueRecord(FINISHED, 1, run_id)}
    assert h.store.due_records(planned, "paxos") == {}
    assert h.store.due_records([segments[3]], "full") == {} and h.store.due_records([], "full") == {}
    ids = {(s.range.start, s.range.end): s.segment_id for s in segments}
    assert h.store.due_records_of(keyspace, TABLES, range(256), ids) == {
        sid: record for sid, record in h.store.due_records(planned, "full").items() if sid != elsewhere.segment_id
    }
    assert h.store.due_records_of(keyspace, TABLES, [], ids) == {}
    # By position (what the plan task reads): the i-th segment's record at i, None for one never repaired; a segment
    # named twice gets its record twice. Keys of `due_records_of` are whatever `ids` maps the ranges to.
    for kind in ("full", "preview", "paxos"):
        by_id = h.store.due_records(planned, kind)
        assert h.store.due_records_in_order(planned, kind) == [by_id.get(s.segment_id) for s in planned]
    done, failed_once = DueRecord(FINISHED, 1, run_id), DueRecord(None, 2, h.name("old"))
    twice = [segments[0], *planned, segments[0]]
    assert h.store.due_records_in_order(twice, "full") == [done, done, failed_once, None, None, done, done]
    assert h.store.due_records_in_order([], "full") == []
    positions = {(s.range.start, s.range.end): index for index, s in enumerate(segments)}
    assert h.store.due_records_of(keyspace, TABLES, range(256), positions) == {0: done, 1: failed_once}
    # Units on the same ranges (keyspaces sharing a replication, as a fleet night's 13 units share the ring's
    # ranges): each unit's own records, at its own positions, whichever unit has a record of a range.
    alike = [_segment(other, s.range.start, s.range.end) for s in segments]
    h.store.record_repairs([RecordUpdate(alike[2], _done(alike[2], run_id), STARTED, FINISHED)])
    shared = [*segments, *alike, *[_segment(keyspace, s.range.start, s.range.end, tables=("users",)) for s in segments]]
    by_id = h.store.due_records(shared, "full")
    assert h.store.due_records_in_order(shared, "full") == [by_id.get(s.segment_id) for s in shared]
    assert h.store.due_records_in_order(shared, "full")[:9] == [done, failed_once, None, None, None, None, done, None,
                                                                None]  # fmt: skip


def check_preview_findings_kept_latest_first(h: Harness) -> None:
    keyspace = h.name("prv")
    assert h.store.preview_findings(keyspace) == []
    first = PreviewFinding(keyspace, "events", (TokenRange(0, 10), TokenRange(10, 20)), 2, STARTED, h.name("r1"),
                           REPLICAS[0])  # fmt: skip
    later = PreviewFinding(keyspace, "users", (TokenRange(-30, -20),), 1, FINISHED, h.name("r2"), REPLICAS[1])
    h.store.record_preview(first)
    h.store.record_preview(later, ttl_seconds=2)
    assert h.store.preview_findings(keyspace) == [later, first]
    assert later in h.store.preview_findings()
    h.advance(2.5)
    assert h.store.preview_findings(keyspace) == [first]  # findings expire with their TTL


def check_a_lease_lives_its_ttl_from_its_owners_last_renewal(h: Harness) -> None:
    """A migration renews its keyspace lease at every task: the renewal, not the first take, starts the TTL;
    nobody else takes it meanwhile; once expired it is free (and the nightly repair sees the keyspace again)."""
    keyspace = h.name("leased")
    resource = f"keyspace:{keyspace}"
    # Cassandra counts a TTL in whole seconds (the cell dies at the second it was written, truncated, plus the TTL):
    # a 5 s lease lives more than 4 s, and the reads below leave a second for a loaded node to answer.
    h.store.lease_ttl_seconds = 5
    h.store.acquire_lease(resource, "m1", "keyspace_migration")
    with pytest.raises(MigrationError, match="is held by m1") as refused:
        h.store.acquire_lease(resource, "m2", "keyspace_migration")
    assert f"WHERE resource = '{resource}' IF owner = 'm1'" in refused.value.fix  # how to free a dead run's lease
    h.advance(3)
    h.store.acquire_lease(resource, "m1", "keyspace_migration")  # renewed: 5 s from now
    h.advance(3)  # past the first take's TTL, within the renewal's
    assert keyspace in h.store.leased_keyspaces() and _owner(h, resource) == "m1"
    h.advance(2.5)  # past the renewal's
    assert keyspace not in h.store.leased_keyspaces() and h.store.lease(resource) is None
    h.store.acquire_lease(resource, "m2", "keyspace_migration")  # expired: free for another migration
    h.store.release_lease(resource, "m1")  # not its owner: changes nothing
    assert _owner(h, resource) == "m2"
    h.store.release_lease(resource, "m2")
    assert h.store.lease(resource) is None


def _record(h: Harness, keyspace: str, run_id: str, dag_id: str | None = "keyspace_migration") -> dict[str, object]:
    """A stored migration record's keys the store reads (the rest is the record's own business)."""
    return {"migration_id": f"{keyspace}@{run_id}", "keyspace": keyspace, "dag_id": dag_id, "run_id": run_id,
            "ring": {"nodes": ["not read by the store"]}, "steps": [{"class": "SimpleStrategy"}]}  # fmt: skip


def check_migration_round_trip(h: Harness) -> None:
    """A migration's record comes back as stored, its state as set; unknown ids read as nothing."""
    keyspace, run = h.name("shop"), h.name("manual__1")
    record = _record(h, keyspace, run)
    h.store.record_migration(f"{keyspace}@{run}", keyspace, '{"old": 1}', '{"new": 2}', "planned", record)
    assert h.store.migration(f"{keyspace}@{run}") == record
    assert h.store.migration_state(f"{keyspace}@{run}") == "planned"
    h.store.set_migration_state(f"{keyspace}@{run}", "altered:1")
    assert h.store.migration_state(f"{keyspace}@{run}") == "altered:1"
    assert [(m, s, r) for m, s, _, r in h.store.migrations_of(keyspace)] == [(f"{keyspace}@{run}", "altered:1", record)]
    assert h.store.migration(f"{keyspace}@{h.name('never')}") is None
    assert h.store.migration_state(f"{keyspace}@{h.name('never')}") is None
    entry = JournalEntry("pre_repair:1", TokenRange(-5, 7), "done", "127.0.0.2", 1, 2.5, "")
    h.store.record_journal(f"{keyspace}@{run}", entry)
    assert h.store.journal_of(f"{keyspace}@{run}") == [entry]
    assert h.store.journal(f"{keyspace}@{run}", "pre_repair:1") == {entry.range: entry}
    assert h.store.journal(f"{keyspace}@{run}", "post_repair:1") == {}


def check_run_migrations_are_the_runs_own(h: Harness) -> None:
    """A DAG run's migrations are found by (dag_id, run_id): the one its precheck stored; after another run took
    it over (stored it again naming itself), under both runs, the record naming the later; never another DAG's
    or another run's, nor one without a DAG."""
    shop, users, orphan = h.name("shop"), h.name("users"), h.name("orphan")
    first, second, other = h.name("manual__1"), h.name("manual__2"), h.name("manual__3")
    for keyspace, run in ((shop, first), (users, other)):
        h.store.record_migration(f"{keyspace}@{run}", keyspace, "{}", "{}", "planned", _record(h, keyspace, run))
    h.store.record_migration(f"{orphan}@{first}", orphan, "{}", "{}", "planned", _record(h, orphan, first, None))
    elsewhere = dict(_record(h, shop, other), dag_id="another_dag")
    h.store.record_migration(f"{shop}@{other}", shop, "{}", "{}", "planned", elsewhere)

    def found(dag_id: str, run_id: str) -> list[tuple[str, object]]:
        return sorted((row.migration_id, row.record.get("run_id")) for row in h.store.run_migrations(dag_id, run_id))

    assert found("keyspace_migration", first) == [(f"{shop}@{first}", first)]
    assert found("keyspace_migration", other) == [(f"{users}@{other}", other)]
    assert found("another_dag", other) == [(f"{shop}@{other}", other)]
    assert found("keyspace_migration", second) == [] and found("another_dag", first) == []
    taken = dict(_record(h, shop, first), run_id=second)  # the take-over: same id, the record names its run
    h.store.record_migration(f"{shop}@{first}", shop, "{}", "{}", "altered:1", taken)
    assert found("keyspace_migration", second) == [(f"{shop}@{first}", second)]
    assert found("keyspace_migration", first) == [(f"{shop}@{first}", second)]  # the row, as it is now


def check_migration_pages_round_trip(h: Harness) -> None:
    """The page's view of a migration's plan comes back as stored (its chunks joined in their order, past ten of
    them), under its record's version only; a view not stored reads as None."""
    migration_id = f"{h.name('shop')}@{h.name('manual__1')}"
    chunks = [bytes([i]) * 1000 for i in range(11)] + [b"\x00\xff"]
    h.store.record_migration_pages(migration_id, "v1", chunks)
    assert h.store.migration_pages(migration_id, "v1") == b"".join(chunks)
    assert h.store.migration_pages(migration_id, "v2") is None
    assert h.store.migration_pages(f"{migration_id}x", "v1") is None


def check_journal_spans_read_only_their_slice(h: Harness) -> None:
    """A span is the entries of its stage from its first to its last range (both included, in range order), at most
    its limit; several spans come back in the order given; another stage's entries are never in them."""
    migration_id = f"{h.name('shop')}@{h.name('manual__1')}"
    entries = [JournalEntry(step, TokenRange(start, start + 10), "failed" if start == 20 else "done", "127.0.0.2", 1,
                            1.5, "stream failed" if start == 20 else "")
               for step in ("post_repair:1", "pre_repair:1") for start in (-30, 0, 10, 20, 40)]  # fmt: skip
    for entry in entries:
        h.store.record_journal(migration_id, entry)
    pre = [e for e in entries if e.step == "pre_repair:1"]
    assert h.store.journal_spans(migration_id, "pre_repair:1", [((0, 10), (20, 30), 100)]) == pre[1:4]
    assert h.store.journal_spans(migration_id, "pre_repair:1", [((0, 10), (20, 30), 2)]) == pre[1:3]
    assert h.store.journal_spans(migration_id, "pre_repair:1", [((40, 50), (40, 50), 1), ((-30, -20), (0, 9), 5)]) == [
        pre[4], pre[0]]  # fmt: skip
    assert h.store.journal_spans(migration_id, "pre_repair:1", [((1, 0), (9, 0), 5)]) == []
    assert h.store.journal_spans(migration_id, "post_repair:2", [((-30, -20), (40, 50), 5)]) == []
    assert h.store.journal_spans(f"{migration_id}x", "pre_repair:1", [((-30, -20), (40, 50), 5)]) == []


def check_stage_progress_round_trip(h: Harness) -> None:
    """A stage's progress comes back as stored, one row per stage by stage name, the latest write of a stage
    replacing its row; a migration without any reads as none."""
    migration_id = f"{h.name('shop')}@{h.name('manual__1')}"
    ranges = [TokenRange(start, start + 10) for start in range(0, 100, 10)]
    first = stage_progress("pre_repair:1", ranges, {ranges[0]: "done", ranges[3]: "failed"})
    post = stage_progress("post_repair:1", ranges[:4], {})
    h.store.record_stage_progress(migration_id, replace(first, updated_at=STARTED))
    h.store.record_stage_progress(migration_id, replace(post, updated_at=STARTED))
    assert h.store.stage_progress(migration_id) == [replace(post, updated_at=STARTED),
                                                    replace(first, updated_at=STARTED)]  # fmt: skip
    later = stage_progress("pre_repair:1", ranges, dict.fromkeys(ranges, "done"))
    h.store.record_stage_progress(migration_id, replace(later, updated_at=FINISHED))
    stored = h.store.stage_progress(migration_id)
    assert stored[1] == replace(later, updated_at=FINISHED) and stored[1].codes().done == len(ranges)
    assert h.store.stage_progress(f"{migration_id}x") == []


def _owner(h: Harness, resource: str) -> str | None:
    lease = h.store.lease(resource)
    return None if lease is None else lease.owner


CHECKS = [
    check_a_dropped_run_plan_is_gone_and_others_stay,
    check_a_lease_lives_its_ttl_from_its_owners_last_renewal,
    check_history_round_trip_and_partitions,
    check_upsert_keeps_what_it_does_not_write,
    check_record_repairs_writes_every_update,
    check_history_rows_expire,
    check_run_plan_round_trip,
    check_run_progress_round_trip,
    check_repair_runs_latest_first,
    check_pause_switch,
    check_preview_findings_kept_latest_first,
    check_each_repair_type_keeps_its_own_history,
    check_records_of_reads_the_named_segments_records,
    check_segment_records_reads_the_segments_of_every_unit,
    check_due_records_are_what_due_selection_reads_of_the_records,
    check_migration_round_trip,
    check_run_migrations_are_the_runs_own,
    check_migration_pages_round_trip,
    check_journal_spans_read_only_their_slice,
    check_stage_progress_round_trip,
]
