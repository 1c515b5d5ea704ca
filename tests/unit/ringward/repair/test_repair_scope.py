"""What a repair status covers (shared by `ringward repair status` and the UI's Repair page): the settings it
plans segments with, the tables it lists and the ones it leaves out, each with the reason."""

from __future__ import annotations

from ringward.repair import RECENT_RUNS, dump_config, load_config, parse_config, repair_scope, status_config

SCHEMA = {
    "system": ["local", "peers_v2"],
    "system_schema": ["tables"],
    "system_traces": ["events", "sessions"],
    "system_distributed": ["repair_history", "view_build_status"],
    "ringward_ops": ["leases", "repair_history"],
    "shop": ["orders", "carts"],
    "nightly": ["users"],
    "empty": [],
}


def test_status_uses_the_last_runs_splitter_with_the_base_selection() -> None:
    base = load_config()
    last = parse_config({"splitter": {"subranges_per_range": 2}, "keyspaces": {"include": ["only_this"]}})
    chosen = status_config(base, dump_config(last), "r1")
    assert chosen.config.splitter == last.splitter and chosen.config.splitter != base.splitter
    assert chosen.config.keyspaces == base.keyspaces
    assert chosen.problem is None and chosen.note is None
    assert status_config(base, None, None).config is base
    assert status_config(base, {}, "r0").config is base


def test_an_unreadable_recorded_config_falls_back_to_the_base_and_says_why() -> None:
    base = load_config()
    chosen = status_config(base, {"segment_timeout": "PT3H"}, "old")
    assert chosen.config is base
    assert chosen.note is not None
    assert "segment_timeout" in chosen.note and "run old" in chosen.note and "base configuration" in chosen.note


def test_default_scope_lists_replicated_tables_and_says_what_is_left_out() -> None:
    covered, excluded = repair_scope(SCHEMA, load_config())
    assert covered == [
        ("nightly", "users"), ("ringward_ops", "leases"), ("ringward_ops", "repair_history"),
        ("shop", "carts"), ("shop", "orders"),
        ("system_distributed", "repair_history"), ("system_distributed", "view_build_status"),
    ]  # fmt: skip
    reasons = {e.name: e.reason for e in excluded}
    assert set(reasons) == {"system", "system_schema", "system_traces", "empty"}
    assert "node-local" in reasons["system"] and "node-local" in reasons["system_schema"]
    assert (
        reasons["system_traces"] == "left out by the configuration: keyspaces include ['*'] exclude ['system_traces']"
    )
    assert reasons["empty"] == "no tables"


def test_runs_limited_by_their_parameters_narrow_the_list_to_what_they_repaired() -> None:
    """The screenshot's case: the runs repaired only `nightly`; system_distributed and ringward_ops are not
    listed as overdue, they are listed as left out, naming the latest run and its selection."""
    only_nightly = dump_config(parse_config({"keyspaces": {"include": ["nightly"]}}))
    covered, excluded = repair_scope(SCHEMA, load_config(), [("manual__1", only_nightly)])
    assert covered == [("nightly", "users")]
    reasons = {e.name: e.reason for e in excluded}
    for keyspace in ("ringward_ops", "system_distributed", "shop"):
        assert reasons[keyspace] == (
            "all 2 tables: outside the scope of the latest run (latest: manual__1, keyspaces include ['nightly'] "
            "exclude [], tables include ['*'] exclude [])"
        )
    # Another recent run repaired `shop`: both are covered, and the reason counts the runs.
    only_shop = dump_config(parse_config({"keyspaces": {"include": ["shop"]}}))
    covered, excluded = repair_scope(SCHEMA, load_config(), [("manual__2", only_shop), ("manual__1", only_nightly)])
    assert covered == [("nightly", "users"), ("shop", "carts"), ("shop", "orders")]
    reason = {e.name: e.reason for e in excluded}["ringward_ops"]
    assert reason.startswith("all 2 tables: outside the scope of any of the 2 latest runs (latest: manual__2, ")


def test_a_full_scheduled_run_among_the_recent_ones_covers_the_whole_selection() -> None:
    full = dump_config(load_config())
    only_nightly = dump_config(parse_config({"keyspaces": {"include": ["nightly"]}}))
    runs = [("manual__noon", only_nightly), ("scheduled__night", full)]
    assert repair_scope(SCHEMA, load_config(), runs)[0] == repair_scope(SCHEMA, load_config())[0]
    # ... unless it is older than the last RECENT_RUNS runs.
    older = [(f"manual__{i}", only_nightly) for i in range(RECENT_RUNS)] + [("scheduled__night", full)]
    assert repair_scope(SCHEMA, load_config(), older)[0] == [("nightly", "users")]


def test_table_filters_name_each_table_left_out() -> None:
    config = parse_config({"keyspaces": {"include": ["shop", "nightly"]}, "tables": {"exclude": ["shop.carts"]}})
    covered, excluded = repair_scope(SCHEMA, config)
    assert covered == [("nightly", "users"), ("shop", "orders")]
    reasons = {e.name: e.reason for e in excluded}
    assert reasons["shop.carts"] == "left out by the configuration: tables include ['*'] exclude ['shop.carts']"
    assert "ringward_ops" in reasons and "keyspaces include ['shop', 'nightly']" in reasons["ringward_ops"]


def test_an_unreadable_run_config_narrows_nothing() -> None:
    covered, _ = repair_scope(SCHEMA, load_config(), [("old", {"segment_timeout": "PT3H"}), ("none", None)])
    assert covered == repair_scope(SCHEMA, load_config())[0]
