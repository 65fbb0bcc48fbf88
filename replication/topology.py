"""Replication loops: directed cycles of enabled flows that nothing would stop.

A record goes around a cycle of flows until something on the way refuses it. Two things can:
- topic names, when every flow on the cycle uses DefaultReplicationPolicy with the same separator: the
  remote name carries its lineage (`B.A.orders`) and a flow never sends a topic to a cluster named in it;
- the provenance header, when every flow on the cycle has `provenance.header.enabled`: each hop records
  where the record has been and no flow sends it back there.
A cycle where neither holds loops. In particular a cycle mixing policies is not stopped by names: an
identity flow hides the prefix the default flow added (A->B default then B->A identity brings `A.orders`
back to A, whose A->B flow then creates `A.A.orders` on B, and so on).

Detection does not enumerate simple cycles, whose number grows exponentially with a mesh: it works per
strongly connected component in time linear in clusters and flows, plus a search bounded by
SEARCH_BUDGET steps (see `_loop_walks`), so a full mesh of dozens of clusters or a chain of thousands of
flows is checked in well under a second.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from replication.config import FlowConfig
from replication.policy import is_identity_policy_class

# One loop is reported per flow that anchors one; cap them so a large mesh stays readable.
MAX_REPORTED_LOOPS = 20
# Steps of the exact search for a simple cycle through two given flows, for all components together.
SEARCH_BUDGET = 100_000


@dataclass(frozen=True)
class ReplicationLoop:
    flows: tuple[FlowConfig, ...]
    reason: str
    fix: str

    @property
    def path(self) -> str:
        return "->".join([flow.source for flow in self.flows] + [self.flows[0].source])

    @property
    def explanation(self) -> str:
        return f"{self.path}: {self.reason}; {self.fix}"


def _strongly_connected(order: Sequence[str], outgoing: Mapping[str, list[FlowConfig]]) -> dict[str, int]:
    """The strongly connected component of every cluster (Tarjan's algorithm, iterative: O(clusters + flows))."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    component: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    for root in order:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(outgoing.get(root, ())))]
        while work:
            node, edges = work[-1]
            flow = next(edges, None)
            if flow is not None:
                if flow.target not in index:
                    index[flow.target] = low[flow.target] = len(index)
                    stack.append(flow.target)
                    on_stack.add(flow.target)
                    work.append((flow.target, iter(outgoing.get(flow.target, ()))))
                elif flow.target in on_stack:
                    low[node] = min(low[node], index[flow.target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component[member] = index[node]
                    if member == node:
                        break
    return component


def _shortest_path(
    start: str, goal: str, outgoing: Mapping[str, list[FlowConfig]], component: Mapping[str, int]
) -> list[FlowConfig]:
    """The fewest flows from `start` to `goal` inside their component (breadth-first; both in one component)."""
    came_by: dict[str, FlowConfig | None] = {start: None}
    frontier = deque([start])
    while frontier and goal not in came_by:
        node = frontier.popleft()
        for flow in outgoing.get(node, ()):
            if flow.target not in came_by and component[flow.target] == component[start]:
                came_by[flow.target] = flow
                frontier.append(flow.target)
    path: list[FlowConfig] = []
    while (came := came_by[goal]) is not None:
        path.append(came)
        goal = came.source
    return path[::-1]


def _rotated(walk: list[FlowConfig], rank: Mapping[str, int]) -> tuple[FlowConfig, ...]:
    """The closed walk starting at its lowest-ranked cluster, so one loop always reads the same."""
    first = min(range(len(walk)), key=lambda position: rank[walk[position].source])
    return tuple(walk[first:] + walk[:first])


def _loop_walks(flows: Sequence[FlowConfig], order: Sequence[str]) -> Iterable[tuple[FlowConfig, ...]]:
    """Closed walks of flows that loop, found in time linear in clusters and flows (plus a bounded search).

    Only flows inside one strongly connected component can be on a cycle. A component loops only when a flow
    in it lacks the provenance header and it holds an identity flow or two separators. An identity flow
    without the header on any cycle loops: its shortest cycle is reported. Otherwise the loop needs one
    simple cycle through two given flows, which is NP-complete to decide on a directed graph (the two
    disjoint paths problem), so it is searched exactly within SEARCH_BUDGET steps; a component the budget
    cannot settle is reported on a closed walk through the flows that would make it loop (the safe side).
    """
    rank = {alias: position for position, alias in enumerate(order)}
    outgoing: dict[str, list[FlowConfig]] = {}
    for flow in sorted(flows, key=lambda flow: (rank[flow.source], rank[flow.target])):
        outgoing.setdefault(flow.source, []).append(flow)
    component = _strongly_connected(order, outgoing)
    members: dict[int, list[FlowConfig]] = {}
    for alias in order:
        for flow in outgoing.get(alias, ()):
            if component[flow.source] == component[flow.target]:
                members.setdefault(component[flow.source], []).append(flow)

    def through(*anchors: FlowConfig) -> tuple[FlowConfig, ...]:
        walk: list[FlowConfig] = []
        for anchor, following in zip(anchors, anchors[1:] + anchors[:1], strict=True):
            walk += [anchor, *_shortest_path(anchor.target, following.source, outgoing, component)]
        return _rotated(walk, rank)

    budget = [SEARCH_BUDGET]
    for group in members.values():
        headerless = [flow for flow in group if not flow.provenance_header_enabled]
        identity = [flow for flow in group if is_identity_policy_class(flow.replication_policy_class)]
        if not headerless or (
            not identity and len({flow.replication_policy_separator for flow in group}) == 1
        ):
            continue
        anchored = [through(flow) for flow in identity if not flow.provenance_header_enabled]
        settled = True
        for flow in headerless if not anchored else ():
            found = _looping_cycle_through(flow, outgoing, component, budget)
            if found:
                anchored = [_rotated(list(found), rank)]
                break
            settled = settled and found is not False
        if not anchored and not settled:
            walk = through(headerless[0])
            separators = {flow.replication_policy_separator for flow in walk}
            other = identity or [
                flow for flow in group if flow.replication_policy_separator not in separators
            ]
            anchored = [walk if _loop(walk) else through(headerless[0], other[0])]
        yield from anchored


def _looping_cycle_through(
    first: FlowConfig,
    outgoing: Mapping[str, list[FlowConfig]],
    component: Mapping[str, int],
    budget: list[int],
) -> tuple[FlowConfig, ...] | None | Literal[False]:
    """A simple cycle through `first` that loops, None when there is none, False when the budget ran out."""
    path = [first]
    on_path = {first.source, first.target}
    work = [iter(outgoing.get(first.target, ()))]
    while work:
        budget[0] -= 1
        if budget[0] < 0:
            return False
        flow = next(work[-1], None)
        if flow is None:
            work.pop()
            on_path.discard(path.pop().target)
            continue
        if component[flow.target] != component[first.source]:
            continue
        if flow.target == first.source:
            if _loop((*path, flow)) is not None:
                return (*path, flow)
        elif flow.target not in on_path:
            path.append(flow)
            on_path.add(flow.target)
            work.append(iter(outgoing.get(flow.target, ())))
    return None


def _names(flows: Iterable[FlowConfig]) -> str:
    return ", ".join(flow.name for flow in flows)


def _loop(cycle: tuple[FlowConfig, ...]) -> ReplicationLoop | None:
    """The loop on the closed walk `cycle`, or None when topic names or provenance headers stop it."""
    if all(flow.provenance_header_enabled for flow in cycle):
        return None
    identity = [flow for flow in cycle if is_identity_policy_class(flow.replication_policy_class)]
    separators = {flow.replication_policy_separator for flow in cycle}
    if not identity and len(separators) == 1:
        return None
    without_header = [flow for flow in cycle if not flow.provenance_header_enabled]
    header_fix = f"enable provenance.header.enabled=true on {_names(without_header)}"
    if len(identity) == len(cycle):
        both = "both flows use" if len(cycle) == 2 else "every flow uses"
        reason = f"{both} IdentityReplicationPolicy without provenance.header.enabled, so records would loop forever"
        return ReplicationLoop(cycle, reason, f"{header_fix} or use DefaultReplicationPolicy")
    if identity:
        reason = (
            f"{_names(identity)} use{'s' if len(identity) == 1 else ''} IdentityReplicationPolicy, which keeps the "
            "cluster prefixes other flows add out of the remote names, so names cannot stop records going around "
            "and they would loop forever"
        )
    else:
        listed = ", ".join(f"'{flow.replication_policy_separator}' on {flow.name}" for flow in cycle)
        reason = (
            f"the flows use different replication.policy.separator values ({listed}), so no flow can read the "
            "lineage another wrote into the topic names and records would loop forever"
        )
    return ReplicationLoop(
        cycle, reason, f"{header_fix}, or use DefaultReplicationPolicy with one separator on all"
    )


def detect_replication_loops(flows: Sequence[FlowConfig], *, aliases: Sequence[str]) -> list[ReplicationLoop]:
    """Loops among the enabled flows (disabled ones carry nothing), at most MAX_REPORTED_LOOPS of them."""
    enabled = [flow for flow in flows if flow.enabled]
    mentioned = {flow.source for flow in enabled} | {flow.target for flow in enabled}
    order = list(dict.fromkeys(aliases)) + sorted(mentioned - set(aliases))
    loops: dict[str, ReplicationLoop] = {}
    for walk in _loop_walks(enabled, order):
        loop = _loop(walk)
        if loop is not None:
            loops.setdefault(loop.path, loop)
            if len(loops) == MAX_REPORTED_LOOPS:
                break
    return list(loops.values())


def find_replication_loops(flows: Sequence[FlowConfig], *, aliases: Sequence[str]) -> list[str]:
    """One explanation per replication loop, naming the path, why it loops and how to fix it."""
    return [loop.explanation for loop in detect_replication_loops(flows, aliases=aliases)]
