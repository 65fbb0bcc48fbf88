"""The overview's topology picture, the flow page's latest error per partition and the audit log's
before/after diff (pure functions).

The live roll-ups the pages show (flow health, worst partition, lag, staleness) are
`controlplane.status.rollup.flow_summaries` / `flow_status`, the same the API answers with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controlplane import alerts
from controlplane.flows.models import Cluster
from controlplane.status.rollup import FlowSummary
from controlplane.web import numbers

# -- topology picture --------------------------------------------------------------------------------------
WIDTH, NODE_RADIUS, PAIR_OFFSET = 720, 38, 14
LABEL_FONT_PX, LABEL_LINE_PX = 12, 15
# Conservative advance widths at LABEL_FONT_PX (wider than the page's sans-serif draws them): a label
# placed clear of the others by these widths is clear of them on screen.
_WIDE_CHARS, _WIDE_PX, _CHAR_PX = frozenset("mwMW"), 11.5, 7.2
_LABEL_GAPS = (6.0, 20.0, 36.0)  # how far from its arrow a label may sit
_LABEL_SPOTS = (0.5, 0.4, 0.6, 0.3, 0.7, 0.22, 0.78)  # where along its arrow, nearest the middle first
# Arrows labelled at most: every flow both ways between 6 clusters is 30. Past it the labels could not be
# read in the picture (nor placed in a page's time: each is placed clear of all the others), so arrows
# keep their tooltip (`<title>`: the flow, its state and lag) and the table under the picture lists them.
LABELLED_ARROWS = 40
Box = tuple[float, float, float, float]  # left, top, right, bottom


@dataclass(frozen=True)
class Node:
    cluster: Cluster
    x: float
    y: float


@dataclass(frozen=True)
class Edge:
    summary: FlowSummary
    x1: float
    y1: float
    x2: float
    y2: float
    label_x: float  # the label's centre line
    label_y: float  # its first line's baseline
    lines: tuple[str, ...]  # the label: the flow's state, then its lag (or its staleness)


@dataclass(frozen=True)
class Topology:
    width: int
    height: int
    radius: int
    nodes: list[Node]
    edges: list[Edge]
    line_px: int = LABEL_LINE_PX  # between a label's lines
    labels_hidden: bool = False  # more arrows than LABELLED_ARROWS: none is labelled


def _height(count: int) -> int:
    return 320 if count <= 2 else 460


def _node_positions(count: int, height: int) -> list[tuple[float, float]]:
    """Clusters evenly on an ellipse, the first on the left (two clusters sit side by side)."""
    cx, cy = WIDTH / 2, height / 2
    rx, ry = WIDTH / 2 - NODE_RADIUS - 60, height / 2 - NODE_RADIUS - 20
    if count == 1:
        return [(cx, cy)]
    return [
        (cx - rx * math.cos(2 * math.pi * i / count), cy - ry * math.sin(2 * math.pi * i / count))
        for i in range(count)
    ]


def edge_label(summary: FlowSummary) -> tuple[str, str]:
    """The flow's state, and how far behind it is (or how long since it was seen)."""
    if summary.health == "stale":
        return str(summary.flow.state), f"stale, seen {numbers.seconds(summary.age_s)} ago"
    lag = f"{numbers.count(summary.records_behind)} behind"
    return str(summary.flow.state), lag + (
        f", seen {numbers.seconds(summary.age_s)} ago" if summary.stale else ""
    )


def label_size(lines: Sequence[str]) -> tuple[float, float]:
    """A label's box (width, height) at LABEL_FONT_PX, never smaller than drawn."""
    width = max(sum(_WIDE_PX if ch in _WIDE_CHARS else _CHAR_PX for ch in line) for line in lines)
    return width + 4, LABEL_LINE_PX * len(lines) + 4


def overlap_area(a: Box, b: Box) -> float:
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def _outside(box: Box, width: float, height: float) -> float:
    inside = overlap_area(box, (0.0, 0.0, width, height))
    return (box[2] - box[0]) * (box[3] - box[1]) - inside


