"""The reads of a failover, a drain, a drill and an offset mapping over a flow's two clusters (the
`replication.cluster_ports.FlowClusters` port): `read_plan` turns the observations into a
`replication.failover.FailoverPlan`; `observe_drain` is the same observation reduced to what the drain
needs; the groups' plans read their committed offsets first, then the offset syncs. `FlowReads` is what
each implementation knows of its flow without asking a cluster (its policy, its topics, the offset syncs
read so far). Pure: the clusters are asked through the port (`replication.kafka.failover_io` on Apache
Kafka, `replication.memory.clusters` in memory).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from replication import failover
from replication.checkpoint import ABSENT, CommittedOffset
from replication.cluster_ports import FailoverIOError, FlowClusters
from replication.config import ClusterConfig, FlowConfig, OffsetSyncsTopicLocation
from replication.connector import TopicSelection
from replication.filters import GroupFilter
from replication.formats import Checkpoint
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import replication_policy_for

log = logging.getLogger(__name__)

TopicPartitionKey = tuple[str, int]

ARRIVAL_WINDOW_S = 1.0
READ_TIMEOUT_S = 10.0  # each request of a flow's reads, unless its caller bounds it (a web request does)


class FlowReads:
    """What a `FlowClusters` knows of its flow without asking a cluster; its reads are the subclass's."""

    def __init__(
        self,
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float | None = None,
    ) -> None:
        self.flow, self.source, self.target = flow, source, target
        self.timeout_s = READ_TIMEOUT_S if timeout_s is None else timeout_s
        self.policy = replication_policy_for(flow, known_aliases=known_aliases)
        self.topics = TopicSelection.of(flow, self.policy)
        self.store = OffsetSyncStore()

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]:
        raise NotImplementedError

    def group_names(self, cluster: ClusterConfig) -> list[str]:
        raise NotImplementedError

    def replicated_partitions(self) -> dict[TopicPartitionKey, str]:
        """Every source partition the flow replicates -> its remote topic."""
        partitions: dict[TopicPartitionKey, str] = {}
        for topic, count in self.partition_counts(self.source).items():
            remote_topic = self.topics.decide(topic).remote_topic  # None: not replicated
            if remote_topic is not None and not self.policy.is_heartbeats_topic(topic):
                partitions.update({(topic, p): remote_topic for p in range(count)})
        return partitions

    def source_groups(self) -> list[str]:
        """The source's consumer groups the flow's groups / groups.exclude select."""
        group_filter = GroupFilter.for_flow(self.flow)
        return [
            group for group in self.group_names(self.source) if group_filter.should_replicate_group(group)
        ]

    def offset_syncs_readable(self, *, source_reachable: bool) -> bool:
        return source_reachable or self.flow.offset_syncs_topic_location == OffsetSyncsTopicLocation.TARGET


# -- observations -----------------------------------------------------------------------------------------
def _replicated_offset(store: OffsetSyncStore, key: TopicPartitionKey) -> int | None:
    newest = store.newest_sync(*key)
    return None if newest is None else newest.upstream_offset + 1


def observe_partitions(
    reader: FlowClusters,
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
    reader: FlowClusters,
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
    reader: FlowClusters, groups: Sequence[str]
) -> tuple[dict[str, str], dict[str, dict[TopicPartitionKey, CommittedOffset]]]:
    return reader.group_states(reader.target, groups), reader.committed_offsets(reader.target, groups)


def group_plans_from_source(
    reader: FlowClusters,
    *,
    groups: Sequence[str],
    remote_topics: Mapping[str, str],
    committed: Mapping[str, Mapping[TopicPartitionKey, CommittedOffset]] | None = None,
) -> list[failover.GroupPlan]:
    """Committed offsets read on the source first (unless given: read earlier), then the offset syncs:
    once the flow stopped, the syncs then cover every record the groups consumed, and translation is
    exact (`replication.checkpoint`)."""
    if committed is None:
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
    reader: FlowClusters,
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
    reader: FlowClusters, checkpoints: Mapping[str, Mapping[TopicPartitionKey, Checkpoint]]
) -> dict[str, str]:
    """Remote topic -> source topic, for the topics the checkpoints name."""
    return {
        remote_topic: reader.policy.upstream_topic(remote_topic) or remote_topic
        for by_partition in checkpoints.values()
        for remote_topic, _ in by_partition
    }


def read_plan(
    reader: FlowClusters,
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
