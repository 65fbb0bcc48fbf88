"""workers.metadata: a flow's metadata run creates every internal topic its tasks write before the flow's
first remote topic (a broker creates partitions in order: one created behind 10,000 new remote partitions
was not writable for minutes)."""

from __future__ import annotations

import dataclasses

import pytest

from controlplane.status.runtime import FlowSpec
from harness.runtime import create_topic
from replication.config import FlowConfig
from replication.kafka.admin import TopicAdmin
from replication.policy import replication_policy_for
from replication.position_records import positions_topic
from workers.metadata import CachedMetadata

pytestmark = pytest.mark.kafka


@pytest.mark.parametrize("periodic", [True, False], ids=["heartbeats-and-checkpoints", "neither"])
def test_the_internal_topics_of_the_task_and_of_the_periodic_tasks_are_created_before_the_remote_topics(
    cluster_a, cluster_b, unique_name, monkeypatch, periodic
):
    alias = "S" + unique_name.rsplit("-", 1)[-1]  # its own checkpoints topic, `<alias>.checkpoints.internal`
    source = dataclasses.replace(cluster_a, alias=alias)
    create_topic(source, f"{unique_name}-t", 2)
    flow = FlowConfig(source=alias, target="B", enabled=True, topics=(f"{unique_name}-t",)).replace(
        emit_heartbeats_enabled=periodic, emit_checkpoints_enabled=periodic
    )
    aliases = (alias, "B")
    policy = replication_policy_for(flow, known_aliases=aliases)
    requested: list[str] = []
    create = TopicAdmin.create_topics

    def recorded(admin, topics, **options):  # the real requests, recorded
        topics = list(topics)
        requested.extend(topic.name for topic in topics)
        return create(admin, topics, **options)

    monkeypatch.setattr(TopicAdmin, "create_topics", recorded)
    existed = TopicAdmin(cluster_b).partition_counts()
    spec = FlowSpec(
        flow_id=1,
        flow=flow,
        source=source,
        target=cluster_b,
        known_aliases=aliases,
        runnable=True,
        config_version="1",
        queue="replication",
    )
    metadata = CachedMetadata.build(spec)
    try:
        metadata.topic_sync.tick(now=1000.0)
    finally:
        metadata.close()

    first = requested[: requested.index(f"{alias}.{unique_name}-t")]
    checkpoints = policy.checkpoints_topic(alias)
    assert positions_topic(alias) in first  # the task's own (its offset syncs' name is shared: B's)
    if periodic:
        assert checkpoints in first
        assert policy.heartbeats_topic() in first or policy.heartbeats_topic() in existed
        assert checkpoints in TopicAdmin(cluster_b).partition_counts()
    else:
        assert checkpoints not in requested and policy.heartbeats_topic() not in first
