"""MirrorHeartbeatTask: MM2 heartbeat records on the target, at the configured interval."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from replication.config import FlowConfig, OffsetSyncsTopicLocation
from replication.filters import TopicFilter
from replication.formats import Heartbeat
from replication.heartbeat import MirrorHeartbeatTask, heartbeat_for
from replication.kafka.flow_tasks import offset_syncs_cluster, periodic_tasks_for_flow
from replication.kafka.internal_topics import InternalTopicReader
from replication.policy import classify_topic, replication_policy_for

ALIASES = ("A", "B")


class MemorySink:
    def __init__(self) -> None:
        self.heartbeats: list[Heartbeat] = []

    def emit(self, heartbeats: Sequence[Heartbeat]) -> None:
        self.heartbeats.extend(heartbeats)

    def close(self) -> None:
        pass


def test_heartbeat_record_bytes_are_mm2s():
    heartbeat = heartbeat_for(FlowConfig(source="A", target="B"), now=1_700_000_000.25)
    assert heartbeat == Heartbeat("A", "B", 1_700_000_000_250)
    assert heartbeat.key() == b"\x00\x01A\x00\x01B"
    assert heartbeat.value() == b"\x00\x00" + (1_700_000_000_250).to_bytes(8, "big")
    assert Heartbeat.decode(heartbeat.key(), heartbeat.value()) == heartbeat


def test_heartbeats_follow_the_interval():
    sink = MemorySink()
    flow = FlowConfig(source="A", target="B", emit_heartbeats_interval_seconds=5)
    task = MirrorHeartbeatTask(flow=flow, sink=sink)
    for now in (100.0, 102.0, 104.9, 105.0, 107.0, 110.0):
        task.tick(now=now)
    assert [h.timestamp_ms for h in sink.heartbeats] == [100_000, 105_000, 110_000]
    assert task.metrics().heartbeats_emitted == 3


def test_disabled_heartbeats_are_not_emitted():
    sink = MemorySink()
    task = MirrorHeartbeatTask(
        flow=FlowConfig(source="A", target="B", emit_heartbeats_enabled=False), sink=sink
    )
    task.tick(now=1.0)
    assert sink.heartbeats == []


@pytest.mark.parametrize("policy_class", ["DefaultReplicationPolicy", "IdentityReplicationPolicy"])
def test_heartbeats_are_replicated_downstream_as_alias_heartbeats(policy_class: str):
    # Even with a topic filter that would exclude them: every downstream cluster sees every upstream one.
    flow = FlowConfig(source="A", target="B", topics=("orders",), replication_policy_class=policy_class)
    policy = replication_policy_for(flow, known_aliases=ALIASES)
    decision = classify_topic(
        topic="heartbeats", flow=flow, policy=policy, topic_filter=TopicFilter.for_flow(flow)
    )
    assert (decision.replicate, decision.remote_topic) == (True, "A.heartbeats")


@pytest.mark.kafka
def test_periodic_tasks_write_heartbeats_to_the_target(cluster_a, cluster_b):
    flow = FlowConfig(source="A", target="B", enabled=True, emit_checkpoints_enabled=False)
    tasks = periodic_tasks_for_flow(flow=flow, source=cluster_a, target=cluster_b, known_aliases=ALIASES)
    assert [type(task).__name__ for task in tasks] == ["MirrorHeartbeatTask"]
    started_ms = int(time.time() * 1000)
    try:
        tasks[0].tick(now=time.time())
    finally:
        for task in tasks:
            task.close()
    reader = InternalTopicReader(cluster_b, "heartbeats", decode=Heartbeat.decode)
    try:
        heartbeats = [
            h for h in reader.read_new() if (h.source_cluster_alias, h.target_cluster_alias) == ("A", "B")
        ]
    finally:
        reader.close()
    assert heartbeats and heartbeats[-1].timestamp_ms >= started_ms


def test_periodic_tasks_follow_the_flow_toggles(cluster_a, cluster_b):
    def names(**changes) -> list[str]:
        flow = FlowConfig(source="A", target="B", enabled=True, **changes)
        tasks = periodic_tasks_for_flow(flow=flow, source=cluster_a, target=cluster_b, known_aliases=ALIASES)
        try:
            return [type(task).__name__ for task in tasks]
        finally:
            for task in tasks:
                task.close()

    assert names() == ["MirrorHeartbeatTask", "MirrorCheckpointTask"]
    assert names(
        emit_heartbeats_enabled=False, emit_checkpoints_enabled=False, sync_group_offsets_enabled=True
    ) == ["MirrorCheckpointTask"]
    assert names(emit_heartbeats_enabled=False, emit_checkpoints_enabled=False) == []


@pytest.mark.parametrize(("location", "expected"), [("source", "A"), ("target", "B")])
def test_offset_syncs_are_read_where_the_flow_writes_them(cluster_a, cluster_b, location: str, expected: str):
    flow = FlowConfig(source="A", target="B", offset_syncs_topic_location=OffsetSyncsTopicLocation(location))
    assert offset_syncs_cluster(flow, source=cluster_a, target=cluster_b).alias == expected
