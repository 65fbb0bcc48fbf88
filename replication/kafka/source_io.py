"""The Kafka side of `MirrorSourceTask`: its `TaskIO` (`replication.task_io`) on confluent-kafka.

`kafka_task_io` makes the task's clients: a `KafkaRecordSource` over its consumer (the consumer's
messages go through unwrapped), idempotent producers as the `RecordSink` (the hot loop pays no wrapper per
record; at at_least_once several behind a `ShardedSink` when the task writes to many partitions), the offset-syncs emitter, and `PartitionReader`s that read partitions to their end.

Client settings: each role has tunable defaults (a cluster's `<alias>.producer.*` / `.consumer.*` or
the flow's `A->B.producer.*` / `A->B.consumer.*` override them) and settings the delivery guarantee
depends on, which nothing overrides: idempotent acks=all producer, no auto commit, and
`auto.offset.reset=error` so a missing offset is reported to the data-loss detector, never silently
reset.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import TypeVar

from confluent_kafka import (
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import OffsetSpec

from replication.config import ClusterConfig, DeliveryGuarantee, FlowConfig, offset_syncs_cluster
from replication.kafka.clients import (
    ClientValue,
    consume_available,
    make_admin,
    make_consumer,
    make_producer,
    producer_properties,
    record_sink,
)
from replication.kafka.flow_tasks import InternalTopicSink
from replication.kafka.internal_topics import InternalTopic, InternalTopicWriter
from replication.kafka.positions import positions_internal_topic
from replication.kafka.record_source import KafkaRecordSource, is_benign_consumer_event
from replication.offset_syncs import OffsetSyncEmitter
from replication.policy import ReplicationPolicy
from replication.sink_shards import PARTITIONS_PER_PRODUCER, ShardedSink
from replication.task_io import (
    ClientError,
    PartitionReadError,
    Record,
    RecordSink,
    Tail,
    TaskIO,
    TransactionFailure,
)

__all__ = [
    "KafkaRecordSource",
    "PartitionReadError",
    "PartitionReader",
    "Tail",
    "kafka_task_io",
    "source_consumer_overrides",
]

log = logging.getLogger(__name__)

PartitionKey = tuple[str, int]
T = TypeVar("T")

# librdkafka's message.timeout.ms bounds how long a record can stay unacknowledged; flushing this long
# (plus a margin) leaves no record in doubt, which restarts of a partition rely on (`settle_timeout_s`:
# the flow's own value when it sets one).
MESSAGE_TIMEOUT_MS = 120_000
SETTLE_MARGIN_S = 10.0
SETTLE_TIMEOUT_S = MESSAGE_TIMEOUT_MS / 1000 + SETTLE_MARGIN_S

PRODUCER_DEFAULTS: Mapping[str, ClientValue] = {
    # How long a record may wait for others to share its request. Batches still form by themselves while
    # requests are in flight; 1 instead of 5 took 2-3 ms off the p50 at 20,000 rec/s, throughput the same
    # (112k rec/s of 100 B either way, `bench engine`-style copy, alternating rounds). 5 costs 7-11% less
    # CPU per record at 100 B (fewer, fuller requests) and nothing measurable at 1 KB and 10 KB
    # (`bench engine --ab producer.linger.ms=5`, docs/performance.md): a flow short of CPU may set it.
    # Larger batches (batch.num.messages, batch.size) changed nothing at 1: a batch ends on time, not size.
    "linger.ms": 1,
    # Bounded memory: produce() raises BufferError past these and the task serves acknowledgements
    # instead of consuming more.
    "queue.buffering.max.messages": 100_000,
    "queue.buffering.max.kbytes": 262_144,
    "message.timeout.ms": MESSAGE_TIMEOUT_MS,
}
# Remote topics are topic sync's to create, with the source's partitions and configs (MM2's
# MirrorSourceConnector creates them before its tasks write). librdkafka's producer lets the broker create
# a topic its metadata requests name (Apache Kafka's auto.create.topics.enable is on by default, with
# num.partitions 1): a task that asked for a remote topic's metadata before topic sync created it made a
# one-partition topic, whose other partitions the producer then refused as unknown
# (tests/replication/test_source_task.py). Not a flow setting: the task waits for topic sync's topic.
PRODUCER_REQUIRED: Mapping[str, ClientValue] = {"allow.auto.create.topics": False}
TRANSACTIONAL_PRODUCER_DEFAULTS: Mapping[str, ClientValue] = {
    # A task commits at every persist (at least every 0.2 s while records flow, up to 3.2 s while it is
    # behind: `replication.transactions.TransactionSpan`): a transaction a dead
    # worker left open blocks read_committed readers of its partitions until its task starts again
    # (which aborts it) or this passes. librdkafka wants it >= message.timeout.ms.
    "transaction.timeout.ms": MESSAGE_TIMEOUT_MS,
}
CONSUMER_DEFAULTS: Mapping[str, ClientValue] = {
    "isolation.level": "read_committed",  # records of aborted transactions are never mirrored
    "queued.max.messages.kbytes": 65_536,
    # Once a partition's prefetch passes its thresholds (the 64 MB above, or librdkafka's 100,000 records per
    # partition), it fetches again 10 ms later, not after librdkafka's 1 s: `make_consumer` sets that for
    # every consumer (`clients.FETCH_QUEUE_BACKOFF_MS`; a flow's `consumer.fetch.queue.backoff.ms` wins).
    # How long the broker may hold a fetch that found nothing: Kafka's own default. Apache Kafka answers
    # as soon as a record arrives (fetch.min.bytes = 1), whatever this is, so on Apache Kafka it sets only
    # the idle cost (docs/apache-kafka.md, `python -m bench idle`, one task on 20 idle partitions): 10 ms
    # 58-75 fetch requests/s and 110-120 ms of broker CPU per second over the idle broker's, 500 ms ~2/s
    # and nothing measurable. A just-started task knows a caught-up partition's end from its first fetch
    # answer, up to this long after the start: its status says records_behind unknown meanwhile. Brokers
    # that hold every fetch this long even with records there (the embedded tansu broker) add up to this
    # much to every record's latency: the demo on it sets `consumer.fetch.wait.max.ms = 10` (workers/demo.py).
    "fetch.wait.max.ms": 500,
}


def _client_overrides(
    role: str,
    *,
    cluster: ClusterConfig,
    flow: FlowConfig,
    defaults: Mapping[str, ClientValue],
    required: Mapping[str, ClientValue],
) -> dict[str, ClientValue]:
    """defaults < cluster `<alias>.<role>.*` < flow `A->B.<role>.*` < required."""
    prefix = f"{role}."
    flow_scoped = {
        name[len(prefix) :]: value for name, value in flow.extra.items() if name.startswith(prefix)
    }
    configured = cluster.client_properties(role)
    return {
        **{name: value for name, value in defaults.items() if name not in configured},
        **flow_scoped,
        **required,
    }


def source_consumer(flow: FlowConfig, source: ClusterConfig, *, task_index: int) -> Consumer:
    """The task's consumer: assign() only, positions are ours, out-of-range offsets reported."""
    return make_consumer(
        source,
        group_id=f"mirrorplane-{flow.name}-{task_index}",
        overrides=source_consumer_overrides(flow, source),
    )


