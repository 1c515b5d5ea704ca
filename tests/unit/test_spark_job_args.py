"""Spark job plumbing without Spark: command lines, job arguments, range splitting, row dating, results."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward.errors import ConfigurationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, TokenRange
from ringward_spark import jars, submit
from ringward_spark.counts import baseline_from_result, scan_counts_from_result
from ringward_spark.range_counts import RangeTally, plan_subranges, row_written_at, scan_query, tally_ranges
from ringward_spark.ringward_job import parse_args
from ringward_spark.submit import JOB_FILE, count_job_args, range_counts_job_args, spark_submit_args

tokens = st.integers(MIN_TOKEN, MAX_TOKEN)


def test_spark_submit_args_keep_spark_small_and_pass_the_jars() -> None:
    command = spark_submit_args(["count"], jars=["/a.jar", "/b.jar"], spark_submit="/bin/spark-submit")
    assert command[:3] == ["/bin/spark-submit", "--master", "local[2]"]
    assert command[command.index("--driver-memory") + 1] == "512m"
    assert command[command.index("--jars") + 1] == "/a.jar,/b.jar"
    confs = {command[i + 1] for i, arg in enumerate(command) if arg == "--conf"}
    assert {"spark.ui.enabled=false", "spark.sql.shuffle.partitions=4"} <= confs
    assert any(c.startswith("spark.executor.extraJavaOptions=") and "netty" in c for c in confs)
    assert "netty" in command[command.index("--driver-java-options") + 1]
    assert command[-2:] == [str(JOB_FILE), "count"]


def test_spark_submit_args_take_overrides() -> None:
    command = spark_submit_args(
        ["count"],
        master="local[1]",
        conf={"spark.driver.memory": "1g", "spark.driver.extraJavaOptions": "-Dx=1"},
    )
    assert command[command.index("--master") + 1] == "local[1]"
    assert command[command.index("--driver-memory") + 1] == "1g"
    assert command[command.index("--driver-java-options") + 1].endswith(" -Dx=1")
    assert "--jars" not in command


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


def test_jars_need_maven_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    with pytest.raises(ConfigurationError, match="Maven"):
        jars.connector_jars(tmp_path)
    lib = jars.connector_lib_dir(tmp_path)
    lib.mkdir(parents=True)
    (lib / "spark-cassandra-connector_2.12-3.5.1.jar").touch()
    (lib / ".complete").touch()
    assert jars.connector_jars(tmp_path) == [str(lib / "spark-cassandra-connector_2.12-3.5.1.jar")]


def _fake_spark_submit(tmp_path: Path, body: str) -> str:
    script = tmp_path / "spark-submit"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return str(script)


def test_run_job_returns_what_the_job_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The fake writes {"argc": N, "python": $PYSPARK_PYTHON} to the path after --output, as the job does.
    fake = _fake_spark_submit(
        tmp_path,
        'while [ "$1" != "--output" ]; do shift; done\n'
        'printf \'{"mode": "count", "python": "%s"}\' "$PYSPARK_PYTHON" > "$2"\n',
    )
    monkeypatch.setattr(submit, "spark_submit_binary", lambda: fake)
    monkeypatch.setattr(submit, "connector_jars", lambda: ["/x.jar"])
    assert submit.run_job(count_job_args(["h"], "ks", "t")) == {"mode": "count", "python": sys.executable}


def test_run_job_failure_shows_the_python_traceback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _fake_spark_submit(
        tmp_path,
        "echo '26/11/22 INFO SparkContext: noise' >&2\n"
        "echo 'Traceback (most recent call last):' >&2\n"
        "echo '  File \"job.py\", line 1' >&2\n"
        "echo '\tat org.apache.spark.Frame(Frame.scala:1)' >&2\n"
        "echo 'ValueError: table gone' >&2\nexit 1\n",
    )
    monkeypatch.setattr(submit, "spark_submit_binary", lambda: fake)
    monkeypatch.setattr(submit, "connector_jars", lambda: [])
    with pytest.raises(submit.SparkJobError, match="exit 1") as failure:
        submit.run_job(count_job_args(["h"], "ks", "t"))
    assert "ValueError: table gone" in failure.value.problem
    assert "Frame.scala" not in failure.value.problem and "noise" not in failure.value.problem
