"""The Kafka reads and writes of a failover, batched so a plan for thousands of partitions takes a moment.

One `list_offsets` request per cluster for every partition, one `describe_consumer_groups` for every
group, the `list_consumer_group_offsets` requests of all groups in flight together, the offset-syncs
topic read incrementally, and one probe consumer assigned to every partition at once to find the first
record not yet replicated. `read_plan` turns the observations into a `replication.failover.FailoverPlan`;
`observe_drain` is the same observation reduced to what the drain needs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace

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
from replication.config import ClusterConfig, FlowConfig, OffsetSyncsTopicLocation
from replication.connector import TopicSelection
from replication.filters import GroupFilter
from replication.formats import Checkpoint, Heartbeat, OffsetSync, RecordFormatError
from replication.kafka.clients import kafka_error_code, kafka_error_reason, make_admin, make_consumer
from replication.kafka.cluster_check import check_cluster
from replication.kafka.flow_tasks import offset_syncs_cluster
from replication.kafka.groups import GroupAdminError, GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicReader
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import replication_policy_for

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

REACHABILITY_TIMEOUT_S = 3.0
ARRIVAL_WINDOW_S = 1.0
# Heartbeats of every flow into the target share one topic; the newest of this flow is near its end.
HEARTBEAT_TAIL_RECORDS = 2000


class FailoverReader:
    """Reads both clusters of a flow for a failover plan and a drain; writes the groups' offsets."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float = 10.0,
    ) -> None:
        self.flow, self.source, self.target = flow, source, target
        self.timeout_s = timeout_s
        self.policy = replication_policy_for(flow, known_aliases=known_aliases)
        self.topics = TopicSelection.of(flow, self.policy)
        self.store = OffsetSyncStore()
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

    def replicated_partitions(self) -> dict[TopicPartitionKey, str]:
        """Every source partition the flow replicates -> its remote topic."""
        partitions: dict[TopicPartitionKey, str] = {}
        for topic, count in self.partition_counts(self.source).items():
            decision = self.topics.decide(topic)
            if decision.replicate and not self.policy.is_heartbeats_topic(topic):
                partitions.update({(topic, p): decision.remote_topic for p in range(count)})
        return partitions

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
    def source_groups(self) -> list[str]:
        """The source's consumer groups the flow's groups / groups.exclude select."""
        group_filter = GroupFilter.for_flow(self.flow)
        listed = GroupOffsetsAdmin(self.source, timeout_s=self.timeout_s).list_groups()
        return [group for group in listed if group_filter.should_replicate_group(group)]

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
    def offset_syncs_readable(self, *, source_reachable: bool) -> bool:
        return source_reachable or self.flow.offset_syncs_topic_location == OffsetSyncsTopicLocation.TARGET

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
        consumer = make_consumer(self.target, overrides={"enable.partition.eof": True})
        partition = TopicPartition(self.policy.heartbeats_topic(), 0)
        try:
            low, high = consumer.get_watermark_offsets(partition, timeout=self.timeout_s, cached=False)
            consumer.assign([TopicPartition(partition.topic, 0, max(low, high - HEARTBEAT_TAIL_RECORDS))])
            newest: int | None = None
            deadline = time.monotonic() + self.timeout_s
            while time.monotonic() < deadline:
                messages = consumer.consume(10_000, timeout=0.5)
                for message in messages:
                    if message.error() is not None:
                        if message.error().code() == KafkaError._PARTITION_EOF:
                            return newest
                        continue
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
        consumer = make_consumer(
            self.source,
            overrides={
                "enable.partition.eof": True,
                "isolation.level": "read_committed",
                "auto.offset.reset": "earliest",
                "fetch.wait.max.ms": 10,
                "queued.max.messages.kbytes": 1024,
            },
        )
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
                for message in consumer.consume(10_000, timeout=0.2):
                    key = (message.topic(), message.partition())
                    if key not in pending:
                        continue
                    error = message.error()
                    if error is None:
                        timestamp_type, timestamp = message.timestamp()
                        found[key] = failover.UnreplicatedRecord(
                            message.offset(), timestamp if timestamp_type else None
                        )
                    elif error.code() != KafkaError._PARTITION_EOF:
                        log.warning("flow %s: probing %s[%d]: %s", self.flow.name, *key, error.str())
                    pending.discard(key)
                    settled.append(TopicPartition(*key))
                if settled:
                    consumer.pause(settled)  # its first record is known: fetch no more of it
        finally:
            consumer.close()
        return found, pending

    def close(self) -> None:
        if self._sync_reader is not None:
            self._sync_reader.close()
            self._sync_reader = None


