"""SizeIndex: estimates per token range from per-range rows and from per-node sums, summed over a unit's tables."""

from __future__ import annotations

import pytest
from ringward.repair import NodeSizeEstimate, SizeEstimate
from ringward.repair._estimates import SizeIndex
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring, TokenRange

RING = Ring.of(
    [
        Node("10.0.0.1", "dc1", "r1", (-6000, 1000)),
        Node("10.0.0.2", "dc1", "r1", (0, 4000)),
    ]
)  # ranges: (4000, -6000] wraps (10.0.0.1), (-6000, 0] (10.0.0.2), (0, 1000] (10.0.0.1), (1000, 4000] (10.0.0.2)


def test_a_rows_own_range_gives_back_its_numbers_exactly_summed_over_the_tables() -> None:
    rows = [
        SizeEstimate("ks", "a", "-6000", "0", 3, 1_000),
        SizeEstimate("ks", "b", "-6000", "0", 7, 10),
        SizeEstimate("ks", "a", "4000", "-6000", 5, 999),  # wraps
        SizeEstimate("ks", "a", "-6000", "0", 3, 1_000),  # the same range from another node: counted once
        SizeEstimate("other", "a", "-6000", "0", 1_000, 1_000),
    ]
    index = SizeIndex(rows, "ks", ())
    assert index.estimate(TokenRange(-6000, 0)) == (3_000 + 70, 1_010)
    assert index.estimate(TokenRange(4000, -6000)) == (4_995, 999)
    assert index.estimate(TokenRange(-3000, 0)) == (pytest.approx(1_535), pytest.approx(505))  # half the range
    assert SizeIndex(rows, "ks", ("b",)).estimate(TokenRange(-6000, 0)) == (70, 10)


def test_a_nodes_sum_is_spread_over_its_primary_ranges_by_width() -> None:
    rows = [
        NodeSizeEstimate("ks", "a", "10.0.0.2", 7_000, 70_000),
        NodeSizeEstimate("ks", "b", "10.0.0.2", 7_000, 7_000),
    ]
    index = SizeIndex(rows, "ks", (), RING)
    # 10.0.0.2 is primary for (-6000, 0] (6,000 tokens) and (1000, 4000] (3,000 tokens).
    data, partitions = index.estimate(TokenRange(-6000, 0))
    assert (data, partitions) == (pytest.approx(77_000 * 6 / 9), pytest.approx(14_000 * 6 / 9))
    assert index.estimate(TokenRange(0, 1000)) == (0, 0)  # 10.0.0.1 sent no sums: no estimate there
    whole_ring = index.estimate(TokenRange(MAX_TOKEN, MAX_TOKEN))
    assert whole_ring == (pytest.approx(77_000), pytest.approx(14_000))


def test_the_wrapping_primary_range_of_a_node_gets_its_share_across_the_wrap() -> None:
    index = SizeIndex([NodeSizeEstimate("ks", "a", "10.0.0.1", 1_000, 1_000)], "ks", (), RING)
    wrap = TokenRange(4000, -6000)
    owned = wrap.width() + 1000
    assert index.estimate(wrap)[1] == pytest.approx(1_000 * wrap.width() / owned)
    assert index.estimate(TokenRange(MIN_TOKEN, -6000))[1] == pytest.approx(1_000 * (-6000 - MIN_TOKEN) / owned)


def test_rows_of_overlapping_ranges_add_up_where_they_overlap() -> None:
    rows = [SizeEstimate("ks", "a", "0", "100", 1, 100), SizeEstimate("ks", "a", "50", "150", 1, 100)]
    index = SizeIndex(rows, "ks", ())
    assert index.estimate(TokenRange(50, 100)) == (pytest.approx(100), pytest.approx(100))
    assert index.estimate(TokenRange(0, 150)) == (pytest.approx(200), pytest.approx(200))
    assert index.estimate(TokenRange(150, 1000)) == (0, 0)


def test_node_sums_need_the_ring() -> None:
    with pytest.raises(ValueError, match="ring"):
        SizeIndex([NodeSizeEstimate("ks", "a", "10.0.0.1", 1, 1)], "ks", ())
    assert SizeIndex([], "ks", ()).empty and SizeIndex([], "ks", ()).estimate(TokenRange(0, 1)) == (0, 0)