def source_consumer_overrides(flow: FlowConfig, source: ClusterConfig) -> dict[str, ClientValue]:
    """The task consumer's settings over the cluster's: defaults < cluster < flow < what the task needs."""
    return _client_overrides(
        "consumer",
        cluster=source,
        flow=flow,
        defaults=CONSUMER_DEFAULTS,
        required={
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            "auto.offset.reset": "error",
            "enable.partition.eof": False,
        },
    )


def transactional(flow: FlowConfig) -> bool:
    """Whether the flow's task writes in Kafka transactions (exactly_once with exactly.once.transactions)."""
    return flow.delivery_guarantee == DeliveryGuarantee.EXACTLY_ONCE and flow.exactly_once_transactions


def transactional_id(flow: FlowConfig, task_index: int) -> str:
    """One per task of the flow, the same on every worker: a task started anywhere fences the previous
    producer of its index (and aborts what it left open). The target principal needs WRITE and DESCRIBE
    on this TransactionalId (docs/security.md)."""
    return f"{transactional_id_prefix(flow)}{task_index}"


def transactional_id_prefix(flow: FlowConfig) -> str:
    return f"mirrorplane-{flow.name}-"


def mirror_producer(flow: FlowConfig, target: ClusterConfig, *, task_index: int) -> Producer:
    """Idempotent (ordered, no internal-retry duplicates); transactional or gapless.

    Transactional (exactly_once with `exactly.once.transactions`, the default): the task commits what it
    wrote at each persist, a restarted task's `init_transactions` fences the producer it replaces and
    aborts its open transaction, so the committed records of a remote partition are a prefix of what was
    sent. Otherwise `enable.gapless.guarantee` makes an error that could leave a hole (record n lost, n+1
    written) fatal, so what reached the target is a prefix of what was sent, but for records that time
    out (message.timeout.ms, which librdkafka leaves out of that guarantee). The exactly_once restart
    reads the target's (committed) tail and knows everything before it is there; at_least_once asks one
    delivery report per partition per batch (`batch_reports_within_s`).
    """
    return make_producer(target, overrides=mirror_producer_overrides(flow, target, task_index=task_index))


