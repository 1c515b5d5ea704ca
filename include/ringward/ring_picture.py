"""The ring of a cluster as SVG text: each primary range an arc in its owner's colour, a tick per token.

Drawn on the same circle as the placement and repair pictures (minimum token at 12 o'clock, clockwise).
"""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from ringward import _svg
from ringward.ring import Ring, TokenRange

__all__ = ["render_ring_svg"]

_DOWN = "#c7c7c7"


def render_ring_svg(ring: Ring, *, title: str, max_arcs: int | None = None, max_legend: int | None = None) -> str:
    """One ring: the range ending at each token is drawn in the colour of the token's owner (its primary
    range); a node seen down is drawn grey and named so in the legend.

    `max_arcs`: above this many ranges each arc is a run of neighbouring ranges, drawn in the colour of the node
    owning most of them (its tooltip counts the owners); `max_legend`: the legend names at most this many nodes
    (the down ones first) and counts the rest. Both keep the picture's size bounded whatever the ring's."""
    cx, cy = 280.0, 300.0
    addresses = sorted(ring.addresses())
    names = _svg.short_names(addresses)
    colours = {a: _svg.PALETTE[i % len(_svg.PALETTE)] for i, a in enumerate(addresses)}
    body = [_svg.text(400, 30, title, size=17, extra="font-weight='bold'")]
    ranges = ring.ranges()
    owners = [ring.token_owner[r.end] for r in ranges]  # each range ends at its primary token
    if max_arcs is not None and len(ranges) > max_arcs:
        bounds = [len(ranges) * i // max_arcs for i in range(max_arcs + 1)]
        owned_by = [owner.address for owner in owners]
        seen_down = {node.address for node in ring.nodes if not node.state.startswith("U")}
        for first, last in pairwise(bounds):
            arc = TokenRange(ranges[first].start, ranges[last - 1].end)
            counts = Counter(owned_by[first:last])
            down = sum(n for address, n in counts.items() if address in seen_down)
            main = counts.most_common(1)[0][0]
            top = ", ".join(f"{address} {n}" for address, n in counts.most_common(3))
            more = f" and {len(counts) - 3} more nodes" if len(counts) > 3 else ""
            note = f"; {down} of them of nodes seen down" if down else ""
            body.append(_svg.path(
                _svg.donut_segment(cx, cy, 140, 210, arc), css_class="arc", fill=_DOWN if down else colours[main],
                title=f"{arc}: {last - first} primary ranges, of {top}{more}{note}",
                extra="stroke='white' stroke-width='0.5'",
            ))  # fmt: skip
    else:
        for token_range, owner in zip(ranges, owners, strict=True):
            fill = colours[owner.address] if owner.state.startswith("U") else _DOWN
            body.append(
                _svg.path(
                    _svg.donut_segment(cx, cy, 140, 210, token_range),
                    css_class="arc",
                    fill=fill,
                    title=f"{token_range}: primary range of {owner.address}",
                    extra="stroke='white' stroke-width='1'",
                )
            )
    tokens = len(ring.sorted_tokens)
    body.append(_svg.text(cx, cy - 10, f"{len(ring.nodes)} nodes", size=18, extra="font-weight='bold' fill='#333'"))
    body.append(_svg.text(cx, cy + 16, f"{tokens} tokens", size=12, extra="fill='#666'"))
    listed = addresses
    if max_legend is not None and len(addresses) > max_legend:  # the nodes seen down first: what needs a look
        listed = sorted(addresses, key=lambda a: (ring.node(a).state.startswith("U"), a))[:max_legend]
    for i, address in enumerate(listed):
        node = ring.node(address)
        up = node.state.startswith("U")
        label = f"{names[address]} {address} {node.datacenter}/{node.rack} {node.state} ({len(node.tokens)} tokens)"
        body.append(_svg.legend_row(540, 120 + 26 * i, colours[address] if up else _DOWN, label))
    rows = len(listed)
    if len(listed) < len(addresses):
        body.append(_svg.text(540, 120 + 26 * rows, f"and {len(addresses) - len(listed)} more nodes (the page's "
                              "node list has every node)", size=12, anchor="start"))  # fmt: skip
        rows += 1
    height = max(560, 160 + 26 * rows)
    return _svg.document(900, height, body)
