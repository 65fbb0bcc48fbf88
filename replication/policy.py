"""Replication policies (remote topic naming), lineage, cycle detection and the provenance header.

Names follow MM2 (`ReplicationPolicy`, `DefaultReplicationPolicy`, `IdentityReplicationPolicy`,
`topicSource`, `upstreamTopic`, `originalTopic`, `replicationHops`). One deliberate difference: MM2 reads
any prefix before the separator as a source cluster, so a local `orders.v1` is taken for topic `v1`
replicated from a cluster `orders`. Here a prefix is a source only when it is a known cluster alias.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from replication.config import (
    DEFAULT_REPLICATION_POLICY,
    IDENTITY_REPLICATION_POLICY,
    OffsetSyncsTopicLocation,
)

if TYPE_CHECKING:
    from replication.config import FlowConfig
    from replication.filters import TopicFilter

HEARTBEATS_TOPIC = "heartbeats"
OFFSET_SYNCS_TOPIC_PREFIX = "mm2-offset-syncs"
CHECKPOINTS_TOPIC_NAME = "checkpoints"
INTERNAL_SUFFIX_NAME = "internal"


class ReplicationPolicy(ABC):
    """How a flow names remote topics and how a topic name reveals where it came from (MM2's interface)."""

    def __init__(
        self,
        *,
        separator: str = ".",
        known_aliases: Iterable[str],
        internal_topic_separator_enabled: bool = True,
    ) -> None:
        """`internal_topic_separator_enabled` (MM2's `replication.policy.internal.topic.separator.enabled`):
        when False, internal topics (offset syncs, checkpoints) are named with '.' whatever `separator`
        is, as MM2 2.x named them: a flow with a custom separator finds an older MM2's internal topics."""
        if not separator:
            raise ValueError("replication.policy.separator: must not be empty")
        self.separator = separator
        self.internal_separator = separator if internal_topic_separator_enabled else "."
        # Longest first, so that with aliases `us` and `us-east` a topic `us-east.x` comes from `us-east`.
        self.known_aliases: tuple[str, ...] = tuple(sorted(set(known_aliases), key=len, reverse=True))

    @abstractmethod
    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        """The name `topic` of cluster `source_cluster_alias` gets on the target."""

    @abstractmethod
    def topic_source(self, topic: str) -> str | None:
        """The cluster alias `topic` was replicated from, or None for a local topic (or when unknowable)."""

    @abstractmethod
    def upstream_topic(self, topic: str) -> str | None:
        """The name of `topic` on the cluster it was replicated from, one hop up (None when unknown)."""

    def original_topic(self, topic: str) -> str:
        """The name of `topic` on the cluster where it was first produced."""
        seen = {topic}
        while (upstream := self.upstream_topic(topic)) is not None and upstream not in seen:
            seen.add(upstream)
            topic = upstream
        return topic

    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def _internal_suffix(self) -> str:
        return self.internal_separator + INTERNAL_SUFFIX_NAME

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        """`mm2-offset-syncs.<alias>.internal` (MM2's `ReplicationPolicy.offsetSyncsTopic`)."""
        return OFFSET_SYNCS_TOPIC_PREFIX + self.internal_separator + cluster_alias + self._internal_suffix()

    def flow_offset_syncs_topic(self, flow: FlowConfig) -> str:
        """The offset-syncs topic of `flow`, named as MM2's `MirrorSourceConfig.offsetSyncsTopic()` does:
        after the cluster it does NOT live on. On the source (the default) that is the target alias; on the
        target (`offset-syncs.topic.location = target`) the source alias, so that the flows of a fan-in
        (A->C and B->C) each have their own topic on C and syncs of same-named topics never mix."""
        return self.offset_syncs_topic(flow.target if _syncs_on_source(flow) else flow.source)

    def legacy_flow_offset_syncs_topic(self, flow: FlowConfig) -> str | None:
        """The name Mirrorplane used before it named the topic as MM2 does (always after the target alias),
        when it differs from `flow_offset_syncs_topic`: only with `offset-syncs.topic.location = target`."""
        return None if _syncs_on_source(flow) else self.offset_syncs_topic(flow.target)

    def checkpoints_topic(self, cluster_alias: str) -> str:
        """`<alias>.checkpoints.internal` on the target, named after the source alias of the flow."""
        return cluster_alias + self._checkpoints_suffix()

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == HEARTBEATS_TOPIC

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def _checkpoints_suffix(self) -> str:
        return self.internal_separator + CHECKPOINTS_TOPIC_NAME + self._internal_suffix()

    def is_mm2_internal_topic(self, topic: str) -> bool:
        """MM2's own topics: offset syncs, Connect's mm2-configs/-offsets/-status, and checkpoints."""
        return (
            topic.startswith("mm2") and topic.endswith(self._internal_suffix())
        ) or self.is_checkpoints_topic(topic)

    def is_internal_topic(self, topic: str) -> bool:
        """Topics never replicated: Kafka's (`__consumer_offsets`, `.`-prefixed), `*.internal`, MM2's own."""
        return (
            topic.startswith(("__", "."))
            or topic.endswith((".internal", "-internal"))
            or self.is_mm2_internal_topic(topic)
        )

    def _prefix_source(self, topic: str) -> str | None:
        """The known alias `topic` starts with, followed by the separator and a non-empty rest."""
        for alias in self.known_aliases:
            prefix = alias + self.separator
            if topic.startswith(prefix) and len(topic) > len(prefix):
                return alias
        return None


def _syncs_on_source(flow: FlowConfig) -> bool:
    return flow.offset_syncs_topic_location != OffsetSyncsTopicLocation.TARGET


class DefaultReplicationPolicy(ReplicationPolicy):
    """`<source alias><separator><topic>`: `orders` from A is `A.orders` on B, `B.A.orders` two hops on."""

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        return source_cluster_alias + self.separator + topic

    def topic_source(self, topic: str) -> str | None:
        return self._prefix_source(topic)

    def upstream_topic(self, topic: str) -> str | None:
        source = self._prefix_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]


