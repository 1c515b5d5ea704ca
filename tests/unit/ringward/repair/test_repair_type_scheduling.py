"""Issue 24: repair types as units of scheduling, their nodetool flags, the incremental guards and the
per-host controls (pure parts)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from ringward.errors import ConfigurationError
from ringward.repair import (
    RepairTypeSettings,
    RepairUnit,
    Segment,
    SegmentRecord,
    TableFeatures,
    apply_overrides,
    coverage_view,
    dump_config,
    history_key,
    incremental_repaired_shares,
    incremental_skip_reason,
    incremental_unit,
    joined_nodes,
    live_metrics,
    load_config,
    parse_config,
    prioritised,
    record_start,
    record_success,
    repair_flags,
    select_due_by_type,
)
from ringward.ring import TokenRange

NOW = datetime(2026, 11, 25, 2, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)


def seg(start: int, *replicas: str) -> Segment:
    return Segment("ks", (), TokenRange(start, start + 1), replicas)


# -- configuration -------------------------------------------------------------------------------------------


def test_the_shipped_config_runs_full_only_and_every_type_has_settings() -> None:
    config = load_config()
    assert config.enabled_types == ("full",)
    assert config.repair_type is None and config.session_type == "full"
    assert config.repair_types.incremental.min_free_disk_ratio == 0.2
    assert all(config.interval_of(kind) == timedelta(hours=24) for kind in ("full", "incremental", "preview", "paxos"))


@pytest.mark.parametrize("kind", ["full", "preview"])
def test_the_older_repair_type_field_still_works_as_only_that_type(kind: str) -> None:
    config = parse_config({"repair_type": kind})
    assert config.enabled_types == (kind,) and config.session_type == kind
    assert parse_config(dump_config(config)) == config  # the round trip of XCom and the run record


def test_repair_type_param_switches_one_type_on_and_keeps_the_others_settings() -> None:
    base = parse_config({"repair_types": {"full": {"job_threads": 3}, "incremental": {"enabled": True}}})
    assert base.enabled_types == ("full", "incremental")
    preview_night = apply_overrides(base, {"repair_type": "preview"})
    assert preview_night.enabled_types == ("preview",)
    assert preview_night.repair_types.full.job_threads == 3


def test_each_type_has_its_own_cadence_defaulting_to_the_top_level_one() -> None:
    config = parse_config(
        {"min_repair_interval": "12h", "repair_types": {"paxos": {"enabled": True, "min_repair_interval": "1h"}}}
    )
    assert config.interval_of("full") == 12 * HOUR and config.interval_of("paxos") == HOUR
    typed = config.for_type("paxos")
    assert typed.repair_type == "paxos" and typed.min_repair_interval == HOUR


@pytest.mark.parametrize(
    ("data", "words"),
    [
        ({"repair_types": {"preview": {"repair_out_of_sync": True}}}, None),
        ({"repair_types": {"full": {"repair_out_of_sync": True}}}, "only a preview"),
        ({"repair_types": {"paxos": {"min_free_disk_ratio": 0.1}}}, "only incremental"),
        ({"repair_types": {"full": {"parallelism": "dc_parallel", "local_dc_only": True}}}, "contradict"),
        ({"repair_types": {"full": {"parallelism": "datacenter_aware"}}}, "dc_parallel"),
        ({"repair_types": {"full": {"job_threads": 0}}}, "greater than or equal to 1"),
        ({"ignore_dcs": ["dc2"], "repair_types": {"full": {"local_dc_only": True}}}, "ignore_dcs"),
        ({"repair_types": {"full": {"local_dc_only": True}}}, None),
    ],
)
def test_type_settings_are_checked(data: dict[str, object], words: str | None) -> None:
    if words is None:
        parse_config(data)
        return
    with pytest.raises(ConfigurationError) as caught:
        parse_config(data)
    assert words in str(caught.value)


# -- nodetool flags ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "flags"),
    [
        ("full", ["-full"]),
        ("incremental", []),
        ("preview", ["-full", "--preview"]),
        ("paxos", ["--paxos-only"]),
    ],
)
def test_flags_per_type(kind: str, flags: list[str]) -> None:
    assert repair_flags(kind, RepairTypeSettings()) == flags  # type: ignore[arg-type]
    assert "--validate" not in repair_flags(kind, RepairTypeSettings())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("settings", "extra"),
    [
        (RepairTypeSettings(parallelism="parallel"), []),
        (RepairTypeSettings(parallelism="sequential"), ["-seq"]),
        (RepairTypeSettings(parallelism="dc_parallel"), ["-dcpar"]),
        (RepairTypeSettings(local_dc_only=True), ["-local"]),
        (
            RepairTypeSettings(parallelism="sequential", local_dc_only=True, job_threads=4),
            ["-seq", "-local", "-j", "4"],
        ),
        (RepairTypeSettings(job_threads=1), []),
    ],
)
def test_flags_per_parallelism_mode(settings: RepairTypeSettings, extra: list[str]) -> None:
    assert repair_flags("full", settings) == ["-full", *extra]


# -- per-type history and cadence ------------------------------------------------------------------------------


def test_history_keys_are_per_type_and_full_keeps_the_segment_id() -> None:
    assert history_key("abc", "full") == "abc"
    assert len({history_key("abc", kind) for kind in ("full", "incremental", "preview", "paxos")}) == 4


def _done(segment: Segment, kind: str, when: datetime) -> tuple[str, SegmentRecord]:
    record = record_success(
        record_start(SegmentRecord(segment.segment_id, repair_type=kind), segment.segment_id, "old"), when, 1.0, kind
    )
    return history_key(segment.segment_id, kind), record


def test_a_preview_night_does_not_delay_the_next_full_repair() -> None:
    """Issue 24's bug: a preview counted as a repair for min_repair_interval."""
    a = seg(0, "n1", "n2")
    config = parse_config({"repair_types": {"full": {"enabled": True}, "preview": {"enabled": True}}})
    records = dict([_done(a, "full", NOW - 25 * HOUR), _done(a, "preview", NOW - HOUR)])
    due = {plan.repair_type: plan.selection for plan in select_due_by_type([a], records, run_id="r", now=NOW,
                                                                           config=config)}  # fmt: skip
    assert due["full"].due == (a,)  # the preview an hour ago does not count
    assert due["preview"].not_due == (a,)  # the preview's own cadence does


