"""MM2's internal topics (offset syncs, checkpoints, heartbeats) on an in-memory cluster, read as
`replication.kafka.internal_topics` reads them on Kafka: partition 0, tombstones and records that do not
decode skipped."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from replication.formats import RecordFormatError
from replication.memory.task_io import MemoryCluster, MemoryRecord

T = TypeVar("T")


def decoded_record(record: MemoryRecord, decode: Callable[[bytes, bytes], T]) -> T | None:
    """A record of an MM2 internal topic, decoded; None for a tombstone or a record that does not decode
    (`replication.kafka.internal_topics` skips them)."""
    value = record.value()
    if value is None:
        return None
    try:
        return decode(record.key() or b"", value)
    except RecordFormatError:
        return None


def decoded(
    memory: MemoryCluster, topic: str, decode: Callable[[bytes, bytes], T], *, start: int = 0
) -> list[T]:
    """The records of partition 0 of an MM2 internal topic from `start`, decoded."""
    log = memory.partitions.get((topic, 0))
    records = [] if log is None else log.records[max(start - log.low, 0) :]
    return [decoded for record in records if (decoded := decoded_record(record, decode)) is not None]


def read_new(
    memory: MemoryCluster, topic: str, decode: Callable[[bytes, bytes], T], *, start: int
) -> tuple[list[T], int]:
    """The records of partition 0 of an MM2 internal topic from `start`, decoded, and where the next read
    starts (its end)."""
    log = memory.partitions.get((topic, 0))
    return decoded(memory, topic, decode, start=start), 0 if log is None else log.end
