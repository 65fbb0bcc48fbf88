"""The Kafka side of continuous verification: offset syncs, range reads on both clusters, and the
observations a flow's failover readiness needs (groups active on the target, topic parity).

`FlowVerifier` is kept per flow in a worker process (its offset-syncs reader is incremental). For each
partition it plans with `replication.verification.plan_ranges`, reads each range's source records
(`read_committed`, as the mirror reads) and their target copies over the translated offsets, and lets
`compare_range` judge; the run's `ByteBudget` is charged with every byte read, and no range starts once
it is spent. Every request is bounded by `timeout_s`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException, TopicPartition

from replication.config import ClusterConfig, FlowConfig
from replication.connector import TopicSelection, plan_topic_sync
from replication.filters import ConfigPropertyFilter, GroupFilter
from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer
from replication.kafka.flow_tasks import offset_syncs_cluster
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicReader
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import replication_policy_for
from replication.verification import (
    ByteBudget,
    MirroredRecord,
    OffsetRange,
    PartitionOutcome,
    PartitionProgress,
    RangeVerdict,
    VerificationLimits,
    compare_range,
    fold_verdicts,
    plan_ranges,
    verifiable_end,
)

log = logging.getLogger(__name__)

READER_OVERRIDES = {
    "isolation.level": "read_committed",  # as the mirror reads: aborted records are not mirrored
    "enable.partition.eof": True,
    "fetch.wait.max.ms": 50,
    # A range is a thousand records or so: librdkafka's prefetch (up to 100,000 records or 64 MB queued
    # per partition) fetched ~8x what the verifier read and its byte budget counted (measured: 9.8 MB/s
    # from the source at 1.2 MB/s of traffic), on the brokers the mirror itself reads and writes.
    "queued.min.messages": 1_000,
    "queued.max.messages.kbytes": 1_024,
    "max.partition.fetch.bytes": 262_144,
}
# Group states in which a group has members: failover cannot write its offsets.
ACTIVE_GROUP_STATES = frozenset({"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"})
MAX_GROUPS_DESCRIBED = 100


class RangeNotReadable(RuntimeError):
    """The partition's readable end (high watermark, or last stable offset with read_committed) is still
    before the range's end: verify it later, it is not a mismatch. Apache Kafka's end is never before a
    replicated position; the embedded broker reports one too low by the size of its last batch - 1."""


class RangeReader:
    """Reads [start, end) of one partition of one cluster, records only (gaps hold none)."""

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
        tp = TopicPartition(topic, partition, start)
        self._consumer.assign([tp])
        records: list[MirroredRecord] = []
        deadline = time.monotonic() + self.timeout_s
        try:
            while time.monotonic() < deadline:
                if max_records is not None and len(records) >= max_records:
                    break
                message = self._consumer.poll(min(0.5, max(deadline - time.monotonic(), 0.01)))
                if message is None:
                    (position,) = self._consumer.position([tp])
                    if position.offset >= end:
                        break
                    continue
                if (message.topic(), message.partition()) != (topic, partition):
                    continue  # fetched for an earlier assignment
                error = message.error()
                if error is not None:
                    if error.code() != KafkaError._PARTITION_EOF:
                        raise KafkaException(error)
                    if max_records is None and message.offset() < end:
                        raise RangeNotReadable(
                            f"cluster {self.cluster.alias}: {topic}[{partition}] is readable up to offset "
                            f"{message.offset()} only, before {end}"
                        )
                    break
                if message.offset() < start:
                    continue  # fetched for an earlier assignment of the same partition
                if message.offset() >= end:
                    break
                records.append(mirrored_record(message))
            else:
                raise TimeoutError(
                    f"cluster {self.cluster.alias}: reading {topic}[{partition}] [{start}, {end}) did not "
                    f"finish within {self.timeout_s:g}s"
                )
        finally:
            self._consumer.unassign()
        return records

    def close(self) -> None:
        self._consumer.close()


def mirrored_record(message) -> MirroredRecord:
    """A consumed message as compared (verification, drills): a CreateTime timestamp only."""
    kind, timestamp = message.timestamp()
    key, value, headers = message.key(), message.value(), tuple(message.headers() or ())
    size = len(key or b"") + len(value or b"") + sum(len(n) + len(v or b"") for n, v in headers)
    return MirroredRecord(
        offset=message.offset(),
        key=key,
        value=value,
        headers=headers,
        timestamp_ms=timestamp if kind == TIMESTAMP_CREATE_TIME else None,
        size=size,
    )


class FlowVerifier:
    """Verification and readiness observations of one flow, against its real clusters."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float,
    ) -> None:
        self.flow, self.source, self.target, self.timeout_s = flow, source, target, timeout_s
        self.policy = replication_policy_for(flow, known_aliases=known_aliases)
        self.topics = TopicSelection.of(flow, self.policy)
        self.store = OffsetSyncStore()
        self._syncs = InternalTopicReader(
            offset_syncs_cluster(flow, source=source, target=target),
            self.policy.flow_offset_syncs_topic(flow),
            decode=OffsetSync.decode,
            timeout_s=timeout_s,
        )
        self._source = RangeReader(source, timeout_s=timeout_s)
        self._target = RangeReader(target, timeout_s=timeout_s)

    def refresh_syncs(self) -> None:
        self.store.update_all(self._syncs.read_new())

    # -- verification -----------------------------------------------------------------------------------
    def verify_partition(
        self,
        *,
        topic: str,
        partition: int,
        remote_topic: str,
        progress: PartitionProgress,
        replicated_position: int | None,
        limits: VerificationLimits,
        budget: ByteBudget,
        seed: int,
    ) -> PartitionOutcome:
        newest = self.store.newest_sync(topic, partition)
        sync = None if newest is None else (newest.upstream_offset, newest.downstream_offset)
        end = verifiable_end(
            replicated_position=replicated_position,
            newest_sync_upstream=newest.upstream_offset if newest else None,
        )
        oldest = self.store.oldest_upstream_offset(topic, partition)
        if end is None or oldest is None:
            reason = "no offset sync read yet" if newest is None else "no replicated position yet"
            return PartitionOutcome(topic, partition, remote_topic, "unverifiable", reason, sync=sync)
        low = max(oldest, self._source.watermarks(topic, partition)[0])
        plan = plan_ranges(progress=progress, low=low, end=end, limits=limits, seed=seed)
        continuing = progress if plan.verified_from == progress.verified_from else PartitionProgress()
        hot = self._verify_ranges(plan.ranges, topic, partition, remote_topic, limits, budget, continuing)
        samples = self._verify_ranges(plan.samples, topic, partition, remote_topic, limits, budget)
        return fold_verdicts(
            topic=topic,
            partition=partition,
            remote_topic=remote_topic,
            progress=progress,
            plan=plan,
            hot=hot,
            samples=samples,
            sync=sync,
        )

    def _verify_ranges(
        self,
        ranges: Sequence[OffsetRange],
        topic: str,
        partition: int,
        remote_topic: str,
        limits: VerificationLimits,
        budget: ByteBudget,
        progress: PartitionProgress | None = None,
    ) -> list[RangeVerdict]:
        """Verify ranges in order while the budget lasts, up to the first mismatch. A range that starts
        where the verified part ends reads the target from where that part ends on the target."""
        verdicts: list[RangeVerdict] = []
        verified_up_to = progress.verified_up_to if progress else None
        target_from = progress.target_verified_up_to if progress else None
        for offsets in ranges:
            if budget.exhausted:
                break
            target_start = target_from if offsets.start == verified_up_to else None
            try:
                verdict = self.verify_range(
                    topic, partition, remote_topic, offsets, limits=limits, target_start=target_start
                )
            except RangeNotReadable as exc:
                log.debug("%s: verified next run", exc)
                break
            except TimeoutError as exc:  # a slow cluster: this partition waits for the next run
                log.warning("%s; verified next run", exc)
                break
            budget.spend(verdict.bytes_read)
            verdicts.append(verdict)
            if not verdict.clean:
                break
            verified_up_to, target_from = offsets.end, verdict.target_end
        return verdicts

    def verify_range(
        self,
        topic: str,
        partition: int,
        remote_topic: str,
        offsets: OffsetRange,
        *,
        limits: VerificationLimits,
        target_start: int | None = None,
    ) -> RangeVerdict:
        def translate(offset: int) -> int | None:
            return self.store.translate_downstream(topic, partition, offset)

        source = self._source.read(topic, partition, offsets.start, offsets.end)
        start, end = translate(offsets.start), translate(offsets.end)
        if start is None or end is None:  # planned within the syncs: only a rewind since can do this
            raise ValueError(f"{topic}[{partition}] {offsets} no longer translates (offset syncs rewound)")
        if target_start is not None:
            start = min(start, target_start)
        target = self._target.read(remote_topic, partition, start, end) if end > start else []
        mapped = {translate(record.offset) for record in source}
        unmapped = sum(1 for record in target if record.offset not in mapped)
        lookahead = (
            self._source.read(
                topic, partition, offsets.end, offsets.end + 10 * limits.range_records, max_records=unmapped
            )
            if unmapped
            else []
        )
        return compare_range(
            offsets=offsets,
            source=source,
            target=target,
            translate=translate,
            lookahead=lookahead,
            target_end=end,
        )

    # -- readiness observations -------------------------------------------------------------------------
    def groups_active_on_target(self) -> list[str]:
        """Groups the flow replicates that have members on the target (their offsets cannot be written)."""
        admin = GroupOffsetsAdmin(self.target, timeout_s=self.timeout_s)
        group_filter = GroupFilter.for_flow(self.flow)
        groups = [g for g in admin.list_groups() if group_filter.should_replicate_group(g)]
        return [g for g in groups[:MAX_GROUPS_DESCRIBED] if admin.group_state(g) in ACTIVE_GROUP_STATES]

    def topic_parity(self) -> tuple[list[str], list[str]]:
        """(partition problems, config problems) of the remote topics, as the topic sync would fix them."""
        source_admin = TopicAdmin(self.source, timeout_s=self.timeout_s)
        target_admin = TopicAdmin(self.target, timeout_s=self.timeout_s)
        source_counts = source_admin.partition_counts()
        mirrored = self.topics.mirrored(source_counts)
        mirrored = tuple(d for d in mirrored if not self.policy.is_heartbeats_topic(d.topic))
        target_counts = target_admin.partition_counts()
        source_topics = source_admin.describe_topics({d.topic: source_counts[d.topic] for d in mirrored})
        target_topics = target_admin.describe_topics(
            {
                d.remote_topic: target_counts[d.remote_topic]
                for d in mirrored
                if d.remote_topic in target_counts
            }
        )
        plan = plan_topic_sync(
            mirrored=tuple(d for d in mirrored if d.topic in source_topics),
            source_topics=source_topics,
            target_topics=target_topics,
            flow=self.flow,
            config_filter=ConfigPropertyFilter.for_flow(self.flow),
            target_broker_count=target_admin.broker_count(),
        )
        partitions = [f"{t.name} missing on {self.target.alias}" for t in plan.create] + [
            f"{g.topic}: {g.current} partitions, {g.desired} on the source" for g in plan.grow
        ]
        configs = [f"{u.topic}: {', '.join(sorted(u.changes))}" for u in plan.update_configs if u.changes]
        return partitions, configs

    def close(self) -> None:
        for closeable in (self._syncs, self._source, self._target):
            try:
                closeable.close()
            except Exception:
                log.exception("closing the verifier of flow %s->%s", self.flow.source, self.flow.target)