def test_types_are_due_on_their_own_cadence() -> None:
    a, b = seg(0, "n1"), seg(10, "n2")
    config = parse_config(
        {
            "repair_types": {
                "full": {"min_repair_interval": "7d"},
                "incremental": {"enabled": True, "min_repair_interval": "1h"},
            }
        }
    )
    records = dict([_done(a, "full", NOW - 2 * 24 * HOUR), _done(a, "incremental", NOW - 2 * HOUR),
                    _done(b, "incremental", NOW - 30 * 60 * timedelta(seconds=1))])  # fmt: skip
    plans = select_due_by_type([a, b], records, run_id="r", now=NOW, config=config)
    assert [p.repair_type for p in plans] == ["full", "incremental"]
    full, incremental = plans
    assert full.selection.due == (b,) and full.selection.not_due == (a,)  # b never had a full repair
    assert incremental.selection.due == (a,) and incremental.selection.not_due == (b,)
    assert incremental.config.repair_type == "incremental" and incremental.config.min_repair_interval == HOUR


def test_disabled_repair_runs_no_type() -> None:
    config = parse_config({"enabled": False, "force_repair_hosts": ["n1"]})
    (full,) = select_due_by_type([seg(0, "n1")], {}, run_id="r", now=NOW, config=config)
    assert full.selection.due == () and len(full.selection.not_due) == 1


# -- per-host controls ----------------------------------------------------------------------------------------


def test_priority_hosts_ranges_come_first_keeping_their_order() -> None:
    a, b, c, d = seg(0, "n1", "n2"), seg(10, "n3", "n4"), seg(20, "n2", "n3"), seg(30, "n4", "n1")
    assert prioritised([a, b, c, d], ["n3"]) == [b, c, a, d]
    assert prioritised([a, b], []) == [a, b]
    config = parse_config({"priority_hosts": ["n3"]})
    (full,) = select_due_by_type([a, b, c, d], {}, run_id="r", now=NOW, config=config)
    assert full.selection.due == (b, c, a, d)


