"""The ring of a cluster as SVG text: each primary range an arc in its owner's colour, a tick per token.

Drawn on the same circle as the placement and repair pictures (minimum token at 12 o'clock, clockwise).
"""

from __future__ import annotations

from ringward import _svg
from ringward.ring import Ring

__all__ = ["render_ring_svg"]

_DOWN = "#c7c7c7"


def render_ring_svg(ring: Ring, *, title: str) -> str:
    """One ring: the range ending at each token is drawn in the colour of the token's owner (its primary
    range); a node seen down is drawn grey and named so in the legend."""
    cx, cy = 280.0, 300.0
    addresses = sorted(ring.addresses())
    names = _svg.short_names(addresses)
    colours = {a: _svg.PALETTE[i % len(_svg.PALETTE)] for i, a in enumerate(addresses)}
    body = [_svg.text(400, 30, title, size=17, extra="font-weight='bold'")]
    for token_range in ring.ranges():
        owner = ring.token_owner[ring.primary_token(token_range.end)]
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
    for i, address in enumerate(addresses):
        node = ring.node(address)
        up = node.state.startswith("U")
        label = f"{names[address]} {address} {node.datacenter}/{node.rack} {node.state} ({len(node.tokens)} tokens)"
        body.append(_svg.legend_row(540, 120 + 26 * i, colours[address] if up else _DOWN, label))
    height = max(560, 160 + 26 * len(addresses))
    return _svg.document(900, height, body)
