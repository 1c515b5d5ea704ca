"""Ring pictures as SVG text: placement before/after a migration, and repair age per range.

Tokens are placed on the circle by value (the minimum token at 12 o'clock, clockwise), so arc
lengths show how much of the token space each range covers.

Every label is built from typed values (a replication as `Replication.describe` writes it) and escaped once, as
the element is written (`ringward._svg`); the finished SVG is never rewritten.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

from ringward import _svg
from ringward.plan import MigrationPlan
from ringward.ring import Ring, TokenRange

__all__ = ["REPAIR_BUCKETS", "render_placement_svg", "render_repair_svg", "xml_text"]


xml_text = _svg.xml_text  # text from anywhere, as SVG element content

_MOVED = "#d62728"
_NEVER = "#c7c7c7"
# (upper bound of repair age as a share of gc_grace_seconds, colour, label)
REPAIR_BUCKETS: tuple[tuple[float, str, str], ...] = (
    (0.5, "#59a14f", "repaired < 50% of gc_grace ago"),
    (0.8, "#edc948", "50-80% of gc_grace"),
    (1.0, "#f28e2b", "80-100% of gc_grace"),
    (float("inf"), "#e15759", "older than gc_grace (overdue)"),
)
_LABEL_LIMIT = 64  # above this many ranges per-range labels are left to the hover titles
_LABEL_GAP = 9.0  # degrees between two labels outside the ring


def render_placement_svg(plan: MigrationPlan, *, max_arcs: int | None = None) -> str:
    """Two rings, before and after, each range an arc coloured by its replica set.

    `max_arcs`: above this many ranges the picture is drawn in at most that many arcs per ring, each a run of
    neighbouring ranges (`_placement_summary_svg`): its size stays bounded whatever the ring's."""
    if max_arcs is not None and plan.total_ranges > max_arcs:
        return _placement_summary_svg(plan, max_arcs)
    changes = plan.ranges
    colours = _set_colours([c.old for c in changes] + [c.new for c in changes])
    names = _svg.short_names(sorted({a for c in changes for a in (*c.old, *c.new)}))
    width, top = 1160, 90
    body = [
        _svg.text(width / 2, 28, f"{plan.keyspace}: {_title(plan)}", size=17, extra="font-weight='bold'"),
        _svg.text(width / 2, 54, _subtitle(plan), size=13, extra=f"fill='{'#2b7a2b' if plan.safe else _MOVED}'"),
    ]
    rings = (
        (260.0, "before", plan.ring, plan.old.describe()),
        (870.0, "after", plan.ring_after or plan.ring, plan.new.describe()),
    )
    cy = top + 220.0
    for cx, side, ring, caption in rings:
        for change in changes:
            replicas = change.old if side == "before" else change.new
            label = f"{change.range}: {', '.join(replicas) or 'no replica'}"
            data = _svg.donut_segment(cx, cy, 110, 170, change.range)
            body.append(
                _svg.path(
                    data,
                    css_class="arc",
                    fill=colours[_key(replicas)],
                    title=label,
                    extra="stroke='white' stroke-width='1'",
                )
            )
        if side == "after":
            body += _moved_marks(plan, cx, cy, names)
        body += _token_ticks(ring, cx, cy, names)
        body.append(_svg.text(cx, cy - 8, side, size=20, extra="font-weight='bold' fill='#333'"))
        body.append(_svg.text(cx, cy + 16, f"{len(ring.nodes)} nodes", size=12, extra="fill='#666'"))
        body.append(_svg.text(cx, cy + 235, caption, size=12, extra="fill='#333'"))
    legend_top = cy + 270
    body += _placement_legend(colours, names, top=legend_top, width=width)
    nodes_row = legend_top + 26 + 20 * ((len(colours) + 1) // 2) + 8
    body.append(_svg.text(40, nodes_row, "nodes: " + _node_list(plan, names), size=12, anchor="start"))
    height = int(nodes_row + 30)
    return _svg.document(width, height, body)


def run_range(first: TokenRange, last: TokenRange) -> TokenRange:
    """The token range from the start of `first` to the end of `last` (neighbours in ring order)."""
    return TokenRange(first.start, last.end)


_SUMMARY_LEGEND_NODES = 40  # nodes named under a summary picture; the rest are counted


def _placement_summary_svg(plan: MigrationPlan, max_arcs: int) -> str:
    """The placement of a large ring: each arc a run of neighbouring ranges, before in the neutral colour, after
    shaded by the share of its ranges whose replicas change (the tooltip gives the counts)."""
    width, top = 1160, 90
    ranges, moved_at = _ranges_and_moves(plan)
    count = max(1, min(max_arcs, len(ranges)))  # runs of neighbours, sizes differing by one at most
    bounds = [len(ranges) * i // count for i in range(count + 1)]
    runs = [(ranges[b], ranges[e - 1], e - b, sum(moved_at[b:e])) for b, e in itertools.pairwise(bounds)]
    body = [
        _svg.text(width / 2, 28, f"{plan.keyspace}: {_title(plan)}", size=17, extra="font-weight='bold'"),
        _svg.text(width / 2, 54, _subtitle(plan), size=13, extra=f"fill='{'#2b7a2b' if plan.safe else _MOVED}'"),
    ]
    cy = top + 220.0
    rings = ((260.0, "before", plan.ring, plan.old.describe()),
             (870.0, "after", plan.ring_after or plan.ring, plan.new.describe()))  # fmt: skip
    for cx, side, ring, caption in rings:
        for first, last, size, moved in runs:
            arc = run_range(first, last)
            share = moved / size
            fill = _svg.PALETTE[0] if side == "before" else _MOVED
            opacity = 0.8 if side == "before" else 0.15 + 0.85 * share
            title = f"{arc}: {size} ranges, {moved} of them change replicas"
            body.append(_svg.path(_svg.donut_segment(cx, cy, 110, 170, arc), css_class="arc", fill=fill, title=title,
                                  extra=f"fill-opacity='{opacity:.2f}' stroke='white' stroke-width='0.5'"))  # fmt: skip
        body.append(_svg.text(cx, cy - 8, side, size=20, extra="font-weight='bold' fill='#333'"))
        body.append(_svg.text(cx, cy + 16, f"{len(ring.nodes)} nodes", size=12, extra="fill='#666'"))
        body.append(_svg.text(cx, cy + 235, caption, size=12, extra="fill='#333'"))
    legend_top = cy + 270
    per_arc = f"{len(ranges) // len(runs)}" + ("" if len(ranges) % len(runs) == 0 else "-" +
                                                str(len(ranges) // len(runs) + 1))  # fmt: skip
    shading = f"after: the darker, the more of the arc's ranges change replicas ({sum(moved_at)} of " \
        f"{plan.total_ranges})"  # fmt: skip
    body.append(_svg.legend_row(40, legend_top, _MOVED, shading))
    body.append(_svg.text(40, legend_top + 26, f"{plan.total_ranges} ranges drawn as {len(runs)} arcs of {per_arc} "
                          "neighbouring ranges each: the page's range list has each range's replicas", size=12,
                          anchor="start"))  # fmt: skip
    nodes = sorted({n.address: n for r in (plan.ring, plan.ring_after) if r for n in r.nodes}.items())
    named = [f"{a} {n.datacenter}/{n.rack}" for a, n in nodes[:_SUMMARY_LEGEND_NODES]]
    if len(nodes) > _SUMMARY_LEGEND_NODES:
        named.append(f"and {len(nodes) - _SUMMARY_LEGEND_NODES} more")
    lines = [",  ".join(named[i : i + 6]) for i in range(0, len(named), 6)]
    for i, line in enumerate(lines):
        body.append(_svg.text(40, legend_top + 52 + 20 * i, ("nodes: " if i == 0 else "") + line, size=12,
                              anchor="start"))  # fmt: skip
    return _svg.document(width, int(legend_top + 80 + 20 * len(lines)), body)


def _ranges_and_moves(plan: MigrationPlan) -> tuple[Sequence[TokenRange], list[bool]]:
    """Every range of the plan in ring order, and whether its replica set changes (`MigrationPlan.counted_ranges`;
    from `plan.ranges` when its placements are of two rings)."""
    counted = plan.counted_ranges()
    if counted is not None:
        return counted
    return [c.range for c in plan.ranges], [bool(c.gained or c.lost) for c in plan.ranges]


def render_repair_svg(entries: Sequence[tuple[TokenRange, float | None]], *, title: str) -> str:
    """One ring coloured by repair age as a share of gc_grace_seconds (None: never repaired)."""
    cx, cy = 280.0, 300.0
    body = [_svg.text(400, 30, title, size=17, extra="font-weight='bold'")]
    counts = [0] * (len(REPAIR_BUCKETS) + 1)
    for token_range, share in entries:
        bucket = _bucket(share)
        counts[bucket] += 1
        colour = _NEVER if share is None else REPAIR_BUCKETS[bucket][1]
        age = "never repaired" if share is None else f"repaired {share:.0%} of gc_grace ago"
        data = _svg.donut_segment(cx, cy, 140, 210, token_range)
        body.append(
            _svg.path(
                data,
                css_class="arc",
                fill=colour,
                title=f"{token_range}: {age}",
                extra="stroke='white' stroke-width='1'",
            )
        )
    overdue = counts[len(REPAIR_BUCKETS) - 1] + counts[-1]
    body.append(_svg.text(cx, cy - 10, f"{len(entries)} ranges", size=18, extra="font-weight='bold' fill='#333'"))
    body.append(_svg.text(cx, cy + 16, f"{overdue} overdue or never repaired", size=12, extra="fill='#666'"))
    rows = [(c, f"{label} ({n})") for (_, c, label), n in zip(REPAIR_BUCKETS, counts, strict=False)]
    rows.append((_NEVER, f"never repaired ({counts[-1]})"))
    for i, (colour, label) in enumerate(rows):
        body.append(_svg.legend_row(540, 230 + 26 * i, colour, label))
    return _svg.document(800, 560, body)


def _bucket(share: float | None) -> int:
    if share is None:
        return len(REPAIR_BUCKETS)
    return next(i for i, (bound, _, _) in enumerate(REPAIR_BUCKETS) if share < bound)


def _moved_marks(plan: MigrationPlan, cx: float, cy: float, names: dict[str, str]) -> list[str]:
    """A red band outside every range whose replicas change, with +gained/-lost labels where they fit."""
    marks = []
    last_label: float | None = None
    for change in sorted(plan.affected, key=lambda c: _svg.mid_angle(c.range)):
        moves = " ".join([*(f"+{names[a]}" for a in change.gained), *(f"\u2212{names[a]}" for a in change.lost)])
        data = _svg.donut_segment(cx, cy, 174, 184, change.range)
        marks.append(_svg.path(data, css_class="moved", fill=_MOVED, title=f"{change.range}: {moves}"))
        angle = _svg.mid_angle(change.range)
        # Near 12 and 6 o'clock labels run along the ring and need a wider gap than at the sides.
        gap = _LABEL_GAP if abs(math.sin(math.radians(angle))) > 0.5 else 2.5 * _LABEL_GAP
        if plan.total_ranges <= _LABEL_LIMIT and (last_label is None or angle - last_label >= gap):
            marks.append(_outside_label(cx, cy, 194, angle, moves))
            last_label = angle
    return marks


def _outside_label(cx: float, cy: float, radius: float, angle: float, content: str) -> str:
    """A label just outside the ring, anchored away from it so it never covers the band."""
    x, y = _svg.point(cx, cy, radius, angle)
    side = math.sin(math.radians(angle))
    anchor = "start" if side > 0.25 else "end" if side < -0.25 else "middle"
    if anchor == "middle":
        y += -8 if math.cos(math.radians(angle)) > 0 else 8
    return _svg.text(x, y, content, size=10, anchor=anchor, extra=f"fill='{_MOVED}'")


def _token_ticks(ring: Ring, cx: float, cy: float, names: dict[str, str]) -> list[str]:
    """A tick at every ring token, labelled with its owner inside the ring; close labels step inwards."""
    ticks = []
    label_each = len(ring.sorted_tokens) <= _LABEL_LIMIT
    last_angle, level = -360.0, 0
    for token in ring.sorted_tokens:
        angle = _svg.angle_of(token)
        ticks.append(_svg.radial_line(cx, cy, 102, 170, angle))
        if not label_each:
            continue
        level = level + 1 if angle - last_angle < 6 else 0
        last_angle = angle
        if level > 2:
            continue
        owner = ring.token_owner[token].address
        x, y = _svg.point(cx, cy, 90 - 13 * level, angle)
        ticks.append(_svg.text(x, y, names.get(owner, owner), size=10, extra="fill='#333'"))
    return ticks


def _placement_legend(
    colours: dict[tuple[str, ...], str], names: dict[str, str], *, top: float, width: int
) -> list[str]:
    rows = [
        _svg.legend_row(40, top, _MOVED, "replicas change on this range (+ gained, \u2212 lost)"),
        _svg.text(width / 2 + 20, top, "ticks: ring tokens, labelled with their owner", size=12, anchor="start"),
    ]
    for i, (key, colour) in enumerate(colours.items()):
        column, row = i % 2, i // 2
        label = "replicas " + (", ".join(names.get(a, a) for a in key) or "none")
        if names and any(names[a] != a for a in key):
            label += "  (" + ", ".join(key) + ")"
        rows.append(_svg.legend_row(40 + column * (width / 2 - 20), top + 26 + 20 * row, colour, label))
    return rows


def _node_list(plan: MigrationPlan, names: dict[str, str]) -> str:
    rings = [plan.ring] if plan.ring_after is None else [plan.ring, plan.ring_after]
    nodes = {n.address: n for ring in rings for n in ring.nodes}
    return ",  ".join(f"{names.get(a, a)} {n.datacenter}/{n.rack}" for a, n in sorted(nodes.items()))


def _set_colours(replica_lists: Sequence[Sequence[str]]) -> dict[tuple[str, ...], str]:
    colours: dict[tuple[str, ...], str] = {}
    for replicas in replica_lists:
        key = _key(replicas)
        if key not in colours:
            colours[key] = _svg.PALETTE[len(colours) % len(_svg.PALETTE)] if key else _NEVER
    return colours


def _key(replicas: Sequence[str]) -> tuple[str, ...]:
    return tuple(sorted(replicas))


def _title(plan: MigrationPlan) -> str:
    if plan.ring_after is not None:
        return "ring change"
    return f"{plan.old.strategy} \u2192 {plan.new.strategy}"


def _subtitle(plan: MigrationPlan) -> str:
    verdict = "safe" if plan.safe else f"refused ({', '.join(sorted({f.code for f in plan.refusals}))})"
    return f"affected {plan.diff.affected_count()} of {plan.total_ranges} ranges \u00b7 {verdict}"
