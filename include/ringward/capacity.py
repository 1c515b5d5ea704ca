"""Capacity precheck: the bytes each node will receive, against its load and, where configured, its capacity.

A node that gains a range receives one replica's copy of the keyspace's data in that range (repair streams
it in). The bytes per range come from `system.size_estimates` (`ringward.repair.SizeIndex`: each node's sums
spread over its primary ranges by width, or per-range rows spread over each row's range); the plan's changes
say which node gains which range. Growth above
GROWTH_WARNING of a node's current load is a warning in the approval; a node whose load plus what it
receives exceeds its configured capacity refuses the change.

Capacities are configured as {node address or datacenter: size}; a node's own entry wins over its
datacenter's. Sizes are bytes (an integer) or text with a binary unit ("500GiB", "1.5 TiB", "800 MB").
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from ringward.diff import RangeChange
from ringward.errors import ConfigurationError, UnsafeChangeError
from ringward.markdown import markdown_escape
from ringward.ring import Ring, TokenRange

__all__ = [
    "GROWTH_WARNING",
    "MAX_SIZE",
    "CapacityReport",
    "NodeIntake",
    "capacity_report",
    "configured_capacities",
    "format_bytes",
    "incoming_bytes",
    "parse_size",
    "parse_status_loads",
]

GROWTH_WARNING = 0.5  # warn when a node receives more than half its current load
# The largest size read (a capacity, a load): far above any disk, far below what overflows the report's floats
# (the repair settings' sizes have the same cap). Size texts longer than MAX_SIZE_TEXT are not read at all.
MAX_SIZE = 2**60  # 1 EiB
MAX_SIZE_TEXT = 64

_UNITS = {
    "": 1, "b": 1, "bytes": 1,
    "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4, "pb": 1000**5,
    "kib": 1024, "mib": 1024**2, "gib": 1024**3, "tib": 1024**4, "pib": 1024**5,
}  # fmt: skip
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*$")
# `nodetool status`: state, address, load (number and unit), tokens, owns, host id, rack.
_STATUS_LOAD = re.compile(r"^[UD][NLJM]\s+(\S+)\s+(\d+(?:\.\d+)?\s*[KMGTP]?i?B|\?)\s", re.MULTILINE)


def parse_size(value: object, what: str = "size") -> int:
    """Bytes of an integer or a size text such as "500GiB" or "123.45 KiB" (nodetool's format), at most MAX_SIZE."""
    if isinstance(value, bool):
        raise ConfigurationError(f"The {what} {value!r} is not a size.", 'Give bytes or a size such as "500GiB".')
    if isinstance(value, int):
        if value < 0:
            raise ConfigurationError(f"The {what} {value} is negative.", "Give a size of zero or more bytes.")
        return _at_most_max(value, value, what)
    text = str(value)
    match = _SIZE.match(text) if len(text) <= MAX_SIZE_TEXT else None
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        shown = text if len(text) <= MAX_SIZE_TEXT else f"{text[:MAX_SIZE_TEXT]}... ({len(text)} characters)"
        raise ConfigurationError(
            f"The {what} {shown!r} is not a size ringward can read.",
            'Give bytes (an integer) or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB): "500GiB".',
        )
    size = float(match.group(1)) * _UNITS[unit]
    return _at_most_max(int(size) if math.isfinite(size) else MAX_SIZE + 1, text, what)


def _at_most_max(size: int, given: object, what: str) -> int:
    """`size`, refused past MAX_SIZE: a larger capacity checks nothing, and it overflows the report's floats."""
    if size > MAX_SIZE:
        shown = repr(given) if len(repr(given)) <= 40 else repr(given)[:37] + "..."
        raise ConfigurationError(
            f"The {what} {shown} is above the cap of {MAX_SIZE} bytes (1 EiB) a size may hold.",
            'Give the node\'s real size in bytes or with a unit, e.g. "2TiB".',
        )
    return size


def format_bytes(count: float) -> str:
    """Binary units, as nodetool prints them: 1536 -> "1.50 KiB"."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(count) < 1024 or unit == "TiB":
            return f"{count:.0f} B" if unit == "B" else f"{count:.2f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def parse_status_loads(output: str) -> dict[str, int | None]:
    """Node -> load in bytes from `nodetool status` (None where it shows `?`)."""
    return {
        address: None if load == "?" else parse_size(load.replace(" ", ""), "load")
        for address, load in _STATUS_LOAD.findall(output)
    }


def configured_capacities(config: Mapping[str, object] | None, ring: Ring) -> dict[str, int]:
    """Node -> capacity in bytes, from {node or datacenter: size}; a node's own entry wins over its DC's.

    An entry that names neither a node nor a datacenter of the ring is refused: a typo must not silently
    leave a node unchecked.
    """
    if not config:
        return {}
    datacenters = ring.datacenters()
    addresses = {node.address for node in ring.nodes}
    unknown = sorted(key for key in config if key not in addresses and key not in datacenters)
    if unknown:
        raise ConfigurationError(
            f"The capacity configuration names {unknown}, neither a node nor a datacenter of the ring.",
            f"Key capacities by node address ({', '.join(sorted(addresses))}) or datacenter "
            f"({', '.join(sorted(datacenters))}).",
        )
    capacities = {}
    for node in ring.nodes:
        entry = config.get(node.address, config.get(node.datacenter))
        if entry is not None:
            capacities[node.address] = parse_size(entry, f"capacity of {node.address}")
    return capacities


def incoming_bytes(changes: Iterable[RangeChange], range_bytes: Callable[[TokenRange], float]) -> dict[str, int]:
    """Node -> bytes it receives: for every range it gains, one replica's copy of that range's data."""
    received: dict[str, float] = {}
    for change in changes:
        gained = change.gained
        if not gained:
            continue
        size = range_bytes(change.range)
        for node in gained:
            received[node] = received.get(node, 0.0) + size
    return {node: math.ceil(total) for node, total in received.items()}


@dataclass(frozen=True)
class NodeIntake:
    """What one receiving node gets, against what it holds and (when configured) what it can hold."""

    node: str
    incoming: int
    load: int | None
    capacity: int | None

    @property
    def growth(self) -> float | None:
        """incoming / load; None when the load is unknown, infinite when the node holds nothing yet."""
        if self.load is None:
            return None
        return math.inf if self.load == 0 else self.incoming / self.load

    @property
    def after(self) -> int | None:
        return None if self.load is None else self.load + self.incoming

    @property
    def warns(self) -> bool:
        return self.incoming > 0 and self.growth is not None and self.growth > GROWTH_WARNING

    @property
    def exceeds(self) -> bool:
        return self.capacity is not None and self.incoming + (self.load or 0) > self.capacity


@dataclass(frozen=True)
class CapacityReport:
    intakes: tuple[NodeIntake, ...]
    estimated: bool  # whether the keyspace had size estimates (without them every intake reads 0 bytes)

    @property
    def warnings(self) -> tuple[NodeIntake, ...]:
        return tuple(i for i in self.intakes if i.warns)

    @property
    def over_capacity(self) -> tuple[NodeIntake, ...]:
        return tuple(i for i in self.intakes if i.exceeds)

    def refuse_if_over(self) -> None:
        """UnsafeChangeError naming each node that would exceed its capacity, its bytes and the fix."""
        over = self.over_capacity
        if not over:
            return
        nodes = "; ".join(
            f"{i.node} would hold {format_bytes(i.incoming + (i.load or 0))} ({format_bytes(i.load or 0)} now + "
            f"{format_bytes(i.incoming)} received) of its {format_bytes(i.capacity or 0)} capacity"
            for i in over
        )
        raise UnsafeChangeError(
            f"The change would fill nodes past their configured capacity: {nodes}.",
            "Add disk or nodes to those datacenters first (or free space: `nodetool clearsnapshot`, then cleanup "
            "of earlier changes), or correct the capacity configuration if it is out of date.",
        )

    def markdown(self) -> str:
        """The approval's capacity section: one row per receiving node, warnings first in words."""
        if not self.intakes:
            return "**Capacity**: no node receives data."
        lines = ["**Capacity** (bytes each node receives, from system.size_estimates):"]
        if not self.estimated:
            lines.append("- no size estimates for this keyspace yet: the intakes below read 0 bytes.")
        for intake in self.warnings:
            growth = "unbounded (it holds nothing yet)" if intake.growth == math.inf else f"{intake.growth:.0%}"
            lines.append(f"- WARNING: {markdown_escape(intake.node)} grows by {growth} of its current load.")
        lines += ["", "| node | receives | load now | after | capacity |", "|---|---|---|---|---|"]
        for i in self.intakes:
            lines.append(
                f"| {markdown_escape(i.node)} | {format_bytes(i.incoming)} | {_or_unknown(i.load)} | "
                f"{_or_unknown(i.after)} | {_or_unknown(i.capacity, 'not configured')} |"
            )
        return "\n".join(lines)


def capacity_report(
    changes: Iterable[RangeChange],
    range_bytes: Callable[[TokenRange], float],
    loads: Mapping[str, int | None],
    capacities: Mapping[str, int],
    estimated: bool = True,
) -> CapacityReport:
    """The intake of every node that gains a range, in address order."""
    incoming = incoming_bytes(changes, range_bytes)
    intakes = tuple(
        NodeIntake(node, incoming[node], loads.get(node), capacities.get(node)) for node in sorted(incoming)
    )
    return CapacityReport(intakes, estimated)


def _or_unknown(value: int | None, missing: str = "unknown") -> str:
    return missing if value is None else format_bytes(value)