def test_force_repair_hosts_are_due_whatever_their_cadence() -> None:
    a, b = seg(0, "n1", "n2"), seg(10, "n3", "n4")
    records = dict([_done(a, "full", NOW - HOUR), _done(b, "full", NOW - HOUR)])
    config = parse_config({"force_repair_hosts": ["n4"]})
    (full,) = select_due_by_type([a, b], records, run_id="r", now=NOW, config=config)
    assert full.selection.due == (b,) and full.selection.not_due == (a,) and full.forced == 1


def test_a_node_that_joined_since_the_last_run_is_repaired_at_once() -> None:
    ring = {"10.0.0.1": "h1", "10.0.0.2": "h2", "10.0.0.9": "h9"}
    joined = joined_nodes(ring, ["h1", "h2", "h3"])
    assert joined == {"10.0.0.9"}
    assert joined_nodes(ring, []) == frozenset()  # no last run: nothing is "new"
    a, b = seg(0, "10.0.0.1", "10.0.0.2"), seg(10, "10.0.0.2", "10.0.0.9")
    records = dict([_done(a, "full", NOW - HOUR), _done(b, "full", NOW - HOUR)])
    (full,) = select_due_by_type([a, b], records, run_id="r", now=NOW, config=parse_config({}), joined=joined)
    assert full.selection.due == (b,)
    off = parse_config({"repair_new_nodes": False})
    (full,) = select_due_by_type([a, b], records, run_id="r", now=NOW, config=off, joined=joined)
    assert full.selection.due == ()


# -- incremental guards ---------------------------------------------------------------------------------------


def test_tables_with_views_or_cdc_get_no_incremental_repair() -> None:
    assert incremental_skip_reason("ks.t", TableFeatures()) is None
    views = incremental_skip_reason("ks.t", TableFeatures(materialized_views=("t_by_x",)))
    assert views is not None and "t_by_x" in views and "full" in views
    cdc = incremental_skip_reason("ks.t", TableFeatures(cdc=True))
    assert cdc is not None and "CDC" in cdc


def test_incremental_units_leave_out_tables_with_views_or_cdc_and_say_why() -> None:
    features = {"ks.events": TableFeatures(materialized_views=("events_by_user",)), "ks.log": TableFeatures(cdc=True)}
    unit, reasons = incremental_unit(RepairUnit("ks"), ["users", "events", "log"], features)
    assert unit == RepairUnit("ks", ("users",), "incremental") and len(reasons) == 2
    whole, none = incremental_unit(RepairUnit("ks"), ["users"], features)
    assert whole == RepairUnit("ks", (), "incremental") and none == []  # a new table still gets repaired
    gone, why = incremental_unit(RepairUnit("ks", ("events",)), ["users", "events"], features)
    assert gone is None and "events_by_user" in why[0]


# -- live metrics ----------------------------------------------------------------------------------------------


def test_live_metrics_follow_the_progress_report() -> None:
    progress = {"done": 7, "failed": 1, "postponed": 2, "total": 20, "sessions": 3, "final": False}
    assert live_metrics(progress, skipped=5) == {
        "SucceededTokenRangesCount": 7, "FailedTokenRangesCount": 1, "SkippedTokenRangesCount": 5,
        "PostponedTokenRangesCount": 2, "RepairsInProgress": 3,
    }  # fmt: skip
    assert live_metrics({**progress, "final": True})["RepairsInProgress"] == 0
    assert live_metrics({})["SucceededTokenRangesCount"] == 0


def test_the_repaired_share_of_a_table_is_the_mean_of_its_nodes_with_the_least_repaired_one() -> None:
    per_node = {"n1": {"ks.t": 100.0, "ks.u": 0.0}, "n2": {"ks.t": 50.0}, "n3": {"ks.t": 75.0}}
    assert incremental_repaired_shares(per_node) == {
        "ks.t": {"repaired": 75.0, "lowest": 50.0, "nodes": 3},
        "ks.u": {"repaired": 0.0, "lowest": 0.0, "nodes": 1},
    }
    assert incremental_repaired_shares({}) == {}


def test_a_types_coverage_reads_its_own_last_success_and_full_stays_as_it_is() -> None:
    full = record_success(record_start(None, "s", "r", "full"), NOW, 1.0, "full")
    assert coverage_view(full) == full
    preview = record_success(record_start(None, "s", "r", "preview"), NOW, 1.0, "preview")
    assert preview.last_full_success is None  # a preview repairs nothing
    assert coverage_view(preview).last_full_success == NOW and coverage_view(preview).last_success == NOW
