"""In-memory clusters and the `replication.task_io` Protocols on them, to run `MirrorSourceTask` without a
broker (the way arroyo tests on its `LocalBroker`): clusters of partition logs and consumer groups, a
source fetching from them, a sink whose delivery reports come in an order and with failures a test
chooses, partition readers and an offset-sync emitter. They keep the Protocols' contracts (per-partition
order of fetches and reports, `BufferError` while the sink is full, a failed record never followed by a
delivered one of its partition); the broker integration tests (tests/replication/test_source_task.py)
check the Kafka ones. `replication.memory.clusters` serves the control plane's ports from the same clusters.
"""

from __future__ import annotations

import math
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from replication.checkpoint import CommittedOffset
from replication.consumer_groups import GroupMember
from replication.formats import OffsetSync
from replication.task_io import (
    ClientError,
    DeliveryCallback,
    Headers,
    PartitionReadError,
    Record,
    Tail,
    TaskIO,
    TopicPartition,
    TransactionFailure,
)

CREATE_TIME = 1


@dataclass
class MemoryRecord:
    """A stored record, shaped like confluent-kafka's `Message` (what the task reads of one)."""

    _topic: str
    _partition: int
    _offset: int
    _key: bytes | None
    _value: bytes | None
    _headers: Headers
    _timestamp: tuple[int, int]
    _error: MemoryError_ | None = None

    def error(self) -> MemoryError_ | None:
        return self._error

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def headers(self) -> Headers:
        return self._headers

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def __len__(self) -> int:
        return len(self._value or b"")

    def content(self) -> tuple:
        """What a mirror must keep: key, value, headers, timestamp."""
        return (self._key, self._value, self._headers, self._timestamp)


@dataclass(frozen=True)
class MemoryError_:
    text: str
    out_of_range: bool = False

    def str(self) -> str:
        return self.text


@dataclass
class MemoryPartition:
    low: int = 0  # earliest offset: retention deleted what is below
    records: list[MemoryRecord] = field(default_factory=list)
    aborted: set[int] = field(default_factory=set)  # offsets of records of aborted transactions

    @property
    def end(self) -> int:
        return self.low + len(self.records)

    @property
    def size_bytes(self) -> int:
        """What its log holds: its records' keys and values (a broker's adds batch headers)."""
        return sum(len(r.key() or b"") + len(r) for r in self.records)


@dataclass
class MemoryGroup:
    """A consumer group: its committed offsets and its members (a group with members is STABLE)."""

    committed: dict[TopicPartition, CommittedOffset] = field(default_factory=dict)
    members: tuple[GroupMember, ...] = ()
    simple: bool = True  # offsets committed without membership, until a member joins

    @property
    def state(self) -> str:
        return "STABLE" if self.members else "EMPTY"


class MemoryCluster:
    def __init__(self) -> None:
        self.partitions: dict[TopicPartition, MemoryPartition] = {}
        self.groups: dict[str, MemoryGroup] = {}
        self.configs: dict[str, dict[str, str]] = {}  # the configs set on each topic (its overrides)
        self.unreachable: str | None = None  # set: every read of it fails with this reason

    def commit(self, group: str, offsets: Mapping[TopicPartition, int]) -> None:
        """What a consumer of `group` commits: `offsets` (the next record each partition reads)."""
        committed = self.groups.setdefault(group, MemoryGroup()).committed
        committed.update({key: CommittedOffset(offset) for key, offset in offsets.items()})

    def join(self, group: str, member: GroupMember) -> None:
        """A consumer joins `group` (it becomes STABLE: its offsets may not be changed under it)."""
        joined = self.groups.setdefault(group, MemoryGroup())
        joined.members, joined.simple = (*joined.members, member), False

    def leave(self, group: str) -> None:
        """Every member leaves `group` (it is EMPTY, its offsets kept)."""
        self.groups[group].members = ()

    def create(self, topic: str, partitions: int) -> None:
        for partition in range(partitions):
            self.partitions.setdefault((topic, partition), MemoryPartition())

    def append(
        self,
        topic: str,
        partition: int,
        *,
        key: bytes | None,
        value: bytes | None,
        headers: Headers = None,
        timestamp_ms: int = 1_700_000_000_000,
    ) -> MemoryRecord:
        log = self.partitions[(topic, partition)]
        record = MemoryRecord(
            topic,
            partition,
            log.end,
            key,
            value,
            headers,
            (CREATE_TIME, timestamp_ms or int(time.time() * 1000)),
        )
        log.records.append(record)
        return record

    def delete_before(self, topic: str, partition: int, offset: int) -> None:
        """Retention: offsets below `offset` are gone."""
        log = self.partitions[(topic, partition)]
        log.records = [record for record in log.records if record.offset() >= offset]
        log.low = offset

    def read(self, topic: str, partition: int) -> list[MemoryRecord]:
        """The partition's records as a `read_committed` reader sees them (none of an aborted transaction)."""
        log = self.partitions[(topic, partition)]
        if log.aborted:
            return [record for record in log.records if record.offset() not in log.aborted]
        return list(log.records)


