"""A flow's metadata run on the embedded brokers records its checkpoints' latency (MM2 checkpoint-latency-ms)
and /metrics exports it: one slice replicates a topic (offset syncs), a group commits on the source, the
metadata run translates and writes the checkpoint."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from django.test import Client

from controlplane.status.models import FlowSignals
from controlplane.status.runtime import runtime_flow_spec
from harness.runtime import count_records, create_topic, produce, wait_until
from replication.kafka.clients import make_consumer
from replication.kafka.source_io import kafka_task_io
from replication.positions import InMemoryPositionStore
from replication.source import MirrorSourceTask
from workers import metadata

pytestmark = [pytest.mark.kafka]


def test_the_checkpoints_latency_is_recorded_and_exported(
    settings, make_flow, redis_url, cluster_a, cluster_b, unique_name
):
    settings.METRICS_OPEN = True
    topic, group = f"{unique_name}-orders", f"{unique_name}-billing"
    create_topic(cluster_a, topic, 1)
    produce(cluster_a, topic, 20, partitions=1)
    consumer = make_consumer(cluster_a, group_id=group)  # before the flow lists the source's groups
    consumer.commit(offsets=[TopicPartition(topic, 0, 12)], asynchronous=False)
    consumer.close()
    flow = make_flow(topics=[topic], groups=[group], emit_checkpoints_interval_seconds=1)
    try:
        metadata.flow_metadata(flow_id=flow.pk, token="test")  # creates the remote topic
        spec = runtime_flow_spec(flow_id=flow.pk)
        policy = metadata._CACHE[flow.pk].topic_sync.policy
        task = MirrorSourceTask(
            flow=spec.flow,
            policy=policy,
            task_index=0,
            position_store=InMemoryPositionStore(),
            io=kafka_task_io(spec.flow, source=spec.source, target=spec.target, policy=policy, task_index=0),
        )
        task.assign([(topic, 0)])
        try:
            wait_until(
                lambda: (
                    task.run_slice(max_seconds=0.5).records == 0
                    and count_records(cluster_b, f"A.{topic}", 1) == 20
                ),
                timeout_s=30,
                what="replication",
            )
        finally:
            task.close()

        def latency() -> float | None:
            metadata.flow_metadata(flow_id=flow.pk, token="test")
            row = FlowSignals.objects.filter(flow=flow).first()
            return row and row.checkpoint_latency_ms

        recorded = wait_until(latency, timeout_s=30, what="a checkpoint with its latency")
    finally:
        metadata._entry(None, flow.pk)
    assert recorded > 0
    exported = Client().get("/metrics").content.decode()
    line = next(
        line
        for line in exported.splitlines()
        if line.startswith(f'mirrorplane_checkpoint_latency_seconds{{flow="{flow.name}"')
    )
    assert float(line.rsplit(" ", 1)[1]) == pytest.approx(recorded / 1000)
