"""A task's `RecordSource` on confluent-kafka (`KafkaRecordSource`): its consumer, assigned by the task,
never committing or resetting an offset of its own (`replication.kafka.source_io` makes it)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from replication.kafka.clients import consume_available, source_records
from replication.task_io import ClientError, SourceRecord

PartitionKey = tuple[str, int]


class KafkaRecordSource:
    """The task's `RecordSource`: its consumer, assign() only (positions are the task's), out-of-range
    offsets reported, never reset. Hands the consumer's `Message`s through as they are."""

    def __init__(self, consumer: Consumer) -> None:
        self._consumer = consumer
        self._assigned: set[PartitionKey] = set()

    def assign(
        self, positions: Mapping[PartitionKey, int], *, again: Collection[PartitionKey] | None = None
    ) -> None:
        """`RecordSource.assign`: the partitions that leave, or fetch again, are taken off the consumer's
        assignment and those that come, or fetch again, added from their offsets (librdkafka's incremental
        assignment); the others' fetching and what it fetched ahead are left alone. So a task of thousands
        of partitions that starts a few more, or restarts one, does not fetch all of them again."""
        if again is None or not self._assigned:  # a new assignment (the first one too): librdkafka's assign
            self._consumer.assign(
                [TopicPartition(topic, partition, offset) for (topic, partition), offset in positions.items()]
            )
            self._assigned = set(positions)
            return
        leave = [key for key in self._assigned if key not in positions or key in again]
        come = [key for key in positions if key not in self._assigned or key in again]
        if leave:
            self._consumer.incremental_unassign(
                [TopicPartition(topic, partition) for topic, partition in leave]
            )
        if come:
            self._consumer.incremental_assign(
                [TopicPartition(topic, partition, positions[(topic, partition)]) for topic, partition in come]
            )
        self._assigned = set(positions)

    def fetch(self, *, first_wait_s: float, max_records: int) -> Sequence[SourceRecord]:
        # One record with the wait, then what is fetched already without one (replication.fetching).
        return source_records(
            consume_available(self._consumer, wait_s=first_wait_s, max_messages=max_records)
        )

    def is_out_of_range(self, error: ClientError) -> bool:
        """With auto.offset.reset=error librdkafka reports a missing fetch offset as one of these."""
        return isinstance(error, KafkaError) and error.code() in (
            KafkaError.OFFSET_OUT_OF_RANGE,
            KafkaError._AUTO_OFFSET_RESET,
        )

    def is_benign(self, error: ClientError) -> bool:
        return isinstance(error, KafkaError) and is_benign_consumer_event(error)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int] | None:
        try:
            low, high = self._consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
        except KafkaException:
            return None
        return (low, high) if high >= 0 else None

    def position(self, topic: str, partition: int) -> int | None:
        try:
            (position,) = self._consumer.position([TopicPartition(topic, partition)])
        except KafkaException:
            return None
        return position.offset if position.offset >= 0 else None

    def close(self) -> None:
        self._consumer.close()


def is_benign_consumer_event(error: KafkaError) -> bool:
    return error.code() == KafkaError._PARTITION_EOF
