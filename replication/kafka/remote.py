"""MM2's `RemoteClusterUtils` on real clusters: list topics or read checkpoints, then ask `replication.remote`.

`translate_offsets` is MM2's `translateOffsets`: the newest checkpoint per remote partition of a group,
read from `<source>.checkpoints.internal` on the target: where the group resumes after a failover.
"""

from __future__ import annotations

from replication import remote
from replication.config import ClusterConfig, FlowConfig, Mm2Config
from replication.formats import Checkpoint
from replication.kafka.admin import TopicAdmin
from replication.kafka.internal_topics import InternalTopicReader
from replication.policy import ReplicationPolicy, replication_policy_for

TopicPartition = tuple[str, int]


def topic_names(cluster: ClusterConfig) -> list[str]:
    return sorted(TopicAdmin(cluster).partition_counts())


def heartbeat_topics(*, cluster: ClusterConfig, policy: ReplicationPolicy) -> list[str]:
    return remote.heartbeat_topics(topic_names(cluster), policy=policy)


def checkpoint_topics(*, cluster: ClusterConfig, policy: ReplicationPolicy) -> list[str]:
    return remote.checkpoint_topics(topic_names(cluster), policy=policy)


def replication_hops(*, cluster: ClusterConfig, policy: ReplicationPolicy, upstream_alias: str) -> int:
    return remote.replication_hops(topic_names(cluster), policy=policy, upstream_alias=upstream_alias)


def upstream_clusters(*, cluster: ClusterConfig, policy: ReplicationPolicy) -> set[str]:
    return remote.upstream_clusters(topic_names(cluster), policy=policy)


def latest_group_checkpoints(
    *, target: ClusterConfig, source_alias: str, group: str, policy: ReplicationPolicy
) -> dict[TopicPartition, Checkpoint]:
    """The group's newest checkpoint per remote partition (empty when there is no checkpoints topic)."""
    reader = InternalTopicReader(target, policy.checkpoints_topic(source_alias), decode=Checkpoint.decode)
    try:
        return remote.latest_checkpoints(reader.read_new(), group=group)
    finally:
        reader.close()


def translate_offsets(
    *, target: ClusterConfig, source_alias: str, group: str, policy: ReplicationPolicy
) -> dict[TopicPartition, int]:
    checkpoints = latest_group_checkpoints(
        target=target, source_alias=source_alias, group=group, policy=policy
    )
    return {key: checkpoint.downstream_offset for key, checkpoint in checkpoints.items()}


def _flow(config: Mm2Config, *, source: str, target: str) -> FlowConfig:
    """The configured flow (enabled or not), else MM2's defaults: the policy names the topics."""
    for flow in config.flows:
        if (flow.source, flow.target) == (source, target):
            return flow
    return FlowConfig(source=source, target=target)


def translate_offsets_for_cli(config: Mm2Config, *, source: str, target: str, group: str) -> dict:
    """`python -m replication translate-offsets`: the group's translated offsets as JSON-able data."""
    for alias in (source, target):
        if alias not in config.aliases:
            raise SystemExit(f"error: unknown cluster alias {alias!r}; known: {', '.join(config.aliases)}")
    policy = replication_policy_for(_flow(config, source=source, target=target), known_aliases=config.aliases)
    checkpoints = latest_group_checkpoints(
        target=config.cluster(target), source_alias=source, group=group, policy=policy
    )
    return {
        "source": source,
        "target": target,
        "group": group,
        "checkpoints_topic": policy.checkpoints_topic(source),
        "offsets": [
            {
                "topic": topic,
                "partition": partition,
                "offset": checkpoint.downstream_offset,
                "upstream_offset": checkpoint.upstream_offset,
                "metadata": checkpoint.metadata,
            }
            for (topic, partition), checkpoint in sorted(checkpoints.items())
        ],
    }