# -- observations -----------------------------------------------------------------------------------------
def _replicated_offset(store: OffsetSyncStore, key: TopicPartitionKey) -> int | None:
    newest = store.newest_sync(*key)
    return None if newest is None else newest.upstream_offset + 1


def observe_partitions(
    reader: FailoverReader,
    *,
    partitions: Mapping[TopicPartitionKey, str],
    source_ends: Mapping[TopicPartitionKey, int],
    target_ends: Mapping[TopicPartitionKey, int] | None = None,
) -> list[failover.PartitionObservation]:
    """Replicated positions (offset syncs read now) and the first record not yet replicated."""
    store = reader.refresh_offset_syncs()
    starts = {key: _replicated_offset(store, key) for key in partitions}
    found, unsettled = reader.first_unreplicated(starts)
    if unsettled:
        log.warning("flow %s: %d partition(s) not probed in time", reader.flow.name, len(unsettled))
    return [
        failover.PartitionObservation(
            topic=key[0],
            partition=key[1],
            remote_topic=remote_topic,
            source_end=source_ends.get(key),
            replicated_offset=starts[key],
            # An unsettled partition is treated as not replicated from its start: never optimistic.
            first_unreplicated=found.get(key)
            or (failover.UnreplicatedRecord(starts[key] or 0, None) if key in unsettled else None),
            target_end=None if target_ends is None else target_ends.get((remote_topic, key[1])),
        )
        for key, remote_topic in sorted(partitions.items())
    ]


def observe_drain(
    reader: FailoverReader,
    *,
    partitions: Mapping[TopicPartitionKey, str],
    ends_at_start: Mapping[TopicPartitionKey, int],
    producers_stopped: bool,
) -> failover.DrainProgress:
    observations = observe_partitions(reader, partitions=partitions, source_ends=ends_at_start)
    return failover.drain_progress(
        observations=observations, ends_at_start=ends_at_start, producers_stopped=producers_stopped
    )


def _target_groups(
    reader: FailoverReader, groups: Sequence[str]
) -> tuple[dict[str, str], dict[str, dict[TopicPartitionKey, CommittedOffset]]]:
    return reader.group_states(reader.target, groups), reader.committed_offsets(reader.target, groups)


def group_plans_from_source(
    reader: FailoverReader, *, groups: Sequence[str], remote_topics: Mapping[str, str]
) -> list[failover.GroupPlan]:
    """Committed offsets read on the source first, then the offset syncs: the syncs then cover every
    record the groups consumed, and translation is exact (`replication.checkpoint`)."""
    committed = reader.committed_offsets(reader.source, groups)
    store = reader.refresh_offset_syncs()
    states, target_committed = _target_groups(reader, groups)
    return [
        failover.group_plan_from_source(
            group=group,
            committed=committed.get(group, {}),
            remote_topics=remote_topics,
            store=store,
            target_state=states.get(group, ABSENT),
            target_committed=target_committed.get(group, {}),
        )
        for group in groups
    ]


def group_plans_from_checkpoints(
    reader: FailoverReader,
    *,
    groups: Sequence[str],
    checkpoints: Mapping[str, Mapping[TopicPartitionKey, Checkpoint]],
) -> list[failover.GroupPlan]:
    """The source does not answer: each group's newest checkpoints (re-translated when the offset
    syncs live on the target)."""
    store = reader.refresh_offset_syncs() if reader.offset_syncs_readable(source_reachable=False) else None
    states, target_committed = _target_groups(reader, groups)
    return [
        failover.group_plan_from_checkpoints(
            group=group,
            checkpoints=checkpoints.get(group, {}),
            source_topics=_source_topics(reader, checkpoints),
            store=store,
            target_state=states.get(group, ABSENT),
            target_committed=target_committed.get(group, {}),
        )
        for group in groups
    ]


