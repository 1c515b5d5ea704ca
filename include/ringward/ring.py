"""Ring snapshots: nodes with their tokens, and the token ranges they form.

Tokens are Murmur3Partitioner tokens, integers in [-2**63, 2**63 - 1]. -2**63 is the partitioner's
minimum token: it is never owned by a node and marks the wrap-around point of the ring.
A range is `(start, end]`; when `start >= end` it wraps past the maximum token.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property

from ringward.errors import RingError

__all__ = ["MAX_TOKEN", "MIN_TOKEN", "Node", "Ring", "TokenRange"]

MIN_TOKEN = -(2**63)
MAX_TOKEN = 2**63 - 1


@dataclass(frozen=True, order=True)
class TokenRange:
    """`(start, end]` on the ring, with Cassandra's Range semantics.

    - `start >= end` wraps past the maximum token (Range.isWrapAround).
    - `start == end` is the whole ring; `(MIN_TOKEN, MIN_TOKEN]` is its canonical form.
    - `end == MIN_TOKEN` means "to the end of the ring": `(start, MAX_TOKEN]` plus the minimum token
      itself, which no key hashes to (only the empty key has it).
    """

    start: int
    end: int

    def __post_init__(self) -> None:
        if MIN_TOKEN <= self.start <= MAX_TOKEN and MIN_TOKEN <= self.end <= MAX_TOKEN:
            return  # one chained test: rings of 256,000 ranges build many of these
        name, value = ("start", self.start) if not MIN_TOKEN <= self.start <= MAX_TOKEN else ("end", self.end)
        raise RingError(
            f"Range {name} {value} is outside the Murmur3 token space.",
            f"Tokens lie in [{MIN_TOKEN}, {MAX_TOKEN}].",
        )

    @classmethod
    def whole_ring(cls) -> TokenRange:
        return cls(MIN_TOKEN, MIN_TOKEN)

    @property
    def wraps(self) -> bool:
        return self.start >= self.end

    @property
    def is_whole_ring(self) -> bool:
        return self.start == self.end

    def contains(self, token: int) -> bool:
        if self.wraps:
            return token > self.start or token <= self.end
        return self.start < token <= self.end

    def width(self) -> int:
        """Number of tokens in the range (2**64 for the whole ring)."""
        span = self.end - self.start
        return span if span > 0 else span + 2**64

    def unwrap(self) -> list[TokenRange]:
        """The range as pieces that do not cross the minimum token, as nodetool repair -st/-et takes them.

        Like Cassandra's Range.unwrap: a range ending at the minimum token is returned as is (it does
        not cross it), so is `(MIN_TOKEN, MIN_TOKEN]`; `(t, t]` becomes `(t, MIN] + (MIN, t]`.
        """
        if not self.wraps or self.end == MIN_TOKEN:
            return [self]
        return [TokenRange(self.start, MIN_TOKEN), TokenRange(MIN_TOKEN, self.end)]

    def __str__(self) -> str:
        return f"({self.start}, {self.end}]"


@dataclass(frozen=True)
class Node:
    """A Cassandra node as ringward needs it."""

    address: str
    datacenter: str
    rack: str
    tokens: tuple[int, ...]
    host_id: str | None = None
    state: str = "UN"
    load_bytes: int | None = None


@dataclass(frozen=True)
class Ring:
    """An immutable snapshot of the token ring: nodes sorted by address, tokens in ring order."""

    nodes: tuple[Node, ...]
    sorted_tokens: tuple[int, ...] = field(init=False, repr=False)
    token_owner: dict[int, Node] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.nodes:
            raise RingError("The ring has no nodes.", "Give a ring with at least one node.")
        owners: dict[int, Node] = {}
        addresses: set[str] = set()
        for node in self.nodes:
            if node.address in addresses:
                raise RingError(f"Node {node.address} appears twice in the ring.", "List each node once.")
            addresses.add(node.address)
            if not node.tokens:
                raise RingError(f"Node {node.address} has no tokens.", "Give every node its tokens.")
            if _tokens_fit(node.tokens, owners):  # checked with builtins: big rings hold 256,000 tokens
                owners.update(dict.fromkeys(node.tokens, node))
                continue
            for token in node.tokens:  # something is wrong: find it and say what
                if not MIN_TOKEN < token <= MAX_TOKEN:
                    raise RingError(
                        f"Token {token} of node {node.address} is outside the Murmur3 range.",
                        f"Tokens must lie in ({MIN_TOKEN}, {MAX_TOKEN}].",
                    )
                if token in owners:
                    raise RingError(
                        f"Token {token} is owned by both {owners[token].address} and {node.address}.",
                        "Each token must belong to exactly one node.",
                    )
                owners[token] = node
        object.__setattr__(self, "nodes", tuple(sorted(self.nodes, key=lambda n: n.address)))
        object.__setattr__(self, "sorted_tokens", tuple(sorted(owners)))
        object.__setattr__(self, "token_owner", owners)

    @classmethod
    def of(cls, nodes: Iterable[Node]) -> Ring:
        return cls(tuple(nodes))

    def node(self, address: str) -> Node:
        for node in self.nodes:
            if node.address == address:
                return node
        raise RingError(f"No node {address} in the ring.", "Use one of: " + ", ".join(self.addresses()))

    def addresses(self) -> list[str]:
        return [n.address for n in self.nodes]

    def datacenters(self) -> dict[str, list[Node]]:
        """Nodes per datacenter, in address order."""
        dcs: dict[str, list[Node]] = {}
        for node in self.nodes:
            dcs.setdefault(node.datacenter, []).append(node)
        return dcs

    def ranges(self) -> list[TokenRange]:
        """One range per ring token, in ring order: the range ending at each token.

        The first range `(last_token, first_token]` is the wrap-around range.
        """
        return list(self._ranges)

    @cached_property
    def _ranges(self) -> tuple[TokenRange, ...]:
        tokens = self.sorted_tokens
        return tuple(map(TokenRange, (tokens[-1], *tokens[:-1]), tokens))

    @cached_property
    def primary_owners(self) -> tuple[str, ...]:
        """The address of each range's primary replica (the node owning its end token), in `ranges()` order."""
        owner = self.token_owner
        return tuple(owner[token_range.end].address for token_range in self._ranges)

    @cached_property
    def primary_widths(self) -> tuple[tuple[str, int], ...]:
        """(address, tokens of its primary ranges) of every node, in the order the ring first lists them."""
        owned: dict[str, int] = {}
        for token_range, address in zip(self._ranges, self.primary_owners, strict=True):
            owned[address] = owned.get(address, 0) + token_range.width()
        return tuple(owned.items())

    @cached_property
    def primary_shares(self) -> tuple[float, ...]:
        """Each range's share of its primary replica's tokens (its width / the tokens of the node's primary
        ranges), in `ranges()` order: how a node's own total (system.size_estimates summed) spreads over them."""
        owned = dict(self.primary_widths)
        return tuple(r.width() / owned[a] for r, a in zip(self._ranges, self.primary_owners, strict=True))

    @cached_property
    def unrolled_bounds(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """The ring's ranges as pieces of the line [MIN_TOKEN, MIN_TOKEN + 2**64] in token order, the wrap-around
        range in two parts (its part from MIN_TOKEN first, its part up to MIN_TOKEN + 2**64 last): the pieces'
        bounds (one more than the pieces) and widths. What a size index of node totals is built on (`SizeIndex`)."""
        ranges = self._ranges
        if not ranges:
            return (), ()
        bounds = (MIN_TOKEN, *(r.end for r in ranges), MIN_TOKEN + 2**64)  # the last range ends where the first starts
        widths = tuple(map(operator.sub, bounds[1:], bounds[:-1]))
        return bounds, widths

    def primary_token(self, token: int) -> int:
        """The ring token whose range `(previous, token]` contains `token`."""
        index = bisect.bisect_left(self.sorted_tokens, token)
        return self.sorted_tokens[index % len(self.sorted_tokens)]

    def primary_ranges(self, address: str) -> list[TokenRange]:
        """The ranges a node owns as primary replica (as `nodetool repair -pr` repairs them)."""
        return [r for r in self.ranges() if self.token_owner[r.end].address == address]

    def ring_walk(self, start_token: int) -> Iterator[Node]:
        """Owners of ring tokens clockwise, starting at the token owning `start_token`."""
        tokens: Sequence[int] = self.sorted_tokens
        first = bisect.bisect_left(tokens, start_token) % len(tokens)
        for i in range(len(tokens)):
            yield self.token_owner[tokens[(first + i) % len(tokens)]]


def _tokens_fit(tokens: Sequence[int], owners: dict[int, Node]) -> bool:
    """The tokens lie in the Murmur3 range, are distinct, and none is owned yet."""
    return (
        min(tokens) > MIN_TOKEN
        and max(tokens) <= MAX_TOKEN
        and len(set(tokens)) == len(tokens)
        and owners.keys().isdisjoint(tokens)
    )
