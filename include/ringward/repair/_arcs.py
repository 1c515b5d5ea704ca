"""Token arithmetic on the ring: equal-width splitting and overlap of (possibly wrapping) ranges."""

from __future__ import annotations

from ringward.ring import MIN_TOKEN, TokenRange

__all__ = ["RING_SIZE", "overlap_width", "split_evenly"]

RING_SIZE = 2**64


def _normalise(position: int) -> int:
    """A position on the unrolled ring folded back into the token domain."""
    return (position - MIN_TOKEN) % RING_SIZE + MIN_TOKEN


def split_evenly(token_range: TokenRange, pieces: int) -> list[TokenRange]:
    """`pieces` contiguous ranges of (nearly) equal width covering `token_range` exactly, in ring order.

    Fewer pieces when the range holds fewer tokens than asked for; pieces may wrap (unwrap them after).
    """
    width = token_range.width()
    count = max(1, min(pieces, width))
    bounds = [_normalise(token_range.start + width * i // count) for i in range(count)]
    bounds.append(token_range.end)
    return [TokenRange(bounds[i], bounds[i + 1]) for i in range(count)]


def _intervals(token_range: TokenRange) -> list[tuple[int, int]]:
    """Half-open integer intervals `(low, high]` on the unrolled line [MIN_TOKEN, MIN_TOKEN + 2**64]."""
    if not token_range.wraps:
        return [(token_range.start, token_range.end)]
    top = MIN_TOKEN + RING_SIZE
    return [(token_range.start, top), (MIN_TOKEN, token_range.end)]


def overlap_width(a: TokenRange, b: TokenRange) -> int:
    """Number of tokens two ranges share."""
    return sum(
        max(0, min(a_high, b_high) - max(a_low, b_low))
        for a_low, a_high in _intervals(a)
        for b_low, b_high in _intervals(b)
    )
