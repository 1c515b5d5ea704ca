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

__all__ = ["CALIBRATION_FILE", "Measured", "Terms", "errors", "fit", "held_out_errors", "load_terms"]

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
