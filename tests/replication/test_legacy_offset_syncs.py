"""Offset syncs move from Mirrorplane's legacy topic name to MM2's; fan-in flows keep theirs apart."""

from __future__ import annotations

import uuid

import pytest

from replication.config import ClusterConfig, FlowConfig, OffsetSyncsTopicLocation
from replication.formats import OffsetSync
from replication.kafka.internal_topics import InternalTopicReader, InternalTopicWriter
from replication.kafka.legacy_offset_syncs import move_legacy_offset_syncs
from replication.kafka.source_io import kafka_task_io
from replication.legacy_offset_syncs import legacy_topic_writers, plan_syncs_migration, sync_claims
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import DefaultReplicationPolicy
from replication.positions import InMemoryPositionStore
from replication.source import MirrorSourceTask
from tests.replication.test_source_task import create_topics, produce, read_partition, replicated, run_until

TARGET = OffsetSyncsTopicLocation.TARGET


def fan_in_flow(source: str, target: str = "C", **settings) -> FlowConfig:
    return FlowConfig(
        source=source, target=target, enabled=True, offset_syncs_topic_location=TARGET, **settings
    )


def s(topic: str, partition: int, upstream: int, downstream: int) -> OffsetSync:
    return OffsetSync(topic, partition, upstream, downstream)


FLOWS = [
    fan_in_flow("A", topics=("orders", "shared")),
    fan_in_flow("B", topics=("payments", "shared")),
    FlowConfig(source="D", target="C", enabled=True),  # syncs on its source: wrote elsewhere
]
ON_TARGET = {"A.orders": 2, "A.shared": 1, "B.payments": 1, "B.shared": 1}
CLAIMS = sync_claims(
    legacy_topic_writers(FLOWS, target="C"), target_partitions=ON_TARGET, known_aliases=["A", "B", "C", "D"]
)
LEGACY = [
    s("orders", 0, 0, 0),
    s("payments", 0, 0, 0),
    s("shared", 0, 0, 0),
    s("orders", 1, 0, 0),
    s("orders", 0, 10, 12),
    s("orders", 5, 0, 0),  # no such remote partition: nobody's
    s("payments", 0, 7, 7),
]


def test_only_flows_into_the_target_with_syncs_there_wrote_the_legacy_topic():
    assert [flow.name for flow in legacy_topic_writers(FLOWS, target="C")] == ["A->C", "B->C"]


def test_a_flow_takes_its_own_syncs_in_order_and_leaves_the_ambiguous_partitions_behind():
    plan = plan_syncs_migration(flow="A->C", legacy=LEGACY, current=[], claims=CLAIMS)
    assert plan.copy == [s("orders", 0, 0, 0), s("orders", 0, 10, 12), s("orders", 1, 0, 0)]
    assert plan.ambiguous == [("shared", 0)]
    other = plan_syncs_migration(flow="B->C", legacy=LEGACY, current=[], claims=CLAIMS)
    assert other.copy == [s("payments", 0, 0, 0), s("payments", 0, 7, 7)]


def test_the_move_is_idempotent_and_finishes_an_interrupted_copy():
    interrupted = [s("orders", 0, 0, 0)]  # the first record of the copy landed, then the process died
    plan = plan_syncs_migration(flow="A->C", legacy=LEGACY, current=interrupted, claims=CLAIMS)
    assert plan.copy == [s("orders", 0, 10, 12), s("orders", 1, 0, 0)]
    done = [s("orders", 0, 0, 0), s("orders", 0, 10, 12), s("orders", 1, 0, 0)]
    assert plan_syncs_migration(flow="A->C", legacy=LEGACY, current=done, claims=CLAIMS).copy == []


def test_a_partition_the_flow_already_synced_in_its_new_topic_is_left_alone():
    own = [s("orders", 0, 50, 52)]  # an older sync after this one would read as a rewind
    plan = plan_syncs_migration(flow="A->C", legacy=LEGACY, current=own, claims=CLAIMS)
    assert plan.copy == [s("orders", 1, 0, 0)]
    assert plan.already_moved == [("orders", 0)]