def _crossings(box: Box, segments: Sequence[tuple[float, float, float, float]]) -> int:
    """How many points (every 6 px) of the other arrows lie in `box`. Per arrow, the span of it inside the
    box is clipped first (Liang-Barsky) and only the points at its ends are tested one by one: the same
    count as testing every point, in a time that does not grow with the arrow's length."""
    hits = 0
    for x1, y1, x2, y2 in segments:
        if max(x1, x2) < box[0] or min(x1, x2) > box[2] or max(y1, y2) < box[1] or min(y1, y2) > box[3]:
            continue  # every point of the arrow lies in its own bounding box
        steps = max(int(math.hypot(x2 - x1, y2 - y1) / 6), 1)
        inside = _clip(x1, x2 - x1, box[0], box[2], 0.0, 1.0)
        inside = inside and _clip(y1, y2 - y1, box[1], box[3], *inside)
        if not inside:
            continue
        # The points inside are consecutive: those around the clipped span, tested as before.
        first, last = max(math.floor(inside[0] * steps) - 1, 0), min(math.ceil(inside[1] * steps) + 1, steps)
        for i in range(first, last + 1):
            x, y = x1 + (x2 - x1) * i / steps, y1 + (y2 - y1) * i / steps
            hits += box[0] <= x <= box[2] and box[1] <= y <= box[3]
    return hits


def _clip(
    start: float, delta: float, low: float, high: float, t0: float, t1: float
) -> tuple[float, float] | None:
    """The part of [t0, t1] where start + delta * t lies in [low, high] (a little wider, never narrower:
    the caller tests the points themselves), or None."""
    if delta == 0:
        return (t0, t1) if low <= start <= high else None
    a, b = (low - start) / delta, (high - start) / delta
    lo, hi = max(t0, min(a, b) - 1e-9), min(t1, max(a, b) + 1e-9)
    return (lo, hi) if lo <= hi else None