def _source_topics(
    reader: FailoverReader, checkpoints: Mapping[str, Mapping[TopicPartitionKey, Checkpoint]]
) -> dict[str, str]:
    """Remote topic -> source topic, for the topics the checkpoints name."""
    return {
        remote_topic: reader.policy.upstream_topic(remote_topic) or remote_topic
        for by_partition in checkpoints.values()
        for remote_topic, _ in by_partition
    }


def read_plan(
    reader: FailoverReader,
    *,
    groups: Sequence[str] | None,
    clock: Callable[[], float] = time.time,
    arrival_window_s: float = ARRIVAL_WINDOW_S,
    last_known_lag: failover.LastKnownLag | None = None,
) -> tuple[failover.FailoverPlan, dict[TopicPartitionKey, str]]:
    """The failover plan of the flow for `groups` (every group the flow selects when None), and the
    replicated partitions (source partition -> remote topic) it covers. `last_known_lag` (what the
    workers last measured, with its age) is used when the source does not answer."""
    started = time.monotonic()
    source_ok, source_detail = reader.reachable(reader.source)
    target_ok, target_detail = reader.reachable(reader.target)
    if not target_ok:
        raise FailoverIOError(f"the target {reader.target.alias} does not answer: {target_detail}")
    target_counts = reader.partition_counts(reader.target)
    notes: tuple[str, ...] = ()
    if source_ok:
        partitions = reader.replicated_partitions()
        first_ends = reader.end_offsets(reader.source, partitions)
        sampled_at = time.monotonic()
        chosen = list(groups) if groups is not None else reader.source_groups()
        remote_topics = {topic: remote_topic for (topic, _), remote_topic in partitions.items()}
        group_plans = group_plans_from_source(reader, groups=chosen, remote_topics=remote_topics)
        remote_ends = reader.end_offsets(reader.target, {(r, p) for (_, p), r in partitions.items()})
        observations = observe_partitions(
            reader, partitions=partitions, source_ends=first_ends, target_ends=remote_ends
        )
        # Records still arriving: the source ends again, `arrival_window_s` after the first sample.
        time.sleep(max(sampled_at + arrival_window_s - time.monotonic(), 0.0))
        later_ends = reader.end_offsets(reader.source, partitions)
        observations = [replace(o, source_end_later=later_ends.get(o.key)) for o in observations]
    else:
        checkpoints = reader.latest_checkpoints(groups)
        chosen = list(groups) if groups is not None else sorted(checkpoints)
        group_plans = group_plans_from_checkpoints(reader, groups=chosen, checkpoints=checkpoints)
        partitions = {
            (row.topic, row.partition): row.remote_topic for plan in group_plans for row in plan.partitions
        }
        known = last_known_lag.records_behind if last_known_lag is not None else {}
        for topic, p in known:
            partitions.setdefault((topic, p), reader.policy.format_remote_topic(reader.flow.source, topic))
        observations = [
            failover.PartitionObservation(
                topic=topic,
                partition=p,
                remote_topic=remote_topic,
                last_known_lag=known.get((topic, p)),
            )
            for (topic, p), remote_topic in sorted(partitions.items())
        ]
        notes = ("the source does not answer: offsets come from the newest checkpoints on the target",)
        if last_known_lag is not None:
            notes += (last_known_lag.note(),)
    missing = sorted({r for (_, p), r in partitions.items() if target_counts.get(r, 0) <= p})
    plan = failover.build_plan(
        flow=reader.flow.name,
        target_alias=reader.target.alias,
        now=clock(),
        source_reachable=source_ok,
        source_detail=source_detail,
        target_reachable=target_ok,
        target_detail=target_detail,
        observations=observations,
        groups=group_plans,
        missing_remote_topics=missing,
        arrival_window_s=arrival_window_s,
        heartbeat_ms=reader.newest_heartbeat_ms(),
        build_seconds=round(time.monotonic() - started, 3),
        notes=notes,
    )
    return plan, partitions
