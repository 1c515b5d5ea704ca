"""Murmur3Partitioner tokens of partition keys, exactly as Cassandra computes them (`SELECT token(...)`).

A single-column key is hashed as its serialized value. A composite key is hashed as Cassandra's
CompositeType encoding: per component a 2-byte big-endian length, the bytes, and a 0x00
end-of-component byte. The token is the first 64 bits (h1) of Cassandra's hash3_x64_128 with seed 0,
with Long.MIN_VALUE moved to Long.MAX_VALUE (Murmur3Partitioner.normalize); an empty key has the
minimum token.
"""

from __future__ import annotations

from collections.abc import Sequence

from ringward._cql_values import SUPPORTED_TYPES, cql_type
from ringward._murmur3 import cassandra_h1
from ringward.errors import ConfigurationError
from ringward.ring import MAX_TOKEN, MIN_TOKEN

__all__ = [
    "SUPPORTED_TYPES",
    "composite_key",
    "murmur3_token",
    "partition_key",
    "partition_key_of_text",
    "serialize",
    "token_for",
    "token_of_text",
]

_MAX_COMPONENT = 0xFFFF


def murmur3_token(key: bytes) -> int:
    """The Murmur3Partitioner token of a serialized partition key."""
    if not key:
        return MIN_TOKEN
    h1 = cassandra_h1(key)
    return MAX_TOKEN if h1 == MIN_TOKEN else h1


def serialize(value: object, cql_type_name: str) -> bytes:
    """Cassandra's serialization of `value` as the CQL type `cql_type_name`."""
    return cql_type(cql_type_name).serialize(value)


def composite_key(components: Sequence[bytes]) -> bytes:
    """CompositeType encoding of serialized components, as Cassandra builds multi-column partition keys."""
    out = bytearray()
    for index, component in enumerate(components):
        if len(component) > _MAX_COMPONENT:
            raise ConfigurationError(
                f"Partition key component {index + 1} is {len(component)} bytes long.",
                f"Each component of a composite partition key is at most {_MAX_COMPONENT} bytes.",
            )
        out += len(component).to_bytes(2, "big") + component + b"\x00"
    return bytes(out)


def partition_key(values: Sequence[object], types: Sequence[str]) -> bytes:
    """The serialized partition key Cassandra hashes: one value as is, several as a composite."""
    _check_arity(len(values), types)
    parts = [serialize(value, name) for value, name in zip(values, types, strict=True)]
    return parts[0] if len(parts) == 1 else composite_key(parts)


def token_for(values: Sequence[object], types: Sequence[str]) -> int:
    """The token of a partition key given as Python values, one per partition key column."""
    return murmur3_token(partition_key(values, types))


def partition_key_of_text(texts: Sequence[str], types: Sequence[str]) -> bytes:
    """The serialized partition key for values typed on the command line (e.g. '0xCAFE' for a blob)."""
    _check_arity(len(texts), types)
    values = [cql_type(name).parse(text) for text, name in zip(texts, types, strict=True)]
    return partition_key(values, types)


def token_of_text(texts: Sequence[str], types: Sequence[str]) -> int:
    """The token of a partition key typed on the command line (e.g. '0xCAFE' for a blob)."""
    return murmur3_token(partition_key_of_text(texts, types))


def _check_arity(count: int, types: Sequence[str]) -> None:
    if isinstance(types, str):
        raise ConfigurationError(
            f"Partition key types were given as one string {types!r}.", "Give a list of type names."
        )
    if not types:
        raise ConfigurationError("No partition key types given.", "Give one CQL type per key column.")
    if count != len(types):
        raise ConfigurationError(
            f"{count} partition key value(s) for {len(types)} type(s).",
            "Give exactly one value per partition key column, in key order.",
        )
