"""The Kafka side of continuous verification: offset syncs, partitions' ends, range reads on both
clusters, and the observations a flow's failover readiness needs (groups active on the target, topic
parity).

`FlowVerifier` is kept per flow in a worker process (its offset-syncs reader is incremental). Per run it
lists every partition's ends in three ListOffsets requests per broker (`partition_ends`: the source's log
starts and last stable offsets, the remote partitions' last stable offsets), plans each partition with
`replication.verification.partition_turn`, and verifies the turns a batch at a time
(`replication.verification_reads.RangeVerifier`, shared with the in-memory clusters): each round reads one
range of every partition of the batch, the source ranges on one assignment (`RangeReader.read_ranges`,
`read_committed` as the mirror reads), then their target copies over the translated offsets on another,
and lets `compare_range` judge. A range past either side's listed end is put off without a read. The
run's `ByteBudget` is charged with every byte read and admits a round's ranges on their estimated bytes;
its `RunClock` stops new batches and rounds. Every read is bounded by `timeout_s`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from replication.browse import mirrored_record
from replication.cluster_ports import Key, RangeNotReadable
from replication.config import ClusterConfig, FlowConfig, offset_syncs_cluster
from replication.connector import TopicSelection
from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import (
    BOUNDED_PREFETCH,
    ClientValue,
    consume_available,
    make_admin,
    make_consumer,
)
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicReader
from replication.policy import replication_policy_for
from replication.verification import (
    MirroredRecord,
    PartitionEnds,
)
from replication.verification_reads import RangeVerifier, ReadRequest, TopicsRead, groups_active, topic_parity

log = logging.getLogger(__name__)

READER_OVERRIDES: dict[str, ClientValue] = {
    "isolation.level": "read_committed",  # as the mirror reads: aborted records are not mirrored
    "enable.partition.eof": True,
    "fetch.wait.max.ms": 50,
    # A range is a thousand records or so: librdkafka's prefetch (up to 100,000 records or 64 MB queued
    # per partition) fetched ~8x what the verifier read and its byte budget counted (measured: 9.8 MB/s
    # from the source at 1.2 MB/s of traffic), on the brokers the mirror itself reads and writes.
    "queued.min.messages": 1_000,
    **BOUNDED_PREFETCH,
    "max.partition.fetch.bytes": 262_144,
}


READ_BATCH = 1000  # messages taken per call, at most


class RangeReader:
    """Reads ranges of partitions of one cluster, records only (gaps hold none): many partitions at once
    on one assignment, their fetches shared."""

    def __init__(self, cluster: ClusterConfig, *, timeout_s: float) -> None:
        self.cluster, self.timeout_s = cluster, timeout_s
        self._consumer = make_consumer(cluster, overrides=READER_OVERRIDES)

    def watermarks(self, topic: str, partition: int) -> tuple[int, int]:
        """(log start, listed end) asked from the broker now."""
        return self._consumer.get_watermark_offsets(
            TopicPartition(topic, partition), timeout=self.timeout_s, cached=False
        )

    def read(
        self, topic: str, partition: int, start: int, end: int, *, max_records: int | None = None
    ) -> list[MirroredRecord]:
        """Records with offsets in [start, end) in order. With `max_records` (a look-ahead) at most that
        many, and fewer when the partition ends first; without, the whole range or RangeNotReadable."""
        found = self.read_ranges({(topic, partition): (start, end, max_records)})[(topic, partition)]
        if isinstance(found, Exception):
            raise found
        return found

    def read_ranges(self, requests: Mapping[Key, ReadRequest]) -> dict[Key, list[MirroredRecord] | Exception]:
        """Each partition's records of its range (as `read`), all partitions assigned at once and read
        within one timeout; a partition that cannot be read whole gets its RangeNotReadable or
        TimeoutError instead."""
        found: dict[Key, list[MirroredRecord] | Exception] = {key: [] for key in requests}
        pending = dict(requests)
        assigned = [TopicPartition(t, p, start) for (t, p), (start, _, _) in requests.items()]
        self._consumer.assign(assigned)
        deadline = time.monotonic() + self.timeout_s
        try:
            while pending and time.monotonic() < deadline:
                messages = consume_available(
                    self._consumer,
                    wait_s=min(0.5, max(deadline - time.monotonic(), 0.01)),
                    max_messages=READ_BATCH,
                )
                reading = set(pending)
                for message in messages:
                    self._take(message, pending, found)
                if pending and len(messages) < READ_BATCH:
                    # All that was fetched is taken: a range that ends in a gap (transaction markers) is
                    # passed once the position is past its end, with no record or end event to say so.
                    for tp in self._consumer.position([TopicPartition(t, p) for t, p in pending]):
                        if tp.offset >= pending[(tp.topic, tp.partition)][1]:
                            del pending[(tp.topic, tp.partition)]
                if done := reading - pending.keys():  # fetch no further than the ranges
                    self._consumer.pause([TopicPartition(t, p) for t, p in done])
        finally:
            self._consumer.resume(assigned)  # a partition stays paused through unassign and assign
            self._consumer.unassign()
        for (topic, partition), (start, end, _) in pending.items():
            found[(topic, partition)] = TimeoutError(
                f"cluster {self.cluster.alias}: reading {topic}[{partition}] [{start}, {end}) did not "
                f"finish within {self.timeout_s:g}s"
            )
        return found

    def _take(
        self, message, pending: dict[Key, ReadRequest], found: dict[Key, list[MirroredRecord] | Exception]
    ) -> None:
        """Keep one consumed message in its partition's records; its partition leaves `pending` once its
        read is done."""
        key = _key(message)
        if key not in pending:
            return  # fetched for an earlier assignment, or its read is done
        (topic, partition), (start, end, limit) = key, pending[key]
        records = found[key]
        assert isinstance(records, list)  # an exception ends the partition's read
        error = message.error()
        if error is not None:
            if error.code() != KafkaError._PARTITION_EOF:
                found[key] = KafkaException(error)
            elif limit is None and message.offset() < end:
                found[key] = RangeNotReadable(
                    f"cluster {self.cluster.alias}: {topic}[{partition}] is readable up to offset "
                    f"{message.offset()} only, before {end}"
                )
            del pending[key]
            return
        if message.offset() < start or (records and message.offset() <= records[-1].offset):
            return  # fetched for an earlier assignment of the same partition
        if message.offset() < end:
            records.append(mirrored_record(message))
        if message.offset() >= end - 1 or (limit is not None and len(records) >= limit):
            del pending[key]

    def close(self) -> None:
        self._consumer.close()


def _key(message) -> Key:
    return message.topic(), message.partition()


class FlowVerifier(RangeVerifier):
    """Verification and readiness observations of one flow, against its real clusters."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float,
        schema_ids: Callable[[], Mapping[int, int] | None] | None = None,
    ) -> None:
        """`schema_ids`: the flow's source -> target schema IDs as its schema sync found them, None when
        its copies keep the source's IDs (the control plane's `rewritten_schema_ids` decides; read at each
        comparison), so that a rewritten ID is not a difference (`as_copied`)."""
        super().__init__(
            source=RangeReader(source, timeout_s=timeout_s),
            target=RangeReader(target, timeout_s=timeout_s),
            schema_ids=schema_ids,
        )
        self.flow, self.source, self.target, self.timeout_s = flow, source, target, timeout_s
        self.policy = replication_policy_for(flow, known_aliases=known_aliases)
        self.topics = TopicSelection.of(flow, self.policy)
        self._syncs = InternalTopicReader(
            offset_syncs_cluster(flow, source=source, target=target),
            self.policy.flow_offset_syncs_topic(flow),
            decode=OffsetSync.decode,
            timeout_s=timeout_s,
        )
        self._source_admin, self._target_admin = make_admin(source), make_admin(target)

    def refresh_syncs(self) -> None:
        self.store.update_all(self._syncs.read_new())

    # -- verification -----------------------------------------------------------------------------------
    def partition_ends(self, partitions: Sequence[tuple[str, int, str]]) -> dict[Key, PartitionEnds]:
        """Every (topic, partition, remote topic)'s ends in three ListOffsets requests per broker: the
        source's log starts and readable ends, the remote partitions' readable ends. A partition the
        source does not list is left out (verified once it does)."""
        starts = self._list_offsets(
            self._source_admin, [(t, p) for t, p, _ in partitions], OffsetSpec.earliest()
        )
        ends = self._list_offsets(self._source_admin, [(t, p) for t, p, _ in partitions], OffsetSpec.latest())
        target_ends = self._list_offsets(
            self._target_admin, [(remote, p) for _, p, remote in partitions], OffsetSpec.latest()
        )
        return {
            (t, p): PartitionEnds(starts[(t, p)], ends[(t, p)], target_ends.get((remote, p)))
            for t, p, remote in partitions
            if (t, p) in starts and (t, p) in ends
        }

    def _list_offsets(self, admin, partitions: Sequence[Key], spec: OffsetSpec) -> dict[Key, int]:
        if not partitions:
            return {}
        futures = admin.list_offsets(
            {TopicPartition(t, p): spec for t, p in partitions},
            isolation_level=IsolationLevel.READ_COMMITTED,  # as the mirror reads: the last stable offset
            request_timeout=self.timeout_s,
        )
        offsets: dict[Key, int] = {}
        for tp, future in futures.items():
            try:
                offsets[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                log.debug("listing offsets of %s[%d]: %s", tp.topic, tp.partition, exc)
        return offsets

    # -- readiness observations -------------------------------------------------------------------------
    def groups_active_on_target(self) -> list[str]:
        admin = GroupOffsetsAdmin(self.target, timeout_s=self.timeout_s)
        return groups_active(self.flow, admin.list_groups(), state=admin.group_state)

    def topic_parity(self) -> tuple[list[str], list[str]]:
        source_admin = TopicAdmin(self.source, timeout_s=self.timeout_s)
        target_admin = TopicAdmin(self.target, timeout_s=self.timeout_s)
        return topic_parity(
            self.flow,
            self.topics,
            target_alias=self.target.alias,
            source=TopicsRead(source_admin.partition_counts, source_admin.describe_topics),
            target=TopicsRead(target_admin.partition_counts, target_admin.describe_topics),
            target_brokers=target_admin.broker_count,
        )

    def close(self) -> None:
        for closeable in (self._syncs, self._source, self._target):
            try:
                closeable.close()
            except Exception:
                log.exception("closing the verifier of flow %s->%s", self.flow.source, self.flow.target)
