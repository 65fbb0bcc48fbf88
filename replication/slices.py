"""What a slice of a `MirrorSourceTask` returns: its `SliceResult`, and each thing it could not do as a
typed `SliceError` (the kind says what the caller does about it; `str()` is what operators read)."""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
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
# A task that another producer or a new assignment took over: reported once when it happens (a warning);
# what its close repeats of it is not a new failure.
FENCED_KINDS = frozenset({SliceErrorKind.FENCED, SliceErrorKind.SUPERSEDED})


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


# A slice's errors as one text (a task's error, an event, every log line of them): the first few in full,
# then how many more. Each partition's own error is its row's; a task of thousands of partitions that
# cannot start says so in a line, not in every error (600 KB copied into every row and event before).
SHOWN_ERRORS = 3


def errors_text(errors: Sequence[SliceError], *, shown: int = SHOWN_ERRORS) -> str | None:
    """`errors` as operators read them in one bounded line (None when there are none)."""
    if not errors:
        return None
    text = "; ".join(map(str, errors[:shown]))
    rest = errors[shown:]
    if not rest:
        return text
    partitions = {error.partition for error in rest if error.partition is not None}
    of_partitions = f" about {len(partitions):,} other partition(s)" if partitions else ""
    return f"{text}; and {len(rest):,} more error(s){of_partitions} (each partition's own on its row)"


def log_error(log: logging.Logger, label: str, error: SliceError, errors: list[SliceError]) -> None:
    """Keep `error` in the slice's `errors`; log it while the slice has few (`log_rest` the others)."""
    errors.append(error)
    if len(errors) <= SHOWN_ERRORS:
        log.error("%s: %s", label, error)


def log_rest(log: logging.Logger, label: str, errors: Sequence[SliceError]) -> None:
    """At the end of a slice, the errors `log_error` did not log, in a line: one of them and how many."""
    if len(errors) > SHOWN_ERRORS:
        log.error("%s: %s", label, errors_text(errors[SHOWN_ERRORS:], shown=1))


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
