"""How a `MirrorSourceTask` reaches its clusters: the Protocols its runtime drives, Kafka Connect's split.

The task (`replication.source`) fetches from a `RecordSource`, produces to a `RecordSink` and tracks the
deliveries, emits offset syncs through an `OffsetSyncEmitter` (`replication.offset_syncs`) and persists
positions in a `PositionStore` (`replication.positions`); it reads partitions to their end through a
`PartitionReader` (exactly_once recovery on the target, the data-loss check on the source); with
`rewrite-ids` a `SchemaRewriter` (the registries) rewrites schema IDs, or raises `SchemaWait`.
`replication.kafka.source_io.kafka_task_io` implements them with confluent-kafka; the unit tests run the
task on in-memory implementations.

The record and delivery types are confluent-kafka's `Message` and `KafkaError` shapes (methods, not
attributes), so the Kafka implementation hands its client's objects through unwrapped: the hot loop pays
no wrapper per record.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, Protocol

from replication.offset_syncs import OffsetSyncEmitter

log = logging.getLogger(__name__)

Headers = list[tuple[str, bytes | None]] | None
TopicPartition = tuple[str, int]
Record = tuple[int, Headers]  # (offset, headers), as a PartitionReader reads it


class ClientError(Protocol):
    """Why a fetch or a delivery failed (confluent-kafka's `KafkaError`)."""

    def str(self) -> str: ...


class SourceRecord(Protocol):
    """A fetched record, or a fetch error about a partition (`error()` set); confluent-kafka's `Message`.
    A delivered record (its `offset()` the downstream offset) has the same shape."""

    def error(self) -> ClientError | None: ...
    def topic(self) -> str | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...  # None on an error event that is about no offset
    def timestamp(self) -> tuple[int, int]: ...  # (type: 0 none, 1 create time, 2 log append time; ms)
    def headers(self) -> Headers: ...
    def key(self) -> bytes | None: ...
    def value(self) -> bytes | None: ...
    def __len__(self) -> int: ...  # value bytes


class RecordSource(Protocol):
    """The source partitions of a task, fetched from positions it gives (never an offset of its own)."""

    def assign(
        self, positions: Mapping[TopicPartition, int], *, again: Collection[TopicPartition] | None = None
    ) -> None:
        """Fetch exactly these partitions: a partition new to the assignment, or in `again`, from its given
        offset; one that stays and is not in `again` goes on from where its fetching is (what it fetched
        ahead is kept). `again=None`: every partition from its given offset (a new assignment)."""

    def fetch(self, *, first_wait_s: float, max_records: int) -> Sequence[SourceRecord]:
        """Up to `max_records` records (per partition in offset order), returned as soon as the first one is
        there (waiting `first_wait_s` at most): what is fetched already comes with it, no wait for more."""

    def is_out_of_range(self, error: ClientError) -> bool:
        """The fetch offset does not exist (any more): a case for the data-loss check."""

    def is_benign(self, error: ClientError) -> bool:
        """An event that is no error (end of partition)."""

    def watermarks(self, topic: str, partition: int) -> tuple[int, int] | None:
        """(earliest, end) as the last fetches reported them; None when not known yet."""

    def position(self, topic: str, partition: int) -> int | None:
        """The offset the source gives next (past transaction markers it skipped); None before it gave any."""

    def close(self) -> None: ...


DeliveryCallback = Callable[[ClientError | None, SourceRecord], None]


class RecordSink(Protocol):
    """The target, written in order per partition; every record produced with a callback gets exactly one
    delivery report (a transactional sink's commit answers for those produced without one).

    Reports of one partition arrive in produce order; a failed record is never followed by a delivered
    one of the same partition that was produced after it (idempotent, gapless producer)."""

    def produce(
        self,
        topic: str,
        *,
        value: bytes | None,
        key: bytes | None,
        partition: int,
        timestamp: int,  # ms; 0: "now"
        headers: Headers,
        on_delivery: DeliveryCallback | None,
    ) -> None:
        """Queue one record. `BufferError` while the queue is full (serve reports with `poll`, try again);
        any other exception: this record cannot be sent."""

    def poll(self, timeout: float) -> int:
        """Serve delivery reports (the callbacks run here), waiting up to `timeout` for one."""

    def flush(self, timeout: float) -> int:
        """Serve reports until none is outstanding or `timeout` passed; how many are still outstanding."""

    def list_topics(self, topic: str, timeout: float) -> object:
        """Connect and learn `topic`'s partitions now, before its first record (a new producer's first
        records otherwise wait for its own metadata refresh: 0.5-1 s measured on the embedded broker)."""

    def __len__(self) -> int:
        """Records produced and not reported yet."""


class TransactionalSink(RecordSink, Protocol):
    """A `RecordSink` that writes in transactions (exactly_once with `exactly.once.transactions`): the
    records between two commits become visible to read_committed readers together, or never."""

    def init_transactions(self, timeout: float) -> None:
        """Fence every earlier producer of the same transactional id and abort what it left open."""

    def begin_transaction(self) -> None: ...

    def commit_transaction(self, timeout: float) -> None:
        """Deliver every record produced since `begin_transaction` and commit them (raises otherwise)."""

    def abort_transaction(self, timeout: float) -> None: ...


class TransactionFailure(enum.StrEnum):
    """What a failed transactional call means for the task (`TaskIO.transaction_failure`)."""

    RETRY = "retry"  # try the same call again (a timeout)
    ABORT = "abort"  # abort the transaction; the partitions restart from what is committed
    FENCED = "fenced"  # another producer of this task took over: this one must stop writing
    FATAL = "fatal"  # the producer is unusable: a new one (its init aborts the transaction)


class PartitionReadError(RuntimeError):
    """A partition that could not be read. `unknown_partition`: the cluster answered that it does not know
    the partition (its topic not created, or created and not known yet to the broker or the client's
    metadata), as opposed to a cluster that did not answer or any other failure."""

    def __init__(self, message: str, *, unknown_partition: bool = False) -> None:
        super().__init__(message)
        self.unknown_partition = unknown_partition


class SchemaWait(Exception):
    """The record names a source schema the target registry does not hold yet (or that could not be
    looked up): the partition waits at this record (`replication.schema_hold`)."""

    def __init__(self, source_id: int, reason: str) -> None:
        super().__init__(f"schema ID {source_id}: {reason}")
        self.source_id = source_id


class SchemaRewriter(Protocol):
    """Rewrites the schema IDs of keys and values (`rewrite-ids`, `keep-ids`): the registries' side of a
    task (`replication.schemas.ids.SchemaIdRewriter`)."""

    def rewrite(self, payload: bytes | None) -> bytes | None:
        """`payload` naming the target's ID of its schema; `SchemaWait` when that is not known yet."""


class Tail(NamedTuple):
    low: int  # earliest offset
    end: int  # true end offset
    last: Record | None  # None when the partition holds no record


ReadOutcome = tuple[dict[TopicPartition, list[Record]], dict[TopicPartition, PartitionReadError]]


class PartitionReader(Protocol):
    """Reads partitions of one cluster to their true end, many at once; a partition that fails is reported
    on its own, the others are read."""

    def watermarks_all(
        self, keys: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, tuple[int, int]], dict[TopicPartition, PartitionReadError]]:
        """(earliest offset, listed end) of each partition, and the partitions that failed."""

    def read_all_to_end(self, starts: Mapping[TopicPartition, int]) -> ReadOutcome:
        """Each partition's (offset, headers) from its start to its end, in order, and the failures."""

    def tails(
        self, keys: Sequence[TopicPartition]
    ) -> tuple[dict[TopicPartition, Tail], dict[TopicPartition, PartitionReadError]]:
        """Each partition's earliest offset, true end and last record, and the failures."""

    def tail(self, topic: str, partition: int) -> Tail:
        """One partition's `Tail`; `PartitionReadError` when it cannot be read."""

    def close(self) -> None: ...