def mirror_producer_overrides(
    flow: FlowConfig, target: ClusterConfig, *, task_index: int
) -> dict[str, ClientValue]:
    required: dict[str, ClientValue] = {"enable.idempotence": True, "acks": "all", **PRODUCER_REQUIRED}
    defaults = PRODUCER_DEFAULTS
    if transactional(flow):
        required["transactional.id"] = transactional_id(flow, task_index)
        defaults = {**PRODUCER_DEFAULTS, **TRANSACTIONAL_PRODUCER_DEFAULTS}
    else:
        required["enable.gapless.guarantee"] = True
    return _client_overrides("producer", cluster=target, flow=flow, defaults=defaults, required=required)


LIBRDKAFKA_MESSAGE_TIMEOUT_MS = 300_000  # librdkafka's own default (MESSAGE_TIMEOUT_MS is ours)
REPORT_TRUST = 0.9  # of message.timeout.ms: a report that came later vouches only for its own record


def message_timeout_s(flow: FlowConfig, target: ClusterConfig) -> float:
    """How long the task's producer may hold a record before it fails it: its message.timeout.ms (or the
    alias delivery.timeout.ms; the shorter when both are set), as the flow, the cluster or we set it;
    infinite for 0."""
    properties = producer_properties(target, overrides=mirror_producer_overrides(flow, target, task_index=0))
    set_ms = [
        float(properties[name])
        for name in ("message.timeout.ms", "delivery.timeout.ms")
        if name in properties
    ]
    timeout_ms = min(set_ms) if set_ms else LIBRDKAFKA_MESSAGE_TIMEOUT_MS
    return math.inf if timeout_ms == 0 else timeout_ms / 1000


LIBRDKAFKA_MESSAGE_MAX_BYTES = 1_000_000  # librdkafka's default message.max.bytes


def record_limit_bytes(flow: FlowConfig, target: ClusterConfig) -> int:
    """The largest record the task's producer accepts (`TaskIO.record_limit_bytes`): its message.max.bytes,
    as the flow or the cluster set it."""
    properties = producer_properties(target, overrides=mirror_producer_overrides(flow, target, task_index=0))
    return int(properties.get("message.max.bytes", LIBRDKAFKA_MESSAGE_MAX_BYTES))


def batch_reports_within_s(message_timeout_s: float) -> float:
    """How long after a batch is sent its partitions' last records' delivery reports vouch for the
    records before them (`TaskIO.batch_reports_within_s`): within the producer's message timeout no
    record of the batch can have timed out. A margin for the clocks' granularity."""
    return message_timeout_s * REPORT_TRUST


def settle_timeout_s(message_timeout_s: float) -> float:
    """How long a settle flushes (`TaskIO.settle_timeout_s`): past the producer's message timeout no
    record is in doubt. Without a timeout (0), ours."""
    return SETTLE_TIMEOUT_S if math.isinf(message_timeout_s) else message_timeout_s + SETTLE_MARGIN_S


def offset_syncs_internal_topic(
    flow: FlowConfig, *, source: ClusterConfig, target: ClusterConfig, policy: ReplicationPolicy
) -> InternalTopic:
    """The flow's offset-syncs topic, where offset-syncs.topic.location says."""
    return InternalTopic(
        offset_syncs_cluster(flow, source=source, target=target),
        policy.flow_offset_syncs_topic(flow),
        replication_factor=flow.offset_syncs_topic_replication_factor,
    )


def task_internal_topics(
    flow: FlowConfig, *, source: ClusterConfig, target: ClusterConfig, policy: ReplicationPolicy
) -> tuple[InternalTopic, ...]:
    """The internal topics a task writes between its fetches: its positions and its offset syncs. A write
    holds the fetch loop until acknowledged, so they are created before the remote topics
    (`TopicMetadataSync`), as MM2's connectors create theirs when they start: a broker creates partitions
    in order, and one created behind thousands of new remote partitions was not writable for 60 s."""
    return (
        positions_internal_topic(target, source_alias=flow.source),
        offset_syncs_internal_topic(flow, source=source, target=target, policy=policy),
    )