class IdentityReplicationPolicy(ReplicationPolicy):
    """Remote topics keep their names (migration, active-passive); heartbeats are still prefixed so that
    `A.heartbeats` shows which cluster emitted them. Where a topic came from cannot be read from its name.
    """

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic.endswith(HEARTBEATS_TOPIC)

    def format_remote_topic(self, source_cluster_alias: str, topic: str) -> str:
        if self._looks_like_heartbeats(topic):
            return source_cluster_alias + self.separator + topic
        return topic

    def topic_source(self, topic: str) -> str | None:
        return self._prefix_source(topic) if self._looks_like_heartbeats(topic) else None

    def upstream_topic(self, topic: str) -> str | None:
        # As in MM2: a non-heartbeat topic's upstream name is its own name.
        if not self._looks_like_heartbeats(topic):
            return topic
        source = self._prefix_source(topic)
        return None if source is None else topic[len(source) + len(self.separator) :]


_POLICIES: dict[str, type[ReplicationPolicy]] = {
    DEFAULT_REPLICATION_POLICY: DefaultReplicationPolicy,
    "DefaultReplicationPolicy": DefaultReplicationPolicy,
    IDENTITY_REPLICATION_POLICY: IdentityReplicationPolicy,
    "IdentityReplicationPolicy": IdentityReplicationPolicy,
}
ACCEPTED_POLICY_CLASSES: tuple[str, ...] = tuple(_POLICIES)


def policy_class_error(class_name: str) -> str | None:
    """Why `replication.policy.class` cannot be `class_name`, or None when it is a policy we implement."""
    if class_name in ACCEPTED_POLICY_CLASSES:
        return None
    return f"replication.policy.class: unknown replication policy '{class_name}'; accepted: " + ", ".join(
        ACCEPTED_POLICY_CLASSES
    )


def is_identity_policy_class(class_name: str) -> bool:
    return _POLICIES.get(class_name) is IdentityReplicationPolicy


def replication_policy_for(flow: FlowConfig, *, known_aliases: Iterable[str]) -> ReplicationPolicy:
    """The policy object a flow's `replication.policy.class` and `.separator` describe."""
    error = policy_class_error(flow.replication_policy_class)
    if error:
        raise ValueError(error)
    policy_class = _POLICIES[flow.replication_policy_class]
    return policy_class(
        separator=flow.replication_policy_separator,
        known_aliases=known_aliases,
        internal_topic_separator_enabled=flow.replication_policy_internal_topic_separator_enabled,
    )


