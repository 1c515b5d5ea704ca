"""Parsing of human-friendly durations ("1h30m", 3600) and sizes ("200MiB") for the repair configuration."""

from __future__ import annotations

import math
import re
from datetime import timedelta

__all__ = ["MAX_BYTES", "MAX_DURATION", "duration_parts", "format_duration", "parse_bytes", "parse_duration"]

# The largest duration and size a setting may hold: far above any sensible value, far below what overflows
# Python's timedelta (999,999,999 days) or a float. A bigger value is refused as a ValueError naming the limit.
MAX_DURATION = timedelta(days=3650)
MAX_BYTES = 2**60  # 1 EiB

_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_DURATION_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)?", re.IGNORECASE)
_SIZE_FACTORS = {
    "B": 1,
    "KB": 10**3,
    "MB": 10**6,
    "GB": 10**9,
    "TB": 10**12,
    "KIB": 2**10,
    "MIB": 2**20,
    "GIB": 2**30,
    "TIB": 2**40,
}


def parse_duration(value: object) -> timedelta:
    """A duration from seconds (int/float), a timedelta, or text like "24h", "1h30m", "90s", "2d"."""
    if isinstance(value, timedelta):
        return _bounded_duration(value.total_seconds(), value)
    if isinstance(value, bool):
        raise ValueError("expected a duration such as 3600 (seconds) or '1h30m', not a boolean")
    if isinstance(value, int | float):
        return _bounded_duration(value, value)
    if isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if len(text) > 64:
            raise ValueError(
                f"expected a duration such as 3600 (seconds), '24h' or '1h30m', got {len(text)} characters"
            )
        if re.fullmatch(r"\d+(\.\d+)?", text):
            return _bounded_duration(float(text), value)
        parts = _DURATION_PART.findall(text)
        if parts and "".join(n + u for n, u in parts) == text:
            return _bounded_duration(sum(float(n) * _DURATION_SECONDS[u] for n, u in parts), value)
    raise ValueError(f"expected a duration such as 3600 (seconds), '24h' or '1h30m', got {value!r}")


def _bounded_duration(seconds: float, given: object) -> timedelta:
    """`seconds` as a timedelta, refused (ValueError, not OverflowError) beyond MAX_DURATION or not finite."""
    if (isinstance(seconds, float) and not math.isfinite(seconds)) or abs(seconds) > MAX_DURATION.total_seconds():
        raise ValueError(f"{_short(given)} is beyond the largest duration a setting may hold ({MAX_DURATION.days}d)")
    return timedelta(seconds=seconds)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def parse_bytes(value: object) -> int:
    """A size in bytes from an int or text like "200MiB", "1.5GB", "4096"."""
    if isinstance(value, bool):
        raise ValueError("expected a size such as 104857600 or '100MiB', not a boolean")
    if isinstance(value, int):
        return _bounded_size(value, value)
    if isinstance(value, str) and len(value) <= 64:
        match = _SIZE.fullmatch(value.strip())
        if match:
            unit = (match.group(2) or "B").upper()
            size = float(match.group(1)) * _SIZE_FACTORS[unit]
            return _bounded_size(int(size) if math.isfinite(size) else MAX_BYTES + 1, value)
    raise ValueError(f"expected a size such as 104857600 or '100MiB', got {value!r}")


def _bounded_size(size: int, given: object) -> int:
    if abs(size) > MAX_BYTES:
        raise ValueError(f"{_short(given)} is beyond the largest size a setting may hold ({MAX_BYTES} bytes, 1EiB)")
    return size


def duration_parts(seconds: float) -> tuple[int, int, int, int]:
    """Whole days, hours, minutes and seconds of a duration (rounded to the second, never negative): the one
    split every rendering of a duration shares, compact here and spelled out on the pages."""
    total = max(0, round(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return days, hours, minutes, secs


def format_duration(seconds: float) -> str:
    """Compact duration: `45s`, `1m02s`, `3h05m09s`, `2d04h`."""
    days, hours, minutes, secs = duration_parts(seconds)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"
