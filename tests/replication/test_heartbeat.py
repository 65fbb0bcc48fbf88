"""MirrorHeartbeatTask: MM2 heartbeat records on the target, at the configured interval."""

from __future__ import annotations

import textwrap
import time
from collections.abc import Sequence

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, TopicPartition

from harness.runtime import READ_TO_END
from replication.config import FlowConfig, OffsetSyncsTopicLocation, offset_syncs_cluster
from replication.filters import TopicFilter
from replication.formats import Heartbeat
from replication.heartbeat import MirrorHeartbeatTask, heartbeat_for
from replication.kafka.clients import make_consumer
from replication.kafka.flow_tasks import periodic_tasks_for_flow
from replication.mm2file import parse_mm2
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


def test_every_cluster_pair_emits_heartbeats_unless_turned_off_like_mm2s_cluster_pairs():
    config = parse_mm2(
        textwrap.dedent(
            """\
            clusters = A, B, C
            A.bootstrap.servers = a:9092
            B.bootstrap.servers = b:9092
            C.bootstrap.servers = c:9092
            emit.heartbeats.interval.seconds = 5
            A->B.enabled = true
            C->A.emit.heartbeats.enabled = false
            """
        )
    ).config
    pairs = {flow.name: flow for flow in config.heartbeat_pairs()}
    assert sorted(pairs) == ["A->B", "A->C", "B->A", "B->C", "C->B"]
    assert {flow.emit_heartbeats_interval_seconds for flow in pairs.values()} == {5}
    assert [flow.name for flow in config.heartbeat_pairs(("A",))] == ["B->A"]
    # Off at the top level: only a pair that turns them back on emits.
    off = parse_mm2(
        "clusters = A, B\nA.bootstrap.servers = a:9092\nB.bootstrap.servers = b:9092\n"
        "emit.heartbeats.enabled = false\nA->B.enabled = true\nB->A.emit.heartbeats.enabled = true\n"
    ).config
    assert [flow.name for flow in off.heartbeat_pairs()] == ["B->A"]


@pytest.mark.kafka
def test_periodic_tasks_write_heartbeats_to_the_target_stamped_with_their_own_time(cluster_a, cluster_b):
    flow = FlowConfig(source="A", target="B", enabled=True, emit_checkpoints_enabled=False)
    tasks = periodic_tasks_for_flow(flow=flow, source=cluster_a, target=cluster_b, known_aliases=ALIASES)
    assert [type(task).__name__ for task in tasks] == ["MirrorHeartbeatTask"]
    an_hour_ago = time.time() - 3600  # far from the producer's clock: the record must carry this time
    try:
        tasks[0].tick(now=an_hour_ago)
    finally:
        for task in tasks:
            task.close()
    stamped = [
        (heartbeat, timestamp_ms)
        for heartbeat, timestamp_ms in _heartbeat_records(cluster_b, "heartbeats")
        if heartbeat == Heartbeat("A", "B", int(an_hour_ago * 1000))
    ]
    assert stamped and stamped[-1][1] == int(an_hour_ago * 1000)


def _heartbeat_records(cluster, topic: str) -> list[tuple[Heartbeat, int]]:
    """Every heartbeat of `topic` with its record timestamp."""
    consumer = make_consumer(cluster, overrides=READ_TO_END)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    records: list[tuple[Heartbeat, int]] = []
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                if message.error().code() == KafkaError._PARTITION_EOF:
                    break
                continue
            records.append((Heartbeat.decode(message.key(), message.value()), message.timestamp()[1]))
    finally:
        consumer.close()
    return records


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
