"""Replication loops: directed cycles of enabled flows that nothing would stop.

A record goes around a cycle of flows until something on the way refuses it. Two things can:
- topic names, when every flow on the cycle uses DefaultReplicationPolicy with the same separator: the
  remote name carries its lineage (`B.A.orders`) and a flow never sends a topic to a cluster named in it;
- the provenance header, when every flow on the cycle has `provenance.header.enabled`: each hop records
  where the record has been and no flow sends it back there.
A cycle where neither holds loops. In particular a cycle mixing policies is not stopped by names: an
identity flow hides the prefix the default flow added (A->B default then B->A identity brings `A.orders`
back to A, whose A->B flow then creates `A.A.orders` on B, and so on).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from replication.config import FlowConfig
from replication.policy import is_identity_policy_class

# Cycles are enumerated exhaustively; cap the explanations so a large all-to-all mesh stays readable.
MAX_REPORTED_LOOPS = 20


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


def _simple_cycles(flows: Sequence[FlowConfig], order: Sequence[str]) -> Iterable[tuple[FlowConfig, ...]]:
    """Every elementary cycle once, starting at its lowest-ranked cluster (small graphs: DFS is enough)."""
    rank = {alias: index for index, alias in enumerate(order)}
    outgoing: dict[str, list[FlowConfig]] = {}
    for flow in flows:
        outgoing.setdefault(flow.source, []).append(flow)

    def extend(start: str, path: list[FlowConfig], visited: set[str]) -> Iterable[tuple[FlowConfig, ...]]:
        node = path[-1].target if path else start
        for flow in outgoing.get(node, ()):
            if flow.target == start:
                yield (*path, flow)
            elif flow.target not in visited and rank[flow.target] > rank[start]:
                yield from extend(start, [*path, flow], visited | {flow.target})

    for start in order:
        yield from extend(start, [], {start})


def _names(flows: Iterable[FlowConfig]) -> str:
    return ", ".join(flow.name for flow in flows)


def _loop(cycle: tuple[FlowConfig, ...]) -> ReplicationLoop | None:
    """The loop on `cycle`, or None when topic names or provenance headers stop it."""
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
    order = list(aliases) + sorted(mentioned - set(aliases))
    loops: list[ReplicationLoop] = []
    for cycle in _simple_cycles(enabled, order):
        loop = _loop(cycle)
        if loop is not None:
            loops.append(loop)
            if len(loops) == MAX_REPORTED_LOOPS:
                break
    return loops


def find_replication_loops(flows: Sequence[FlowConfig], *, aliases: Sequence[str]) -> list[str]:
    """One explanation per replication loop, naming the path, why it loops and how to fix it."""
    return [loop.explanation for loop in detect_replication_loops(flows, aliases=aliases)]
