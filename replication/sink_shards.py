"""Several producers behind one `RecordSink`, each remote partition always on the same one.

librdkafka sends one partition per ProduceRequest, and an idempotent producer keeps at most 5 requests in
flight per broker (confluentinc/librdkafka#1700). A task writing to hundreds or thousands of remote
partitions led by one broker sends about a request per partition, 5 at a time: the last partition's
records wait for the requests of the others (head of line), where the Java producer MirrorMaker 2 runs
sends every partition of a broker in one request. Measured with `python -m bench producers` (one broker,
20,000 records/s of 100 B round robin; docs/performance.md): over 1,000 partitions one producer's
acknowledgement p50 was 53-1,493 ms and four producers' 23-33 ms; over 250, one producer's 18-29 ms and
two producers' 12 ms. Over 64 partitions (`python -m bench latency-mm2`) four producers gained nothing
and cost about 15% more CPU per record, so a task of up to `partitions_per_producer` partitions keeps one.

So a task writing to many remote partitions shares them among producers: the first
`partitions_per_producer` partitions it writes go to the first producer, the next ones to a second, up
to `max_producers`, then round robin. A partition's producer never changes for the sink's life, so its
records stay in order and each producer keeps its own guarantees (idempotent, gapless); what fails one
fails the sink, which the task replaces whole (`Delivery.replace_sink`), as it replaces one producer.
Not for transactions: a transaction is one producer's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from replication.task_io import RecordSink, TopicPartition

# A producer writing to up to this many remote partitions keeps up (above); the next partitions a task
# writes go to another producer.
PARTITIONS_PER_PRODUCER = 250
# Each producer has its own connections and threads: past this many, partitions are shared round robin.
MAX_PRODUCERS = 4


class ShardedSink:
    """A `RecordSink` over producers made by `make` (the first one at once, the others when their first
    partition comes). `route` gives the hot loop a partition's own producer's `produce`."""

    def __init__(
        self,
        make: Callable[[], RecordSink],
        *,
        partitions_per_producer: int = PARTITIONS_PER_PRODUCER,
        max_producers: int = MAX_PRODUCERS,
    ) -> None:
        if partitions_per_producer < 1 or max_producers < 1:
            raise ValueError("partitions_per_producer and max_producers are 1 or more")
        self._make = make
        self._per_producer, self._max = partitions_per_producer, max_producers
        self.producers: list[RecordSink] = [make()]
        self._routes: dict[TopicPartition, RecordSink] = {}

    def route(self, topic: str, partition: int) -> Callable[..., None]:
        """The `produce` of the producer that writes `topic`'s `partition` (chosen at its first record)."""
        producer = self._routes.get((topic, partition))
        if producer is None:
            producer = self._routes[topic, partition] = self._next_producer()
        return producer.produce

    def _next_producer(self) -> RecordSink:
        index = len(self._routes) // self._per_producer
        if index >= self._max:
            return self.producers[len(self._routes) % self._max]
        if index == len(self.producers):  # this partition is the next producer's first (one at a time)
            # Not asked about the topics the others were (`Delivery.warm`): at thousands of partitions that
            # is a request per topic, in the fetch loop. Its first records wait for its own metadata (one
            # request for every topic it lacks, 0.5-1 s), once; the partitions started only once the first
            # producer's answer showed their remote partition with a leader.
            self.producers.append(self._make())
        return self.producers[index]

    def produce(self, topic: str, *, partition: int, **record: Any) -> None:
        """`RecordSink.produce` on the partition's producer (the record's other fields passed as they are)."""
        self.route(topic, partition)(topic, partition=partition, **record)

    def poll(self, timeout: float) -> int:
        """Serve every producer's reports; while none came, wait on each in turn (a share of `timeout`)."""
        producers = self.producers
        if len(producers) == 1:  # most tasks: the fetch loop polls once per fetch
            return producers[0].poll(timeout)
        served = 0
        share = timeout / len(producers)
        for producer in producers:
            served += producer.poll(0 if served else share)
        return served

    def flush(self, timeout: float) -> int:
        """Flush every producer within `timeout` in all; how many records are still outstanding."""
        deadline = time.monotonic() + timeout
        for producer in self.producers:
            producer.flush(max(deadline - time.monotonic(), 0.0))
        return len(self)

    def list_topics(self, topic: str, timeout: float) -> Any:
        """Every producer there is learns `topic`; the first one's answer."""
        answers = [producer.list_topics(topic, timeout) for producer in self.producers]
        return answers[0]

    def __len__(self) -> int:
        producers = self.producers
        return len(producers[0]) if len(producers) == 1 else sum(len(producer) for producer in producers)
