"""Spark job plumbing without Spark: command lines, job arguments, range splitting, row dating, results."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward.errors import ConfigurationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, TokenRange
from ringward_spark.counts import baseline_from_result, scan_counts_from_result
from ringward_spark.range_counts import RangeTally, plan_subranges, row_written_at, scan_query, tally_ranges
from ringward_spark.ringward_job import parse_args
from ringward_spark.submit import count_job_args, range_counts_job_args

tokens = st.integers(MIN_TOKEN, MAX_TOKEN)


def test_range_counts_args_round_trip_through_the_job_parser() -> None:
    ranges = [TokenRange(MIN_TOKEN, -5), TokenRange(9, MIN_TOKEN), TokenRange(100, -100)]
    job_args = range_counts_job_args(
        ["127.0.0.12", "127.0.0.13"], "ks", "t", ranges, consistency="ONE", pinned_host="127.0.0.13",
        cutoff_us=123, splits_per_range=4,
    )  # fmt: skip
    args = parse_args([*job_args, "--output", "/tmp/x.json"])
    assert (args.mode, args.hosts, args.keyspace, args.table) == (
        "range-counts",
        "127.0.0.12,127.0.0.13",
        "ks",
        "t",
    )
    assert (args.consistency, args.pin_host, args.cutoff_us, args.splits_per_range) == (
        "ONE",
        "127.0.0.13",
        123,
        4,
    )
    assert args.ranges == ranges


def test_count_args_round_trip_and_refuse_nothing_to_count() -> None:
    args = parse_args([*count_job_args(["h"], "ks", "t", consistency="QUORUM"), "--output", "o"])
    assert (args.mode, args.consistency, args.port) == ("count", "QUORUM", 9042)
    with pytest.raises(ConfigurationError, match="contact points"):
        count_job_args([], "ks", "t")
    with pytest.raises(ConfigurationError, match="No token ranges"):
        range_counts_job_args(["h"], "ks", "t", [])


def _covered(pieces: list[tuple[int, int]], token: int) -> int:
    return sum(1 for start, end in pieces if start < token <= end)


@given(tokens, tokens, st.integers(1, 7), st.lists(tokens, max_size=20))
def test_subranges_never_wrap_and_cover_each_token_once(start: int, end: int, splits: int, probes: list[int]) -> None:
    token_range = TokenRange(start, end)
    pieces = plan_subranges([token_range], splits)
    assert all(p.start < p.end and p.index == 0 for p in pieces)
    bounds = [(p.start, p.end) for p in pieces]
    for token in [*probes, start, end, start + 1 if start < MAX_TOKEN else start, MAX_TOKEN]:
        if token == MIN_TOKEN:
            continue  # no key hashes to the minimum token
        assert _covered(bounds, token) == (1 if token_range.contains(token) else 0)


def test_subranges_keep_the_requested_range_index() -> None:
    pieces = plan_subranges([TokenRange(0, 10), TokenRange(10, 0)], 2)
    assert {p.index for p in pieces} == {0, 1}
    assert [(p.start, p.end) for p in pieces if p.index == 0] == [(0, 5), (5, 10)]
    with pytest.raises(ConfigurationError):
        plan_subranges([TokenRange(0, 10)], 0)


def test_row_written_at_takes_the_newest_cell() -> None:
    assert row_written_at([5, None, 7]) == 7
    assert row_written_at([None, [3, 9, None]]) == 9  # a non-frozen collection gives one time per cell
    assert row_written_at([None, None]) is None
    assert row_written_at([]) is None


def test_tallies_sum_per_requested_range() -> None:
    totals = tally_ranges(3, [RangeTally(0, 2, 1, 0), RangeTally(2, 4), RangeTally(0, 3, 0, 1)])
    assert totals == [RangeTally(0, 5, 1, 1), RangeTally(1), RangeTally(2, 4)]


def test_scan_query_quotes_names_and_bounds_the_token() -> None:
    query = scan_query("Ks", "t", ["a", "b"], ["v"])
    assert query == (
        'SELECT token("a", "b"), writetime("v") FROM "Ks"."t" WHERE token("a", "b") > %s AND token("a", "b") <= %s'
    )


def _result(**overrides: object) -> dict[str, object]:
    result: dict[str, object] = {
        "mode": "range-counts", "consistency": "ALL", "pinned_host": None, "cutoff_us": 77,
        "ranges": [{"start": 0, "end": 10, "rows": 4, "later_rows": 1, "undated_rows": 0}],
    }  # fmt: skip
    return {**result, **overrides}


def test_job_results_become_verification_inputs() -> None:
    scan = scan_counts_from_result(_result(pinned_host="h", consistency="ONE"))
    assert (scan.cutoff_us, scan.replica) == (77, "h")
    assert [(c.token_range, c.rows, c.later_rows) for c in scan.ranges] == [(TokenRange(0, 10), 4, 1)]
    assert baseline_from_result(_result(cutoff_us=None), 55).taken_at_us == 55
    with pytest.raises(ConfigurationError, match="CL ALL"):
        baseline_from_result(_result(consistency="ONE"), 55)
    with pytest.raises(ConfigurationError, match="cutoff"):
        scan_counts_from_result(_result(cutoff_us=None))
    with pytest.raises(ConfigurationError, match="range-counts"):
        scan_counts_from_result(_result(mode="count"))


def test_a_count_job_may_count_several_tables_in_one_application() -> None:
    args = parse_args([*count_job_args(["h"], "ks", ["a", "b", "c"]), "--output", "o"])
    assert (args.mode, args.tables) == ("count", ["a", "b", "c"])
    assert parse_args([*count_job_args(["h"], "ks", "a"), "--output", "o"]).tables == ["a"]
    with pytest.raises(ConfigurationError, match="No table"):
        count_job_args(["h"], "ks", [])


def test_writetime_is_read_only_from_columns_the_cluster_accepts_it_for() -> None:
    """Cassandra 4.x refuses writetime() of a non-frozen collection or user type; 5.0 returns cell timestamps."""
    from ringward_spark.range_counts import writetime_readable

    for cql_type in ("text", "int", "frozen<list<text>>", "frozen<address>"):
        assert writetime_readable(cql_type, below_5=True, user_types={"address"}), cql_type
    for cql_type in ("list<text>", "set<int>", "map<text, int>", "address"):
        assert not writetime_readable(cql_type, below_5=True, user_types={"address"}), cql_type
        assert writetime_readable(cql_type, below_5=False, user_types={"address"}), cql_type
    assert not writetime_readable("counter", below_5=False)
