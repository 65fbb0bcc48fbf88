"""MM2's single-partition, compacted internal topics: create, read from the beginning, write.

`InternalTopicReader` reads a topic incrementally (the offset-syncs topic for `OffsetSyncStore`, a
checkpoints topic for `translate_offsets`), `InternalTopicWriter` writes records and waits for acks.
Records that do not decode (any exception of the decoder: truncated, bad version, invalid UTF-8, ...) are
logged, counted in `skipped_records` and skipped, never fatal: a foreign writer must not stop a flow.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic, clamp_replication_factor
from replication.formats import RecordFormatError, decode_records
from replication.kafka.admin import ADMIN_TIMEOUT_S, TopicAdmin
from replication.kafka.clients import consume_available, kafka_error_code, make_consumer, make_producer
from replication.logonce import warn_once

log = logging.getLogger(__name__)

T = TypeVar("T")

_NO_SUCH_PARTITION = (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART)

INTERNAL_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


class InternalTopicError(RuntimeError):
    pass


@dataclass(frozen=True)
class InternalTopic:
    """One of a flow's internal topics: where it lives and how it is created (1 partition, compacted)."""

    cluster: ClusterConfig
    name: str
    replication_factor: int
    configs: Mapping[str, str] = field(default_factory=lambda: dict(INTERNAL_TOPIC_CONFIGS))

    def ensure(self, *, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        ensure_internal_topic(
            self.cluster,
            self.name,
            replication_factor=self.replication_factor,
            timeout_s=timeout_s,
            configs=self.configs,
        )


def ensure_internal_topic(
    cluster: ClusterConfig,
    topic: str,
    *,
    replication_factor: int,
    timeout_s: float = ADMIN_TIMEOUT_S,
    configs: Mapping[str, str] = INTERNAL_TOPIC_CONFIGS,
) -> None:
    """Create `topic` (1 partition, compacted) unless it exists; the factor is lowered to the broker count."""
    admin = TopicAdmin(cluster, timeout_s=timeout_s)
    if topic in admin.partition_counts():
        return
    factor, warning = clamp_replication_factor(
        requested=replication_factor, broker_count=admin.broker_count()
    )
    if warning:
        warn_once(log, "cluster %s: topic %s: %s", cluster.alias, topic, warning)
    new_topic = NewRemoteTopic(
        name=topic,
        source_topic=topic,
        partitions=1,
        replication_factor=factor,
        configs=dict(configs),
    )
    error = admin.create_topics([new_topic]).get(topic)
    if error is not None:
        raise InternalTopicError(str(error)) from error
    log.info("cluster %s: created internal topic %s (replication factor %d)", cluster.alias, topic, factor)


class InternalTopicReader(Generic[T]):
    """Reads a partition of `topic` (0: MM2's internal topics have one) from its beginning; each
    `read_new()` returns what came since. Tombstones are skipped, or decoded with a None value when
    `tombstones` (a Connect offsets topic, where one resets a position)."""

    def __init__(
        self,
        cluster: ClusterConfig,
        topic: str,
        *,
        decode: Callable[[bytes, bytes], T],
        batch: int = 1000,
        timeout_s: float = ADMIN_TIMEOUT_S,
        partition: int = 0,
        tombstones: bool = False,
    ) -> None:
        self.cluster, self.topic = cluster, topic
        self.timeout_s = timeout_s
        self._decode = decode
        self._batch = batch
        self._tombstones = tombstones
        self._partition = TopicPartition(topic, partition)
        # A broker may hold a fetch for fetch.wait.max.ms even when records are there (the embedded one
        # does: librdkafka's 500 ms default made every positions load of a task taking partitions over
        # wait half a second); reads stop at the end offset, so a short wait does not spin. Between reads
        # the partition is unassigned: an assigned consumer keeps asking the broker every 10 ms, which
        # cost ~75 fetch requests/s per idle reader on Apache Kafka (`python -m bench idle`), and the
        # checkpoint task, the verifier and a failover keep readers open for the flow's life.
        self._consumer = self._new_consumer()
        self._position = 0
        # Assigned by the first read that finds records to fetch, once the topic's end offset answered: a
        # partition assigned before its topic existed stays unknown to librdkafka until its next metadata
        # refresh, minutes later (a CI run's reader made before its topic read nothing for 10 s). Offset 0
        # rather than OFFSET_BEGINNING saves a ListOffsets round trip (half a second on some brokers);
        # where retention or compaction removed it, auto.offset.reset=earliest starts at the log start.
        self._assigned = False
        self.skipped_records = 0
        self.reached_end = False  # the last read_new got to the topic's end within its timeout

    def _new_consumer(self):
        return make_consumer(self.cluster, overrides={"fetch.wait.max.ms": 10})

    def _high_watermark(self, timeout_s: float) -> int | None:
        try:
            return self._consumer.get_watermark_offsets(self._partition, timeout=timeout_s, cached=False)[1]
        except KafkaException as exc:
            log.debug("cluster %s: %s has no end offset yet: %s", self.cluster.alias, self.topic, exc)
            # A topic not created yet holds nothing to read; a cluster that did not answer may hold more.
            self.reached_end = kafka_error_code(exc) in _NO_SUCH_PARTITION
            if self.reached_end:
                # librdkafka may keep a partition it found missing unknown until its periodic metadata
                # refresh, minutes later, even once the topic exists (replication.kafka.source_io
                # PartitionReader does the same): the next read asks the cluster with a new client.
                self._consumer.close()
                self._consumer = self._new_consumer()
                self._assigned = False
            return None

    def read_new(self, *, timeout_s: float | None = None) -> list[T]:
        """Records up to the current end of the topic (none if it does not exist yet), within `timeout_s`
        (the reader's own timeout by default)."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        deadline = time.monotonic() + timeout_s
        end = self._high_watermark(timeout_s)
        if end is None:
            return []
        if not self._assigned and self._position < end:
            self._fetch_from_position()
        records: list[T] = []
        while self._position < end and (remaining := deadline - time.monotonic()) > 0:
            if not self._take(self._poll(timeout_s=min(remaining, 0.5)), records):
                # Transaction markers and compacted-away offsets hold no record: ask where the fetch is.
                (position,) = self._consumer.position([self._partition])
                self._position = max(self._position, position.offset)
        if self._position < end:
            log.warning(
                "cluster %s: reading %s stopped at offset %d of %d after %gs",
                self.cluster.alias,
                self.topic,
                self._position,
                end,
                timeout_s,
            )
        # A broker may report an end offset below records it already returned in the same fetch.
        while self._take(self._consumer.consume(self._batch, timeout=0), records):
            pass
        self.reached_end = self._position >= end
        if self.reached_end:  # nothing to fetch until the next read: stop asking (it starts at _position)
            self._consumer.unassign()
            self._assigned = False
        return records

    def _fetch_from_position(self) -> None:
        self._consumer.assign([TopicPartition(self.topic, self._partition.partition, self._position)])
        self._assigned = True

    def _poll(self, *, timeout_s: float) -> list:
        return consume_available(self._consumer, wait_s=timeout_s, max_messages=self._batch + 1)

    def _take(self, messages: list, records: list[T]) -> bool:
        fetched = []
        for message in messages:
            if message.error():
                if message.error().code() != KafkaError._PARTITION_EOF:
                    log.warning("cluster %s: reading %s: %s", self.cluster.alias, self.topic, message.error())
                continue
            self._position = message.offset() + 1
            fetched.append(message)
        decoded, malformed = decode_records(fetched, self._decode, tombstones=self._tombstones)
        records.extend(value for _, value in decoded)
        self.skipped_records += len(malformed)
        for message, exc in malformed:
            log.warning(
                "cluster %s: %s offset %d skipped (malformed record): %s",
                self.cluster.alias,
                self.topic,
                message.offset(),
                exc if isinstance(exc, RecordFormatError) else f"{type(exc).__name__}: {exc}",
            )
        return bool(messages)

    def close(self) -> None:
        self._consumer.close()


class InternalTopicWriter:
    """Writes records to partition 0 of `topic`, creating the topic on first use."""

    def __init__(
        self,
        cluster: ClusterConfig,
        topic: str,
        *,
        replication_factor: int,
        timeout_s: float = 30.0,
        configs: Mapping[str, str] = INTERNAL_TOPIC_CONFIGS,
    ) -> None:
        self.cluster, self.topic = cluster, topic
        self._replication_factor = replication_factor
        self._configs = configs
        self.timeout_s = timeout_s
        self._producer = make_producer(cluster)
        self._ready = False
        self._failures: list[str] = []  # delivery errors since `delivered` last looked

    @classmethod
    def of(cls, topic: InternalTopic, *, timeout_s: float = 30.0) -> InternalTopicWriter:
        return cls(
            topic.cluster,
            topic.name,
            replication_factor=topic.replication_factor,
            configs=topic.configs,
            timeout_s=timeout_s,
        )

    def write(
        self,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        timestamps_ms: Sequence[int] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Write and wait until the cluster acknowledged every record (within `timeout_s`, the writer's own
        timeout by default); raise InternalTopicError if not. `timestamps_ms`, one per record, are the
        records' timestamps (the producer's clock when not given)."""
        timeout_s = self.timeout_s if timeout_s is None else timeout_s
        self.send(records, timestamps_ms=timestamps_ms, timeout_s=timeout_s)
        if not self.delivered(timeout_s=timeout_s):
            raise InternalTopicError(
                f"cluster {self.cluster.alias}: writing {len(records)} record(s) to {self.topic} failed: "
                f"{len(self._producer)} not acknowledged within {timeout_s:g}s"
            )

    def send(
        self,
        records: Sequence[tuple[bytes, bytes | None]],
        *,
        timestamps_ms: Sequence[int] | None = None,
        timeout_s: float | None = None,
    ) -> None:
        """Start writing the records, without waiting for their acknowledgement (`delivered`); creating the
        topic first waits up to `timeout_s`."""
        self._ensure_topic(self.timeout_s if timeout_s is None else timeout_s)
        for index, (key, value) in enumerate(records):
            timestamp = 0 if timestamps_ms is None else timestamps_ms[index]  # 0: the producer's clock
            self._producer.produce(
                self.topic,
                key=key,
                value=value,
                partition=0,
                timestamp=timestamp,
                on_delivery=self._on_delivery,
            )
            self._producer.poll(0)

    def _on_delivery(self, error, _message) -> None:
        if error is not None:
            self._failures.append(error.str())

    def delivered(self, *, timeout_s: float) -> bool:
        """Whether every record sent is acknowledged, waiting up to `timeout_s`; InternalTopicError when
        one failed since the last call (the failures are then cleared)."""
        if timeout_s > 0:
            unsent = self._producer.flush(timeout_s)
        else:
            self._producer.poll(0)  # serves the reports that came
            unsent = len(self._producer)
        failures, self._failures = self._failures, []
        if failures:
            raise InternalTopicError(
                f"cluster {self.cluster.alias}: writing to {self.topic} failed: {', '.join(sorted(set(failures)))}"
            )
        return not unsent

    def prepare(self, *, timeout_s: float | None = None) -> None:
        """Create the topic if needed and connect the producer now, so that the first write does not
        wait for either (a task about to take partitions over opens them before it holds them)."""
        self._ensure_topic(self.timeout_s if timeout_s is None else timeout_s)

    def _ensure_topic(self, timeout_s: float) -> None:
        if not self._ready:
            ensure_internal_topic(
                self.cluster,
                self.topic,
                replication_factor=self._replication_factor,
                timeout_s=timeout_s,
                configs=self._configs,
            )
            # Connected, with the topic's metadata: a new producer's first record otherwise waits for
            # librdkafka's own metadata refresh, 0.5-1 s on the embedded broker (measured), with the
            # task's fetch loop blocked behind that write.
            self._producer.list_topics(self.topic, timeout=timeout_s)
            self._ready = True

    def close(self) -> None:
        self._producer.flush(5)
