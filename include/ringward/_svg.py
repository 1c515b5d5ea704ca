"""SVG building blocks for ring pictures: donut arcs at token positions, labels, legend rows.

Text from the cluster or the store (datacenter, rack, keyspace, address) enters only through `text` and `path`'s
title, escaped there; characters XML 1.0 cannot hold (control characters) are shown as U+FFFD, so the picture
stays a well-formed document whatever a name holds."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from xml.sax.saxutils import escape, quoteattr

from ringward.ring import MIN_TOKEN, TokenRange

_RING_SIZE = 2**64
FONT = "font-family='Helvetica, Arial, sans-serif'"

# Distinct, colour-blind friendly enough fills (Tableau 10 and two extra).
PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#59a14f",
    "#b07aa1",
    "#76b7b2",
    "#edc948",
    "#ff9da7",
    "#9c755f",
    "#e15759",
    "#bab0ac",
    "#86bcb6",
    "#d4a6c8",
)


def angle_of(token: int) -> float:
    """Degrees clockwise from 12 o'clock: the minimum token sits at the top."""
    return (token - MIN_TOKEN) / _RING_SIZE * 360.0


def point(cx: float, cy: float, radius: float, degrees: float) -> tuple[float, float]:
    rad = math.radians(degrees)
    return cx + radius * math.sin(rad), cy - radius * math.cos(rad)


def donut_segment(cx: float, cy: float, inner: float, outer: float, token_range: TokenRange) -> str:
    """Path data of the band between `inner` and `outer` radius covering `token_range`."""
    start = angle_of(token_range.start)
    sweep = token_range.width() / _RING_SIZE * 360.0
    if sweep >= 359.999:  # one token: the range is the whole ring, drawn as two half bands
        return _band(cx, cy, inner, outer, start, 180.0) + " " + _band(cx, cy, inner, outer, start + 180, 180.0)
    return _band(cx, cy, inner, outer, start, sweep)


def _band(cx: float, cy: float, inner: float, outer: float, start: float, sweep: float) -> str:
    end = start + sweep
    large = 1 if sweep > 180 else 0
    ox0, oy0 = point(cx, cy, outer, start)
    ox1, oy1 = point(cx, cy, outer, end)
    ix1, iy1 = point(cx, cy, inner, end)
    ix0, iy0 = point(cx, cy, inner, start)
    return (
        f"M{ox0:.2f},{oy0:.2f} A{outer},{outer} 0 {large} 1 {ox1:.2f},{oy1:.2f} "
        f"L{ix1:.2f},{iy1:.2f} A{inner},{inner} 0 {large} 0 {ix0:.2f},{iy0:.2f} Z"
    )


def radial_line(cx: float, cy: float, inner: float, outer: float, degrees: float) -> str:
    x0, y0 = point(cx, cy, inner, degrees)
    x1, y1 = point(cx, cy, outer, degrees)
    return f"<line x1='{x0:.2f}' y1='{y0:.2f}' x2='{x1:.2f}' y2='{y1:.2f}' stroke='#333' stroke-width='0.8'/>"


def mid_angle(token_range: TokenRange) -> float:
    return (angle_of(token_range.start) + token_range.width() / _RING_SIZE * 180.0) % 360.0


# Characters XML 1.0 does not allow in a document (tab, line feed and carriage return are allowed).
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff\ud800-\udfff]")


def xml_text(content: str) -> str:
    """`content` as SVG text: markup characters escaped, characters XML cannot hold replaced."""
    return escape(_NOT_XML.sub("\ufffd", content))


def text(x: float, y: float, content: str, *, size: int = 12, anchor: str = "middle", extra: str = "") -> str:
    return (
        f"<text x='{x:.1f}' y='{y:.1f}' {FONT} font-size='{size}' text-anchor='{anchor}' "
        f"dominant-baseline='middle'{' ' + extra if extra else ''}>{xml_text(content)}</text>"
    )


def path(data: str, *, css_class: str, fill: str, title: str, extra: str = "") -> str:
    return (
        f"<path class={quoteattr(css_class)} d='{data}' fill={quoteattr(fill)}"
        f"{' ' + extra if extra else ''}><title>{xml_text(title)}</title></path>"
    )


def legend_row(x: float, y: float, fill: str, label: str, *, extra: str = "") -> str:
    swatch = (
        f"<rect x='{x:.1f}' y='{y - 7:.1f}' width='14' height='14' rx='2' fill={quoteattr(fill)}"
        f"{' ' + extra if extra else ''}/>"
    )
    return swatch + text(x + 22, y, label, size=12, anchor="start")


def document(width: int, height: int, body: Sequence[str]) -> str:
    return "\n".join(
        [
            f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
            f"viewBox='0 0 {width} {height}'>",
            f"<rect width='{width}' height='{height}' fill='white'/>",
            *body,
            "</svg>",
            "",
        ]
    )


def short_names(addresses: Sequence[str]) -> dict[str, str]:
    """Labels short enough for a ring: the last IPv4 octet (".4") when the rest is shared."""
    prefixes = {a.rsplit(".", 1)[0] for a in addresses if a.count(".") == 3}
    if len(prefixes) == 1 and all(a.count(".") == 3 for a in addresses):
        return {a: "." + a.rsplit(".", 1)[1] for a in addresses}
    return {a: a for a in addresses}


# What `document` and the building blocks above write, and nothing else: the elements, and their attributes.
_SVG = "{http://www.w3.org/2000/svg}"
_ELEMENTS = frozenset({"svg", "rect", "line", "path", "text", "title"})
_ATTRIBUTES = frozenset({
    "width", "height", "viewBox", "x", "y", "x1", "y1", "x2", "y2", "rx", "d", "class", "fill", "fill-opacity",
    "stroke", "stroke-width", "font-family", "font-size", "font-weight", "text-anchor", "dominant-baseline",
})  # fmt: skip


def checked_document(markup: str) -> str:
    """`markup` if it is a picture these building blocks could have drawn; `ValueError` otherwise.

    For markup a page inlines but did not just draw (a view of a plan read from ringward_ops, which whoever may
    write that keyspace could have changed): one well-formed SVG document of the elements and attributes above
    only, with no declaration, comment, CDATA section or processing instruction (where an XML parser and a
    browser's HTML parser could read the same text differently). No element or attribute that can run script,
    load a resource or hold HTML passes; text is text either way.
    """
    if "<!" in markup or "<?" in markup:
        raise ValueError("an SVG picture with a declaration, comment, CDATA section or processing instruction")
    try:
        root = ElementTree.fromstring(markup)
    except ElementTree.ParseError as error:
        raise ValueError(f"an SVG picture that is not well-formed ({error})") from error
    if root.tag != f"{_SVG}svg":
        raise ValueError(f"an SVG picture whose root is {root.tag!r}")
    for element in root.iter():
        name = element.tag[len(_SVG) :] if isinstance(element.tag, str) and element.tag.startswith(_SVG) else None
        if name not in _ELEMENTS:
            raise ValueError(f"an SVG picture with the element {element.tag!r}")
        unknown = sorted(set(element.attrib) - _ATTRIBUTES)
        if unknown:
            raise ValueError(f"an SVG picture with the attributes {unknown} on {name!r}")
    return markup
