"""Consumer groups on every cluster: the list with states and members, one group's offsets and lag per
partition, what the flows that checkpoint it know (translated offset on the target, the checkpoint's
age, what a failover would write). The group's writes (offset reset, deletion) are in
`controlplane.browse.group_changes`.

Reads go through `cluster_reads.cluster_read` (bounded by the cluster timeout, refused at once while the
cluster does not answer). Listing is one ListGroups request, one batched DescribeGroups, the groups'
OffsetFetch requests in flight together and one ListOffsets per cluster (measured on the embedded
broker with 1,000 groups: 2 ms, ~200 ms, 0.4-1.2 s on a loaded machine), so it runs inside the request;
states, members and lag stop at GROUP_DESCRIBE_MAX groups a cluster.
"""

from __future__ import annotations

import datetime
import functools
from dataclasses import dataclass, field, replace

from django.utils import timezone

from controlplane.core.errors import ClusterUnavailable, ServiceValidationError
from controlplane.flows import engine, selectors
from controlplane.flows.cluster_reads import cluster_read, clusters_read, timed
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow
from controlplane.status import rollup
from replication import failover_reads
from replication.config import ClusterConfig
from replication.consumer_groups import (
    GroupDescription,
    lag,
)
from replication.failover import GroupPlan
from replication.filters import GroupFilter

GROUP_DESCRIBE_MAX = 1000
TopicPartition = tuple[str, int]


# -- the list ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupRow:
    group: str
    state: str
    members: int | None  # None: not described (more than GROUP_DESCRIBE_MAX groups)
    lag: int | None = None  # records behind, summed over its committed partitions (None: unknown)
    partitions: int | None = None  # partitions it has committed offsets for
    flows: tuple[Flow, ...] = ()  # flows that checkpoint the group (this cluster is their source)


@dataclass
class ClusterGroups:
    cluster: Cluster
    groups: list[GroupRow] = field(default_factory=list)
    problem: str = ""
    read_at: datetime.datetime | None = None
    read_ms: float | None = None
    described_all: bool = True


def _checkpointing_flows(cluster: Cluster) -> list[tuple[Flow, GroupFilter]]:
    flows = selectors.flow_list().filter(source=cluster, emit_checkpoints_enabled=True)
    return [(flow, GroupFilter.for_flow(engine.flow_to_config(flow))) for flow in flows]


def _list_groups(config: ClusterConfig, timeout_s: float) -> tuple[list[GroupRow], bool]:
    """One ListGroups, then for the first GROUP_DESCRIBE_MAX groups one DescribeGroups, their
    OffsetFetch requests together and one ListOffsets for every partition they committed."""
    admin = clusters().group_admin(config, timeout_s=timeout_s)
    listing = admin.list_group_states()
    shown = [g.group for g in listing[:GROUP_DESCRIBE_MAX]]
    described = admin.describe(shown)
    committed = admin.committed_offsets_of(shown)
    partitions = {key for offsets in committed.values() for key in offsets}
    ends = clusters().topic_reads(config, timeout_s=timeout_s).end_offsets(partitions) if partitions else {}
    rows = []
    for item in listing:
        description = described.get(item.group)
        offsets = committed.get(item.group)
        rows.append(
            GroupRow(
                group=item.group,
                state=description.state if description is not None else item.state,
                members=len(description.members) if description is not None else None,
                lag=None if offsets is None else _total_lag(offsets, ends),
                partitions=None if offsets is None else len(offsets),
            )
        )
    return rows, len(listing) <= GROUP_DESCRIBE_MAX


def _total_lag(offsets, ends) -> int | None:
    known = [value for key, c in offsets.items() if (value := lag(c.offset, ends.get(key))) is not None]
    return sum(known) if known else None


def group_list(*, clusters: list[Cluster] | None = None) -> list[ClusterGroups]:
    """Every group of every cluster; a cluster that does not answer has its `problem` and no groups."""
    result = []
    for cluster in clusters if clusters is not None else selectors.cluster_list().order_by("alias"):
        entry = ClusterGroups(cluster)
        try:
            (rows, entry.described_all), entry.read_at, entry.read_ms = timed(
                functools.partial(cluster_read, cluster, _list_groups)
            )
        except ClusterUnavailable as exc:
            entry.problem = str(exc)
            result.append(entry)
            continue
        flows = _checkpointing_flows(cluster)
        entry.groups = [
            replace(
                row, flows=tuple(flow for flow, groups in flows if groups.should_replicate_group(row.group))
            )
            for row in rows
        ]
        result.append(entry)
    return result


# -- one group --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupPartition:
    topic: str
    partition: int
    committed: int | None
    end: int | None
    lag: int | None
    consumer: str = ""  # client id of the member it is assigned to


@dataclass(frozen=True)
class CheckpointRow:
    """One partition as a flow that checkpoints the group sees it."""

    topic: str
    partition: int
    remote_topic: str
    source_offset: int | None  # committed on the source
    translated_offset: int | None  # where the group resumes on the target (exact; None: unprovable)
    target_offset: int | None  # committed on the target now
    checkpoint_offset: int | None  # the newest checkpoint's downstream offset
    checkpoint_age_s: float | None
    checkpoint_stale: bool  # older than checkpoint_stale_after_s: the flow stopped checkpointing it
    write: bool  # a failover writes translated_offset
    note: str


