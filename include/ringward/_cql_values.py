"""Cassandra's native serialization of CQL values, and parsing of the text forms a user types.

Each type has a serializer taking a Python value and a parser taking CLI text. Serialization follows
Cassandra's marshal serializers (org.apache.cassandra.serializers): big-endian fixed-width integers,
UTF-8 text, 16-byte UUIDs, milliseconds as a signed 64-bit timestamp, days offset by 2**31 as an
unsigned 32-bit date, IEEE-754 floats, raw blobs, 4- or 16-byte addresses.
"""

from __future__ import annotations

import ipaddress
import math
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from ringward.errors import ConfigurationError

__all__ = ["CQL_TYPES", "SUPPORTED_TYPES", "CqlType", "cql_string_literal", "cql_type"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)
_DATE_EPOCH_OFFSET = 2**31  # Cassandra stores dates as unsigned days with the Unix epoch at 2**31.


def _refuse(cql: str, value: object, why: str, fix: str) -> ConfigurationError:
    return ConfigurationError(f"Cannot use {value!r} as a CQL {cql} value: {why}.", fix)


def cql_string_literal(text: str, what: str = "value") -> str:
    """`text` as a CQL string literal ('...' with each ' doubled), for statements that cannot bind it (a
    replication map in CREATE/ALTER KEYSPACE). Control characters are refused: no datacenter, class or option
    name holds one, and a statement printed for an administrator must read as it runs."""
    if not isinstance(text, str) or any(ord(c) < 32 or ord(c) == 127 for c in text):
        raise ConfigurationError(
            f"Cannot use {text!r} as a {what} in CQL: it holds a control character.",
            f"Give the {what} as Cassandra shows it (nodetool status), without control characters.",
        )
    return "'" + text.replace("'", "''") + "'"


# --- serializers: Python value -> Cassandra bytes ---------------------------------------------------


def _fixed_int(cql: str, size: int) -> Callable[[object], bytes]:
    low, high = -(2 ** (8 * size - 1)), 2 ** (8 * size - 1) - 1

    def serialize(value: object) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _refuse(cql, value, "not an integer", f"Give a Python int in [{low}, {high}].")
        if not low <= value <= high:
            raise _refuse(cql, value, "out of range", f"A {cql} lies in [{low}, {high}].")
        return value.to_bytes(size, "big", signed=True)

    return serialize


