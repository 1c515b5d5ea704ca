"""range-counts job results as the verification rule's inputs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ringward.errors import ConfigurationError
from ringward.ring import TokenRange
from ringward.verification import Baseline, RangeCount, ScanCounts

__all__ = ["baseline_from_result", "range_counts_from_result", "scan_counts_from_result", "stage_scans"]


def range_counts_from_result(result: Mapping[str, Any]) -> tuple[RangeCount, ...]:
    if result.get("mode") != "range-counts":
        raise ConfigurationError(
            f"Expected a range-counts job result, got mode {result.get('mode')!r}.", "Run a range-counts job."
        )
    return tuple(
        RangeCount(TokenRange(int(entry["start"]), int(entry["end"])), int(entry["rows"]), int(entry["later_rows"]))
        for entry in result["ranges"]
    )


def baseline_from_result(result: Mapping[str, Any], taken_at_us: int) -> Baseline:
    """The baseline: a CL ALL range-counts run before the ALTER that started at `taken_at_us`."""
    if result.get("consistency") != "ALL" or result.get("pinned_host"):
        raise ConfigurationError(
            "A baseline must be counted at CL ALL without pinning.", "Run range-counts with consistency ALL."
        )
    return Baseline(taken_at_us, range_counts_from_result(result))


def scan_counts_from_result(result: Mapping[str, Any]) -> ScanCounts:
    """A verify-time scan: the reference (unpinned) or one new replica (pinned)."""
    if result.get("cutoff_us") is None:
        raise ConfigurationError(
            "A verify-time count needs a writetime cutoff.",
            "Run range-counts with cutoff_us = the baseline time.",
        )
    return ScanCounts(int(result["cutoff_us"]), range_counts_from_result(result), result.get("pinned_host"))


def stage_scans(result: Mapping[str, Any], phase: str) -> list[dict[str, Any]]:
    """The range-counts results of one phase of a stage job, in the order of the plan's scans."""
    if result.get("mode") != "stage":
        raise ConfigurationError(f"Expected a stage job result, got mode {result.get('mode')!r}.", "Run a stage job.")
    for entry in result["phases"]:
        if entry["name"] == phase:
            return list(entry["scans"])
    raise ConfigurationError(
        f"The stage job result has no phase {phase!r}.", "Plan the phase in the stage job (spark_operators)."
    )
