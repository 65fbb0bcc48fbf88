"""MM2's internal topics (offset syncs, checkpoints, heartbeats) on an in-memory cluster, read as
`replication.kafka.internal_topics` reads them on Kafka: partition 0, tombstones and records that do not
decode skipped."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from replication.formats import decode_records
from replication.memory.task_io import MemoryCluster

T = TypeVar("T")


def decoded(
    memory: MemoryCluster, topic: str, decode: Callable[[bytes, bytes], T], *, start: int = 0
) -> list[T]:
    """The records of partition 0 of an MM2 internal topic from `start`, decoded."""
    log = memory.partitions.get((topic, 0))
    records = [] if log is None else log.records[max(start - log.low, 0) :]
    return [value for _, value in decode_records(records, decode)[0]]


def read_new(
    memory: MemoryCluster, topic: str, decode: Callable[[bytes, bytes], T], *, start: int
) -> tuple[list[T], int]:
    """The records of partition 0 of an MM2 internal topic from `start`, decoded, and where the next read
    starts (its end)."""
    log = memory.partitions.get((topic, 0))
    return decoded(memory, topic, decode, start=start), 0 if log is None else log.end
