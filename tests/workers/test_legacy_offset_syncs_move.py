"""A worker building a flow's task first moves the flow's offset syncs from the legacy topic name (the
target's) to MM2's (the source's), under the flow's Redis lock; a second build copies nothing."""

from __future__ import annotations

import pytest

from controlplane.status import runtime
from replication.formats import OffsetSync
from replication.kafka.internal_topics import InternalTopicWriter
from tests.replication.test_legacy_offset_syncs import read_syncs
from tests.replication.test_source_task import create_topics
from workers.replication import CachedTask

pytestmark = [pytest.mark.kafka]


def test_building_a_task_moves_the_flows_legacy_offset_syncs_once(
    make_flow, redis_url, cluster_b, unique_name
):
    flow = make_flow(topics=[unique_name], offset_syncs_topic_location="target")
    create_topics(cluster_b, [f"A.{unique_name}"], 1)
    legacy = InternalTopicWriter(cluster_b, "mm2-offset-syncs.B.internal", replication_factor=1)
    sync = OffsetSync(unique_name, 0, 7, 3)
    try:
        legacy.write([(sync.key(), sync.value())])
    finally:
        legacy.close()
    spec = runtime.runtime_flow_spec(flow_id=flow.pk)
    for _ in range(2):
        CachedTask.build(spec, 0).close()
    moved = [s for s in read_syncs(cluster_b, "mm2-offset-syncs.A.internal") if s.topic == unique_name]
    assert moved == [sync]
