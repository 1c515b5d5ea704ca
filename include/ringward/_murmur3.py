"""Cassandra's flavour of MurmurHash3 x64-128, as org.apache.cassandra.utils.MurmurHash.hash3_x64_128.

Cassandra reads the last `len % 16` bytes (the tail) as signed Java bytes, so a tail byte >= 0x80 is
sign-extended into the upper bits of the tail word before mixing. The reference MurmurHash3 (and the
mmh3 package) reads them unsigned, so the two agree exactly when no tail byte is >= 0x80. Body blocks
are read unsigned little-endian by both.
"""

from __future__ import annotations

import mmh3

__all__ = ["cassandra_h1", "cassandra_hash3_x64_128", "mmh3_agrees"]

_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F
_BLOCK = 16


def _rotl(value: int, bits: int) -> int:
    return ((value << bits) | (value >> (64 - bits))) & _MASK


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    return k ^ (k >> 33)


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK


def _mix_k2(k2: int) -> int:
    return (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK


def _signed_tail_word(tail: bytes) -> int:
    """Little-endian word of up to 8 tail bytes, each sign-extended as Java's `(long) byte` does."""
    word = 0
    for shift, byte in enumerate(tail):
        signed = byte - 256 if byte >= 0x80 else byte
        word ^= (signed << (8 * shift)) & _MASK
    return word


def _to_signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def cassandra_hash3_x64_128(key: bytes, seed: int = 0) -> tuple[int, int]:
    """Both 64-bit halves (h1, h2) of Cassandra's hash, as signed Java longs."""
    h1 = h2 = seed & _MASK
    body_end = len(key) - len(key) % _BLOCK
    for offset in range(0, body_end, _BLOCK):
        k1 = int.from_bytes(key[offset : offset + 8], "little")
        k2 = int.from_bytes(key[offset + 8 : offset + 16], "little")
        h1 ^= _mix_k1(k1)
        h1 = (_rotl(h1, 27) + h2) & _MASK
        h1 = (h1 * 5 + 0x52DCE729) & _MASK
        h2 ^= _mix_k2(k2)
        h2 = (_rotl(h2, 31) + h1) & _MASK
        h2 = (h2 * 5 + 0x38495AB5) & _MASK

    tail = key[body_end:]
    if len(tail) > 8:
        h2 ^= _mix_k2(_signed_tail_word(tail[8:]))
    if tail:
        h1 ^= _mix_k1(_signed_tail_word(tail[:8]))

    h1 ^= len(key)
    h2 ^= len(key)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1 = _fmix(h1)
    h2 = _fmix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return _to_signed(h1), _to_signed(h2)


def mmh3_agrees(key: bytes) -> bool:
    """True when the reference MurmurHash3 gives Cassandra's value: no tail byte is >= 0x80."""
    return all(byte < 0x80 for byte in key[len(key) - len(key) % _BLOCK :])


def cassandra_h1(key: bytes) -> int:
    """The first half (h1) of Cassandra's hash with seed 0: through mmh3 (C) where it agrees."""
    if mmh3_agrees(key):
        return mmh3.hash64(key, 0, True)[0]
    return cassandra_hash3_x64_128(key)[0]
