"""Did every new replica receive its data? The verify step's rule, from row counts per token range.

Three counts per affected range, all of CQL rows:

- baseline:  rows read at CL ALL before the ALTER, at time T_b (µs). The old replica set answered.
- reference: rows read at CL ALL at verify time whose newest writetime is <= the cutoff T_b. The new
  replica set answers, reconciled: a row any new replica holds is counted.
- replica:   rows one new replica holds with writetime <= T_b: a CL ONE read with the replica itself as
  the only coordinator (a replica coordinator serves ONE from its own data; dynamic snitch off).

Rows written after T_b, during the migration, are left out of the reference and the replica counts
alike, so writes still in flight to a new replica never raise an alarm.

The rule, per affected range and new replica:

- replica == reference: OK.
- replica <  reference: MISSING_ROWS, a failure. The replica lacks rows the others hold; reads at
  CL ONE served by it would miss them, and cleanup on the former replicas would lose them for good.
- replica >  reference: EXTRA_ROWS, a warning. The replica holds rows a reconciled read no longer
  returns (a deletion or a later overwrite has not reached it): not in sync; a preview repair decides.

And per range, reference against baseline (reported, never a failure):

- reference < baseline: rows deleted during the migration, or rewritten (an overwrite moves a row's
  writetime past the cutoff, so it leaves the count).
- reference > baseline: rows dated before T_b that the baseline did not see (client-supplied
  timestamps, writes landing while the baseline scan ran).

What counts cannot tell: rows held by no new replica at all are missing from the reference too, and
look like deletions. The precheck refuses changes that leave a range none of its old replicas, and
the full repair of the affected ranges runs before this check.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from ringward.errors import ConfigurationError, VerificationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, TokenRange

__all__ = [
    "Baseline",
    "RangeCheck",
    "RangeCount",
    "ReplicaCheck",
    "ScanCounts",
    "Verdict",
    "VerificationReport",
    "rest_of_ring",
    "verify",
]


class Verdict(StrEnum):
    OK = "ok"
    MISSING_ROWS = "missing_rows"
    EXTRA_ROWS = "extra_rows"


@dataclass(frozen=True)
class RangeCount:
    """Rows of one range written at or before the scan's cutoff; `later_rows` were written after it."""

    token_range: TokenRange
    rows: int
    later_rows: int = 0

    def __post_init__(self) -> None:
        if self.rows < 0 or self.later_rows < 0:
            raise ConfigurationError(
                f"Negative row count for range {self.token_range}.", "Pass the counts a scan returned."
            )


@dataclass(frozen=True)
class Baseline:
    """Counts at CL ALL before the ALTER; `taken_at_us` (T_b) is the cutoff of every later count."""

    taken_at_us: int
    ranges: tuple[RangeCount, ...]


@dataclass(frozen=True)
class ScanCounts:
    """Counts of one verify-time scan with `cutoff_us`: the reference (replica None) or one pinned replica."""

    cutoff_us: int
    ranges: tuple[RangeCount, ...]
    replica: str | None = None


@dataclass(frozen=True)
class ReplicaCheck:
    token_range: TokenRange
    replica: str
    replica_rows: int
    reference_rows: int

    @property
    def verdict(self) -> Verdict:
        if self.replica_rows < self.reference_rows:
            return Verdict.MISSING_ROWS
        if self.replica_rows > self.reference_rows:
            return Verdict.EXTRA_ROWS
        return Verdict.OK

    def describe(self) -> str:
        where = f"range {self.token_range} on {self.replica}"
        difference = abs(self.reference_rows - self.replica_rows)
        if self.verdict is Verdict.MISSING_ROWS:
            return f"{where}: {difference} of {self.reference_rows} rows missing"
        if self.verdict is Verdict.EXTRA_ROWS:
            return f"{where}: {difference} rows more than the reference {self.reference_rows} (not in sync)"
        return f"{where}: {self.replica_rows} rows, as the reference"


@dataclass(frozen=True)
class RangeCheck:
    token_range: TokenRange
    baseline_rows: int
    reference_rows: int
    later_rows: int
    replicas: tuple[ReplicaCheck, ...]

    @property
    def vanished_rows(self) -> int:
        """Baseline rows the reference no longer counts: deleted or rewritten during the migration."""
        return max(0, self.baseline_rows - self.reference_rows)

    @property
    def appeared_rows(self) -> int:
        """Rows dated before the baseline time that the baseline did not count."""
        return max(0, self.reference_rows - self.baseline_rows)

    def notes(self) -> list[str]:
        notes = []
        if self.vanished_rows:
            notes.append(
                f"range {self.token_range}: {self.vanished_rows} of {self.baseline_rows} baseline rows "
                "deleted or rewritten during the migration"
            )
        if self.appeared_rows:
            notes.append(f"range {self.token_range}: {self.appeared_rows} rows dated before the baseline are new to it")
        return notes