@dataclass(frozen=True)
class TaskIO:
    """A task's clients. Factories are called when the task first needs one (a new sink also after a
    delivery failure: the partitions restart on a fresh producer)."""

    source: RecordSource
    sink: Callable[[], RecordSink]
    offset_syncs: Callable[[], OffsetSyncEmitter]
    source_reader: Callable[[], PartitionReader]
    target_reader: Callable[[], PartitionReader]
    settle_timeout_s: float  # after this long flushing, no record of the sink is in doubt any more
    # A sink whose records of a partition on the target are a prefix of those sent, unless one timed out
    # (a gapless idempotent producer): a report that comes within this long of a record's send vouches
    # for the records sent before it (at_least_once asks one per partition per batch: `Delivery`). None:
    # one report per record.
    batch_reports_within_s: float | None = None
    # The sink is a `TransactionalSink`; `transaction_failure` says what an exception of its calls means.
    transactional: bool = False
    transaction_failure: Callable[[Exception], TransactionFailure] | None = None
    # The sink refuses a record of more bytes than this (key, value and headers: the producer's
    # message.max.bytes) when it is produced; None: it refuses none for its size.
    record_limit_bytes: int | None = None
    # Whether a record the sink refused when it was produced concerns that record or its partition only
    # (too large, its topic or partition unknown): the sink goes on and only that partition restarts
    # (`Delivery`; not in a transaction, which fails with the record). None: every refusal restarts the
    # task's partitions on a new sink.
    refusal_partition_only: Callable[[Exception], bool] | None = None
    # Whether the error of a failed delivery says the target does not know the record's remote partition
    # (its topic deleted, or just created and not known yet to the broker that answered the producer's
    # metadata request): the partition restarts alone, from that record, on the same sink, once the
    # target lists it again (`Delivery.restart_alone`; not in a transaction, which fails whole). None:
    # every failed delivery restarts the task's partitions on a new sink.
    unknown_partition: Callable[[ClientError], bool] | None = None


class Readers:
    """A task's partition readers of both clusters, each opened when first needed."""

    def __init__(self, io: TaskIO) -> None:
        self._io = io
        self._source: PartitionReader | None = None
        self._target: PartitionReader | None = None

    def source(self) -> PartitionReader:
        if self._source is None:
            self._source = self._io.source_reader()
        return self._source

    def target(self) -> PartitionReader:
        if self._target is None:
            self._target = self._io.target_reader()
        return self._target

    @property
    def opened(self) -> tuple[PartitionReader, ...]:
        return tuple(reader for reader in (self._source, self._target) if reader is not None)


class Closeable(Protocol):
    def close(self) -> None: ...


def close_quietly(*clients: Closeable | None) -> None:
    """Close each client there is; closing is best effort (the task is going away anyway)."""
    for client in clients:
        if client is not None:
            try:
                client.close()
            except Exception:
                log.debug("closing %r failed", client, exc_info=True)