class MemorySource:
    """Fetches the assigned partitions from the task's positions, up to `per_partition` records of each
    partition in turn (so a fetch interleaves partitions); an offset outside a partition is reported once
    as out of range and the partition is not fetched again until it is assigned again. A partition in
    `passed_over` gives nothing (its fetching stuck, as librdkafka's once was at 5,000 partitions) until
    it is assigned anew while assigned (`again`); one in `stuck` gives nothing whatever is done."""

    def __init__(self, cluster: MemoryCluster, *, per_partition: int = 7) -> None:
        self.cluster = cluster
        self.per_partition = per_partition
        self.fetch_positions: dict[TopicPartition, int] = {}  # of the assigned partitions it fetches
        self.assigned: set[TopicPartition] = set()
        self.fetched_from: list[dict[TopicPartition, int]] = []  # each assign's partitions fetched anew
        self.passed_over: set[TopicPartition] = set()
        self.stuck: set[TopicPartition] = set()
        self.closed = False

    def assign(
        self, positions: Mapping[TopicPartition, int], *, again: Collection[TopicPartition] | None = None
    ) -> None:
        anew = {
            key: offset
            for key, offset in positions.items()
            if again is None or key in again or key not in self.assigned
        }
        self.fetch_positions = {
            key: anew[key] if key in anew else self.fetch_positions[key]
            for key in positions
            if key in anew or key in self.fetch_positions  # one reported out of range stays unfetched
        }
        self.passed_over -= {key for key in anew if key in self.assigned}  # fetched again: unstuck
        self.assigned = set(positions)
        self.fetched_from.append(anew)

    def fetch(self, *, first_wait_s: float, max_records: int) -> list[MemoryRecord]:
        fetched: list[MemoryRecord] = []
        progressed = True
        while progressed and len(fetched) < max_records:
            progressed = False
            for key, position in list(self.fetch_positions.items()):
                if key in self.passed_over or key in self.stuck:
                    continue
                log = self.cluster.partitions[key]
                if not log.low <= position <= log.end:
                    error = MemoryError_(f"offset {position} out of range", out_of_range=True)
                    fetched.append(MemoryRecord(*key, position, None, None, None, (0, -1), error))
                    del self.fetch_positions[key]
                    continue
                take = log.records[position - log.low : position - log.low + self.per_partition]
                take = take[: max_records - len(fetched)]
                fetched.extend(take)
                self.fetch_positions[key] = position + len(take)
                progressed = progressed or bool(take)
        if not fetched:
            time.sleep(min(first_wait_s, 0.001))  # an idle fetch waits a little, as a consumer does
        return fetched

    def is_out_of_range(self, error: ClientError) -> bool:
        return isinstance(error, MemoryError_) and error.out_of_range

    def is_benign(self, error: ClientError) -> bool:
        return False

    def watermarks(self, topic: str, partition: int) -> tuple[int, int] | None:
        log = self.cluster.partitions[(topic, partition)]
        return (log.low, log.end)

    def position(self, topic: str, partition: int) -> int | None:
        return self.fetch_positions.get((topic, partition))

    def close(self) -> None:
        self.closed = True


