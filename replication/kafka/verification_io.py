"""The Kafka side of continuous verification: offset syncs, partitions' ends, range reads on both
clusters, and the observations a flow's failover readiness needs (groups active on the target, topic
parity).

`FlowVerifier` is kept per flow in a worker process (its offset-syncs reader is incremental). Per run it
lists every partition's ends in three ListOffsets requests per broker (`partition_ends`: the source's log
starts and last stable offsets, the remote partitions' last stable offsets), plans each partition with
`replication.verification.partition_turn`, and verifies the turns a batch at a time: each round reads one
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
from replication.config import ClusterConfig, FlowConfig, SchemaIdMode, offset_syncs_cluster
from replication.connector import TopicSelection, plan_topic_sync
from replication.filters import ConfigPropertyFilter, GroupFilter
from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_admin, make_consumer
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicReader
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import replication_policy_for
from replication.verification import (
    ByteBudget,
    MirroredRecord,
    OffsetRange,
    PartitionEnds,
    PartitionOutcome,
    PartitionProgress,
    PartitionTurn,
    RangeVerdict,
    RunClock,
    VerificationLimits,
    compare_range,
    partition_turn,
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


Key = tuple[str, int]  # (topic, partition)
ReadRequest = tuple[int, int, int | None]  # [start, end), at most that many records (None: the whole range)


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
                messages = self._consumer.consume(
                    num_messages=1000, timeout=min(0.5, max(deadline - time.monotonic(), 0.01))
                )
                reading = set(pending)
                for message in messages:
                    self._take(message, pending, found)
                if not messages:  # a range may end in a gap (markers): the position says it was passed
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
        schema_ids: Callable[[], Mapping[int, int]] | None = None,
    ) -> None:
        """`schema_ids`: a `rewrite-ids` flow's source -> target schema IDs as its schema sync found them
        (read at each comparison), so that a rewritten ID is not a difference (`as_copied`)."""
        self.flow, self.source, self.target, self.timeout_s = flow, source, target, timeout_s
        self._schema_ids = schema_ids if flow.schemas_sync_mode == SchemaIdMode.REWRITE_IDS else None
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

    def partition_turn(
        self,
        *,
        topic: str,
        partition: int,
        remote_topic: str,
        progress: PartitionProgress,
        replicated_position: int | None,
        ends: PartitionEnds,
        limits: VerificationLimits,
        seed: int,
    ) -> PartitionTurn | PartitionOutcome:
        newest = self.store.newest_sync(topic, partition)
        return partition_turn(
            topic=topic,
            partition=partition,
            remote_topic=remote_topic,
            progress=progress,
            replicated_position=replicated_position,
            newest_sync=None if newest is None else (newest.upstream_offset, newest.downstream_offset),
            oldest_sync_upstream=self.store.oldest_upstream_offset(topic, partition),
            ends=ends,
            limits=limits,
            seed=seed,
        )

    def verify(
        self,
        turns: Sequence[PartitionTurn],
        *,
        limits: VerificationLimits,
        budget: ByteBudget,
        clock: RunClock,
        batch_partitions: int,
    ) -> None:
        """Verify the turns in order, `batch_partitions` at a time: each round reads one range of every
        partition of the batch on one assignment per cluster. A batch or a round starts only while the
        byte budget and the clock allow."""
        for first in range(0, len(turns), batch_partitions):
            batch = turns[first : first + batch_partitions]
            while not budget.exhausted and clock.may_start(time.monotonic()):
                clock.start()
                round_ = self._next_round(batch)
                if not round_:
                    break
                round_ = round_[: budget.admit([offsets for _, offsets, _ in round_])]
                items = [(t.topic, t.partition, t.remote_topic, o, start) for t, o, start in round_]
                for (turn, offsets, _), result in zip(round_, self._verify_round(items, limits), strict=True):
                    if isinstance(result, Exception):
                        log.log(
                            logging.DEBUG if isinstance(result, RangeNotReadable) else logging.WARNING,
                            "%s; verified next run",
                            result,
                        )
                        turn.put_off()
                        continue
                    budget.spend(result.bytes_read, offsets=offsets.end - offsets.start)
                    turn.record(result)
            if budget.exhausted or not clock.may_start(time.monotonic()):
                return

    def _next_round(
        self, batch: Sequence[PartitionTurn]
    ) -> list[tuple[PartitionTurn, OffsetRange, int | None]]:
        """The next range of each turn of the batch still going; a range past either side's readable end
        is put off without a read."""
        round_ = []
        for turn in batch:
            while (step := turn.next_range()) is not None:
                offsets, target_start = step
                end = self.store.translate_downstream(turn.topic, turn.partition, offsets.end)
                if turn.readable(offsets, end):
                    round_.append((turn, offsets, target_start))
                    break
                turn.put_off()
        return round_

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
        (result,) = self._verify_round([(topic, partition, remote_topic, offsets, target_start)], limits)
        if isinstance(result, Exception):
            raise result
        return result

    def _verify_round(
        self, items: Sequence[tuple[str, int, str, OffsetRange, int | None]], limits: VerificationLimits
    ) -> list[RangeVerdict | Exception]:
        """Each (topic, partition, remote topic, range, target start)'s verdict, or why it could not be
        read: the source ranges read together, then their copies, then (rarely) the source records just
        after the ranges whose targets hold unmapped records. One item per partition."""
        sources = self._source.read_ranges({(t, p): (r.start, r.end, None) for t, p, _, r, _ in items})
        spans: dict[Key, tuple[int, int]] = {}  # source key -> the target offsets read
        failed: dict[Key, Exception] = {}
        for topic, partition, _, offsets, target_start in items:
            key = (topic, partition)
            start = self.store.translate_downstream(topic, partition, offsets.start)
            end = self.store.translate_downstream(topic, partition, offsets.end)
            if isinstance(sources[key], Exception):
                failed[key] = sources[key]
            elif start is None or end is None:  # planned within the syncs: only a rewind since can do this
                failed[key] = ValueError(
                    f"{topic}[{partition}] {offsets} no longer translates (offset syncs rewound)"
                )
            else:
                spans[key] = (start if target_start is None else min(start, target_start), end)
        remote = {(t, p): r for t, p, r, _, _ in items}
        targets = self._target.read_ranges(
            {(remote[key], key[1]): (start, end, None) for key, (start, end) in spans.items() if end > start}
        )
        copies: dict[Key, list[MirroredRecord]] = {}
        unmapped: dict[Key, int] = {}
        for key in spans:
            found = targets.get((remote[key], key[1]), [])
            if isinstance(found, Exception):
                failed[key] = found
                continue
            mapped = {self.store.translate_downstream(*key, r.offset) for r in sources[key]}
            copies[key] = found
            unmapped[key] = sum(1 for record in found if record.offset not in mapped)
        ranges = {(t, p): r for t, p, _, r, _ in items}
        lookaheads = (
            self._source.read_ranges(
                {
                    key: (ranges[key].end, ranges[key].end + 10 * limits.range_records, count)
                    for key, count in unmapped.items()
                    if count
                }
            )
            if any(unmapped.values())
            else {}
        )
        results: list[RangeVerdict | Exception] = []
        schema_ids = self._schema_ids() if self._schema_ids is not None else None
        for topic, partition, _, offsets, _ in items:
            key = (topic, partition)
            lookahead = lookaheads.get(key, [])
            if key in failed or isinstance(lookahead, Exception):
                results.append(failed.get(key) or lookahead)
                continue
            results.append(
                compare_range(
                    offsets=offsets,
                    source=sources[key],
                    target=copies[key],
                    translate=lambda offset, key=key: self.store.translate_downstream(*key, offset),
                    lookahead=lookahead,
                    target_end=spans[key][1],
                    schema_ids=schema_ids,
                )
            )
        return results

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