@dataclass
class FlowCheckpoints:
    flow: Flow
    rows: list[CheckpointRow] = field(default_factory=list)
    target_state: str = ""
    checkpoints_complete: bool = True
    offset_syncs_complete: bool = True
    problem: str = ""

    @property
    def writes(self) -> int:
        return sum(1 for row in self.rows if row.write)


@dataclass
class GroupDetail:
    cluster: Cluster
    group: str
    description: GroupDescription
    partitions: list[GroupPartition]
    flows: list[FlowCheckpoints]
    read_at: datetime.datetime
    read_ms: float
    reset_flows: list[Flow]  # flows into this cluster: the group's offsets can be reset to the translation

    @property
    def total_lag(self) -> int | None:
        known = [p.lag for p in self.partitions if p.lag is not None]
        return sum(known) if known else None


def _group_state(config: ClusterConfig, timeout_s: float, group: str):
    admin = clusters().group_admin(config, timeout_s=timeout_s)
    description = admin.describe([group])[group]
    committed = {key: c.offset for key, c in admin.committed_offsets(group).items()}
    ends = clusters().topic_reads(config, timeout_s=timeout_s).end_offsets(committed) if committed else {}
    return description, committed, ends


def _flows_checkpointing(group: str, **where) -> list[Flow]:
    """The flows (filtered by `where`) that emit checkpoints for `group`."""
    flows = selectors.flow_list().filter(emit_checkpoints_enabled=True, **where)
    return [f for f in flows if GroupFilter.for_flow(engine.flow_to_config(f)).should_replicate_group(group)]


@dataclass(frozen=True)
class _FlowRead:
    plan: GroupPlan  # the failover plan's rows for the group
    checkpoints_topic: str
    offset_syncs_complete: bool


def _group_plan(flow: Flow, group: str, timeout_s: float) -> _FlowRead:
    reader = engine.flow_reader(flow, timeout_s=timeout_s)
    try:
        remote_topics = {topic: remote for (topic, _), remote in reader.replicated_partitions().items()}
        (plan,) = failover_reads.group_plans_from_source(reader, groups=[group], remote_topics=remote_topics)
        return _FlowRead(
            plan, reader.policy.checkpoints_topic(flow.source.alias), reader.offset_syncs_complete
        )
    finally:
        reader.close()


def checkpoint_stale_after_s(flow: Flow) -> float:
    """A checkpoint is emitted every emit.checkpoints.interval.seconds while the group's offsets move;
    older than three intervals plus the live figures' staleness bound, its age is shown as STALE. (A
    group that stopped committing is not checkpointed again either: STALE says so, it is no error.)"""
    return 3 * flow.emit_checkpoints_interval_seconds + rollup.stale_after_s()


def flow_checkpoints(*, flow: Flow, group: str) -> FlowCheckpoints:
    """What `flow` knows of `group`: the exact translation of its source offsets, its newest checkpoints
    on the target with their age, and what a failover would write."""
    entry = FlowCheckpoints(flow)

    def read(configs: list[ClusterConfig], timeout_s: float):
        flow_read = _group_plan(flow, group, timeout_s)
        topic = flow_read.checkpoints_topic
        admin = clusters().group_admin(configs[0], timeout_s=timeout_s)
        checkpoints, complete = admin.newest_checkpoints(topic, group=group)
        return flow_read, checkpoints, complete

    try:
        flow_read, checkpoints, entry.checkpoints_complete = clusters_read([flow.target, flow.source], read)
    except ClusterUnavailable as exc:
        entry.problem = str(exc)
        return entry
    now_ms = timezone.now().timestamp() * 1000
    stale_after_s = checkpoint_stale_after_s(flow)
    plan = flow_read.plan
    entry.target_state = plan.target_state
    entry.offset_syncs_complete = flow_read.offset_syncs_complete
    for row in plan.partitions:
        checkpoint, written_ms = checkpoints.get((row.remote_topic, row.partition), (None, None))
        age_s = None if written_ms is None else max((now_ms - written_ms) / 1000, 0.0)
        entry.rows.append(
            CheckpointRow(
                topic=row.topic,
                partition=row.partition,
                remote_topic=row.remote_topic,
                source_offset=row.source_offset,
                translated_offset=row.translated_offset,
                target_offset=row.target_offset,
                checkpoint_offset=None if checkpoint is None else checkpoint.downstream_offset,
                checkpoint_age_s=age_s,
                checkpoint_stale=age_s is not None and age_s > stale_after_s,
                write=row.write,
                note=row.note,
            )
        )
    return entry


def group_detail(*, cluster: Cluster, group: str) -> GroupDetail:
    if not group:
        raise ServiceValidationError.single("group", "give a consumer group name")
    (description, committed, ends), read_at, read_ms = timed(
        lambda: cluster_read(cluster, lambda config, timeout_s: _group_state(config, timeout_s, group))
    )
    assigned = {
        key: member.client_id or member.member_id
        for member in description.members
        for key in member.assignment
    }
    partitions = [
        GroupPartition(
            topic=topic,
            partition=partition,
            committed=offset,
            end=ends.get((topic, partition)),
            lag=lag(offset, ends.get((topic, partition))),
            consumer=assigned.get((topic, partition), ""),
        )
        for (topic, partition), offset in sorted(committed.items())
    ]
    return GroupDetail(
        cluster=cluster,
        group=group,
        description=description,
        partitions=partitions,
        flows=[
            flow_checkpoints(flow=flow, group=group) for flow in _flows_checkpointing(group, source=cluster)
        ],
        read_at=read_at,
        read_ms=read_ms,
        reset_flows=_flows_checkpointing(group, target=cluster),
    )
