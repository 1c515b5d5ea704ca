"""Parser for the text `nodetool ring` prints.

Layout (Cassandra 3.x to 5.0), one block per datacenter:

    Datacenter: dc1
    ==========
    Address    Rack  Status State  Load       Owns   Token
                                                     2913852835856394332     <- last token, repeated: ignored
    172.24.0.3 rack1 Up     Normal 65.22 KiB  95.96% -2609423468938814500

A node appears on one line per token. Load is `?` when unknown, Owns `?` without a keyspace.
Warnings and notes nodetool prints around the blocks are skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation

from ringward.errors import RingError
from ringward.ring import Node, Ring

__all__ = ["parse_load", "parse_nodetool_ring"]

_STATUS_CODES = {"up": "U", "down": "D", "?": "?"}
_STATE_CODES = {"normal": "N", "leaving": "L", "joining": "J", "moving": "M"}
# Cassandra prints binary multiples (FileUtils.stringifyFileSize); 2.x spelled them KB, MB, ...
_UNITS = {
    "bytes": 1,
    "b": 1,
    "kib": 2**10,
    "kb": 2**10,
    "mib": 2**20,
    "mb": 2**20,
    "gib": 2**30,
    "gb": 2**30,
    "tib": 2**40,
    "tb": 2**40,
    "pib": 2**50,
    "pb": 2**50,
}
_PROSE_PREFIXES = ("warning", "note", "to view")
_INTEGER = re.compile(r"-?\d+")
_IPV4_WITH_PORT = re.compile(r"^(\d{1,3}(?:\.\d{1,3}){3}):\d+$")
_IPV6_WITH_PORT = re.compile(r"^\[([0-9A-Fa-f:.]+)\]:\d+$")


@dataclass
class _NodeRows:
    """What the lines of one node say so far."""

    datacenter: str
    rack: str
    state: str
    load_bytes: int | None
    first_line: int
    tokens: list[int] = field(default_factory=list)


def parse_load(text: str) -> int | None:
    """`65.28 KiB` -> bytes (rounded); `?` -> None."""
    parts = text.split()
    if parts == ["?"]:
        return None
    if len(parts) != 2 or parts[1].lower() not in _UNITS:
        raise ValueError(f"load {text!r} is not '<number> <unit>' with a unit of {', '.join(_UNITS)}")
    try:
        amount = Decimal(parts[0])
    except InvalidOperation as error:
        raise ValueError(f"load {text!r} does not start with a number") from error
    return int((amount * _UNITS[parts[1].lower()]).to_integral_value())


def _strip_port(address: str) -> str:
    """`nodetool -pp ring` prints `ip:port`; ringward identifies nodes by address alone."""
    for pattern in (_IPV4_WITH_PORT, _IPV6_WITH_PORT):
        match = pattern.match(address)
        if match:
            return match.group(1)
    return address


def _state_code(status: str, state: str, line_number: int) -> str:
    status_code = _STATUS_CODES.get(status.lower())
    state_code = _STATE_CODES.get(state.lower())
    if status_code is None or state_code is None:
        raise RingError(
            f"nodetool ring line {line_number}: unknown Status/State {status!r}/{state!r}.",
            "Status must be Up, Down or ?; State Normal, Leaving, Joining or Moving.",
        )
    return status_code + state_code


def _is_skippable(stripped: str) -> bool:
    if not stripped or set(stripped) == {"="}:
        return True
    if stripped.startswith("Address") and stripped.split()[-1] == "Token":
        return True
    if _INTEGER.fullmatch(stripped):
        return True  # the bare token under the header: the block's last token again
    return stripped.lower().startswith(_PROSE_PREFIXES)


class _RingText:
    """Accumulates the node rows of a `nodetool ring` listing, line by line."""

    def __init__(self) -> None:
        self.datacenter: str | None = None
        self.nodes: dict[str, _NodeRows] = {}

    def feed(self, line_number: int, line: str) -> None:
        stripped = line.strip()
        if stripped.startswith("Datacenter:"):
            self.datacenter = stripped.removeprefix("Datacenter:").strip()
            if not self.datacenter:
                raise RingError(f"nodetool ring line {line_number}: empty datacenter name.", "Name the datacenter.")
            return
        if _is_skippable(stripped):
            return
        if self.datacenter is None:
            raise RingError(
                f"nodetool ring line {line_number}: node row before any 'Datacenter:' header: {stripped!r}.",
                "Give the complete output of `nodetool ring`, including its 'Datacenter:' headers.",
            )
        self._add_row(line_number, stripped.split(), self.datacenter)

    def _add_row(self, line_number: int, fields: list[str], datacenter: str) -> None:
        if len(fields) < 7 or not _INTEGER.fullmatch(fields[-1]):
            raise RingError(
                f"nodetool ring line {line_number}: cannot read {' '.join(fields)!r}.",
                "Each node row is: Address Rack Status State Load Owns Token.",
            )
        address, rack, status, state = _strip_port(fields[0]), fields[1], fields[2], fields[3]
        try:
            load = parse_load(" ".join(fields[4:-2]))
        except ValueError as error:
            raise RingError(f"nodetool ring line {line_number}: {error}.", "Give Load as e.g. '65.28 KiB'.") from error
        code = _state_code(status, state, line_number)
        rows = self.nodes.setdefault(address, _NodeRows(datacenter, rack, code, load, line_number))
        if (rows.datacenter, rows.rack) != (datacenter, rack):
            raise RingError(
                f"nodetool ring line {line_number}: {address} is in {datacenter}/{rack}, "
                f"but line {rows.first_line} put it in {rows.datacenter}/{rows.rack}.",
                "Give one consistent `nodetool ring` listing.",
            )
        rows.tokens.append(int(fields[-1]))

    def ring(self) -> Ring:
        if not self.nodes:
            raise RingError(
                "The nodetool ring text has no node rows.",
                "Give the output of `nodetool ring` from a running cluster.",
            )
        return Ring.of(
            Node(
                address=address,
                datacenter=rows.datacenter,
                rack=rows.rack,
                tokens=tuple(sorted(rows.tokens)),
                state=rows.state,
                load_bytes=rows.load_bytes,
            )
            for address, rows in self.nodes.items()
        )


def parse_nodetool_ring(text: str) -> Ring:
    """The ring a `nodetool ring` listing describes."""
    listing = _RingText()
    for line_number, line in enumerate(text.splitlines(), start=1):
        listing.feed(line_number, line)
    return listing.ring()