def offset_sync_emitter(
    flow: FlowConfig, *, source: ClusterConfig, target: ClusterConfig, policy: ReplicationPolicy
) -> OffsetSyncEmitter:
    """Writes the flow's offset-syncs topic where offset-syncs.topic.location says, creating it."""
    writer = InternalTopicWriter.of(
        offset_syncs_internal_topic(flow, source=source, target=target, policy=policy)
    )
    return InternalTopicSink(writer)


def kafka_task_io(
    flow: FlowConfig,
    *,
    source: ClusterConfig,
    target: ClusterConfig,
    policy: ReplicationPolicy,
    task_index: int,
    partitions_per_producer: int = PARTITIONS_PER_PRODUCER,
) -> TaskIO:
    """A MirrorSourceTask's clients on Kafka. A producer is a `RecordSink` itself (no wrapper per
    record): its produce/poll/flush/len are the Protocol's. At at_least_once a task writing to more than
    `partitions_per_producer` remote partitions shares them among several producers (`ShardedSink`, which
    gives the hot loop each partition's producer directly); a transaction is one producer's."""
    timeout_s = message_timeout_s(flow, target)

    def producer() -> RecordSink:
        return record_sink(mirror_producer(flow, target, task_index=task_index))

    return TaskIO(
        source=KafkaRecordSource(source_consumer(flow, source, task_index=task_index)),
        sink=(
            producer
            if transactional(flow)
            else lambda: ShardedSink(producer, partitions_per_producer=partitions_per_producer)
        ),
        offset_syncs=lambda: offset_sync_emitter(flow, source=source, target=target, policy=policy),
        source_reader=lambda: PartitionReader(source),
        # Transactional: the restart reads the committed tail only (what a zombie or a crash left
        # uncommitted is aborted by the task's init_transactions before it reads).
        target_reader=lambda: PartitionReader(target, read_committed=transactional(flow)),
        settle_timeout_s=settle_timeout_s(timeout_s),
        batch_reports_within_s=None if transactional(flow) else batch_reports_within_s(timeout_s),
        transactional=transactional(flow),
        transaction_failure=transaction_failure,
        record_limit_bytes=record_limit_bytes(flow, target),
        refusal_partition_only=refusal_partition_only,
        unknown_partition=delivery_to_unknown_partition,
    )


# A producer that answers these was fenced: another producer of the same transactional id initialised.
FENCED_CODES = frozenset({KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH})


# What librdkafka refuses at produce() for the record or its partition alone: the producer goes on (the
# record never entered its queue, so a gapless producer has no hole to answer for).
PARTITION_ONLY_REFUSALS = frozenset(
    {
        KafkaError.MSG_SIZE_TOO_LARGE,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError._UNKNOWN_PARTITION,
    }
)


def refusal_partition_only(exc: Exception) -> bool:
    """Whether a produce() refusal concerns its record or partition only (`TaskIO.refusal_partition_only`)."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    return isinstance(error, KafkaError) and error.code() in PARTITION_ONLY_REFUSALS and not error.fatal()


def delivery_to_unknown_partition(error: ClientError) -> bool:
    """`TaskIO.unknown_partition`: a delivery report's error saying the target does not know the record's
    remote partition. librdkafka fails a partition's queued records as "Local: Unknown partition" once a
    metadata answer stops listing it (a deleted topic, or on a cluster of several brokers one that does
    not know a just-created topic yet: thousands of them at the start of a 20,000-partition fleet), the
    broker answers "Unknown topic or partition"; nothing of them was written. A record queued for a
    partition as its topic went away can also fail as "Local: Broker handle destroyed for termination":
    librdkafka fails what is left in a removed partition's queue with that code when it frees the
    partition (`rd_kafka_toppar_destroy_final`), the producer itself going on; a producer being closed
    fails its records so too, and those restart from there all the same."""
    return (
        isinstance(error, KafkaError)
        and (is_unknown_partition(error) or error.code() == KafkaError._DESTROY)
        and not error.fatal()
    )


def transaction_failure(exc: Exception) -> TransactionFailure:
    """What an exception of a transactional producer call means (librdkafka's error flags)."""
    error = exc.args[0] if isinstance(exc, KafkaException) and exc.args else None
    if not isinstance(error, KafkaError):
        return TransactionFailure.FATAL
    if error.code() in FENCED_CODES:
        return TransactionFailure.FENCED
    if error.retriable():
        return TransactionFailure.RETRY
    if error.txn_requires_abort():
        return TransactionFailure.ABORT
    return TransactionFailure.FATAL


# The answers of a cluster that does not know a partition (yet): a topic not created, or just created and
# not known to every broker (no leader yet) or to the client's cached metadata, or not served yet by its
# leader: Apache Kafka lists a new partition's leader at once and that broker answers "not leader" (or
# "leader epoch is newer than broker epoch") until it has created the partition (for 50-90 s after 5,000
# new partitions on one broker at load 17-30).
UNKNOWN_PARTITION_CODES = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._UNKNOWN_TOPIC,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError._NOENT,  # an admin client's ListOffsets of a topic the cluster does not list: "no leaders found"
    }
)


