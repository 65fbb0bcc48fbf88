"""A traffic generator for demos and soak runs: keyed records with headers at a target rate."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence

from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer


class TrafficGenerator(threading.Thread):
    """Produces `rate_per_s` records per second, spread over `topics`, until `stop()`."""

    def __init__(
        self,
        *,
        cluster: ClusterConfig,
        topics: Sequence[str],
        partitions: int = 4,
        rate_per_s: float = 200.0,
        value_bytes: int = 200,
    ) -> None:
        super().__init__(name=f"traffic-{cluster.alias}", daemon=True)
        self.cluster, self.topics, self.partitions = cluster, tuple(topics), partitions
        self.rate_per_s, self.value_bytes = rate_per_s, value_bytes
        self.produced = 0
        self._stop_requested = threading.Event()
        self._paused = threading.Event()

    def stop(self) -> None:
        self._stop_requested.set()

    def pause(self, paused: bool = True) -> None:
        """Stop producing (records already sent are flushed) until `pause(False)`."""
        if paused:
            self._paused.set()
        else:
            self._paused.clear()

    def run(self) -> None:
        TopicAdmin(self.cluster).create_topics(
            NewRemoteTopic(
                name=t, source_topic=t, partitions=self.partitions, replication_factor=1, configs={}
            )
            for t in self.topics
        )
        producer = make_producer(self.cluster)
        padding = "x" * max(0, self.value_bytes - 80)
        interval = 1.0 / self.rate_per_s
        next_at = time.monotonic()
        while not self._stop_requested.is_set():
            if self._paused.is_set():
                producer.flush(10)
                self._stop_requested.wait(0.2)
                next_at = time.monotonic()
                continue
            topic = self.topics[self.produced % len(self.topics)]
            body = {"seq": self.produced, "origin": self.cluster.alias, "at": time.time(), "pad": padding}
            producer.produce(
                topic,
                key=f"{self.cluster.alias}-{self.produced % 97}".encode(),
                value=json.dumps(body).encode(),
                headers=[("generator", b"mirrorplane-demo")],
            )
            producer.poll(0)
            self.produced += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                self._stop_requested.wait(delay)
        producer.flush(10)


class GroupConsumer(threading.Thread):
    """An application's consumer group for demos: subscribes to `topics` in `group`, reads everything and
    commits its offsets (auto commit every `commit_interval_ms`), until `stop()`; leaves the group then."""

    def __init__(
        self, *, cluster: ClusterConfig, group: str, topics: Sequence[str], commit_interval_ms: int = 2000
    ) -> None:
        super().__init__(name=f"consumer-{cluster.alias}-{group}", daemon=True)
        self.cluster, self.group, self.topics = cluster, group, tuple(topics)
        self.commit_interval_ms = commit_interval_ms
        self.consumed = 0
        self._stop_requested = threading.Event()

    def stop(self) -> None:
        self._stop_requested.set()

    def run(self) -> None:
        consumer = make_consumer(
            self.cluster,
            overrides={
                "group.id": self.group,
                "enable.auto.commit": True,
                "enable.auto.offset.store": True,  # an application's consumer: what it read is committed
                "auto.commit.interval.ms": self.commit_interval_ms,
                "auto.offset.reset": "earliest",
                # The embedded broker answers a first JoinGroup only after the rebalance timeout
                # (max.poll.interval.ms, 5 minutes by default): a short one joins in seconds.
                "max.poll.interval.ms": 10_000,
                "session.timeout.ms": 6_000,
            },
        )
        consumer.subscribe(list(self.topics))
        try:
            while not self._stop_requested.is_set():
                self.consumed += sum(
                    1
                    for message in consumer.consume(num_messages=500, timeout=0.5)
                    if message.error() is None
                )
        finally:
            consumer.close()  # commits the last offsets and leaves the group
