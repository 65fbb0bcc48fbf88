"""The Kafka reads and writes of a failover (`replication.cluster_ports.FlowClusters` on Apache Kafka),
batched so a plan for thousands of partitions takes a moment.

One `list_offsets` request per cluster for every partition, one `describe_consumer_groups` for every
group, the `list_consumer_group_offsets` requests of all groups in flight together, the offset-syncs
topic read incrementally, and one probe consumer assigned to every partition at once to find the first
record not yet replicated. `replication.failover_reads` turns the observations into a plan.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from replication import failover, remote
from replication.checkpoint import ABSENT, CommittedOffset
from replication.cluster_ports import FailoverIOError
from replication.config import ClusterConfig, offset_syncs_cluster
from replication.failover_reads import FlowReads
from replication.formats import Checkpoint, Heartbeat, OffsetSync, RecordFormatError
from replication.kafka import drill_io
from replication.kafka.clients import (
    BOUNDED_PREFETCH,
    ClientValue,
    consume_available,
    kafka_error_code,
    kafka_error_reason,
    make_admin,
    make_consumer,
)
from replication.kafka.cluster_check import check_cluster
from replication.kafka.groups import GroupAdminError, GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicReader
from replication.offset_sync_store import OffsetSyncStore

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

REACHABILITY_TIMEOUT_S = 3.0
# Heartbeats of every flow into the target share one topic; the newest of this flow is near its end.
HEARTBEAT_TAIL_RECORDS = 2000


# The first record after each start, over every partition of a flow at once (as the mirror reads).
FIRST_RECORDS_READER: dict[str, ClientValue] = {
    "enable.partition.eof": True,
    "isolation.level": "read_committed",
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 10,
    **BOUNDED_PREFETCH,
}


class FailoverReader(FlowReads):
    """`FlowClusters` on Apache Kafka: reads both clusters of a flow for a failover plan and a drain; writes
    the groups' offsets."""

    def __init__(self, **flow: Any) -> None:
        """`FlowReads`' arguments: the flow, its clusters, the known aliases, the timeout of each request."""
        super().__init__(**flow)
        self._admins: dict[str, AdminClient] = {}
        self._sync_reader: InternalTopicReader | None = None

    def _admin(self, cluster: ClusterConfig) -> AdminClient:
        if cluster.alias not in self._admins:
            self._admins[cluster.alias] = make_admin(cluster)
        return self._admins[cluster.alias]

    # -- metadata ---------------------------------------------------------------------------------------
    def reachable(self, cluster: ClusterConfig) -> tuple[bool, str]:
        check = check_cluster(cluster, timeout_s=REACHABILITY_TIMEOUT_S)
        return check.ok, check.message

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]:
        try:
            metadata = self._admin(cluster).list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise FailoverIOError(
                f"cluster {cluster.alias}: listing topics failed: {kafka_error_reason(exc)}"
            ) from exc
        return {name: len(topic.partitions) for name, topic in metadata.topics.items() if topic.error is None}

    def end_offsets(
        self, cluster: ClusterConfig, partitions: Iterable[TopicPartitionKey]
    ) -> dict[TopicPartitionKey, int]:
        """The end offset of every partition, in one ListOffsets request (partitions in error left out)."""
        request = {TopicPartition(topic, p): OffsetSpec.latest() for topic, p in partitions}
        if not request:
            return {}
        futures = self._admin(cluster).list_offsets(
            request, isolation_level=IsolationLevel.READ_UNCOMMITTED, request_timeout=self.timeout_s
        )
        ends: dict[TopicPartitionKey, int] = {}
        for tp, future in futures.items():
            try:
                ends[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                log.debug("cluster %s: end offset of %s[%d]: %s", cluster.alias, tp.topic, tp.partition, exc)
        return ends

    # -- consumer groups ------------------------------------------------------------------------------
    def group_names(self, cluster: ClusterConfig) -> list[str]:
        return GroupOffsetsAdmin(cluster, timeout_s=self.timeout_s).list_groups()

    def committed_offsets(
        self, cluster: ClusterConfig, groups: Sequence[str]
    ) -> dict[str, dict[TopicPartitionKey, CommittedOffset]]:
        """Every group's committed offsets; the requests (one group each, Kafka's rule) run together."""
        admin = GroupOffsetsAdmin(cluster, timeout_s=self.timeout_s, admin=self._admin(cluster))
        try:
            return admin.committed_offsets_of(groups)
        except GroupAdminError as exc:
            raise FailoverIOError(str(exc)) from exc

    def group_states(self, cluster: ClusterConfig, groups: Sequence[str]) -> dict[str, str]:
        """Kafka's state name of every group (ABSENT when unknown there), in one request."""
        if not groups:
            return {}
        futures = self._admin(cluster).describe_consumer_groups(list(groups), request_timeout=self.timeout_s)
        states: dict[str, str] = {}
        for group, future in futures.items():
            try:
                states[group] = future.result().state.name
            except KafkaException as exc:
                if kafka_error_code(exc) != KafkaError.GROUP_ID_NOT_FOUND:
                    raise FailoverIOError(
                        f"cluster {cluster.alias}: describing group {group}: {kafka_error_reason(exc)}"
                    ) from exc
                states[group] = ABSENT
        return states

    def alter_offsets(
        self, cluster: ClusterConfig, group: str, offsets: Mapping[TopicPartitionKey, int]
    ) -> dict[TopicPartitionKey, str]:
        """Commit `offsets` for `group`; returns the partitions refused with the broker's reason."""
        return GroupOffsetsAdmin(cluster, timeout_s=self.timeout_s).alter_offsets(group, offsets)

    # -- MM2 internal topics -------------------------------------------------------------------------
    def refresh_offset_syncs(self) -> OffsetSyncStore:
        """The offset syncs written since the last call, added to `store` (all of them the first time)."""
        if self._sync_reader is None:
            self._sync_reader = InternalTopicReader(
                offset_syncs_cluster(self.flow, source=self.source, target=self.target),
                self.policy.flow_offset_syncs_topic(self.flow),
                decode=OffsetSync.decode,
                batch=10_000,
            )
        self.store.update_all(self._sync_reader.read_new(timeout_s=self.timeout_s))
        return self.store

    @property
    def offset_syncs_complete(self) -> bool:
        """The last `refresh_offset_syncs` read the offset-syncs topic to its end within the timeout."""
        return self._sync_reader is not None and self._sync_reader.reached_end

    def latest_checkpoints(
        self, groups: Sequence[str] | None
    ) -> dict[str, dict[TopicPartitionKey, Checkpoint]]:
        """The newest checkpoint per remote partition of each group (all groups when None)."""
        reader = InternalTopicReader(
            self.target,
            self.policy.checkpoints_topic(self.flow.source),
            decode=Checkpoint.decode,
            batch=10_000,
        )
        try:
            checkpoints = reader.read_new(timeout_s=self.timeout_s)
        finally:
            reader.close()
        names = sorted({cp.group for cp in checkpoints}) if groups is None else groups
        return {group: remote.latest_checkpoints(checkpoints, group=group) for group in names}

    def newest_heartbeat_ms(self) -> int | None:
        """Timestamp of the newest heartbeat this flow wrote to the target (None when none is found)."""
        # The end is known: the read stops at its last record, without the fetch the broker holds for
        # fetch.wait.max.ms to say "end of partition" (which stays the answer when markers end it).
        consumer = make_consumer(
            self.target, overrides={"enable.partition.eof": True, "fetch.wait.max.ms": 10}
        )
        partition = TopicPartition(self.policy.heartbeats_topic(), 0)
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=self.timeout_s, cached=False)
            consumer.assign([TopicPartition(partition.topic, 0, max(low, high - HEARTBEAT_TAIL_RECORDS))])
            newest: int | None = None
            deadline = time.monotonic() + self.timeout_s
            read_to_end = high <= low  # an empty partition: nothing to read
            while not read_to_end and time.monotonic() < deadline:
                for message in consume_available(consumer, wait_s=0.5, max_messages=10_000):
                    if (error := message.error()) is not None:
                        if error.code() == KafkaError._PARTITION_EOF:
                            return newest
                        continue
                    read_to_end = read_to_end or message.offset() >= high - 1  # this batch is the last
                    try:
                        heartbeat = Heartbeat.decode(message.key() or b"", message.value() or b"")
                    except RecordFormatError as exc:  # a foreign or malformed record: skipped
                        log.warning("flow %s: heartbeat record skipped: %s", self.flow.name, exc)
                        continue
                    if (heartbeat.source_cluster_alias, heartbeat.target_cluster_alias) == (
                        self.flow.source,
                        self.flow.target,
                    ):
                        newest = max(newest or 0, heartbeat.timestamp_ms)
            return newest
        except (KafkaException, ValueError) as exc:
            log.info("flow %s: no heartbeat readable on %s: %s", self.flow.name, self.target.alias, exc)
            return None
        finally:
            consumer.close()

    # -- the probe --------------------------------------------------------------------------------------
    def first_unreplicated(
        self, starts: Mapping[TopicPartitionKey, int | None]
    ) -> tuple[dict[TopicPartitionKey, failover.UnreplicatedRecord], set[TopicPartitionKey]]:
        """The first record at or after each start offset (None: from the beginning), read as the mirror
        reads (read_committed); returns (records found, partitions not settled within the timeout).

        One consumer for all partitions; a partition is settled by its first record or its end.
        """
        if not starts:
            return {}, set()
        consumer = make_consumer(self.source, overrides=FIRST_RECORDS_READER)
        found: dict[TopicPartitionKey, failover.UnreplicatedRecord] = {}
        pending = set(starts)
        try:
            consumer.assign(
                [
                    TopicPartition(topic, p, OFFSET_BEGINNING if start is None else start)
                    for (topic, p), start in starts.items()
                ]
            )
            deadline = time.monotonic() + self.timeout_s
            while pending and time.monotonic() < deadline:
                settled = []
                for message in consume_available(consumer, wait_s=0.2, max_messages=10_000):
                    key = (message.topic(), message.partition())
                    if key not in pending:
                        continue
                    error, offset = message.error(), message.offset()
                    if error is None and offset is not None:  # a record, with its offset
                        timestamp_type, timestamp = message.timestamp()
                        found[key] = failover.UnreplicatedRecord(
                            offset, timestamp if timestamp_type else None
                        )
                    elif error is not None and error.code() != KafkaError._PARTITION_EOF:
                        log.warning("flow %s: probing %s[%d]: %s", self.flow.name, *key, error.str())
                    pending.discard(key)
                    settled.append(TopicPartition(*key))
                if settled:
                    consumer.pause(settled)  # its first record is known: fetch no more of it
        finally:
            consumer.close()
        return found, pending

    def next_records(self, cluster: ClusterConfig, *, timeout_s: float | None = None, **read: Any):
        """`drill_io.next_records` on `cluster`, bounded by `timeout_s` (None: the reader's)."""
        return drill_io.next_records(
            cluster, timeout_s=self.timeout_s if timeout_s is None else timeout_s, **read
        )

    def close(self) -> None:
        if self._sync_reader is not None:
            self._sync_reader.close()
            self._sync_reader = None