def read_syncs(cluster: ClusterConfig, topic: str) -> list[OffsetSync]:
    reader = InternalTopicReader(cluster, topic, decode=OffsetSync.decode)
    try:
        return reader.read_new()
    finally:
        reader.close()


@pytest.mark.kafka
def test_fan_in_flows_with_syncs_on_the_target_keep_them_apart_and_translate_right(
    cluster_a, cluster_b, unique_name
):
    """Fan-in with two clusters: the source cluster A under two aliases (`a-<id>` and `x-<id>`), so two
    flows copy the same topic into one target as two remote topics. `x-<id>.t` starts with 3 foreign
    records, so the two flows map the same upstream offsets to different downstream offsets; a shared
    syncs topic (the legacy name) would make one of the two translations wrong."""
    tag = uuid.uuid4().hex[:8]
    a, x, target = (
        ClusterConfig(alias=f"a-{tag}", bootstrap_servers=cluster_a.bootstrap_servers),
        ClusterConfig(alias=f"x-{tag}", bootstrap_servers=cluster_a.bootstrap_servers),
        ClusterConfig(alias=f"c-{tag}", bootstrap_servers=cluster_b.bootstrap_servers),
    )
    aliases = [a.alias, x.alias, target.alias]
    topic, moved = unique_name, f"{unique_name}-old"
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"{a.alias}.{topic}", f"{x.alias}.{topic}", f"{a.alias}.{moved}"], 1)
    produce(cluster_b, f"{x.alias}.{topic}", {0: [(None, b"foreign", None, 1_700_000_000_000)] * 3})
    produce(cluster_a, topic, {0: [(None, b"r-%d" % i, None, 1_700_000_000_000) for i in range(30)]})
    flows = [fan_in_flow(source.alias, target.alias, topics=(topic, moved)) for source in (a, x)]
    # What an older version left in the shared legacy topic: a's syncs of `moved` (only a-<id>.<moved>
    # exists on the target: a's alone) and syncs of `topic` that either flow could have written.
    legacy = InternalTopicWriter(cluster_b, f"mm2-offset-syncs.{target.alias}.internal", replication_factor=1)
    try:
        legacy.write([(sync.key(), sync.value()) for sync in (s(moved, 0, 0, 0), s(topic, 0, 0, 3))])
    finally:
        legacy.close()
    plan = move_legacy_offset_syncs(flows[0], flows=flows, target=target, known_aliases=aliases)
    assert (plan.copy, plan.ambiguous) == ([s(moved, 0, 0, 0)], [(topic, 0)])
    again = move_legacy_offset_syncs(flows[0], flows=flows, target=target, known_aliases=aliases)
    assert again.copy == []

    policy = DefaultReplicationPolicy(known_aliases=aliases)
    for flow, source in zip(flows, (a, x), strict=True):
        task = MirrorSourceTask(
            flow=flow,
            policy=policy,
            task_index=0,
            position_store=InMemoryPositionStore(),
            io=kafka_task_io(flow, source=source, target=target, policy=policy, task_index=0),
        )
        task.assign([(topic, 0)])
        run_until(task, replicated(task, {(topic, 0): 30}))
        task.close()

    source_records = read_partition(cluster_a, topic, 0)
    for source, first_downstream in ((a, 0), (x, 3)):
        syncs = read_syncs(cluster_b, f"mm2-offset-syncs.{source.alias}.internal")  # MM2's name
        store = OffsetSyncStore()
        store.update_all(syncs)
        remote = read_partition(cluster_b, f"{source.alias}.{topic}", 0)
        assert store.translate_downstream(topic, 0, 0) == first_downstream
        for record in source_records:
            downstream = store.translate_downstream(topic, 0, record.offset())
            assert remote[downstream].value() == record.value()
    assert read_syncs(cluster_b, f"mm2-offset-syncs.{a.alias}.internal")[0] == s(moved, 0, 0, 0)
