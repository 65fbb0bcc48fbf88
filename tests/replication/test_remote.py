"""RemoteClusterUtils equivalents: topology from heartbeat topics, translated offsets from checkpoints."""

from __future__ import annotations

import uuid

import pytest

from replication.connector import NewRemoteTopic
from replication.formats import Checkpoint
from replication.kafka import remote as kafka_remote
from replication.kafka.admin import TopicAdmin
from replication.kafka.internal_topics import InternalTopicWriter
from replication.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from replication.remote import (
    checkpoint_topics,
    heartbeat_topics,
    latest_checkpoints,
    replication_hops,
    upstream_clusters,
)

POLICY = DefaultReplicationPolicy(known_aliases=("us", "eu", "ap"))
# What cluster `ap` holds when eu->ap and us->eu->ap replicate, next to local topics.
TOPICS_ON_AP = [
    "heartbeats",
    "eu.heartbeats",
    "eu.us.heartbeats",
    "eu.orders",
    "orders.v1",
    "eu.checkpoints.internal",
    "us.checkpoints.internal",
    "mm2-offset-syncs.eu.internal",
]


def test_heartbeat_and_checkpoint_topics():
    assert heartbeat_topics(TOPICS_ON_AP, policy=POLICY) == [
        "eu.heartbeats",
        "eu.us.heartbeats",
        "heartbeats",
    ]
    assert checkpoint_topics(TOPICS_ON_AP, policy=POLICY) == [
        "eu.checkpoints.internal",
        "us.checkpoints.internal",
    ]


def test_replication_hops_take_the_shortest_heartbeat_path():
    assert replication_hops(TOPICS_ON_AP, policy=POLICY, upstream_alias="eu") == 1
    assert replication_hops(TOPICS_ON_AP, policy=POLICY, upstream_alias="us") == 2
    assert replication_hops([*TOPICS_ON_AP, "us.heartbeats"], policy=POLICY, upstream_alias="us") == 1
    assert replication_hops(TOPICS_ON_AP, policy=POLICY, upstream_alias="ap") == -1
    # `orders.v1` is a local topic, not one replicated from a cluster called `orders`.
    assert replication_hops(TOPICS_ON_AP, policy=POLICY, upstream_alias="orders") == -1


def test_upstream_clusters_follow_heartbeat_lineage():
    assert upstream_clusters(TOPICS_ON_AP, policy=POLICY) == {"eu", "us"}
    identity = IdentityReplicationPolicy(known_aliases=("us", "eu"))
    assert upstream_clusters(["orders", "heartbeats", "us.heartbeats"], policy=identity) == {"us"}


def test_latest_checkpoint_per_partition_wins():
    checkpoints = [
        Checkpoint("g", "us.orders", 0, 10, 8),
        Checkpoint("other", "us.orders", 0, 99, 99),
        Checkpoint("g", "us.orders", 1, 5, 5),
        Checkpoint("g", "us.orders", 0, 12, 10),
    ]
    assert latest_checkpoints(checkpoints, group="g") == {
        ("us.orders", 0): Checkpoint("g", "us.orders", 0, 12, 10),
        ("us.orders", 1): Checkpoint("g", "us.orders", 1, 5, 5),
    }


@pytest.mark.kafka
def test_kafka_remote_cluster_utils(cluster_b, unique_name):
    upstream = f"x{uuid.uuid4().hex[:8]}"
    policy = DefaultReplicationPolicy(known_aliases=("A", "B", upstream))
    admin = TopicAdmin(cluster_b)
    topic = f"{upstream}.heartbeats"
    assert admin.create_topics([NewRemoteTopic(topic, "heartbeats", 1, 1, {})]) == {topic: None}
    assert topic in kafka_remote.heartbeat_topics(cluster=cluster_b, policy=policy)
    assert kafka_remote.replication_hops(cluster=cluster_b, policy=policy, upstream_alias=upstream) == 1
    assert upstream in kafka_remote.upstream_clusters(cluster=cluster_b, policy=policy)

    group = unique_name
    writer = InternalTopicWriter(cluster_b, policy.checkpoints_topic(upstream), replication_factor=1)
    try:
        writer.write(
            [
                (c.key(), c.value())
                for c in (
                    Checkpoint(group, f"{upstream}.orders", 0, 10, 7),
                    Checkpoint(group, f"{upstream}.orders", 1, 3, 3),
                    Checkpoint(group, f"{upstream}.orders", 0, 20, 17),
                )
            ]
        )
    finally:
        writer.close()
    assert policy.checkpoints_topic(upstream) in kafka_remote.checkpoint_topics(
        cluster=cluster_b, policy=policy
    )
    assert kafka_remote.translate_offsets(
        target=cluster_b, source_alias=upstream, group=group, policy=policy
    ) == {
        (f"{upstream}.orders", 0): 17,
        (f"{upstream}.orders", 1): 3,
    }
    assert (
        kafka_remote.translate_offsets(target=cluster_b, source_alias="nowhere", group=group, policy=policy)
        == {}
    )
