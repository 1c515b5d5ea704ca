"""The Migration page from each stage's stored progress (`ringward.migration_progress`) and its window's journal
entries, against the page from the whole journal (a journal whose stages keep no progress: an older worker's):
the same data for the same journal, in every window, ring order and triage order; and no more journal entries
read than the window shows.

The journal mixes what a stage's journal can hold: done, failed, an entry of another status, entries of ranges
that are no segment of the plan (a start that differs), none for most; on a 48 x 256 ring (12,288 ranges, stages
of several thousand segments: more than one block of the codes' index)."""

from __future__ import annotations

import random
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from ringward.migration import migration_steps, repair_segments
from ringward.migration_progress import stage_progress
from ringward.plan import build_plan
from ringward.ring import Node, Ring, TokenRange
from ringward.ring_sources import ring_to_json
from ringward_airflow.ui import views
from ringward_cassandra.ops_store import JournalEntry

sys.path.insert(0, str(Path(__file__).resolve().parent))  # test_ui_plugin, beside this file
from test_ui_plugin import NEW, OLD, RUN_ID, FakeSource, _world

DAG = "keyspace_migration"
MIGRATION_ID = f"shop@{RUN_ID}"


def _ring(nodes: int = 48, tokens: int = 256) -> Ring:
    picked = random.Random(25).sample(range(-(2**63) + 1, 2**63 - 1, 2**40), nodes * tokens)
    return Ring.of(
        Node(f"10.1.{i // 200}.{i % 200 + 1}", "dc1", f"rack{i % 3}", tuple(picked[i * tokens : (i + 1) * tokens]))
        for i in range(nodes)
    )


def _mixed_world() -> tuple[FakeSource, dict[str, list[TokenRange]]]:
    """The page's world on a 48 x 256 ring, its journal a seeded mix over every stage but the last one's (not
    started: no entry); the stages' segments by stage (RF 1 to 3: step 1 has no pre-repair)."""
    world = _world()
    ring = _ring()
    plan = build_plan(ring, OLD, NEW, keyspace="shop")
    steps = migration_steps(plan)
    row = world.store.migration_rows[0]
    record = dict(row.record, ring=ring_to_json(ring), old=plan.old.as_json(), new=plan.new.as_json(),
                  steps=[s.after.as_json() for s in steps], summary=plan.summary())  # fmt: skip
    world.store.migration_rows[0] = replace(row, record=record)
    rng = random.Random(36)
    segments: dict[str, list[TokenRange]] = {}
    journal: list[JournalEntry] = []
    for step in steps:
        for phase in ("pre", "post"):
            stage = f"{phase}_repair:{step.index}"
            ranges = [s.range for s in repair_segments(ring, step, "shop", phase)]
            segments[stage] = ranges
            if stage == f"post_repair:{steps[-1].index}":
                continue  # not started
            for token_range in ranges:
                roll = rng.random()
                if roll < 0.55:
                    journal.append(JournalEntry(stage, token_range, "done", "10.1.0.1", 1, 2.0, ""))
                elif roll < 0.58:
                    journal.append(JournalEntry(stage, token_range, "failed", "10.1.0.2", 3, 9.0, "stream failed"))
                elif roll < 0.59:
                    journal.append(JournalEntry(stage, token_range, "running", "10.1.0.3", 1, 0.0, "started"))
                elif roll < 0.592 and token_range.start + 1 < token_range.end:  # of no segment: a start that differs
                    moved = TokenRange(token_range.start + 1, token_range.end)
                    journal.append(JournalEntry(stage, moved, "done", "10.1.0.4", 1, 1.0, "not a segment"))
    world.store.journal = sorted(journal, key=lambda e: (e.step, e.range.start, e.range.end))
    return world, segments


def _keep_progress(world: FakeSource, segments: dict[str, list[TokenRange]]) -> None:
    """Each started stage's progress, as the worker that wrote its journal stores it."""
    for stage, ranges in segments.items():
        statuses = {e.range: e.status for e in world.store.journal if e.step == stage}
        if statuses:
            world.store.record_stage_progress(MIGRATION_ID, stage_progress(stage, ranges, statuses))


