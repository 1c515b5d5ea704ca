"""Ring snapshots from text: ringward's JSON format and the output of `nodetool ring`.

JSON format:

    {"nodes": [{"address": "127.0.0.2", "datacenter": "dc1", "rack": "rack1",
                "tokens": [-8151920490432810868, ...],
                "host_id": "...", "state": "UN", "load_bytes": 66846}, ...]}

`host_id`, `state` (default "UN") and `load_bytes` are optional. Tokens may be integers or
integer strings (drivers report tokens as strings).
The live source, through cassandra-driver, is plugins/ringward_cassandra/ring_reader.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ringward._nodetool_ring import parse_nodetool_ring
from ringward.errors import RingError
from ringward.ring import Node, Ring

__all__ = ["load_ring_file", "ring_from_json", "ring_from_nodetool", "ring_to_json"]

_JSON_FIX = 'Write {"nodes": [{"address", "datacenter", "rack", "tokens": [int, ...]}, ...]}.'
_NODE_FIELDS = {"address", "datacenter", "rack", "tokens", "host_id", "state", "load_bytes"}


def ring_from_nodetool(text: str) -> Ring:
    """The ring a `nodetool ring` listing describes (all datacenters in it)."""
    return parse_nodetool_ring(text)


def ring_from_json(text: str) -> Ring:
    """The ring in ringward's JSON format."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise RingError(f"Ring JSON is malformed at line {error.lineno}: {error.msg}.", _JSON_FIX) from error
    except RecursionError:  # a file from a user: a refusal, never a traceback
        raise RingError("Ring JSON is nested too deeply to read.", _JSON_FIX) from None
    except ValueError as error:  # e.g. a number longer than Python reads (4300 digits)
        raise RingError(f"Ring JSON cannot be read: {error}.", _JSON_FIX) from None
    if not isinstance(document, dict) or not isinstance(document.get("nodes"), list):
        raise RingError("Ring JSON has no 'nodes' list at the top level.", _JSON_FIX)
    return Ring.of(_node(entry, f"nodes[{index}]") for index, entry in enumerate(document["nodes"]))


def ring_to_json(ring: Ring) -> str:
    """The ring in ringward's JSON format (nodes by address, tokens ascending); inverse of ring_from_json."""
    nodes: list[dict[str, Any]] = []
    for node in ring.nodes:
        entry: dict[str, Any] = {
            "address": node.address,
            "datacenter": node.datacenter,
            "rack": node.rack,
            "tokens": sorted(node.tokens),
            "state": node.state,
        }
        if node.host_id is not None:
            entry["host_id"] = node.host_id
        if node.load_bytes is not None:
            entry["load_bytes"] = node.load_bytes
        nodes.append(entry)
    return json.dumps({"nodes": nodes}, indent=2) + "\n"


def load_ring_file(path: str | Path) -> Ring:
    """A ring from a file holding either ringward JSON or `nodetool ring` output (detected)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RingError(f"Cannot read ring file {path}: {error}.", "Give a readable UTF-8 text file.") from error
    if text.lstrip().startswith("{"):
        return ring_from_json(text)
    return ring_from_nodetool(text)


def _node(entry: object, where: str) -> Node:
    if not isinstance(entry, dict):
        raise RingError(f"Ring JSON {where} is not an object.", _JSON_FIX)
    unknown = sorted(set(entry) - _NODE_FIELDS)
    if unknown:
        raise RingError(
            f"Ring JSON {where} has unknown field(s) {', '.join(unknown)}.",
            "Node fields are: " + ", ".join(sorted(_NODE_FIELDS)) + ".",
        )
    return Node(
        address=_text(entry, "address", where),
        datacenter=_text(entry, "datacenter", where),
        rack=_text(entry, "rack", where),
        tokens=_tokens(entry.get("tokens"), where),
        host_id=_optional_text(entry, "host_id", where),
        state=_optional_text(entry, "state", where) or "UN",
        load_bytes=_optional_count(entry, "load_bytes", where),
    )


def _text(entry: dict[str, object], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value.strip():
        raise RingError(f"Ring JSON {where}.{key} must be a non-empty string, got {value!r}.", _JSON_FIX)
    return value.strip()


def _optional_text(entry: dict[str, object], key: str, where: str) -> str | None:
    return None if entry.get(key) is None else _text(entry, key, where)


def _optional_count(entry: dict[str, object], key: str, where: str) -> int | None:
    value = entry.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise RingError(f"Ring JSON {where}.{key} must be a non-negative integer, got {value!r}.", _JSON_FIX)
    return value


def _tokens(value: object, where: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not value:
        raise RingError(f"Ring JSON {where}.tokens must be a non-empty list, got {value!r}.", _JSON_FIX)
    if set(map(type, value)) == {int}:  # the common case, checked with builtins (rings hold 256,000 tokens)
        return tuple(sorted(value))
    tokens: list[int] = []
    for index, token in enumerate(value):
        if isinstance(token, int) and not isinstance(token, bool):
            tokens.append(token)
        elif isinstance(token, str) and token.strip().lstrip("-").isdigit():
            tokens.append(int(token))
        else:
            raise RingError(f"Ring JSON {where}.tokens[{index}] is not an integer: {token!r}.", _JSON_FIX)
    return tuple(sorted(tokens))
