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