@pytest.fixture
def fresh(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No plan, journal or count kept from another test."""
    for kept in (views._PLANS, views._JOURNALS, views.JOURNAL_READS):
        kept.clear()
    yield
    for kept in (views._PLANS, views._JOURNALS, views.JOURNAL_READS):
        kept.clear()


def _view(world: FakeSource, window: views.Window) -> dict[str, Any]:
    views._JOURNALS.clear()  # the whole journal read anew (not one kept from the other world's request)
    data, _ = views.migration_view(world, DAG, RUN_ID, window=window)
    return data


def _windows(longest: int) -> list[views.Window]:
    offsets = [0, 1, 199, 4095, 4097, longest // 2, longest - 201, longest - 1, longest + 5]
    return [views.Window(offset, limit, triage) for triage in (False, True) for offset in offsets
            for limit in (1, 7, 200)]  # fmt: skip


def test_the_page_from_the_stored_progress_is_the_page_from_the_whole_journal(fresh: None) -> None:
    """Every window, both orders: the same counts, rows, statuses and details; the page from the progress read no
    more journal entries than it shows rows with an entry (and one per stage not started, to see it has none)."""
    whole, segments = _mixed_world()
    kept, _ = _mixed_world()
    kept.runs = whole.runs  # the same Airflow run (its times)
    _keep_progress(kept, segments)
    started = {e.step for e in kept.store.journal}
    assert {stage for _, stage in kept.store.stages} == started and len(started) >= 2  # none for a stage not started
    longest = max(len(r) for r in segments.values())
    strays = sum(1 for e in kept.store.journal if e.detail == "not a segment")
    assert longest > 4096 and 0 < strays < 100 and any(e.status == "running" for e in whole.store.journal)
    for window in _windows(longest):
        expected = _view(whole, window)
        views.JOURNAL_READS.clear()
        got = _view(kept, window)
        assert got == expected, window
        shown = [row for step in got["steps"] for stage in step["stages"] for row in stage["ranges"]]
        with_entry = sum(1 for row in shown if row["status"] != "pending")
        # the window's entries, and entries of no segment lying among them (which no worker writes): none else
        assert with_entry <= views.JOURNAL_READS[MIGRATION_ID] <= with_entry + strays, window
        assert views.JOURNAL_READS[MIGRATION_ID] <= window.limit * len(segments) + strays
    failed = [stage["failed"] for step in expected["steps"] for stage in step["stages"]]
    assert sum(failed) > 100  # the triage order's head is long: failed ranges in every started stage


def test_a_journal_without_progress_is_read_whole_and_a_progress_of_other_segments_is_not_used(
    fresh: None, caplog: pytest.LogCaptureFixture
) -> None:
    """An older worker's journal (no progress stored): the page reads it whole, as before. A stage's progress of
    other segments (a resume's plan, a hand edit) or that cannot be read is not used either: same page."""
    whole, segments = _mixed_world()
    window = views.Window(0, 200, triage=True)
    expected = _view(whole, window)
    # read whole, once (and one entry of each stage, which told it keeps no progress but has entries)
    assert 0 <= views.JOURNAL_READS[MIGRATION_ID] - len(whole.store.journal) <= len(segments)
    kept, _ = _mixed_world()
    kept.runs = whole.runs
    _keep_progress(kept, segments)
    stage = next(iter(kept.store.stages))
    progress = kept.store.stages[stage]
    kept.store.stages[stage] = replace(progress, segments="0" * 64)  # of other segments
    views.JOURNAL_READS.clear()
    assert _view(kept, window) == expected
    assert views.JOURNAL_READS[MIGRATION_ID] >= len(kept.store.journal)  # read whole
    kept.store.stages[stage] = replace(progress, statuses=progress.statuses[:-3])  # cut short
    views.JOURNAL_READS.clear()
    assert _view(kept, window) == expected
    assert "the stored progress of" in caplog.text and "is not used" in caplog.text


def test_a_span_cut_short_by_entries_of_no_segment_reads_the_stage_whole(fresh: None) -> None:
    """More entries of no segment among a window's rows than a span's slack (written by hand: no worker writes
    them): the span's limit cuts it short of rows it was for; the page then reads the stage's journal whole rather
    than show those rows pending. Same page as from the whole journal."""
    whole, segments = _mixed_world()
    kept, _ = _mixed_world()
    kept.runs = whole.runs
    _keep_progress(kept, segments)
    stage = "post_repair:1"
    ranges = segments[stage]
    statuses = {e.range: e.status for e in kept.store.journal if e.step == stage}
    done = [i for i in range(40) if statuses.get(ranges[i]) == "done" and statuses.get(ranges[i + 1]) == "done"]
    k = done[0]
    assert ranges[k].start + 40 < ranges[k].end and ranges[k + 1].start == ranges[k].end
    strays = [JournalEntry(stage, TokenRange(ranges[k].start + j, ranges[k].end), "done", "x", 1, 0.0, "by hand")
              for j in range(1, 31)]  # fmt: skip
    for world in (whole, kept):
        world.store.journal = sorted(world.store.journal + strays, key=lambda e: (e.step, e.range.start, e.range.end))
    window = views.Window(0, 200)
    expected = _view(whole, window)
    views.JOURNAL_READS.clear()
    assert _view(kept, window) == expected
    assert views.JOURNAL_READS[MIGRATION_ID] >= len(kept.store.journal)  # read whole


def test_a_change_the_worker_stores_shows_on_the_next_request(fresh: None) -> None:
    """No journal kept between requests: an entry the worker writes (and its progress) is on the next page."""
    world, segments = _mixed_world()
    _keep_progress(world, segments)
    window = views.Window(0, 50, triage=True)
    before, _ = views.migration_view(world, DAG, RUN_ID, window=window)
    stage = "post_repair:1"
    target = next(r for r in segments[stage] if not any(e.step == stage and e.range == r for e in world.store.journal))
    world.store.record_journal(MIGRATION_ID, JournalEntry(stage, target, "failed", "10.1.0.9", 2, 5.0, "node down"))
    _keep_progress(world, segments)
    after, _ = views.migration_view(world, DAG, RUN_ID, window=window)  # no clock moved, no cache cleared
    first = next(s for s in after["steps"][0]["stages"] if s["stage"] == stage)
    was = next(s for s in before["steps"][0]["stages"] if s["stage"] == stage)
    assert first["failed"] == was["failed"] + 1
    assert {"range": [target.start, target.end], "detail": "node down"}.items() <= next(
        row for row in first["ranges"] if row["range"] == [target.start, target.end]).items()  # fmt: skip
