"""The demo's traffic generator and application consumer group on Apache Kafka: the generator pauses and
resumes; the group reads and commits what it read (checkpoints and failover need committed groups)."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replication.kafka.clients import make_consumer
from replication.kafka.traffic import GroupConsumer, TrafficGenerator

pytestmark = pytest.mark.kafka


def _end(cluster, topic: str, partitions: int = 4) -> int:
    """The topic's end offsets summed. A new client may answer "unknown partition" for a while, even after
    listing the topic: asked again (for up to 10 s) rather than failing."""
    deadline = time.monotonic() + 10
    while True:
        consumer = make_consumer(cluster)
        try:
            consumer.list_topics(topic, timeout=10)
            return sum(
                consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
                for p in range(partitions)
            )
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError._UNKNOWN_PARTITION or time.monotonic() > deadline:
                raise
        finally:
            consumer.close()
        time.sleep(0.2)


def _wait(condition, what: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.2)


def test_the_generator_pauses_and_resumes_and_the_group_commits_what_it_read(cluster_a, unique_name):
    generator = TrafficGenerator(cluster=cluster_a, topics=[unique_name], rate_per_s=500)
    group = GroupConsumer(
        cluster=cluster_a, group=f"{unique_name}-app", topics=[unique_name], commit_interval_ms=200
    )
    generator.start()
    try:
        _wait(lambda: generator.produced > 200, "the generator produced nothing")
        group.start()
        generator.pause()
        # What was sent before the pause lands (the generator flushes when paused); a new topic's first
        # records may take seconds on a loaded machine, so wait for them rather than for a fixed time.
        _wait(
            lambda: _end(cluster_a, unique_name) == generator.produced,
            "the records sent before the pause did not land",
        )
        paused_at = generator.produced
        time.sleep(1.5)
        assert _end(cluster_a, unique_name) == paused_at  # nothing produced while paused

        checker = make_consumer(cluster_a, group_id=f"{unique_name}-app")
        try:

            def committed() -> int:
                offsets = checker.committed([TopicPartition(unique_name, p) for p in range(4)], timeout=10)
                return sum(max(tp.offset, 0) for tp in offsets)

            _wait(lambda: committed() == paused_at, "the group did not commit everything it read")
        finally:
            checker.close()
        generator.pause(False)
        _wait(lambda: _end(cluster_a, unique_name) > paused_at, "the generator did not resume")
    finally:
        generator.stop()
        group.stop()
        generator.join(15)
        group.join(15)
