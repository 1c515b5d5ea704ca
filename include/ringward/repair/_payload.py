"""Segments as small JSON values, for storing a plan (its chunks in ringward_ops) without pickling.

A segment travels as `[keyspace, [tables], start, end, [replicas]]`; its id is recomputed on arrival,
so it always matches the repair history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ringward.errors import ConfigurationError
from ringward.repair._segments import Segment
from ringward.ring import TokenRange

__all__ = ["decode_segment", "encode_segment"]


def encode_segment(segment: Segment) -> list[Any]:
    return [segment.keyspace, list(segment.tables), segment.range.start, segment.range.end, list(segment.replicas)]


def decode_segment(value: Sequence[Any]) -> Segment:
    try:
        keyspace, tables, start, end, replicas = value
        return Segment(str(keyspace), tuple(tables), TokenRange(int(start), int(end)), tuple(replicas))
    except (TypeError, ValueError) as error:
        raise ConfigurationError(
            f"Not an encoded repair segment: {value!r} ({error}).",
            "Run the plan task again: it stores the plan's segments in this form.",
        ) from None
