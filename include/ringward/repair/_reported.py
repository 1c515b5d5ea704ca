"""What the nightly runs' stored reports say: each table's coverage as the latest report that lists it gave it,
each repair type's entry of a report, a running run's stored progress as figures, which run is under way.

Pure reads of what the report task and the repair worker stored (ringward_ops.repair_runs, repair_progress):
nothing is planned, the repair history is not read. Shared by the Repair page of the Airflow UI and
`ringward repair status` (its default, cheap view).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple, Protocol

from ringward.repair._config import REPAIR_TYPES
from ringward.repair._units import format_duration

__all__ = [
    "Reported",
    "ReportedRun",
    "progress_figures",
    "reported_coverage",
    "reported_table",
    "reported_types",
    "run_under_way",
]


class ReportedRun(Protocol):
    """A recorded run as ringward_ops.repair_runs holds it (RepairRunRow)."""

    @property
    def run_id(self) -> str: ...
    @property
    def summary(self) -> Mapping[str, Any]: ...
    @property
    def updated_at(self) -> datetime | None: ...


class Reported(NamedTuple):
    """A table's coverage as a run's report gave it."""

    repaired: str  # the share repaired within gc_grace as the report wrote it ("40.0%", "n/a")
    run_id: str
    recorded_at: datetime | None  # when the report was stored


def reported_coverage(runs: Iterable[ReportedRun]) -> dict[str, Reported]:
    """keyspace.table -> its coverage from the latest run whose report lists the table (a run limited to some
    keyspaces leaves the others' last figure standing). `runs`: latest first."""
    found: dict[str, Reported] = {}
    for run in runs:
        reported = run.summary.get("tables") or {}
        if not isinstance(reported, Mapping):
            continue
        for name, share in reported.items():
            found.setdefault(str(name), Reported(str(share), run.run_id, run.updated_at))
    return found


def reported_types(summary: Mapping[str, Any]) -> Mapping[str, Any]:
    """A run report's `types` ({type: its state, metrics, coverage...}); a report made before several types ran
    in one night is one type's: its `tables` are that type's coverage."""
    types = summary.get("types")
    if isinstance(types, Mapping):
        return types
    kind = str(summary.get("repair_type") or "full")
    return {kind: {"repaired": summary.get("tables") or {}}} if kind in REPAIR_TYPES else {}


def run_under_way(progress_runs: Mapping[str, datetime | None], runs: Sequence[ReportedRun]) -> str | None:
    """The run whose progress was stored last, when it has no report yet and its progress is newer than the
    latest report (a run that died before its report stops counting once a later run reports). `progress_runs`:
    run id -> when its progress was last stored. `runs`: the recorded runs, latest first."""
    reported = {run.run_id for run in runs}
    latest = runs[0].updated_at if runs else None
    candidates = [(when, run_id) for run_id, when in progress_runs.items() if run_id not in reported and when]
    if not candidates:
        return None
    when, run_id = max(candidates)
    return run_id if latest is None or when > latest else None


def progress_figures(progress: Mapping[str, Any], running: bool) -> dict[str, Any]:
    """A run's stored progress (what the repair worker writes each minute) as figures: segments done, failed,
    postponed and finished of the total, sessions running, per node (the node that needs a look first), the ETA
    (shown while the run is `running` only)."""
    done, failed = int(progress.get("done") or 0), int(progress.get("failed") or 0)
    total = int(progress.get("total") or 0)
    eta = progress.get("eta_seconds")
    running_per_node = dict(progress.get("running") or {})
    per_node = dict(progress.get("per_node") or {})
    nodes = [
        {"node": node, "running": int(running_per_node.get(node) or 0),
         "done": int((per_node.get(node) or {}).get("done") or 0),
         "failed": int((per_node.get(node) or {}).get("failed") or 0)}
        for node in sorted(set(running_per_node) | set(per_node))
    ]  # fmt: skip
    nodes.sort(key=lambda n: (-n["failed"], -n["running"], n["node"]))  # what needs a look first
    return {
        "done": done, "failed": failed, "postponed": int(progress.get("postponed") or 0), "total": total,
        "finished": done + failed, "running": sum(n["running"] for n in nodes),
        "percent": round(100.0 * (done + failed) / total, 1) if total else 100.0,
        "eta_seconds": eta, "eta": format_duration(float(eta)) if running and eta is not None else "-",
        "updated_at": progress.get("updated_at"), "nodes": nodes,
    }  # fmt: skip


def _when(moment: datetime | None) -> str:
    """In UTC, as status_table writes its times."""
    if moment is None:
        return "-"
    return (moment.astimezone(UTC) if moment.tzinfo is not None else moment).strftime("%Y-%m-%d %H:%M")


def reported_table(tables: Sequence[str], reported: Mapping[str, Reported]) -> str:
    """A fixed-width table for the CLI, one line per `tables` entry a report covers: the share repaired within
    gc_grace as reported, when, by which run (tables no report covers are left out: the caller names them)."""
    header = ("TABLE", "REPAIRED", "REPORTED", "RUN")
    rows = [header]
    for table in tables:
        found = reported.get(table)
        if found is not None:
            rows.append((table, found.repaired, _when(found.recorded_at), found.run_id))
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows)
