"""The verify rule: per range and new replica ok / missing rows / extra rows, against the reference."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ringward.errors import ConfigurationError, VerificationError
from ringward.ring import TokenRange
from ringward.verification import Baseline, RangeCount, ScanCounts, Verdict, verify

T_B = 1_700_000_000_000_000
R1 = TokenRange(-100, 0)
R2 = TokenRange(0, 100)


def _scan(counts: dict[TokenRange, int], replica: str | None = None, cutoff: int = T_B) -> ScanCounts:
    return ScanCounts(cutoff, tuple(RangeCount(r, n) for r, n in counts.items()), replica)


def _baseline(counts: dict[TokenRange, int]) -> Baseline:
    return Baseline(T_B, tuple(RangeCount(r, n) for r, n in counts.items()))


def test_replica_with_every_reference_row_is_ok() -> None:
    report = verify(_baseline({R1: 10}), _scan({R1: 10}), [_scan({R1: 10}, "10.0.0.3")])
    assert report.ok
    assert [c.verdict for c in report.checks] == [Verdict.OK]
    assert report.failures == () and report.warnings == ()
    assert report.summary().startswith("verification passed")


def test_replica_below_reference_fails_naming_range_and_replica() -> None:
    report = verify(_baseline({R1: 10, R2: 5}), _scan({R1: 10, R2: 5}), [_scan({R1: 0, R2: 5}, "10.0.0.4")])
    assert not report.ok
    [failure] = report.failures
    assert (failure.token_range, failure.replica, failure.verdict) == (R1, "10.0.0.4", Verdict.MISSING_ROWS)
    assert "range (-100, 0] on 10.0.0.4: 10 of 10 rows missing" in report.summary()
    with pytest.raises(VerificationError, match=r"10\.0\.0\.4"):
        report.raise_for_failures()


def test_replica_above_reference_warns_but_passes() -> None:
    report = verify(_baseline({R1: 10}), _scan({R1: 9}), [_scan({R1: 10}, "10.0.0.4")])
    assert report.ok
    [warning] = report.warnings
    assert warning.verdict is Verdict.EXTRA_ROWS
    assert "not in sync" in report.summary()
    report.raise_for_failures()


def test_rows_deleted_during_migration_are_reported_not_failed() -> None:
    report = verify(_baseline({R1: 10}), _scan({R1: 7}), [_scan({R1: 7}, "10.0.0.4")])
    assert report.ok
    [range_check] = report.ranges
    assert range_check.vanished_rows == 3 and range_check.appeared_rows == 0
    assert "3 of 10 baseline rows deleted or rewritten" in report.summary()


def test_rows_written_after_the_cutoff_never_alarm() -> None:
    reference = ScanCounts(T_B, (RangeCount(R1, 10, later_rows=50),))
    replica = ScanCounts(T_B, (RangeCount(R1, 10, later_rows=3),), "10.0.0.4")
    report = verify(_baseline({R1: 10}), reference, [replica])
    assert report.ok and report.warnings == ()
    assert "50 rows written after the cutoff not compared" in report.summary()


def test_counts_with_another_cutoff_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="cutoff"):
        verify(_baseline({R1: 1}), _scan({R1: 1}, cutoff=T_B + 1), [])
    with pytest.raises(ConfigurationError, match="cutoff"):
        verify(_baseline({R1: 1}), _scan({R1: 1}), [_scan({R1: 1}, "10.0.0.4", cutoff=T_B - 1)])


def test_pinning_must_match_the_role() -> None:
    with pytest.raises(ConfigurationError, match="pinned"):
        verify(_baseline({R1: 1}), _scan({R1: 1}, "10.0.0.4"), [])
    with pytest.raises(ConfigurationError, match="pinned"):
        verify(_baseline({R1: 1}), _scan({R1: 1}), [_scan({R1: 1})])


def test_missing_or_duplicate_counts_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="no reference count"):
        verify(_baseline({R1: 1, R2: 1}), _scan({R1: 1}), [_scan({R2: 1}, "10.0.0.4")])
    with pytest.raises(ConfigurationError, match="no baseline count"):
        verify(_baseline({R1: 1}), _scan({R1: 1, R2: 1}), [])
    with pytest.raises(ConfigurationError, match="twice"):
        verify(_baseline({R1: 1}), ScanCounts(T_B, (RangeCount(R1, 1), RangeCount(R1, 1))), [])
    with pytest.raises(ConfigurationError, match="Negative"):
        RangeCount(R1, -1)


@given(
    st.lists(
        st.tuples(st.integers(0, 50), st.integers(0, 50), st.lists(st.integers(0, 50), max_size=3)),
        min_size=1,
        max_size=6,
    )
)
def test_verdicts_follow_the_comparison_with_the_reference(cases: list[tuple[int, int, list[int]]]) -> None:
    ranges = [TokenRange(i * 10, i * 10 + 10) for i in range(len(cases))]
    baseline = _baseline({r: base for r, (base, _, _) in zip(ranges, cases, strict=True)})
    reference = _scan({r: ref for r, (_, ref, _) in zip(ranges, cases, strict=True)})
    replicas = [
        _scan(
            {r: counts[k] for r, (_, _, counts) in zip(ranges, cases, strict=True) if k < len(counts)},
            f"n{k}",
        )
        for k in range(3)
    ]
    report = verify(baseline, reference, replicas)

    expected_failures = {
        (r, f"n{k}") for r, (_, ref, counts) in zip(ranges, cases, strict=True) for k, n in enumerate(counts) if n < ref
    }
    assert {(c.token_range, c.replica) for c in report.failures} == expected_failures
    assert report.ok == (not expected_failures)
    assert len(report.checks) == sum(len(counts) for _, _, counts in cases)
    for check in report.ranges:
        assert check.vanished_rows - check.appeared_rows == check.baseline_rows - check.reference_rows
