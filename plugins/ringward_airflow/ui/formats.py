"""How the pages write what the views return: times in UTC to the second, durations in words a person reads at a
glance, replication settings as `NetworkTopologyStrategy {dc1: 3}` rather than the CQL map or a Python dict.

Pure text functions returning plain text: the pages escape what they return, once, as they write it. Nothing
here reads markup or evaluates text; the JSON endpoints keep the raw values (ISO stamps, seconds, CQL maps)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from datetime import UTC, datetime

from ringward.errors import RingwardError
from ringward.repair import duration_parts
from ringward.replication import Replication

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


def format_replication(value: Replication | Mapping[str, object]) -> str:
    """`SimpleStrategy RF 3`, `NetworkTopologyStrategy {dc1: 3, dc2: 3}` (the Cassandra 4+ shorthand reads as
    `other DCs: 3`), from the typed setting or its stored JSON map; a map that is no replication setting is
    written as `key: value` pairs. Plain text: the caller escapes it."""
    described = _described(value)
    if described is not None:
        return described
    return ", ".join(f"{k}: {v}" for k, v in value.items()) if isinstance(value, Mapping) else str(value)


# A replication map inside a check's text, as ringward writes one: the CQL map literal of `Replication.to_cql`
# ('' is the only escape in a CQL string) or its JSON map (`json.dumps` of `Replication.as_json`).
_CQL_STRING = r"'(?:[^']|'')*'"
_CQL_MAP = re.compile(rf"\{{\s*'class'\s*:\s*{_CQL_STRING}(?:\s*,\s*{_CQL_STRING}\s*:\s*{_CQL_STRING})*\s*\}}")
_CQL_PAIR = re.compile(rf"({_CQL_STRING})\s*:\s*({_CQL_STRING})")
_JSON_MAP = re.compile(r'\{\s*"class"\s*:[^{}]*\}')


def _cql_unquoted(literal: str) -> str:
    return literal[1:-1].replace("''", "'")


def _described(value: object) -> str | None:
    """`Replication.describe` of a typed setting or of its map; None for anything that is no replication setting
    (the one place the pages turn a replication into words)."""
    if isinstance(value, Replication):
        return value.describe()
    if not isinstance(value, Mapping):
        return None
    try:
        return Replication.parse(value).describe()
    except (RingwardError, TypeError, ValueError):
        return None


def humanize_replications(text: str) -> str:
    """A check's own text (a finding, the precheck summary) with each replication map ringward wrote into it
    shown as `Replication.describe` writes it.

    For the raw text a check wrote, never for markup: the caller escapes the result, once, last. The maps are
    read as written (CQL strings with '' doubled, JSON with json.loads), never evaluated as Python."""

    def from_cql(match: re.Match[str]) -> str:
        options = {_cql_unquoted(k): _cql_unquoted(v) for k, v in _CQL_PAIR.findall(match.group(0))}
        return _described(options) or match.group(0)

    def from_json(match: re.Match[str]) -> str:
        try:
            options = json.loads(match.group(0))
        except ValueError:
            return match.group(0)
        return _described(options) or match.group(0)

    return _JSON_MAP.sub(from_json, _CQL_MAP.sub(from_cql, text))