def _varint(value: object) -> bytes:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _refuse("varint", value, "not an integer", "Give a Python int.")
    magnitude = ~value if value < 0 else value
    # Minimal two's complement, as Java's BigInteger.toByteArray (0 -> one zero byte).
    return value.to_bytes(magnitude.bit_length() // 8 + 1, "big", signed=True)


def _text(cql: str, encoding: str) -> Callable[[object], bytes]:
    def serialize(value: object) -> bytes:
        if not isinstance(value, str):
            raise _refuse(cql, value, "not a string", "Give a Python str.")
        try:
            return value.encode(encoding)
        except UnicodeEncodeError as error:
            raise _refuse(cql, value, f"not {encoding}", "Use text for non-ASCII strings.") from error

    return serialize


def _as_uuid(cql: str, value: object) -> uuid.UUID:
    if isinstance(value, uuid.UUID):
        return value
    if isinstance(value, str):
        try:
            return uuid.UUID(value)
        except ValueError as error:
            raise _refuse(cql, value, "not a UUID", "Write it as 8-4-4-4-12 hex digits.") from error
    raise _refuse(cql, value, "not a UUID", "Give a uuid.UUID or its string form.")


def _uuid(value: object) -> bytes:
    return _as_uuid("uuid", value).bytes


def _timeuuid(value: object) -> bytes:
    parsed = _as_uuid("timeuuid", value)
    if parsed.version != 1:
        raise _refuse("timeuuid", value, f"a version {parsed.version} UUID", "A timeuuid is a version 1 UUID.")
    return parsed.bytes


def _timestamp(value: object) -> bytes:
    if isinstance(value, datetime):
        moment = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        millis = (moment - _EPOCH) // timedelta(milliseconds=1)
    elif isinstance(value, int) and not isinstance(value, bool):
        millis = value
    else:
        raise _refuse("timestamp", value, "not a datetime", "Give a datetime or milliseconds since the epoch.")
    return _fixed_int("timestamp", 8)(millis)


def _date(value: object) -> bytes:
    if isinstance(value, datetime):
        raise _refuse("date", value, "a datetime, not a date", "Give a datetime.date (call .date()).")
    if isinstance(value, date):
        raw = (value - _EPOCH_DATE).days + _DATE_EPOCH_OFFSET
    elif isinstance(value, int) and not isinstance(value, bool):
        raw = value  # As in CQL and the Python driver: an int is the raw unsigned day number.
    else:
        raise _refuse("date", value, "not a date", "Give a datetime.date or the raw day number (2**31 = 1970-01-01).")
    if not 0 <= raw < 2**32:
        raise _refuse("date", value, "out of range", "A raw date value lies in [0, 2**32).")
    return raw.to_bytes(4, "big", signed=False)


def _boolean(value: object) -> bytes:
    if not isinstance(value, bool):
        raise _refuse("boolean", value, "not a bool", "Give True or False.")
    return b"\x01" if value else b"\x00"


def _ieee(cql: str, fmt: str) -> Callable[[object], bytes]:
    def serialize(value: object) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise _refuse(cql, value, "not a number", "Give a Python float.")
        number = float(value)
        if math.isnan(number):
            number = math.nan  # Java's canonical NaN (0x7ff8...), whatever NaN payload was given.
        try:
            return struct.pack(fmt, number)
        except OverflowError as error:
            raise _refuse(cql, value, "out of range", "Use double for larger magnitudes.") from error

    return serialize


def _blob(value: object) -> bytes:
    if not isinstance(value, bytes | bytearray | memoryview):
        raise _refuse("blob", value, "not bytes", "Give bytes (or 0x... hex text on the command line).")
    return bytes(value)


def _inet(value: object) -> bytes:
    if isinstance(value, ipaddress.IPv4Address | ipaddress.IPv6Address):
        return value.packed
    if isinstance(value, str):
        try:
            return ipaddress.ip_address(value).packed
        except ValueError as error:
            raise _refuse("inet", value, "not an IP address", "Give an IPv4 or IPv6 address.") from error
    raise _refuse("inet", value, "not an IP address", "Give an ipaddress object or its string form.")


# --- parsers: command-line text -> Python value -----------------------------------------------------


def _parse_int(cql: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            return int(text.strip(), 10)
        except ValueError as error:
            raise _refuse(cql, text, "not an integer", "Write a decimal integer such as 42 or -7.") from error

    return parse


def _parse_str(text: str) -> object:
    return text


def _parse_timestamp(text: str) -> object:
    stripped = text.strip()
    if stripped.lstrip("-").isdigit():
        return int(stripped)
    try:
        # Without a zone Cassandra uses the coordinator's JVM zone; ringward assumes UTC (as containers run).
        return datetime.fromisoformat(stripped)
    except ValueError as error:
        raise _refuse(
            "timestamp",
            text,
            "neither milliseconds nor an ISO 8601 date-time",
            "Write e.g. 2019-01-01, '2019-01-01 00:00:00+0000' or 1546300800000 (no zone means UTC).",
        ) from error


def _parse_date(text: str) -> object:
    stripped = text.strip()
    if stripped.isdigit():
        return int(stripped)  # As a CQL literal: the raw unsigned day number, epoch at 2**31.
    try:
        return date.fromisoformat(stripped)
    except ValueError as error:
        raise _refuse(
            "date",
            text,
            "not a date",
            "Write YYYY-MM-DD, or the raw unsigned day number (2147483648 = 1970-01-01).",
        ) from error


def _parse_boolean(text: str) -> object:
    lowered = text.strip().lower()
    if lowered not in ("true", "false"):
        raise _refuse("boolean", text, "not a boolean", "Write true or false.")
    return lowered == "true"


def _parse_float(cql: str) -> Callable[[str], object]:
    def parse(text: str) -> object:
        try:
            return float(text.strip())
        except ValueError as error:
            raise _refuse(cql, text, "not a number", "Write e.g. 1.5, -2e10, NaN or Infinity.") from error

    return parse


def _parse_blob(text: str) -> object:
    stripped = text.strip()
    if not stripped.lower().startswith("0x"):
        raise _refuse("blob", text, "not a blob literal", "Write a blob as 0x followed by hex digits, e.g. 0xCAFE.")
    try:
        return bytes.fromhex(stripped[2:])
    except ValueError as error:
        raise _refuse("blob", text, "bad hex digits", "Write an even number of hex digits after 0x.") from error


@dataclass(frozen=True)
class CqlType:
    """One supported CQL type: how to serialize a Python value and how to parse CLI text."""

    name: str
    serialize: Callable[[object], bytes]
    parse: Callable[[str], object]


def _types() -> dict[str, CqlType]:
    entries = [
        CqlType("int", _fixed_int("int", 4), _parse_int("int")),
        CqlType("bigint", _fixed_int("bigint", 8), _parse_int("bigint")),
        CqlType("smallint", _fixed_int("smallint", 2), _parse_int("smallint")),
        CqlType("tinyint", _fixed_int("tinyint", 1), _parse_int("tinyint")),
        CqlType("varint", _varint, _parse_int("varint")),
        CqlType("text", _text("text", "utf-8"), _parse_str),
        CqlType("varchar", _text("varchar", "utf-8"), _parse_str),
        CqlType("ascii", _text("ascii", "ascii"), _parse_str),
        CqlType("uuid", _uuid, _parse_str),
        CqlType("timeuuid", _timeuuid, _parse_str),
        CqlType("timestamp", _timestamp, _parse_timestamp),
        CqlType("date", _date, _parse_date),
        CqlType("boolean", _boolean, _parse_boolean),
        CqlType("double", _ieee("double", ">d"), _parse_float("double")),
        CqlType("float", _ieee("float", ">f"), _parse_float("float")),
        CqlType("blob", _blob, _parse_blob),
        CqlType("inet", _inet, _parse_str),
    ]
    return {entry.name: entry for entry in entries}


CQL_TYPES: dict[str, CqlType] = _types()
SUPPORTED_TYPES: frozenset[str] = frozenset(CQL_TYPES)


def cql_type(name: str) -> CqlType:
    """The supported type called `name` (case-insensitive); ConfigurationError names the supported ones."""
    found = CQL_TYPES.get(name.strip().lower())
    if found is None:
        raise ConfigurationError(
            f"Unsupported CQL type {name!r} for a partition key.",
            "Use one of: " + ", ".join(sorted(SUPPORTED_TYPES)) + ".",
        )
    return found
