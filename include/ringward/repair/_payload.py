"""Segments as small JSON values, for passing a plan between Airflow tasks (XCom) without pickling.

A segment travels as `[keyspace, [tables], start, end, [replicas]]`; its id is recomputed on arrival,
so it always matches the repair history.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ringward.errors import ConfigurationError
from ringward.repair._segments import Segment
from ringward.ring import TokenRange

__all__ = ["decode_batch", "decode_segment", "encode_batch", "encode_segment"]


def encode_segment(segment: Segment) -> list[Any]:
    return [segment.keyspace, list(segment.tables), segment.range.start, segment.range.end, list(segment.replicas)]


def decode_segment(value: Sequence[Any]) -> Segment:
    try:
        keyspace, tables, start, end, replicas = value
        return Segment(str(keyspace), tuple(tables), TokenRange(int(start), int(end)), tuple(replicas))
    except (TypeError, ValueError) as error:
        raise ConfigurationError(
            f"Not an encoded repair segment: {value!r} ({error}).",
            "Pass the batches produced by the plan task unchanged.",
        ) from None


def encode_batch(waves: Sequence[Sequence[Segment]]) -> list[list[list[Any]]]:
    """A batch (waves of segments) as JSON-ready lists."""
    return [[encode_segment(s) for s in wave] for wave in waves]


def decode_batch(value: Sequence[Sequence[Sequence[Any]]]) -> list[list[Segment]]:
    return [[decode_segment(s) for s in wave] for wave in value]
