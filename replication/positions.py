"""Where a `MirrorSourceTask` resumes: the next source offset to replicate, per source partition.

A position only ever covers records the target acknowledged (and whose offset syncs are durable), so
resuming from it never loses a record. `PositionStore` is the port; `replication.kafka.positions` stores
positions in a compacted topic on the target (dedicated mode), workers may store them in a database.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Protocol

TopicPartition = tuple[str, int]


class PositionStore(Protocol):
    def load(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The stored next source offset of each given partition that has one (others are left out)."""

    def save(self, *, flow: str, positions: Mapping[TopicPartition, int]) -> None:
        """Durably store these positions (other partitions keep theirs); raise if it did not happen."""


class InMemoryPositionStore:
    """A PositionStore in a dict, for unit tests and single-process experiments."""

    def __init__(self) -> None:
        self._positions: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()

    def load(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        with self._lock:
            return {
                (topic, partition): self._positions[(flow, topic, partition)]
                for topic, partition in partitions
                if (flow, topic, partition) in self._positions
            }

    def save(self, *, flow: str, positions: Mapping[TopicPartition, int]) -> None:
        with self._lock:
            for (topic, partition), offset in positions.items():
                self._positions[(flow, topic, partition)] = offset


# A moving partition's position is written at most once per POSITION_RECORD_INTERVAL_S, or sooner once it
# moved POSITION_RECORD_OFFSETS past the written one; an idle partition's never. At 10 records/s per
# partition, writing at every persist (5 a second) made the position records about 30% of the records on
# the target; now they are one per 50 records at that rate, and one per 10,000 at most at any rate.
POSITION_RECORD_INTERVAL_S = 5.0
POSITION_RECORD_OFFSETS = 10_000


def position_record_due(
    *,
    position: int,
    written: int | None,
    written_at: float | None,
    now: float,
    interval_s: float = POSITION_RECORD_INTERVAL_S,
    offsets: int = POSITION_RECORD_OFFSETS,
) -> bool:
    """Whether a partition whose position moved from `written` (stored at `written_at`, None: not by
    this task yet) to `position` writes a position record now.

    The cost of coalescing is what a crash makes a restart redo: at most `interval_s` (or `offsets`) of
    a partition's records beyond those in flight (at_least_once writes them again, exactly_once re-reads
    them from the target's tail and resumes exactly after them). Every position is written at once
    before a partition may move to another task (a settle, a close, a removal).
    """
    if written is None or written_at is None:
        return True
    return now - written_at >= interval_s or position - written >= offsets


class PersistCadence:
    """When a running slice persists its positions: once `interval_s` passed or `records` more records were
    acknowledged since the last time, whichever comes first (time passed in, so it is tested without I/O).

    What a crash can make a restart write again is what was acknowledged since the last persist (plus
    what was in flight), so this bounds at_least_once duplicates and the exactly_once tail re-read.
    """

    def __init__(self, *, interval_s: float, records: int, now: float) -> None:
        self.interval_s, self.records = interval_s, records
        self._at, self._acked = now, 0

    def due(self, *, now: float, acked: int) -> bool:
        return now - self._at >= self.interval_s or acked - self._acked >= self.records

    def persisted(self, *, now: float, acked: int) -> None:
        self._at, self._acked = now, acked
