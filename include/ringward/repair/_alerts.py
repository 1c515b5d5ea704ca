"""What a night's report should page someone about: tables near or past their gc_grace deadline, and a night
that ended PARTIAL or FAILED. Pure: the report's table statuses in, alerts out; `ringward_airflow.alerts`
hands them to the Airflow notifiers a deployment configured (operator's guide, "Metrics and alerts").

Each alert names the cluster, the tables and the fix, in the house style of `ringward.errors`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from ringward.repair._status import RepairStatus

__all__ = ["NEAR_DEADLINE_SHARE", "RepairAlert", "decide_alerts"]

# A table whose oldest repaired range is older than this share of its gc_grace_seconds is near its deadline.
NEAR_DEADLINE_SHARE: Final = 0.9
_LISTED = 20  # tables named in a message; the alert's `tables` holds them all


@dataclass(frozen=True)
class RepairAlert:
    """One alert of a night: `kind` is gc_grace_passed, gc_grace_near, night_partial or night_failed."""

    kind: str
    severity: str  # critical | warning
    cluster: str
    run_id: str
    tables: tuple[str, ...]
    problem: str
    fix: str

    @property
    def subject(self) -> str:
        return f"[ringward {self.severity}] {self.cluster}: {self.problem}"

    @property
    def message(self) -> str:
        """The text a notifier sends: problem, tables, fix."""
        more = len(self.tables) - _LISTED
        shown = ", ".join(self.tables[:_LISTED]) + (f" and {more} more" if more > 0 else "")
        lines = [f"Cluster {self.cluster}, run {self.run_id}: {self.problem}"]
        if self.tables:
            lines.append(f"Tables: {shown}")
        lines.append(f"Fix: {self.fix}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, object]:
        return {"kind": self.kind, "severity": self.severity, "cluster": self.cluster, "run_id": self.run_id,
                "tables": list(self.tables), "problem": self.problem, "fix": self.fix, "subject": self.subject,
                "message": self.message}  # fmt: skip


def _name(status: RepairStatus) -> str:
    return f"{status.keyspace}.{status.table}"


def _used(status: RepairStatus) -> float | None:
    age = status.oldest_age
    if age is None or status.gc_grace_seconds <= 0:
        return None
    return age.total_seconds() / status.gc_grace_seconds


def decide_alerts(
    cluster: str,
    run_id: str,
    state: str,
    statuses: Sequence[RepairStatus],
    counts: Mapping[str, int] | None = None,
    near_share: float = NEAR_DEADLINE_SHARE,
) -> list[RepairAlert]:
    """The alerts of a night: tables past their gc_grace deadline (or with a range never repaired), tables
    past `near_share` of it, and the night's state when PARTIAL or FAILED (`counts`: its segments by state,
    e.g. {"failed": 2, "postponed": 5}, named in the message)."""
    passed = sorted(_name(s) for s in statuses if s.health == "OVERDUE")
    near = sorted(
        _name(s) for s in statuses
        if s.health != "OVERDUE" and s.repaired_share is not None and (_used(s) or 0.0) >= near_share
    )  # fmt: skip
    alerts = []
    if passed:
        alerts.append(RepairAlert(
            "gc_grace_passed", "critical", cluster, run_id, tuple(passed),
            f"{len(passed)} table(s) have token ranges not repaired within gc_grace_seconds (or never repaired): "
            "deleted data can come back on replicas that missed a tombstone.",
            "Repair them now: trigger nightly_subrange_repair with Keyspaces/Tables set to them and Segments to "
            "repair = all. If that cannot finish soon, raise their gc_grace_seconds until it has; then find why "
            "the nights did not reach them (postponed or failed segments in the reports, the window, "
            "back-pressure).",
        ))  # fmt: skip
    if near:
        alerts.append(RepairAlert(
            "gc_grace_near", "warning", cluster, run_id, tuple(near),
            f"{len(near)} table(s) are past {near_share:.0%} of gc_grace_seconds since their oldest repaired range.",
            "Make sure the next nights reach them: read the last reports for postponed or failed segments, widen "
            "the window (window.max_duration) or raise parallel_repair_count, or repair them by hand "
            "(Keyspaces/Tables set to them).",
        ))  # fmt: skip
    if state in ("PARTIAL", "FAILED"):
        told = ", ".join(f"{n} {word}" for word, n in sorted((counts or {}).items()) if n)
        alerts.append(RepairAlert(
            f"night_{state.lower()}", "warning" if state == "PARTIAL" else "critical", cluster, run_id, (),
            f"The nightly repair ended {state}" + (f" ({told})." if told else "."),
            "Read the repair and report task logs (last_error in ringward_ops.repair_history); failed and "
            "postponed segments stay due and the next night retries them. If it recurs: the window is too short "
            "for the plan, nodes hold sessions back (back-pressure), or a node is down.",
        ))  # fmt: skip
    return alerts
