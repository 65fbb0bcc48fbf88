"""The overview's topology picture, the flow page's latest error per partition and the audit log's
before/after diff (pure functions).

The live roll-ups the pages show (flow health, worst partition, lag, staleness) are
`controlplane.status.rollup.flow_summaries` / `flow_status`, the same the API answers with.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from controlplane import alerts
from controlplane.models import Cluster
from controlplane.status.rollup import FlowSummary

# -- topology picture --------------------------------------------------------------------------------------
WIDTH, HEIGHT, NODE_RADIUS, PAIR_OFFSET = 720, 320, 38, 14


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
    label_x: float
    label_y: float


@dataclass(frozen=True)
class Topology:
    width: int
    height: int
    radius: int
    nodes: list[Node]
    edges: list[Edge]


def _node_positions(count: int) -> list[tuple[float, float]]:
    """Clusters evenly on an ellipse, the first on the left (two clusters sit side by side)."""
    cx, cy = WIDTH / 2, HEIGHT / 2
    rx, ry = WIDTH / 2 - NODE_RADIUS - 60, HEIGHT / 2 - NODE_RADIUS - 20
    if count == 1:
        return [(cx, cy)]
    return [
        (cx - rx * math.cos(2 * math.pi * i / count), cy - ry * math.sin(2 * math.pi * i / count))
        for i in range(count)
    ]


def topology(*, clusters: Sequence[Cluster], summaries: Sequence[FlowSummary]) -> Topology:
    """Nodes and arrows; a pair of opposite flows is drawn as two parallel arrows, not on top of each other."""
    nodes = [Node(c, x, y) for c, (x, y) in zip(clusters, _node_positions(len(clusters)), strict=True)]
    at = {node.cluster.pk: node for node in nodes}
    edges = []
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
        x1, y1 = start.x + ux * gap + nx, start.y + uy * gap + ny
        x2, y2 = end.x - ux * gap + nx, end.y - uy * gap + ny
        edges.append(Edge(summary, x1, y1, x2, y2, (x1 + x2) / 2 + nx * 1.2, (y1 + y2) / 2 + ny * 1.2))
    return Topology(WIDTH, HEIGHT, NODE_RADIUS, nodes, edges)


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


def flows_firing_first(flow_summaries: list) -> tuple[list, dict]:
    """The summaries with flows that have firing alerts first, and flow id -> its firing alerts."""
    firing = alerts.firing_by_flow()
    return sorted(flow_summaries, key=lambda summary: summary.flow.pk not in firing), firing
