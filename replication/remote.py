"""MM2's `RemoteClusterUtils` / `MirrorClient`, pure: answers from a cluster's topic names or checkpoints.

`replication.kafka.remote` lists the topics (or reads the checkpoints) of a real cluster and calls these.
"""

from __future__ import annotations

from collections.abc import Iterable

from replication.formats import Checkpoint
from replication.policy import ReplicationPolicy, topic_lineage
from replication.policy import replication_hops as topic_replication_hops

TopicPartition = tuple[str, int]


def heartbeat_topics(topics: Iterable[str], *, policy: ReplicationPolicy) -> list[str]:
    """`heartbeats` and its replicas (`A.heartbeats`, `B.A.heartbeats`, ...), sorted."""
    return sorted(topic for topic in topics if policy.is_heartbeats_topic(topic))


def checkpoint_topics(topics: Iterable[str], *, policy: ReplicationPolicy) -> list[str]:
    """`<alias>.checkpoints.internal` topics, sorted."""
    return sorted(topic for topic in topics if policy.is_checkpoints_topic(topic))


def replication_hops(topics: Iterable[str], *, policy: ReplicationPolicy, upstream_alias: str) -> int:
    """Fewest hops from cluster `upstream_alias` to the cluster holding `topics`, read from its heartbeat
    topics (1 when `A.heartbeats` is here for `A`); -1 when no heartbeat comes from it (MM2's rule)."""
    hops = [
        found
        for topic in heartbeat_topics(topics, policy=policy)
        if (found := topic_replication_hops(policy, topic, upstream_alias)) > 0
    ]
    return min(hops, default=-1)


def upstream_clusters(topics: Iterable[str], *, policy: ReplicationPolicy) -> set[str]:
    """Every cluster whose heartbeats reach the cluster holding `topics`, directly or through others."""
    return {
        alias for topic in heartbeat_topics(topics, policy=policy) for alias in topic_lineage(policy, topic)
    }


def latest_checkpoints(checkpoints: Iterable[Checkpoint], *, group: str) -> dict[TopicPartition, Checkpoint]:
    """The newest checkpoint of `group` per remote partition, from checkpoints in topic order.

    The keys are the remote (renamed) topic's partitions: where the group resumes on the target.
    """
    latest: dict[TopicPartition, Checkpoint] = {}
    for checkpoint in checkpoints:
        if checkpoint.group == group:
            latest[(checkpoint.topic, checkpoint.partition)] = checkpoint
    return latest
