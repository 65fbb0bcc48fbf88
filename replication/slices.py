"""What a slice of a `MirrorSourceTask` returns: its `SliceResult`, and each thing it could not do as a
typed `SliceError` (the kind says what the caller does about it; `str()` is what operators read)."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from replication.metrics import GapEvent
from replication.topic_partition import TopicPartition


class SliceErrorKind(enum.StrEnum):
    CONSUME = "consume"  # fetching a partition failed
    PRODUCE = "produce"  # a record could not be queued (too large, producer failed fatally)
    DELIVERY = "delivery"  # the target did not acknowledge a record: the partition restarts from it
    START = "start"  # a partition could not start (its offsets or remote tail unreadable)
    DATA_LOSS = "data_loss"  # data.loss.policy=stop stopped a partition
    OFFSET_SYNC = "offset_sync"  # emitting offset syncs failed: positions wait, retried
    PERSIST = "persist"  # persisting positions failed: retried
    SCHEMA = "schema"  # rewrite-ids: a partition waited longer than SCHEMA_WAIT_ERROR_S for a schema
    TRANSACTION = "transaction"  # a transaction could not commit: aborted, every partition restarts
    FENCED = "fenced"  # another producer of this task took over (a zombie's writes): this task stops
    # The flow's partitions were assigned anew and this task's assignment fenced (replication.generations):
    # it stops, the new assignment's tasks take its partitions over.
    SUPERSEDED = "superseded"


# What ends a pump at once: a transaction abandoned (its partitions restart), the task fenced or superseded.
STOPPING_KINDS = frozenset({SliceErrorKind.TRANSACTION, SliceErrorKind.FENCED, SliceErrorKind.SUPERSEDED})


class TaskFenced(RuntimeError):
    """`run_slice` on a task that was fenced: another producer of the same task took over (this one was a
    zombie), or the flow's partitions were assigned anew and the earlier assignment's tasks fenced
    (`replication.generations`). A new task may start; this one never writes."""


@dataclass(frozen=True)
class SliceError:
    """Something a slice could not do; `str()` is the message operators read."""

    kind: SliceErrorKind
    message: str
    partition: TopicPartition | None = None  # the source partition, when the error is about one

    def __str__(self) -> str:
        return self.message


@dataclass(frozen=True)
class SliceResult:
    records: int  # records acknowledged by the target during the slice
    bytes: int  # value bytes of those records
    positions: Mapping[TopicPartition, int]  # persisted next source offset per partition
    stopped_partitions: tuple[TopicPartition, ...] = ()
    gap_events: tuple[GapEvent, ...] = ()
    errors: tuple[SliceError, ...] = ()
    caught_up: bool = False  # ended early: nothing more to fetch and nothing in flight

    @property
    def ok(self) -> bool:
        return not self.errors
