"""A flow's metadata run checkpoints the topics that came from its target with the stored reverse flow's
offset syncs, where that flow's own settings put them (replication.checkpoint)."""

from __future__ import annotations

import pytest

from controlplane.flows import services
from controlplane.flows.models import Cluster
from controlplane.status.runtime import runtime_flow_spec
from harness.runtime import create_topic
from replication.config import OffsetSyncsTopicLocation
from replication.formats import OffsetSync
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicWriter
from replication.kafka.remote import latest_group_checkpoints
from replication.policy import DefaultReplicationPolicy
from workers import metadata

pytestmark = [pytest.mark.kafka]


def test_a_group_on_a_replica_of_the_targets_topic_is_checkpointed_back_on_the_target(
    make_flow, redis_url, cluster_a, cluster_b, unique_name
):
    topic, group = unique_name, f"{unique_name}-failed-over"
    flow = make_flow(topics=[f"B\\.{topic}"], groups=[group], emit_checkpoints_interval_seconds=1)
    # B->A keeps its offset syncs on its target, A, named after its source: mm2-offset-syncs.B.internal.
    # (This flow's own settings would look on B: only the stored reverse flow says where they are.)
    reverse = services.flow_create(
        actor=None,
        source=Cluster.objects.get(alias="B"),
        target=Cluster.objects.get(alias="A"),
        offset_syncs_topic_location=OffsetSyncsTopicLocation.TARGET.value,
    )
    assert runtime_flow_spec(flow_id=flow.pk).reverse.name == reverse.name
    create_topic(cluster_b, topic, 1)
    create_topic(cluster_a, f"B.{topic}", 1)
    syncs = [OffsetSync(topic, 0, 0, 2), OffsetSync(topic, 0, 5, 8), OffsetSync(topic, 0, 9, 12)]
    writer = InternalTopicWriter(cluster_a, "mm2-offset-syncs.B.internal", replication_factor=1)
    writer.write([(sync.key(), sync.value()) for sync in syncs])
    writer.close()
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(f"B.{topic}", 0): 10}) == {}
    try:
        metadata.flow_metadata(flow_id=flow.pk, token="test")
    finally:
        metadata._entry(None, flow.pk)

    policy = DefaultReplicationPolicy(known_aliases=["A", "B"])
    checkpoints = latest_group_checkpoints(target=cluster_b, source_alias="A", group=group, policy=policy)
    assert {key: (c.upstream_offset, c.downstream_offset) for key, c in checkpoints.items()} == {
        (topic, 0): (10, 7)
    }