class MemorySink:
    """Writes to a cluster when a record is reported delivered. Reports come `per_poll` at a time, the
    highest partition's first (across partitions out of produce order, within one in order); `hold`
    partitions get no report until released. `fail_at` makes the n-th record produced to a partition
    (counted from 0) fail, and every later one of that partition with it (a gapless producer). A full
    queue (`capacity`) raises `BufferError`."""

    def __init__(
        self,
        cluster: MemoryCluster,
        *,
        capacity: int = 100_000,
        per_poll: int = 1_000_000,
        fail_at: Mapping[TopicPartition, int] | None = None,
        refuse: Mapping[TopicPartition, int] | None = None,
        max_bytes: int | None = None,
    ) -> None:
        self.cluster = cluster
        self.max_bytes = max_bytes  # a value larger than this is refused when produced
        self.capacity, self.per_poll = capacity, per_poll
        self.fail_at = dict(fail_at or {})
        self.refuse = dict(refuse or {})  # the n-th produce call to a partition raises once (too large)
        self.hold: set[TopicPartition] = set()
        self.pending: list[tuple[TopicPartition, MemoryRecord, DeliveryCallback, bool]] = []
        self.produced: dict[TopicPartition, int] = {}
        self.failed: set[TopicPartition] = set()
        self.failures = 0  # records whose delivery failed
        self.reports = 0  # successful delivery reports served (callbacks called)
        self.most_pending = 0
        self.buffer_errors = 0
        self.warmed: list[str] = []  # topics list_topics was asked for, in order

    def produce(self, topic, *, value, key, partition, timestamp, headers, on_delivery) -> None:
        if len(self.pending) >= self.capacity:
            self.buffer_errors += 1
            raise BufferError("queue full")
        key_ = (topic, partition)
        if self.refuse.get(key_) == self.produced.get(key_, 0):
            del self.refuse[key_]  # once: the same call on this sink later goes through
            raise ValueError("record too large")
        if self.max_bytes is not None and len(value or b"") > self.max_bytes:
            raise ValueError("record too large")
        self.produced[key_] = self.produced.get(key_, 0) + 1
        if self.fail_at.get(key_) == self.produced[key_] - 1:
            self.failed.add(key_)
        failing = key_ in self.failed
        record = MemoryRecord(topic, partition, -1, key, value, headers, (CREATE_TIME, timestamp))
        self.pending.append((key_, record, on_delivery, failing))
        self.most_pending = max(self.most_pending, len(self.pending))

    def poll(self, timeout: float = 0) -> int:
        reportable = [entry for entry in self.pending if entry[0] not in self.hold]
        reportable.sort(key=lambda entry: entry[0][1], reverse=True)  # stable: in order per partition
        reported = reportable[: self.per_poll]
        if len(reported) < len(self.pending):
            served = set(map(id, reported))
            self.pending = [entry for entry in self.pending if id(entry) not in served]
        else:
            self.pending = []
        for entry in reported:
            key_, record, on_delivery, failing = entry
            if failing:
                self.failures += 1
                if on_delivery is not None:
                    on_delivery(MemoryError_("delivery failed: broker unavailable"), record)
            else:
                written = self._write(key_, record)
                if on_delivery is not None:  # a record produced without a callback asks for no report
                    self.reports += 1
                    on_delivery(None, written)
        return len(reported)

    def flush(self, timeout: float = 0) -> int:
        while self.poll(0):
            pass
        return len(self.pending)

    def list_topics(self, topic: str, timeout: float = 0) -> None:
        self.warmed.append(topic)

    def __len__(self) -> int:
        return len(self.pending)

    def lose_reports(self) -> None:
        """A crash: what is in flight reaches the target, its reports never reach the task."""
        for key_, record, _, failing in self.pending:
            if not failing:
                self._write(key_, record)
        self.pending = []

    def _write(self, key: TopicPartition, record: MemoryRecord) -> MemoryRecord:
        return self.cluster.append(
            *key,
            key=record.key(),
            value=record.value(),
            headers=record.headers(),
            timestamp_ms=record.timestamp()[1],
        )