def place_label(
    *,
    segment: tuple[float, float, float, float],
    size: tuple[float, float],
    taken: Sequence[Box],
    segments: Sequence[tuple[float, float, float, float]],
    width: float,
    height: float,
) -> Box:
    """Where a label of `size` goes beside its arrow `segment`, on the arrow's own side (the side its pair
    offset moved it to, so two opposite arrows keep their labels apart): the first spot, nearest the
    middle and the arrow, that overlaps no box of `taken` (labels and clusters) and stays inside the
    picture, crossing as few other arrows as it can; else the spot overlapping least, pushed inside."""
    x1, y1, x2, y2 = segment
    length = math.hypot(x2 - x1, y2 - y1) or 1.0
    ux, uy = (x2 - x1) / length, (y2 - y1) / length
    nx, ny = -uy, ux  # the side PAIR_OFFSET moved this arrow to
    w, h = size
    reach = abs(nx) * w / 2 + abs(ny) * h / 2  # from the box's centre to its edge facing the arrow
    spots: list[tuple[tuple[float, int], Box]] = []
    for t in _LABEL_SPOTS:
        for gap in _LABEL_GAPS:
            cx, cy = x1 + (x2 - x1) * t + nx * (gap + reach), y1 + (y2 - y1) * t + ny * (gap + reach)
            box = (cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
            clash = sum(overlap_area(box, other) for other in taken) + _outside(box, width, height) * 4
            spots.append(((clash, _crossings(box, segments)), box))
    (clash, _), box = min(spots, key=lambda spot: spot[0])  # the first of the best
    if clash:  # no spot is clear: keep the least crowded one inside the picture
        dx = max(0.0, -box[0]) - max(0.0, box[2] - width)
        dy = max(0.0, -box[1]) - max(0.0, box[3] - height)
        box = (box[0] + dx, box[1] + dy, box[2] + dx, box[3] + dy)
    return box


def topology(*, clusters: Sequence[Cluster], summaries: Sequence[FlowSummary]) -> Topology:
    """Nodes and arrows; a pair of opposite flows is drawn as two parallel arrows, not on top of each other,
    and each arrow's label is placed where it overlaps no other label or cluster and is not clipped
    (`place_label`); past LABELLED_ARROWS arrows, none is labelled (`labels_hidden`)."""
    height = _height(len(clusters))
    positions = _node_positions(len(clusters), height)
    nodes = [Node(c, x, y) for c, (x, y) in zip(clusters, positions, strict=True)]
    at = {node.cluster.pk: node for node in nodes}
    arrows = []
    for summary in summaries:
        start, end = at.get(summary.flow.source_id), at.get(summary.flow.target_id)
        if start is None or end is None:
            continue
        dx, dy = end.x - start.x, end.y - start.y
        length = math.hypot(dx, dy) or 1.0
        ux, uy = dx / length, dy / length
        # The normal of A->B is the opposite of B->A's: the same offset separates a pair of arrows.
        nx, ny = -uy * PAIR_OFFSET, ux * PAIR_OFFSET
        gap = NODE_RADIUS + 6
        arrows.append(
            (
                summary,
                (
                    start.x + ux * gap + nx,
                    start.y + uy * gap + ny,
                    end.x - ux * gap + nx,
                    end.y - uy * gap + ny,
                ),
            )
        )
    if len(arrows) > LABELLED_ARROWS:
        edges = [Edge(summary, *segment, 0.0, 0.0, ()) for summary, segment in arrows]
        return Topology(WIDTH, height, NODE_RADIUS, nodes, edges, labels_hidden=True)
    pad = NODE_RADIUS + 4
    taken: list[Box] = [(n.x - pad, n.y - pad, n.x + pad, n.y + pad) for n in nodes]
    edges = []
    for summary, segment in arrows:
        lines = edge_label(summary)
        others = [other for _, other in arrows if other is not segment]
        box = place_label(
            segment=segment, size=label_size(lines), taken=taken, segments=others, width=WIDTH, height=height
        )
        taken.append(box)
        centre, baseline = (box[0] + box[2]) / 2, box[1] + 2 + LABEL_FONT_PX
        edges.append(Edge(summary, *segment, centre, baseline, lines))
    return Topology(WIDTH, height, NODE_RADIUS, nodes, edges)


def last_errors(events: Sequence) -> dict[tuple[str, int], object]:
    """The newest error or data-loss event per (topic, partition), from events newest first."""
    latest: dict[tuple[str, int], object] = {}
    for event in events:
        if event.kind in ("error", "data_loss_gap") and event.partition is not None:
            latest.setdefault((event.topic, event.partition), event)
    return latest


# -- audit diff --------------------------------------------------------------------------------------------
ABSENT = "—"


@dataclass(frozen=True)
class FieldChange:
    field: str  # dotted path into nested objects: client_properties.linger.ms
    before: str  # ABSENT when the field was not there
    after: str


def audit_changes(before: object, after: object) -> list[FieldChange]:
    """The fields that differ between an audit event's `before` and `after`, by path, values shown
    compactly (strings as they are, the rest as JSON). Shows only what the audit stored, where secrets
    are already masked: it never reveals more than the event holds."""
    old, new = _flat(before), _flat(after)
    return [
        FieldChange(field, _shown(old, field), _shown(new, field))
        for field in sorted(old.keys() | new.keys())
        if old.get(field, ABSENT) != new.get(field, ABSENT) or (field in old) != (field in new)
    ]


def _flat(value: object, prefix: str = "") -> dict[str, object]:
    if value is None and not prefix:
        return {}
    if isinstance(value, Mapping):  # an empty object has no fields
        flat: dict[str, object] = {}
        for key, item in value.items():
            flat |= _flat(item, f"{prefix}{key}.")
        return flat
    return {prefix.rstrip(".") or "value": value}


def _shown(values: Mapping[str, object], field: str) -> str:
    if field not in values:
        return ABSENT
    value = values[field]
    return value if isinstance(value, str) and value else json.dumps(value, sort_keys=True, default=str)


def flows_firing_first(
    rows: Iterable, *, flow_id: Callable[[Any], int] = lambda summary: summary.flow.pk
) -> tuple[list, dict]:
    """The `rows` (flow summaries; flow ids with `flow_id=int`) with flows that have firing alerts first,
    and flow id -> its firing alerts."""
    firing = alerts.firing_by_flow()
    return sorted(rows, key=lambda row: flow_id(row) not in firing), firing