@dataclass(frozen=True)
class VerificationReport:
    cutoff_us: int
    ranges: tuple[RangeCheck, ...]

    @property
    def checks(self) -> tuple[ReplicaCheck, ...]:
        return tuple(check for r in self.ranges for check in r.replicas)

    @property
    def failures(self) -> tuple[ReplicaCheck, ...]:
        return tuple(c for c in self.checks if c.verdict is Verdict.MISSING_ROWS)

    @property
    def warnings(self) -> tuple[ReplicaCheck, ...]:
        return tuple(c for c in self.checks if c.verdict is Verdict.EXTRA_ROWS)

    @property
    def ok(self) -> bool:
        return not self.failures

    def summary(self) -> str:
        checks, failures, warnings = self.checks, self.failures, self.warnings
        head = (
            f"verification {'passed' if self.ok else 'FAILED'}: {len(self.ranges)} ranges, "
            f"{len(checks)} replica checks, {len(failures)} with missing rows, {len(warnings)} not in sync; "
            f"{sum(r.later_rows for r in self.ranges)} rows written after the cutoff not compared"
        )
        lines = [head]
        lines += ["  FAIL " + c.describe() for c in failures]
        lines += ["  WARN " + c.describe() for c in warnings]
        lines += ["  NOTE " + note for r in self.ranges for note in r.notes()]
        return "\n".join(lines)

    def raise_for_failures(self) -> None:
        if not self.ok:
            raise VerificationError(
                self.summary(),
                "Keep the former replicas (no cleanup): full-repair the failed ranges, then verify again.",
            )


def verify(baseline: Baseline, reference: ScanCounts, replicas: Sequence[ScanCounts]) -> VerificationReport:
    """Apply the rule of the module docstring to every range of the reference and every replica count."""
    cutoff = baseline.taken_at_us
    _check_scan(reference, cutoff, expect_replica=False)
    baseline_rows = _by_range(baseline.ranges, "baseline")
    reference_counts = {c.token_range: c for c in _unique(reference.ranges, "reference")}
    checks: dict[TokenRange, list[ReplicaCheck]] = {r: [] for r in reference_counts}
    for scan in replicas:
        replica = _check_scan(scan, cutoff, expect_replica=True)
        for count in _unique(scan.ranges, f"replica {replica}"):
            if count.token_range not in reference_counts:
                raise _incomplete(f"Replica {replica} was counted on range {count.token_range}", "reference")
            reference_rows = reference_counts[count.token_range].rows
            checks[count.token_range].append(ReplicaCheck(count.token_range, replica, count.rows, reference_rows))
    missing_baseline = [r for r in reference_counts if r not in baseline_rows]
    if missing_baseline:
        raise _incomplete(f"Range {missing_baseline[0]} was counted at verify time", "baseline")
    ranges = tuple(
        RangeCheck(r, baseline_rows[r], count.rows, count.later_rows, tuple(checks[r]))
        for r, count in reference_counts.items()
    )
    return VerificationReport(cutoff, ranges)


def rest_of_ring(ranges: Iterable[TokenRange]) -> list[TokenRange]:
    """Non-wrapping ranges covering every token that none of the (disjoint) `ranges` covers, in ring order.

    The verify stage counts these at CL ALL in the same pass as the affected ranges: together they are the whole
    table's row count, without a second full scan.
    """
    pieces = sorted(
        (piece.start, MAX_TOKEN if piece.end == MIN_TOKEN else piece.end)
        for token_range in ranges
        for piece in token_range.unwrap()
    )
    rest: list[TokenRange] = []
    cursor = MIN_TOKEN
    for start, end in pieces:
        if start < cursor:
            raise ConfigurationError(
                f"Range ({start}, {end}] overlaps another range up to token {cursor}.",
                "Give disjoint ranges (the affected ranges of one step are).",
            )
        if start > cursor:
            rest.append(TokenRange(cursor, start))
        cursor = end
    if cursor < MAX_TOKEN:
        rest.append(TokenRange(cursor, MAX_TOKEN))
    return rest


def _check_scan(scan: ScanCounts, cutoff_us: int, *, expect_replica: bool) -> str:
    """The scan's replica ("" for the reference), once its cutoff and pinning are as expected."""
    who = f"replica {scan.replica}" if scan.replica else "reference"
    if scan.cutoff_us != cutoff_us:
        raise ConfigurationError(
            f"The {who} counts used cutoff {scan.cutoff_us}, the baseline was taken at {cutoff_us}.",
            "Count with the baseline time as the cutoff, so rows written during the migration are left out.",
        )
    if expect_replica != (scan.replica is not None):
        raise ConfigurationError(
            f"The {who} counts are {'not ' if expect_replica else ''}pinned to a replica.",
            "Count the reference at CL ALL unpinned and each new replica pinned at CL ONE.",
        )
    return scan.replica or ""


def _unique(counts: Iterable[RangeCount], what: str) -> list[RangeCount]:
    listed = list(counts)
    seen: set[TokenRange] = set()
    for count in listed:
        if count.token_range in seen:
            raise ConfigurationError(f"Range {count.token_range} appears twice in the {what} counts.", "Count once.")
        seen.add(count.token_range)
    return listed


def _by_range(counts: Iterable[RangeCount], what: str) -> dict[TokenRange, int]:
    return {c.token_range: c.rows for c in _unique(counts, what)}


def _incomplete(what: str, missing: str) -> ConfigurationError:
    return ConfigurationError(
        f"{what} but has no {missing} count.", f"Count the same ranges for the {missing} as for the replicas."
    )
