"""One Spark application per verification stage, without Spark: the plans of the baseline and verify stages,
the job's pieces and arguments, the plan file shipped with the submission, and results turned into reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward.errors import ConfigurationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, TokenRange
from ringward.verification import Verdict, rest_of_ring
from ringward_spark.ringward_job import PIECES_PER_RING, parse_args, plan_phase_pieces
from ringward_spark.stages import REFERENCE, REPLICAS, baseline_phases, verify_phases, verify_tables
from ringward_spark.submit import Scan, SparkSubmission, StagePhase, stage_job_args, stage_plan

tokens = st.integers(MIN_TOKEN + 1, MAX_TOKEN)


def _covering(ranges: list[TokenRange], token: int) -> int:
    return sum(1 for r in ranges if r.contains(token))


@given(st.lists(tokens, min_size=0, max_size=12, unique=True), st.lists(tokens, max_size=20))
def test_rest_of_ring_and_the_ranges_cover_every_token_once(bounds: list[int], probes: list[int]) -> None:
    ordered = sorted(bounds)
    # every other gap between sorted bounds is a range: disjoint, non-wrapping
    ranges = [TokenRange(a, b) for a, b in zip(ordered[::2], ordered[1::2], strict=False)]
    rest = rest_of_ring(ranges)
    assert all(not r.wraps for r in rest)
    for token in [*probes, *ordered, MAX_TOKEN, MIN_TOKEN + 1]:
        assert _covering(ranges + rest, token) == 1


def test_rest_of_ring_of_a_wrapping_range_and_of_overlaps() -> None:
    assert rest_of_ring([TokenRange(100, -100)]) == [TokenRange(-100, 100)]
    assert rest_of_ring([TokenRange(MIN_TOKEN, MIN_TOKEN)]) == []
    assert rest_of_ring([]) == [TokenRange(MIN_TOKEN, MAX_TOKEN)]
    assert rest_of_ring([TokenRange(5, MIN_TOKEN)]) == [TokenRange(MIN_TOKEN, 5)]
    with pytest.raises(ConfigurationError, match="overlaps"):
        rest_of_ring([TokenRange(0, 10), TokenRange(5, 20)])


AFFECTED = [TokenRange(0, 100), TokenRange(200, 300)]
GAINED = {"10.0.0.3": [TokenRange(0, 100)], "10.0.0.2": [TokenRange(0, 100), TokenRange(200, 300)]}


def test_the_verify_plan_counts_every_replica_before_the_whole_ring_reference() -> None:
    replicas, reference = verify_phases(["a", "b"], AFFECTED, GAINED, cutoff_us=77)
    assert (replicas.name, reference.name) == (REPLICAS, REFERENCE)
    assert [(s.table, s.pinned_host, s.consistency, s.ranges) for s in replicas.scans] == [
        ("a", "10.0.0.2", "ONE", tuple(GAINED["10.0.0.2"])),
        ("a", "10.0.0.3", "ONE", tuple(GAINED["10.0.0.3"])),
        ("b", "10.0.0.2", "ONE", tuple(GAINED["10.0.0.2"])),
        ("b", "10.0.0.3", "ONE", tuple(GAINED["10.0.0.3"])),
    ]
    assert [(s.table, s.pinned_host, s.consistency) for s in reference.scans] == [
        ("a", None, "ALL"),
        ("b", None, "ALL"),
    ]
    for scan in reference.scans:  # the affected ranges and the rest: the whole ring, once
        assert scan.ranges[:2] == tuple(AFFECTED)
        assert all(_covering(list(scan.ranges), t) == 1 for t in (MIN_TOKEN + 1, 0, 1, 150, 300, 301, MAX_TOKEN))
    assert {s.cutoff_us for s in (*replicas.scans, *reference.scans)} == {77}
    (baseline,) = baseline_phases(["a", "b"], AFFECTED)
    assert [(s.table, s.consistency, s.pinned_host, s.cutoff_us, s.ranges) for s in baseline.scans] == [
        (t, "ALL", None, None, tuple(AFFECTED)) for t in ("a", "b")
    ]


def _entries(*counts: tuple[TokenRange, int, int]) -> list[dict[str, int]]:
    return [
        {"start": r.start, "end": r.end, "rows": n, "later_rows": later, "undated_rows": 0} for r, n, later in counts
    ]


def _scan(table: str, consistency: str, pinned: str | None, cutoff: int | None, *counts: Any) -> dict[str, Any]:
    return {"mode": "range-counts", "table": table, "consistency": consistency, "pinned_host": pinned,
            "cutoff_us": cutoff, "ranges": _entries(*counts)}  # fmt: skip


def test_a_stage_result_becomes_one_report_per_table_with_its_whole_row_count() -> None:
    r1, r2 = AFFECTED
    outside = TokenRange(300, MAX_TOKEN)
    baselines = {
        "a": _scan("a", "ALL", None, None, (r1, 10, 0), (r2, 5, 0)),
        "b": _scan("b", "ALL", None, None, (r1, 0, 0), (r2, 0, 0)),
    }
    result = {
        "mode": "stage",
        "phases": [
            {"name": REPLICAS, "scans": [
                _scan("a", "ONE", "10.0.0.2", 77, (r1, 10, 0), (r2, 4, 0)),
                _scan("a", "ONE", "10.0.0.3", 77, (r1, 10, 0)),
                _scan("b", "ONE", "10.0.0.2", 77, (r1, 0, 0), (r2, 0, 0)),
            ]},
            {"name": REFERENCE, "scans": [
                _scan("a", "ALL", None, 77, (r1, 10, 2), (r2, 5, 0), (outside, 1000, 3)),
                _scan("b", "ALL", None, 77, (r1, 0, 0), (r2, 0, 0), (outside, 7, 0)),
            ]},
        ],
    }  # fmt: skip
    a, b = verify_tables(result, AFFECTED, baselines, 77)
    assert (a.table, a.whole_table_rows, b.table, b.whole_table_rows) == ("a", 1020, "b", 7)
    assert [c.token_range for c in a.report.ranges] == AFFECTED  # the rest of the ring is no reference range
    assert [(c.replica, c.token_range, c.verdict) for c in a.report.failures] == [
        ("10.0.0.2", r2, Verdict.MISSING_ROWS)
    ]
    assert b.report.ok and len(b.report.checks) == 2
    assert a.evidence()["whole_table_rows"] == 1020 and a.evidence()["replica_checks"] == 3
    with pytest.raises(ConfigurationError, match="no baseline"):
        verify_tables(result, AFFECTED, {"a": baselines["a"]}, 77)
    with pytest.raises(ConfigurationError, match="no phase 'replicas'"):
        verify_tables({"mode": "stage", "phases": []}, AFFECTED, baselines, 77)


def test_the_pieces_of_a_phase_are_no_wider_than_their_share_of_the_ring() -> None:
    scans = [Scan("a", (TokenRange(MIN_TOKEN, MAX_TOKEN),)).as_json(), Scan("b", (TokenRange(0, 10),)).as_json()]
    pieces = plan_phase_pieces(scans)
    assert sum(1 for number, _ in pieces if number == 0) == PIECES_PER_RING
    assert [(p.start, p.end) for number, p in pieces if number == 1] == [(0, 10)]
    assert max(p.end - p.start for _, p in pieces) <= 2**64 // PIECES_PER_RING


def test_stage_plan_refuses_nothing_to_count() -> None:
    with pytest.raises(ConfigurationError, match="no phases"):
        stage_plan([])
    with pytest.raises(ConfigurationError, match="no scans"):
        stage_plan([StagePhase("x", ())])
    with pytest.raises(ConfigurationError, match="over no token range"):
        stage_plan([StagePhase("x", (Scan("t", ()),))])
    with pytest.raises(ConfigurationError, match="contact points"):
        stage_job_args([], "ks")


def test_the_plan_travels_as_a_file_beside_the_stage_arguments(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "jars"
    folder.mkdir()
    (folder / "spark-cassandra-connector_2.12-3.5.1.jar").touch()
    monkeypatch.setenv("RINGWARD_SPARK_JARS_DIR", str(folder))
    plan = stage_plan(verify_phases(["a"], AFFECTED, GAINED, cutoff_us=77))
    submission = SparkSubmission(stage_job_args(["h1", "h2"], "ks", port=9043), master="local[2]", plan=plan)
    hook = submission.hook(tmp_path)
    args = parse_args(hook._application_args)
    assert (args.mode, args.hosts, args.port, args.keyspace) == ("stage", "h1,h2", 9043, "ks")
    assert json.loads(Path(args.plan).read_text()) == plan
    assert Path(args.output).parent == tmp_path