class MemoryReader:
    def __init__(self, cluster: MemoryCluster) -> None:
        self.cluster = cluster

    def watermarks_all(self, keys: Sequence[TopicPartition]):
        found, failures = {}, {}
        for key in keys:
            log = self.cluster.partitions.get(key)
            if self.cluster.unreachable is not None:
                failures[key] = PartitionReadError(f"{key[0]}[{key[1]}]: {self.cluster.unreachable}")
            elif log is None:
                failures[key] = PartitionReadError(
                    f"{key[0]}[{key[1]}] does not exist", unknown_partition=True
                )
            else:
                found[key] = (log.low, log.end)
        return found, failures

    def read_all_to_end(self, starts: Mapping[TopicPartition, int]):
        records: dict[TopicPartition, list[Record]] = {}
        _, failures = self.watermarks_all(list(starts))
        for key, start in starts.items():
            if key not in failures:
                records[key] = [
                    (r.offset(), r.headers()) for r in self.cluster.read(*key) if r.offset() >= start
                ]
        return records, failures

    def tails(self, keys: Sequence[TopicPartition]):
        watermarks, failures = self.watermarks_all(keys)
        tails = {}
        for key, (low, end) in watermarks.items():
            records = self.cluster.read(*key)
            tails[key] = Tail(low, end, (records[-1].offset(), records[-1].headers()) if records else None)
        return tails, failures

    def tail(self, topic: str, partition: int) -> Tail:
        tails, failures = self.tails([(topic, partition)])
        if failures:
            raise failures[(topic, partition)]
        return tails[(topic, partition)]

    def close(self) -> None:
        pass


class MemoryEmitter:
    """Keeps the offset syncs it is given; with a `cluster`, also writes them to the flow's offset-syncs
    topic there (partition 0, as MM2 writes it), where the control plane reads them. Acknowledged at
    once, unless `holding`: then only once it is cleared (`delivered` looks)."""

    def __init__(self, cluster: MemoryCluster | None = None, topic: str = "") -> None:
        self.emitted: list[OffsetSync] = []
        self.failing = False
        self.holding = False
        self._unacknowledged: list[OffsetSync] = []
        self.cluster, self.topic = cluster, topic

    def send(self, records: Sequence[OffsetSync]) -> None:
        if self.failing:
            raise ConnectionError("offset-syncs topic unavailable")
        self._unacknowledged.extend(records)
        self.delivered(timeout_s=0)

    def delivered(self, *, timeout_s: float) -> bool:
        if self.holding:
            return False
        records, self._unacknowledged = self._unacknowledged, []
        self.emitted.extend(records)
        if self.cluster is not None:
            self.cluster.create(self.topic, 1)
            for sync in records:
                self.cluster.append(self.topic, 0, key=sync.key(), value=sync.value(), timestamp_ms=0)
        return True

    def prepare(self) -> None:
        pass

    def close(self) -> None:
        pass


