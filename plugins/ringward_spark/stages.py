"""The migration's two Spark stages as plans of one stage job each, and their results as verification reports.

baseline  one phase: every table's affected ranges at CL ALL.
verify    two phases, in this order:
          replicas   every table x every new replica: the ranges it gained, pinned, CL ONE;
          reference  every table over the whole ring at CL ALL: its affected ranges are the reference counts,
                     all its ranges together the whole table's row count (one pass per table).
          The reference comes second: a read at ALL read-repairs the replicas it finds lacking, which would
          hide exactly what the pinned counts look for.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ringward.errors import ConfigurationError
from ringward.ring import TokenRange
from ringward.verification import VerificationReport, rest_of_ring, verify

from ringward_spark.counts import baseline_from_result, scan_counts_from_result, stage_scans
from ringward_spark.submit import Scan, StagePhase

__all__ = [
    "BASELINE",
    "REFERENCE",
    "REPLICAS",
    "TableVerification",
    "baseline_phases",
    "verify_phases",
    "verify_tables",
]

BASELINE = "baseline"
REPLICAS = "replicas"
REFERENCE = "reference"


def baseline_phases(tables: Sequence[str], ranges: Sequence[TokenRange]) -> list[StagePhase]:
    return [StagePhase(BASELINE, tuple(Scan(table, tuple(ranges)) for table in tables))]


def verify_phases(
    tables: Sequence[str], ranges: Sequence[TokenRange], gained: Mapping[str, Sequence[TokenRange]], cutoff_us: int
) -> list[StagePhase]:
    whole_ring = (*ranges, *rest_of_ring(ranges))
    pinned = tuple(
        Scan(table, tuple(replica_ranges), "ONE", pinned_host=replica, cutoff_us=cutoff_us)
        for table in tables
        for replica, replica_ranges in sorted(gained.items())
    )
    reference = tuple(Scan(table, whole_ring, "ALL", cutoff_us=cutoff_us) for table in tables)
    return [StagePhase(REPLICAS, pinned), StagePhase(REFERENCE, reference)]


@dataclass(frozen=True)
class TableVerification:
    table: str
    report: VerificationReport
    whole_table_rows: int

    def evidence(self) -> dict[str, Any]:
        return {
            "replica_checks": len(self.report.checks),
            "rows_verified": sum(c.replica_rows for c in self.report.checks),
            "not_in_sync": [c.describe() for c in self.report.warnings],
            "whole_table_rows": self.whole_table_rows,
        }


def verify_tables(
    result: Mapping[str, Any], ranges: Sequence[TokenRange], baselines: Mapping[str, Mapping[str, Any]], cutoff_us: int
) -> list[TableVerification]:
    """Per table of the reference phase: the verification rule applied to its counts, and its whole-table rows."""
    affected = {(r.start, r.end) for r in ranges}
    pinned: dict[str, list[Mapping[str, Any]]] = {}
    for scan in stage_scans(result, REPLICAS):
        pinned.setdefault(scan["table"], []).append(scan)
    verified = []
    for scan in stage_scans(result, REFERENCE):
        table = scan["table"]
        if table not in baselines:
            raise ConfigurationError(
                f"Table {table} was counted at verify time but has no baseline.",
                "Run the step's baseline again (clear the baseline task), then verify.",
            )
        reference = {**scan, "ranges": [e for e in scan["ranges"] if (e["start"], e["end"]) in affected]}
        whole_table_rows = sum(int(e["rows"]) + int(e["later_rows"]) for e in scan["ranges"])
        report = verify(
            baseline_from_result(baselines[table], cutoff_us),
            scan_counts_from_result(reference),
            [scan_counts_from_result(replica) for replica in pinned.get(table, [])],
        )
        verified.append(TableVerification(table, report, whole_table_rows))
    return verified
