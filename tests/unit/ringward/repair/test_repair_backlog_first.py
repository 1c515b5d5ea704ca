"""Backlog first (issue 40): while segments are never repaired or near their gc_grace deadline, segments that are
merely due do not take the backlog's nodes, and due segments run by the time left to their gc_grace deadline.

The multi-night tests run the fleet simulator in virtual time (`run_ringward` over the real planning and executor):
before `backlog_first` the second night re-repaired the first night's work beside its leftovers."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

from ringward.repair import (
    Segment,
    SegmentRecord,
    backlog_first,
    parse_config,
    select_due,
    select_due_by_type,
)
from ringward.ring import TokenRange
from ringward_fleetsim import DurationModel, FleetSpec, SimCluster
from ringward_fleetsim.ringward_run import run_ringward

NOW = datetime(2026, 11, 28, 2, 0, tzinfo=UTC)
DAY = timedelta(days=1)
TEN_DAYS = 864_000
DAY_SECONDS = 86_400


def seg(start: int, *replicas: str, keyspace: str = "ks") -> Segment:
    return Segment(keyspace, (), TokenRange(start, start + 1), replicas)


def repaired(segment: Segment, ago: timedelta) -> tuple[str, SegmentRecord]:
    return segment.segment_id, SegmentRecord(segment.segment_id, last_success=NOW - ago)


# -- the rule, pure -------------------------------------------------------------------------------------------


def test_merely_due_segments_wait_behind_the_backlog_on_their_nodes() -> None:
    never = seg(0, "a", "b")
    shares_b = seg(10, "b", "c")  # repaired 2 days ago: due, not near gc_grace (10 days)
    elsewhere = seg(20, "d", "e")  # the same, on nodes the backlog does not need
    records = dict([repaired(shares_b, 2 * DAY), repaired(elsewhere, 2 * DAY)])
    run, held = backlog_first([shares_b, elsewhere, never], records, NOW)
    assert run == [never, elsewhere]  # the backlog first, then what does not need its nodes
    assert held == [shares_b]


def test_without_a_backlog_every_due_segment_runs() -> None:
    a, b = seg(0, "a", "b"), seg(10, "b", "c")
    records = dict([repaired(a, 2 * DAY), repaired(b, 3 * DAY)])
    run, held = backlog_first([a, b], records, NOW)
    assert held == [] and run == [b, a]  # b's deadline is the earlier one


def test_a_segment_past_the_alarm_point_is_backlog_and_holds_back_its_nodes() -> None:
    late = seg(0, "a", "b")  # 8.5 of its 10 days gone: past gc_grace_alarm 0.8
    routine = seg(10, "b", "c")
    records = dict([repaired(late, timedelta(days=8.5)), repaired(routine, 2 * DAY)])
    run, held = backlog_first([routine, late], records, NOW, alarm_share=0.8)
    assert (run, held) == ([late], [routine])
    run, held = backlog_first([routine, late], records, NOW, alarm_share=0.9)  # 8.5 days is not late at 0.9
    assert (run, held) == ([late, routine], [])


def test_due_segments_run_by_the_time_left_to_their_gc_grace_deadline() -> None:
    """A short gc_grace repaired yesterday is nearer its deadline than a long one repaired three days ago."""
    long_grace = seg(0, "a", "b", keyspace="slow")  # 10 days, 3 gone: 7 left
    short_grace = seg(10, "c", "d", keyspace="fast")  # 4 days, 1.5 gone: 2.5 left (under the 0.8 alarm: 3.2)
    records = dict([repaired(long_grace, 3 * DAY), repaired(short_grace, timedelta(days=1.5))])
    gc_grace = {"slow": {"t": TEN_DAYS}, "fast": {"t": 4 * 86_400, "u": 5 * 86_400}}
    config = parse_config({})
    selection = select_due([long_grace, short_grace], records, run_id="r", now=NOW, config=config, gc_grace=gc_grace)
    assert selection.due == (short_grace, long_grace)
    assert selection.held_back == ()


def test_select_due_reports_the_held_back_as_not_due_and_a_forced_host_overrides_it() -> None:
    never = seg(0, "a", "b")
    routine = seg(10, "b", "c")
    records = dict([repaired(routine, 2 * DAY)])
    config = parse_config({})
    selection = select_due([never, routine], records, run_id="r", now=NOW, config=config)
    assert selection.due == (never,)
    assert selection.not_due == (routine,) and selection.held_back == (routine,)
    forced = parse_config({"force_repair_hosts": ["c"]})
    (full,) = select_due_by_type([never, routine], records, run_id="r", now=NOW, config=forced)
    assert set(full.selection.due) == {never, routine} and full.selection.held_back == ()


# -- several nights in virtual time (the fleet simulator) -------------------------------------------------------


def _two_night_fleet() -> tuple[FleetSpec, SimCluster]:
    """Six nodes (one DC, RF 3): a night of at most 30 simulated minutes of repair per unit and node leaves a
    backlog for the next night, when everything the first night repaired is due again (min_repair_interval 1h)."""
    spec = FleetSpec.fleet(nodes=6, vnodes=4, dcs=1, keyspaces=1, tables=2, table_bytes_median=200 * 2**30)
    spec = dataclasses.replace(spec, rf_per_dc=3, outliers=0, table_bytes_sigma=0.0)
    model = DurationModel(command_overhead=1.0, session_overhead=1.0, validation_rate=64 * 2**20, mismatch_share=0.0)
    return spec, SimCluster(spec, model, record=True)


def test_a_backlog_left_by_one_night_is_finished_first_by_the_next() -> None:
    spec, cluster = _two_night_fleet()
    config = parse_config({"table_max_repair_time": "30m", "min_repair_interval": "1h", "ranges_per_command": 1})
    result = run_ringward(spec, config, cluster=cluster, nights=4)
    assert result.coverage_seconds is not None and result.uncovered_ranges == 0
    covered_by = result.coverage_seconds
    later = sorted({int(s.start // DAY_SECONDS) for s in cluster.log if s.start >= DAY_SECONDS})
    assert later, "the first night left nothing for the next: the fleet is too small for this test"
    repeats_beside_backlog = 0
    for night in later:
        start = night * DAY_SECONDS
        done_before = {(s.keyspace, s.ranges) for s in cluster.log if s.end <= start and s.ok}
        tonight = [s for s in cluster.log if start <= s.start < start + DAY_SECONDS]
        backlog_nodes = {n for s in tonight if (s.keyspace, s.ranges) not in done_before for n in s.nodes}
        assert backlog_nodes  # each later night starts with the backlog the one before left
        # A range repaired on an earlier night, repaired again before the coverage was complete, took none of
        # the nodes tonight's backlog needed.
        repeats_beside_backlog += sum(
            1 for s in tonight
            if s.start < covered_by and (s.keyspace, s.ranges) in done_before and backlog_nodes & set(s.nodes)
        )  # fmt: skip
    assert repeats_beside_backlog == 0


def test_the_backlog_converges_in_three_nights_and_is_covered_when_its_last_range_is_first_repaired() -> None:
    spec, cluster = _two_night_fleet()
    config = parse_config({"table_max_repair_time": "30m", "min_repair_interval": "1h", "ranges_per_command": 1})
    result = run_ringward(spec, config, cluster=cluster, nights=3)
    first_repair: dict[object, float] = {}
    for session in sorted(cluster.log, key=lambda s: s.end):
        if session.ok:
            first_repair.setdefault((session.keyspace, session.ranges), session.end)
    assert len(first_repair) > 1 and result.coverage_seconds == max(first_repair.values())