@dataclass
class MemoryIO:
    """Two clusters and the task's clients on them; `sinks` are handed out in turn (then fresh ones)."""

    source_cluster: MemoryCluster = field(default_factory=MemoryCluster)
    target_cluster: MemoryCluster = field(default_factory=MemoryCluster)
    emitter: MemoryEmitter = field(default_factory=MemoryEmitter)
    sinks: list[MemorySink] = field(default_factory=list)
    made: list[MemorySink] = field(default_factory=list)
    record_limit_bytes: int | None = None  # the sinks it makes refuse larger values ("record too large")

    def task_io(
        self,
        *,
        per_partition: int = 7,
        transactional: bool = False,
        batch_reports_within_s: float | None = math.inf,
    ) -> TaskIO:
        """`transactional`: the sinks are `MemoryTransactionalSink`s (exactly_once in transactions).
        `batch_reports_within_s`: as a Kafka at_least_once task's (its sinks are gapless, no record times
        out); None: one report per record."""
        return TaskIO(
            source=MemorySource(self.source_cluster, per_partition=per_partition),
            sink=lambda: self._sink(MemoryTransactionalSink if transactional else MemorySink),
            offset_syncs=lambda: self.emitter,
            source_reader=lambda: MemoryReader(self.source_cluster),
            target_reader=lambda: MemoryReader(self.target_cluster),
            settle_timeout_s=1.0,
            batch_reports_within_s=None if transactional else batch_reports_within_s,
            transactional=transactional,
            transaction_failure=memory_transaction_failure if transactional else None,
            record_limit_bytes=self.record_limit_bytes,
            refusal_partition_only=memory_refusal_partition_only,
        )

    def _sink(self, kind: type[MemorySink]) -> MemorySink:
        sink = (
            self.sinks.pop(0) if self.sinks else kind(self.target_cluster, max_bytes=self.record_limit_bytes)
        )
        self.made.append(sink)
        return sink


class MemoryTransactionError(Exception):
    """A transactional call that failed, and what the task must make of it (`memory_transaction_failure`)."""

    def __init__(self, failure: TransactionFailure) -> None:
        super().__init__(f"transaction call failed ({failure})")
        self.failure = failure


def memory_refusal_partition_only(exc: Exception) -> bool:
    """A `MemorySink`'s refusal of a record (too large) leaves the sink usable."""
    return isinstance(exc, ValueError)


def memory_transaction_failure(exc: Exception) -> TransactionFailure:
    return exc.failure if isinstance(exc, MemoryTransactionError) else TransactionFailure.FATAL


class MemoryTransactionalSink(MemorySink):
    """A `MemorySink` with the `TransactionalSink` calls: it counts them, and `failing[call]` lists the
    failures its next calls raise (then it succeeds)."""

    def __init__(self, cluster: MemoryCluster, **kwargs) -> None:
        super().__init__(cluster, **kwargs)
        self.calls: list[str] = []
        self.failing: dict[str, list[TransactionFailure]] = {}
        self._failures_before = 0
        self._written: list[MemoryRecord] = []  # by the open transaction: what an abort hides
        self.in_transaction = False  # begun, not committed nor aborted: records may be produced

    def _write(self, key: TopicPartition, record: MemoryRecord) -> MemoryRecord:
        written = super()._write(key, record)
        self._written.append(written)
        return written

    def _call(self, name: str) -> None:
        self.calls.append(name)
        if self.failing.get(name):
            raise MemoryTransactionError(self.failing[name].pop(0))

    def init_transactions(self, timeout: float) -> None:
        self._call("init")

    def produce(self, topic, **record) -> None:
        if not self.in_transaction:  # as librdkafka's: _STATE, "Local: Erroneous state"
            raise MemoryTransactionError(TransactionFailure.ABORT)
        super().produce(topic, **record)

    def begin_transaction(self) -> None:
        self._call("begin")
        self.in_transaction = True
        self._failures_before = self.failures
        self._written = []

    def commit_transaction(self, timeout: float) -> None:
        """Delivers every record of the transaction; one that failed fails the commit (ABORT), as Kafka's."""
        self._call("commit")
        self.flush(timeout)
        self.in_transaction = False
        if self.failures > self._failures_before:
            raise MemoryTransactionError(TransactionFailure.ABORT)

    def abort_transaction(self, timeout: float) -> None:
        """Its records are hidden from readers (`MemoryCluster.read`), their offsets kept, as Kafka's."""
        self._call("abort")
        self.in_transaction = False
        for record in self._written:
            self.cluster.partitions[(record.topic(), record.partition())].aborted.add(record.offset())
        self._written = []
