"""Token arithmetic on the ring: equal-width splitting, and wrapping ranges as plain intervals."""

from __future__ import annotations

from ringward.ring import MIN_TOKEN, TokenRange

__all__ = ["RING_SIZE", "split_evenly", "unrolled"]

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


def unrolled(token_range: TokenRange) -> list[tuple[int, int]]:
    """The range as half-open intervals `(low, high]` on the line [MIN_TOKEN, MIN_TOKEN + 2**64]."""
    if not token_range.wraps:
        return [(token_range.start, token_range.end)]
    return [(token_range.start, MIN_TOKEN + RING_SIZE), (MIN_TOKEN, token_range.end)]
