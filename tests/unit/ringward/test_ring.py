"""TokenRange edge cases (Cassandra's Range semantics) and Ring ranges."""

from __future__ import annotations

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from ringward.errors import RingError
from ringward.ring import MAX_TOKEN, MIN_TOKEN, Node, Ring, TokenRange

tokens = st.integers(MIN_TOKEN, MAX_TOKEN)
key_tokens = st.integers(MIN_TOKEN + 1, MAX_TOKEN)  # tokens a non-empty key can have


class TestTokenRange:
    def test_plain_range_is_open_start_closed_end(self) -> None:
        r = TokenRange(10, 20)
        assert not r.wraps
        assert [r.contains(t) for t in (10, 11, 20, 21)] == [False, True, True, False]
        assert r.width() == 10

    def test_wrapping_range_crosses_the_maximum(self) -> None:
        r = TokenRange(100, -100)
        assert r.wraps
        assert r.contains(MAX_TOKEN) and r.contains(MIN_TOKEN) and r.contains(-100)
        assert not r.contains(0) and not r.contains(100)

    def test_end_at_minimum_runs_to_the_end_of_the_ring(self) -> None:
        r = TokenRange(5, MIN_TOKEN)
        assert r.contains(6) and r.contains(MAX_TOKEN)
        assert r.contains(MIN_TOKEN)  # as Cassandra's Range: (x, MIN] holds MIN itself
        assert not r.contains(MIN_TOKEN + 1) and not r.contains(5)
        assert r.width() == MAX_TOKEN - 5 + 1
        assert r.unwrap() == [r]

    def test_start_at_minimum_excludes_the_minimum(self) -> None:
        r = TokenRange(MIN_TOKEN, 7)
        assert not r.wraps
        assert not r.contains(MIN_TOKEN) and r.contains(MIN_TOKEN + 1) and r.contains(7)
        assert r.unwrap() == [r]

    def test_whole_ring(self) -> None:
        whole = TokenRange.whole_ring()
        assert whole == TokenRange(MIN_TOKEN, MIN_TOKEN)
        assert whole.is_whole_ring and whole.wraps
        assert whole.width() == 2**64
        assert all(whole.contains(t) for t in (MIN_TOKEN, 0, MAX_TOKEN))
        assert whole.unwrap() == [whole]  # Cassandra's Range.unwrap keeps (MIN, MIN] whole

    def test_single_token_ring_range_is_whole_and_unwraps_in_two(self) -> None:
        r = TokenRange(42, 42)
        assert r.is_whole_ring and r.width() == 2**64
        assert r.unwrap() == [TokenRange(42, MIN_TOKEN), TokenRange(MIN_TOKEN, 42)]

    def test_wrapping_range_unwraps_at_the_minimum(self) -> None:
        assert TokenRange(100, -100).unwrap() == [TokenRange(100, MIN_TOKEN), TokenRange(MIN_TOKEN, -100)]

    @pytest.mark.parametrize(("start", "end"), [(MIN_TOKEN - 1, 0), (0, MAX_TOKEN + 1)])
    def test_tokens_outside_the_token_space_are_refused(self, start: int, end: int) -> None:
        with pytest.raises(RingError, match="outside the Murmur3 token space"):
            TokenRange(start, end)

    def test_str_is_cassandras_notation(self) -> None:
        assert str(TokenRange(-1, 2)) == "(-1, 2]"

    @given(tokens, tokens, key_tokens)
    def test_unwrapped_pieces_cover_exactly_the_range(self, start: int, end: int, token: int) -> None:
        r = TokenRange(start, end)
        pieces = r.unwrap()
        assert all(not p.wraps or p.end == MIN_TOKEN for p in pieces)
        assert sum(p.contains(token) for p in pieces) == int(r.contains(token))

    @given(tokens, tokens)
    def test_width_adds_up_over_unwrapped_pieces(self, start: int, end: int) -> None:
        r = TokenRange(start, end)
        assert sum(p.width() for p in r.unwrap()) == r.width()

    @given(tokens, tokens, tokens)
    def test_a_range_and_its_complement_partition_the_ring(self, start: int, end: int, token: int) -> None:
        assume(start != end)  # the whole ring has no complement range
        assert TokenRange(start, end).contains(token) != TokenRange(end, start).contains(token)


# The seed's num_tokens=1 ring (shared/seeds/000), with the local cluster's addresses.
SEED_RING = Ring.of(
    [
        Node("127.0.0.2", "dc1", "rack1", (2913852835856394332,)),
        Node("127.0.0.3", "dc1", "rack1", (-2609423468938814500,)),
        Node("127.0.0.4", "dc1", "rack2", (-1864680695487047011,)),
    ]
)


class TestRing:
    def test_primary_ranges_match_the_seed_article(self) -> None:
        tokens_2, tokens_3, tokens_4 = 2913852835856394332, -2609423468938814500, -1864680695487047011
        assert SEED_RING.primary_ranges("127.0.0.2") == [TokenRange(tokens_4, tokens_2)]
        assert SEED_RING.primary_ranges("127.0.0.3") == [TokenRange(tokens_2, tokens_3)]
        assert SEED_RING.primary_ranges("127.0.0.3")[0].unwrap() == [
            TokenRange(2913852835856394332, MIN_TOKEN),
            TokenRange(MIN_TOKEN, -2609423468938814500),
        ]

    def test_seed_keys_land_on_the_seed_owners(self) -> None:
        # app_id 1 -> 172.24.0.3 and app_id 6 -> 172.24.0.2 (nodetool getendpoints in the seed).
        owner_of_1 = SEED_RING.token_owner[SEED_RING.primary_token(-4069959284402364209)]
        owner_of_6 = SEED_RING.token_owner[SEED_RING.primary_token(2705480034054113608)]
        assert (owner_of_1.address, owner_of_6.address) == ("127.0.0.3", "127.0.0.2")

    def test_one_token_ring_owns_the_whole_ring(self) -> None:
        ring = Ring.of([Node("127.0.0.2", "dc1", "rack1", (0,))])
        assert ring.ranges() == [TokenRange(0, 0)]
        assert ring.ranges()[0].is_whole_ring

    @given(st.sets(key_tokens, min_size=1, max_size=20), key_tokens)
    def test_ranges_partition_the_ring(self, ring_tokens: set[int], token: int) -> None:
        ring = Ring.of([Node("n", "dc1", "r1", tuple(ring_tokens))])
        assert sum(r.contains(token) for r in ring.ranges()) == 1
        assert sum(r.width() for r in ring.ranges()) == 2**64
