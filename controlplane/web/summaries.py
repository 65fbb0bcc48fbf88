"""What the overview shows: each flow's live totals and the topology picture's geometry.

Reads go through `controlplane.selectors`; this module only folds the per-partition rows the workers
write into one line per flow and places clusters and flows on the SVG canvas (pure functions).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Prefetch

from controlplane import selectors
from controlplane.models import Cluster, Flow, FlowPartitionStatus, FlowState, PartitionState

# Burrow: a group is as bad as its worst partition; STOP, STALL and REWIND report as ERR.
_SEVERITY = {PartitionState.OK: 0, PartitionState.WARN: 1}
HEALTHS = ("ok", "lagging", "error", "paused", "disabled", "waiting")


@dataclass(frozen=True)
class FlowSummary:
    flow: Flow
    partitions: int
    lag_records: int | None  # None until a worker has reported
    lag_seconds: float | None
    position: int  # sum of replicated offsets: its change between refreshes is the throughput
    status: str  # OK, WARN or ERR over the partitions; "" when none reported
    updated_at: datetime | None

    @property
    def health(self) -> str:
        """One word for colour: error, paused, disabled, lagging, ok or waiting (no report yet)."""
        if self.flow.state == FlowState.FAULTED or self.status == PartitionState.ERR:
            return "error"
        if self.flow.state in (FlowState.PAUSED, FlowState.DISABLED):
            return str(self.flow.state)
        if self.lag_records is None:
            return "waiting"
        return "lagging" if self.lag_records > 0 else "ok"


def group_status(states: Sequence[str]) -> str:
    if not states:
        return ""
    worst = max(_SEVERITY.get(state, 2) for state in states)
    return [PartitionState.OK, PartitionState.WARN, PartitionState.ERR][worst]


def summarize(flow: Flow, rows: Sequence[FlowPartitionStatus]) -> FlowSummary:
    lags = [row.lag_records for row in rows if row.lag_records is not None]
    seconds = [row.lag_seconds for row in rows if row.lag_seconds is not None]
    return FlowSummary(
        flow=flow,
        partitions=len(rows),
        lag_records=sum(lags) if lags else None,
        lag_seconds=max(seconds) if seconds else None,
        position=sum(row.replicated_offset or 0 for row in rows),
        status=group_status([row.state for row in rows]),
        updated_at=max((row.updated_at for row in rows), default=None),
    )


def flow_summaries() -> list[FlowSummary]:
    flows = selectors.flow_list().prefetch_related(
        Prefetch("partition_statuses", queryset=FlowPartitionStatus.objects.order_by())
    )
    return [summarize(flow, list(flow.partition_statuses.all())) for flow in flows]


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
