"""The duration model's cost terms fitted on measured repair commands (benchmarks/calibrate_cost.py), and the
fitted terms as a `DurationModel`.

A measured command: its sessions (distinct replica sets), the bytes of one replica's copy of its ranges, its
seconds. The model, alone on its nodes (k = 1): seconds = command_overhead + sessions x session_overhead +
bytes x seconds_per_byte. Least squares over the three terms; the error is relative to each measurement.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "CALIBRATION_FILE",
    "REFIT_FILE",
    "Measured",
    "Point",
    "Terms",
    "errors",
    "fit",
    "fit_linear",
    "fit_report",
    "held_out",
    "held_out_errors",
    "load_model",
    "load_terms",
]

CALIBRATION_FILE = Path(__file__).with_name("calibration.json")


@dataclass(frozen=True)
class Measured:
    group: str  # what a held-out check leaves out together (the data size of the step)
    sessions: int
    bytes_per_replica: float
    seconds: float


@dataclass(frozen=True)
class Terms:
    command_overhead: float
    session_overhead: float
    seconds_per_byte: float

    def predict(self, sessions: int, bytes_per_replica: float) -> float:
        return self.command_overhead + sessions * self.session_overhead + bytes_per_replica * self.seconds_per_byte


def _det3(m: Sequence[Sequence[float]]) -> float:
    return (
        m[0][0] * (m[1][1] * m[2][2] - m[1][2] * m[2][1])
        - m[0][1] * (m[1][0] * m[2][2] - m[1][2] * m[2][0])
        + m[0][2] * (m[1][0] * m[2][1] - m[1][1] * m[2][0])
    )


def fit(points: Sequence[Measured]) -> Terms:
    """Least squares of the three terms (normal equations, Cramer's rule). Refused when the points cannot
    separate them (one session count only, or one size only)."""
    rows = [(1.0, float(p.sessions), float(p.bytes_per_replica)) for p in points]
    ata = [[sum(r[i] * r[j] for r in rows) for j in range(3)] for i in range(3)]
    aty = [sum(r[i] * p.seconds for r, p in zip(rows, points, strict=True)) for i in range(3)]
    # Scale-free singularity test: the bytes column is ~1e8 while the others are ~1.
    scale = math.prod(math.sqrt(ata[i][i]) for i in range(3)) ** 2
    d = _det3(ata)
    if scale == 0 or abs(d) / scale < 1e-9:
        raise ValueError("the measurements do not separate the three terms: vary the session count and the size")
    solution: list[float] = []
    for column in range(3):
        m = [row[:] for row in ata]
        for i in range(3):
            m[i][column] = aty[i]
        solution.append(_det3(m) / d)
    return Terms(*solution)


def errors(points: Sequence[Measured], predicted: Sequence[float]) -> dict[str, float]:
    """Relative errors |predicted - measured| / measured: RMS, median and largest."""
    rel = sorted(abs(q - p.seconds) / p.seconds for p, q in zip(points, predicted, strict=True))
    return {
        "rms_relative": math.sqrt(sum(r * r for r in rel) / len(rel)),
        "median_relative": rel[len(rel) // 2],
        "max_relative": rel[-1],
    }


def held_out_errors(points: Sequence[Measured]) -> dict[str, float]:
    """Each group predicted by the terms fitted on the others: how far the fit carries to a size it never saw."""
    ordered: list[Measured] = []
    predicted: list[float] = []
    for group in sorted({p.group for p in points}):
        terms = fit([p for p in points if p.group != group])
        for p in points:
            if p.group == group:
                ordered.append(p)
                predicted.append(terms.predict(p.sessions, p.bytes_per_replica))
    return errors(ordered, predicted)


def load_terms(path: Path | None = None) -> tuple[Terms, dict[str, Any]]:
    """The fitted terms and the whole record (date, commit, machine, errors) of benchmarks/calibrate_cost.py."""
    path = path or CALIBRATION_FILE
    try:
        record = json.loads(path.read_text())
        terms = Terms(**{k: float(v) for k, v in record["terms"].items()})
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ValueError(
            f"No usable calibration in {path}: {error}. Run benchmarks/calibrate_cost.py on a local cluster."
        ) from error
    return terms, record


# -- the refit (benchmarks/calibrate_terms.py): any linear terms, with leave-one-group-out error -------------------

REFIT_FILE = Path(__file__).with_name("calibration_refit.json")

# The columns of the refit. A repair command (nodetool: `sessions` replica sets, `tables` tables, `ranges` token
# ranges over its sessions) costs command + sessions x session + sessions x tables x table (a repair job per table
# per session) + ranges x tables x range (a Merkle tree per range per table, `range_per_table`) or ranges x range
# + bytes x validation + mismatched x streaming (bytes of one replica's copy / of the writes one replica missed).
NODETOOL_TERMS = ("command", "session", "table", "range", "validation", "streaming")
IN_PROCESS_TERMS = ("task", "table", "validation")  # AutoRepair: one range, one session a task (not separable)


@dataclass(frozen=True)
class Point:
    group: str  # left out together in the held-out check (a data size, a drift round)
    seconds: float
    features: dict[str, float]  # sessions, tables, ranges, bytes, mismatched

    def as_dict(self) -> dict[str, Any]:
        return {"group": self.group, "seconds": self.seconds, "features": dict(self.features)}


def columns(point: Point, terms: Sequence[str], range_per_table: bool = True) -> list[float]:
    f = point.features
    value = {
        "command": 1.0,
        "task": 1.0,
        "session": f["sessions"],
        "table": f["sessions"] * f["tables"],
        "range": f["ranges"] * (f["tables"] if range_per_table else 1.0),
        "validation": f["bytes"],
        "streaming": f["mismatched"],
    }
    return [float(value[t]) for t in terms]


def _solve(a: list[list[float]], b: list[float]) -> list[float]:
    """Gaussian elimination with partial pivoting; ValueError on a (near-)singular system."""
    n = len(b)
    m = [[*row[:], b[i]] for i, row in enumerate(a)]
    for c in range(n):
        pivot = max(range(c, n), key=lambda r: abs(m[r][c]))
        if abs(m[pivot][c]) < 1e-10:
            raise ValueError("the measurements do not separate the terms")
        m[c], m[pivot] = m[pivot], m[c]
        for r in range(n):
            if r != c:
                factor = m[r][c] / m[c][c]
                m[r] = [x - factor * y for x, y in zip(m[r], m[c], strict=True)]
    return [m[i][n] / m[i][i] for i in range(n)]


def fit_linear(
    points: Sequence[Point], terms: Sequence[str], range_per_table: bool = True
) -> tuple[dict[str, float], dict[str, float]]:
    """Least squares of `terms` over `points`: (term -> value, term -> standard error). Columns are scaled to unit
    norm first (bytes are ~1e7, counts ~1); ValueError when the points cannot separate the terms."""
    rows = [columns(p, terms, range_per_table) for p in points]
    k = len(terms)
    if len(rows) <= k:
        raise ValueError(f"{len(rows)} measurements cannot fit {k} terms")
    norms = [math.sqrt(sum(r[j] ** 2 for r in rows)) or 1.0 for j in range(k)]
    scaled = [[r[j] / norms[j] for j in range(k)] for r in rows]
    ata = [[sum(r[i] * r[j] for r in scaled) for j in range(k)] for i in range(k)]
    aty = [sum(r[i] * p.seconds for r, p in zip(scaled, points, strict=True)) for i in range(k)]
    solution = _solve(ata, aty)
    residual = sum((sum(x * y for x, y in zip(r, solution, strict=True)) - p.seconds) ** 2
                   for r, p in zip(scaled, points, strict=True))  # fmt: skip
    sigma2 = residual / (len(rows) - k)
    standard = []
    for j in range(k):  # diagonal of (A'A)^-1, one column at a time
        unit = [1.0 if i == j else 0.0 for i in range(k)]
        standard.append(math.sqrt(max(0.0, sigma2 * _solve(ata, unit)[j])))
    values = {t: solution[j] / norms[j] for j, t in enumerate(terms)}
    errors_ = {t: standard[j] / norms[j] for j, t in enumerate(terms)}
    return values, errors_


def predict(values: dict[str, float], point: Point, range_per_table: bool = True) -> float:
    terms = list(values)
    return sum(v * c for v, c in zip(values.values(), columns(point, terms, range_per_table), strict=True))


def relative_errors(points: Sequence[Point], predicted: Sequence[float]) -> dict[str, float]:
    return errors([Measured(p.group, 1, 0.0, p.seconds) for p in points], predicted)


def held_out(points: Sequence[Point], terms: Sequence[str], range_per_table: bool = True) -> dict[str, float]:
    """Each group predicted by the terms fitted on the other groups."""
    ordered: list[Point] = []
    predicted: list[float] = []
    for group in sorted({p.group for p in points}):
        values, _ = fit_linear([p for p in points if p.group != group], terms, range_per_table)
        for p in points:
            if p.group == group:
                ordered.append(p)
                predicted.append(predict(values, p, range_per_table))
    return relative_errors(ordered, predicted)


def medians(points: Sequence[Point]) -> list[Point]:
    """One point per distinct (group, features): the median of its repeats."""
    by: dict[tuple[str, tuple[tuple[str, float], ...]], list[float]] = {}
    for p in points:
        by.setdefault((p.group, tuple(sorted(p.features.items()))), []).append(p.seconds)
    return [Point(g, sorted(s)[len(s) // 2], dict(f)) for (g, f), s in by.items()]


def repeat_spread(points: Sequence[Point]) -> float:
    """The median over distinct commands of slowest / fastest repeat."""
    by: dict[tuple[str, tuple[tuple[str, float], ...]], list[float]] = {}
    for p in points:
        by.setdefault((p.group, tuple(sorted(p.features.items()))), []).append(p.seconds)
    ratios = sorted(max(s) / min(s) for s in by.values() if len(s) > 1 and min(s) > 0)
    return ratios[len(ratios) // 2] if ratios else float("nan")


def _one_fit(points: Sequence[Point], terms: Sequence[str], range_per_table: bool) -> dict[str, Any]:
    values, standard = fit_linear(points, terms, range_per_table)
    fitted = relative_errors(points, [predict(values, p, range_per_table) for p in points])
    try:
        loo: dict[str, float] | str = held_out(points, terms, range_per_table)
    except ValueError as error:
        loo = f"not computed: {error}"
    return {"terms": values, "standard_error": standard, "error": {"fit": fitted, "leave_one_group_out": loo},
            "points": len(points), "groups": sorted({p.group for p in points})}  # fmt: skip


def fit_report(
    nodetool: Sequence[Point], in_process: Sequence[Point], in_server: Sequence[Point] = ()
) -> dict[str, Any]:
    """Every fit of benchmarks/calibrate_terms.py: nodetool commands (range term per table and per range, on
    every command and on the medians of repeats), the same commands' in-server times, and AutoRepair's tasks."""
    report: dict[str, Any] = {"fits": {}, "repeat_spread": {}}
    streaming = any(p.features["mismatched"] > 0 for p in nodetool)
    terms = NODETOOL_TERMS if streaming else NODETOOL_TERMS[:-1]
    sets: dict[str, tuple[Sequence[Point], Sequence[str]]] = {
        "nodetool": (nodetool, terms),
        "nodetool_medians": (medians(nodetool), terms),
        "nodetool_in_server": (in_server, terms),
        "autorepair_in_process": (in_process, IN_PROCESS_TERMS),
    }
    for name, (points, names) in sets.items():
        if not points:
            continue
        report["repeat_spread"][name] = repeat_spread(points)
        for per_table in (True, False):
            if not per_table and "range" not in names:
                continue
            key = name if per_table else f"{name}_range_per_command"
            try:
                report["fits"][key] = {"range_per_table": per_table, **_one_fit(points, names, per_table)}
            except ValueError as error:
                report["fits"][key] = {"range_per_table": per_table, "not_fitted": str(error)}
    try:
        report["model"] = choose_model(report, in_process, nodetool)
    except ValueError as error:
        report["model"] = {"not_fitted": str(error)}
    report["points"] = [p.as_dict() for p in nodetool]
    report["autorepair_points"] = [p.as_dict() for p in in_process]
    return report


def nonnegative_fit(
    points: Sequence[Point], terms: Sequence[str], range_per_table: bool = True
) -> tuple[dict[str, float], list[str]]:
    """`fit_linear`, then the most negative term (no duration has one) dropped and the rest refitted, until none
    is negative: (term -> value, 0 for a dropped one; the dropped terms in order)."""
    kept = list(terms)
    dropped: list[str] = []
    while True:
        values, standard = fit_linear(points, kept, range_per_table)
        negative = [t for t in kept if values[t] < 0]
        if not negative:
            return {t: values.get(t, 0.0) for t in terms}, dropped
        worst = min(negative, key=lambda t: values[t] / (standard[t] or 1.0))
        kept.remove(worst)
        dropped.append(worst)


def in_process_overhead(points: Sequence[Point], shared: dict[str, float], range_per_table: bool) -> dict[str, Any]:
    """AutoRepair's fixed cost per in-process task with the nodetool fit's session, table, range and per-byte terms
    held: the median over its tasks of measured - (those terms' price), floored at 0; its error on every task, and
    each group predicted by the median of the others."""
    held = {t: v for t, v in shared.items() if t != "command"}

    def rest(p: Point) -> float:
        return p.seconds - predict(held, p, range_per_table)

    def median(values: Sequence[float]) -> float:
        ordered = sorted(values)
        return ordered[len(ordered) // 2]

    value = max(0.0, median([rest(p) for p in points]))
    fitted = relative_errors(points, [value + predict(held, p, range_per_table) for p in points])
    ordered: list[Point] = []
    predicted: list[float] = []
    for group in sorted({p.group for p in points}):
        others = [rest(p) for p in points if p.group != group]
        if not others:
            continue
        v = max(0.0, median(others))
        for p in points:
            if p.group == group:
                ordered.append(p)
                predicted.append(v + predict(held, p, range_per_table))
    loo = relative_errors(ordered, predicted) if ordered else {}
    return {"in_process_overhead": value, "error": {"fit": fitted, "leave_one_group_out": loo}}


def choose_model(report: dict[str, Any], in_process: Sequence[Point], nodetool: Sequence[Point]) -> dict[str, Any]:
    """The terms the simulator uses: of the nodetool fits over every command (a Merkle tree per range per table, or
    per range), the one with the lower leave-one-group-out RMS, refitted without negative terms; AutoRepair's
    in-process overhead with those terms held."""
    candidates = [k for k in ("nodetool", "nodetool_range_per_command") if "terms" in report["fits"].get(k, {})]
    if not candidates:
        raise ValueError("no nodetool fit to choose from")

    def score(key: str) -> float:
        loo = report["fits"][key]["error"]["leave_one_group_out"]
        return float(loo["rms_relative"]) if isinstance(loo, dict) else math.inf

    key = min(candidates, key=score)
    per_table = bool(report["fits"][key]["range_per_table"])
    terms = list(report["fits"][key]["terms"])
    values, dropped = nonnegative_fit(nodetool, terms, per_table)
    fitted = relative_errors(nodetool, [predict(values, p, per_table) for p in nodetool])
    kept = [t for t in terms if t not in dropped]
    _, standard = fit_linear(nodetool, kept, per_table)
    loo = held_out(nodetool, kept, per_table)
    model: dict[str, Any] = {
        "from": key,
        "range_per_table": per_table,
        "terms": values,
        "dropped_negative": dropped,
        "standard_error": standard,
        "error": {"fit": fitted, "leave_one_group_out": loo},
    }
    if in_process:
        model["in_process"] = in_process_overhead(in_process, values, per_table)
    return model


def load_model(path: Path | None = None) -> dict[str, Any]:
    """`DurationModel` keyword arguments from the refit's chosen model (benchmarks/calibrate_terms.py): command,
    session, table and range overheads, validation rate, streaming rate (1 / seconds per missed byte), and the
    in-process overhead. A term the record lacks (not fitted) keeps the model's assumed value."""
    path = path or REFIT_FILE
    try:
        model = json.loads(path.read_text())["model"]
        terms = {k: float(v) for k, v in model["terms"].items()}
        found: dict[str, Any] = {
            "command_overhead": terms["command"],
            "session_overhead": terms["session"],
            "table_overhead": terms.get("table", 0.0),
            "range_overhead": terms.get("range", 0.0),
            "range_per_table": bool(model["range_per_table"]),
            "validation_rate": 1 / terms["validation"],
        }
        if terms.get("streaming", 0.0) > 0:
            found["stream_rate"] = 1 / terms["streaming"]
        if "in_process" in model:
            found["in_process_overhead"] = float(model["in_process"]["in_process_overhead"])
    except (OSError, ValueError, KeyError, TypeError, ZeroDivisionError) as error:
        raise ValueError(
            f"No usable refit in {path}: {error}. Run benchmarks/calibrate_terms.py on a local cluster."
        ) from error
    negative = {k: v for k, v in found.items() if not isinstance(v, bool) and v < 0}
    if negative:
        raise ValueError(f"{path} holds terms no duration can have: {negative}")
    return found