def is_unknown_partition(error: object) -> bool:
    return isinstance(error, KafkaError) and error.code() in UNKNOWN_PARTITION_CODES


class PartitionReader:
    """Reads partitions of one cluster to their true end (restart recovery and the data-loss check).

    The end is where the broker says "end of partition" while fetching, not the listed high
    watermark: some brokers list it too low (the embedded one, by the size of the last batch - 1).
    The `*_all` methods read many partitions at once (one ListOffsets request per broker and kind, one
    consumer fetching them together), so reading 100 partitions costs about what reading one does; a
    partition that fails is reported on its own, the others are read. The offsets are asked by an admin
    client, which answers each partition on its own: a consumer's offsets_for_times fails all of them when
    one answers "not leader", and a task of 2,000 partitions whose remote topics were just created
    started none until the broker served the last (55 slices).
    """

    def __init__(
        self, cluster: ClusterConfig, *, timeout_s: float = 30.0, read_committed: bool = False
    ) -> None:
        """`read_committed`: records of aborted transactions are skipped and the end is the last stable
        offset (reading a partition with a transaction still open waits for it, up to `timeout_s`)."""
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._isolation = "read_committed" if read_committed else "read_uncommitted"
        self._offsets_isolation = (
            IsolationLevel.READ_COMMITTED if read_committed else IsolationLevel.READ_UNCOMMITTED
        )
        self._consumer = self._new_consumer()
        self._admin = make_admin(cluster)

    def _new_consumer(self):
        return make_consumer(
            self.cluster,
            overrides={
                "enable.partition.eof": True,
                "isolation.level": self._isolation,
                "auto.offset.reset": "earliest",
                # The end of a partition is known from an empty fetch: do not let the broker hold it.
                "fetch.wait.max.ms": 50,
            },
        )

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(earliest offset, listed high watermark) asked from the broker now."""
        return _one(self.watermarks_all([(topic, partition)]), (topic, partition))

    def watermarks_all(
        self, keys: Sequence[PartitionKey]
    ) -> tuple[dict[PartitionKey, tuple[int, int]], dict[PartitionKey, PartitionReadError]]:
        """(earliest offset, listed high watermark) of each partition, and the partitions that failed."""
        found: dict[PartitionKey, list[int]] = {key: [] for key in keys}
        failures: dict[PartitionKey, PartitionReadError] = {}
        for which in (OffsetSpec.earliest(), OffsetSpec.latest()):  # ListOffsets "earliest", then "latest"
            asked = [TopicPartition(topic, partition) for topic, partition in found]
            if not asked:
                break
            answers = self._list_offsets(asked, which)
            for topic, partition, offset, error in answers:
                if error is not None or offset < 0:
                    failures[(topic, partition)] = PartitionReadError(
                        f"cluster {self.cluster.alias}: offsets of {topic}[{partition}] unavailable: "
                        f"{error or 'no offset returned'}",
                        unknown_partition=is_unknown_partition(error),
                    )
                    found.pop((topic, partition), None)
                else:
                    found[(topic, partition)].append(offset)
        if any(failure.unknown_partition for failure in failures.values()):
            # librdkafka keeps a partition it once found missing (a remote topic looked up before topic
            # sync created it) unknown until its next periodic metadata refresh, minutes later: the
            # `make demo` tasks kept failing to start that way. New clients ask the broker afresh: the
            # admin client that lists the offsets keeps the same cache ("no leaders found").
            self._consumer.close()
            self._consumer = self._new_consumer()
            self._admin = make_admin(self.cluster)
        return {key: (low, high) for key, (low, high) in found.items()}, failures

    def _list_offsets(
        self, asked: list[TopicPartition], which: OffsetSpec
    ) -> list[tuple[str, int, int, KafkaError | None]]:
        """(topic, partition, offset, error) of each partition asked."""
        try:
            futures = self._admin.list_offsets(
                {tp: which for tp in asked},
                isolation_level=self._offsets_isolation,
                request_timeout=self.timeout_s,
            )
        except KafkaException as exc:
            return [(tp.topic, tp.partition, -1, exc.args[0]) for tp in asked]
        answers: list[tuple[str, int, int, KafkaError | None]] = []
        for tp, future in futures.items():
            try:
                answers.append((tp.topic, tp.partition, future.result().offset, None))
            except KafkaException as exc:
                answers.append((tp.topic, tp.partition, -1, exc.args[0]))
        return answers

    def read_all_to_end(
        self, starts: Mapping[PartitionKey, int]
    ) -> tuple[dict[PartitionKey, list[Record]], dict[PartitionKey, PartitionReadError]]:
        """Each partition's records from its start to its end, in order, and the partitions that failed."""
        records: dict[PartitionKey, list[Record]] = {key: [] for key in starts}
        failures: dict[PartitionKey, PartitionReadError] = {}
        pending = set(starts)
        if not pending:
            return records, failures
        self._consumer.assign([TopicPartition(topic, p, offset) for (topic, p), offset in starts.items()])
        deadline = time.monotonic() + self.timeout_s
        try:
            while pending and time.monotonic() < deadline:
                for message in consume_available(self._consumer, wait_s=0.05, max_messages=10_000):
                    error = message.error()
                    key = (message.topic(), message.partition())
                    if error is not None and message.topic() is None:  # not about one partition
                        failed = list(pending)
                    elif key not in pending:
                        continue  # past its end already
                    elif error is None:
                        records[key].append((message.offset(), message.headers()))
                        continue
                    elif is_benign_consumer_event(error):
                        pending.discard(key)
                        continue
                    else:
                        failed = [key]
                    for topic, partition in failed:
                        failures[(topic, partition)] = PartitionReadError(
                            f"cluster {self.cluster.alias}: reading {topic}[{partition}] from "
                            f"{starts[(topic, partition)]}: {error}",
                            unknown_partition=is_unknown_partition(error),
                        )
                        pending.discard((topic, partition))
        finally:
            self._consumer.unassign()
        for topic, partition in pending:
            failures[(topic, partition)] = PartitionReadError(
                f"cluster {self.cluster.alias}: {topic}[{partition}] did not reach its end within "
                f"{self.timeout_s:g}s (read {len(records[(topic, partition)])} records from "
                f"{starts[(topic, partition)]})"
            )
        return {key: found for key, found in records.items() if key not in failures}, failures

    def tail(self, topic: str, partition: int) -> Tail:
        """The partition's earliest offset, true end offset and last record."""
        return _one(self.tails([(topic, partition)]), (topic, partition))

    def tails(
        self, keys: Sequence[PartitionKey]
    ) -> tuple[dict[PartitionKey, Tail], dict[PartitionKey, PartitionReadError]]:
        """`tail` of each partition, all read together, and the partitions that failed."""
        watermarks, failures = self.watermarks_all(keys)
        tails: dict[PartitionKey, Tail] = {}
        starts = {key: max(low, high - 1) for key, (low, high) in watermarks.items()}
        step = 1
        while starts:
            records, failed = self.read_all_to_end(starts)
            failures.update(failed)
            step *= 2
            going_back: dict[PartitionKey, int] = {}
            for key, found in records.items():
                low, high = watermarks[key]
                if found:
                    tails[key] = Tail(low, found[-1][0] + 1, found[-1])
                elif starts[key] <= low:
                    tails[key] = Tail(low, max(low, high), None)
                else:  # the listed end may sit on offsets without records (transaction markers, compaction)
                    going_back[key] = max(low, starts[key] - step)
            starts = going_back
        return tails, failures

    def close(self) -> None:
        self._consumer.close()


def _one(outcome: tuple[Mapping[PartitionKey, T], Mapping[PartitionKey, PartitionReadError]], key) -> T:
    found, failures = outcome
    if key in failures:
        raise failures[key]
    return found[key]