def topic_lineage(policy: ReplicationPolicy, topic: str) -> list[str]:
    """The clusters `topic` passed through, nearest first: `B.A.orders` -> ['B', 'A']."""
    lineage: list[str] = []
    while (source := policy.topic_source(topic)) is not None and source not in lineage:
        lineage.append(source)
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            break
        topic = upstream
    return lineage


def replication_hops(policy: ReplicationPolicy, topic: str, source_alias: str) -> int:
    """Hops between `topic` and cluster `source_alias` (1 for `A.orders` from A); -1 when not downstream
    of it, as MM2's `replicationHops`."""
    lineage = topic_lineage(policy, topic)
    return lineage.index(source_alias) + 1 if source_alias in lineage else -1


def is_cycle(policy: ReplicationPolicy, topic: str, *, target_alias: str) -> bool:
    """True when replicating `topic` to `target_alias` would send it back to a cluster it came from."""
    return target_alias in topic_lineage(policy, topic)


def returns_through(policy: ReplicationPolicy, topic: str, *, target_aliases: Collection[str]) -> str | None:
    """The alias in `topic`'s lineage that names the target cluster, or None. `target_aliases` are every
    alias the target goes by (one cluster stored or imported twice under two aliases): `is_cycle` sees the
    flow's own target alias only, so a copy named after the target's other alias would be sent back."""
    return next((alias for alias in topic_lineage(policy, topic) if alias in target_aliases), None)


# -- provenance header (Mirrorplane addition, off by default) ---------------------------------------------
PROVENANCE_HEADER = "mirrorplane.provenance"

Headers = list[tuple[str, bytes | None]]


def provenance_path(headers: Sequence[tuple[str, bytes | None]] | None) -> list[str]:
    """The cluster aliases a record passed through, oldest first, read from its provenance header."""
    for key, value in headers or ():
        if key == PROVENANCE_HEADER and value:
            return [alias for alias in value.decode("utf-8", errors="replace").split(",") if alias]
    return []


def provenance_after_hop(headers: Sequence[tuple[str, bytes | None]] | None, *, source_alias: str) -> Headers:
    """The headers to write on the target: the provenance header gains `source_alias`; every other header
    is kept unchanged and in order."""
    value = ",".join([*provenance_path(headers), source_alias]).encode("utf-8")
    result: Headers = []
    replaced = False
    for key, old in headers or ():
        if key == PROVENANCE_HEADER and not replaced:
            result.append((key, value))
            replaced = True
        elif key != PROVENANCE_HEADER:
            result.append((key, old))
    if not replaced:
        result.append((PROVENANCE_HEADER, value))
    return result


def has_visited(headers: Sequence[tuple[str, bytes | None]] | None, *, cluster_alias: str) -> bool:
    """True when the record already passed through `cluster_alias` (so replicating it there loops)."""
    return cluster_alias in provenance_path(headers)


# -- per-topic decision shared by the engine and the control plane -------------------------------------
@dataclass(frozen=True)
class TopicDecision:
    topic: str
    remote_topic: str | None
    replicate: bool
    reason: Literal["filter", "internal", "cycle"] | None
    detail: str | None


def classify_topic(
    *, topic: str, flow: FlowConfig, policy: ReplicationPolicy, topic_filter: TopicFilter
) -> TopicDecision:
    """Whether flow `flow` replicates source topic `topic`, and why not (internal, then cycle, then filter).

    Like MM2, heartbeats topics are replicated whatever the topic filter says while
    `heartbeats.replication.enabled` (the default), so that every downstream cluster can see every upstream
    one; with it false they are replicated only when the topic filter selects them.
    """
    if policy.is_internal_topic(topic):
        return TopicDecision(topic, None, False, "internal", "internal topic: never replicated")
    if is_cycle(policy, topic, target_alias=flow.target):
        lineage = "->".join(reversed(topic_lineage(policy, topic)))
        return TopicDecision(
            topic,
            None,
            False,
            "cycle",
            f"already passed through {flow.target} (path {lineage}->{flow.source}); replicating it back loops",
        )
    bypasses_filter = flow.heartbeats_replication_enabled and policy.is_heartbeats_topic(topic)
    reason = None if bypasses_filter else topic_filter.exclusion_reason(topic)
    if reason is not None:
        return TopicDecision(topic, None, False, "filter", reason)
    return TopicDecision(topic, policy.format_remote_topic(flow.source, topic), True, None, None)
