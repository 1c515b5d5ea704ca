"""How the pages write what the views return: times in UTC to the second, durations in words a person reads at a
glance, replication settings as `NetworkTopologyStrategy {dc1: 3}` rather than the CQL map or a Python dict.

Pure text functions; the JSON endpoints keep the raw values (ISO stamps, seconds, CQL maps)."""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from ringward.errors import RingwardError
from ringward.repair import duration_parts
from ringward.replication import REPLICATION_FACTOR, Replication

__all__ = [
    "format_duration",
    "format_repaired_share",
    "format_replication",
    "format_timestamp",
    "humanize_replications",
]


def format_timestamp(value: datetime | str | None) -> str:
    """`2026-11-25 10:19:03 UTC` from a datetime or an ISO 8601 stamp (a naive one is taken as UTC); "-" for
    None; text that is not a stamp is returned as it is (the caller escapes it)."""
    if value is None or value == "":
        return "-"
    moment = value
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            return value
    assert isinstance(moment, datetime)
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def format_duration(seconds: float | int | str | None) -> str:
    """`3.4 s`, `42.0 s`, `5 min 07 s`, `1 h 02 min`, `2 d 04 h`; "-" for None (or a value that is no number)."""
    if seconds is None or isinstance(seconds, bool):
        return "-"
    try:
        value = max(0.0, float(seconds))
    except (TypeError, ValueError):
        return "-"
    if value < 59.95:
        return f"{value:.1f} s"
    days, hours, minutes, secs = duration_parts(value)
    if days:
        return f"{days} d {hours:02d} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    return f"{minutes} min {secs:02d} s"


def format_repaired_share(repaired: object, lowest: object = None) -> str:
    """An incremental table's split as `87.5% repaired, 12.5% unrepaired (lowest node 75.0%)`; "-" when the share
    is no number."""
    if isinstance(repaired, bool) or not isinstance(repaired, int | float):
        return "-"
    share = min(100.0, max(0.0, float(repaired)))
    text = f"{share:.1f}% repaired, {100.0 - share:.1f}% unrepaired"
    if isinstance(lowest, int | float) and not isinstance(lowest, bool) and lowest < share:
        text += f" (lowest node {float(lowest):.1f}%)"
    return text


def _options(value: Replication | Mapping[str, object] | str) -> Replication | None:
    """The replication a value names: a Replication, a mapping, JSON text, or a CQL map / Python dict literal."""
    if isinstance(value, Replication):
        return value
    try:
        if isinstance(value, str):
            text = value.strip()
            try:
                parsed: object = json.loads(text)
            except ValueError:
                parsed = ast.literal_eval(text)  # a CQL map literal reads as a Python dict literal
            if not isinstance(parsed, Mapping):
                return None
            return Replication.parse(parsed)
        return Replication.parse(value)
    except (RingwardError, ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def format_replication(value: Replication | Mapping[str, object] | str) -> str:
    """`SimpleStrategy RF 3`, `NetworkTopologyStrategy {dc1: 3, dc2: 3}` (the Cassandra 4+ shorthand reads as
    `other DCs: 3`); a value that is not a replication setting is returned as given."""
    replication = _options(value)
    if replication is None:
        return value if isinstance(value, str) else str(value)
    factors = dict(replication.factors)
    if replication.is_simple:
        factor = factors.get(REPLICATION_FACTOR)
        return f"SimpleStrategy RF {factor}" if factor is not None else "SimpleStrategy (default RF)"
    entries = [f"{dc}: {n}" for dc, n in factors.items() if dc != REPLICATION_FACTOR]
    if REPLICATION_FACTOR in factors:
        entries.append(f"other DCs: {factors[REPLICATION_FACTOR]}")
    return f"{replication.strategy} {{{', '.join(entries)}}}" if entries else f"{replication.strategy} {{}}"


# A flat map whose first key is 'class' (or "class"), as the CQL map or a Python dict repr writes it.
_MAP = re.compile(r"""\{\s*(['"])class\1\s*:[^{}]*\}""")


def humanize_replications(text: str) -> str:
    """`text` with each replication map in it (CQL or a dict repr) written as `format_replication` writes it."""

    def replace(match: re.Match[str]) -> str:
        found = match.group(0)
        shown = format_replication(found)
        return found if shown == found else shown

    return _MAP.sub(replace, text)
