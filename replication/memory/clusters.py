"""The in-memory implementation of the control plane's ports (`replication.cluster_ports.Clusters`), on
the clusters of `replication.memory.task_io` (partition logs and consumer groups), one per bootstrap
address: what a test or a demo seeds there, the control plane reads and changes as it would on Kafka.

It answers as the Kafka adapters do where the control plane's rules depend on it: an unknown topic is
`UnknownTopic`, an offset by time past every record is -1, a group with members refuses an offset commit
and its deletion (`GroupNotEmpty`), an unknown group describes as DEAD (Apache Kafka 4's answer). A cluster marked `unreachable`
fails every call with its reason, a cluster failure; a request it refuses is an answer
(`is_cluster_failure` False), as Kafka's error codes decide for the Kafka adapters.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from replication import failover, remote, takeover_reads
from replication.browse import KafkaRecord, PartitionOffsets, mirrored_record, record_of
from replication.checkpoint import CommittedOffset
from replication.cluster_ports import (
    Broker,
    BrowseError,
    ClusterCheck,
    ClusterInfo,
    DrillIOError,
    FailoverIOError,
    FailureKind,
    GroupAdminError,
    GroupNotEmpty,
    Key,
    PartitionReplicas,
    PartitionSize,
    RecordPage,
    ReplicaSize,
    SizesUnread,
    TopicAdminError,
    TopicConfig,
    TopicInfo,
    TopicListing,
    TopicSizes,
    UnknownTopic,
)
from replication.config import ClusterConfig, FlowConfig, offset_syncs_cluster
from replication.consumer_groups import GroupDescription, GroupListing
from replication.failover_reads import FlowReads
from replication.formats import Checkpoint, Heartbeat, OffsetSync, decode_records
from replication.memory.internal_topics import decoded, read_new
from replication.memory.takeover import MemoryTakeoverIO
from replication.memory.task_io import MemoryCluster, MemoryPartition
from replication.memory.verification import MemoryFlowVerifier
from replication.offset_sync_store import OffsetSyncStore
from replication.takeover import TakeoverPlan
from replication.verification import MirroredRecord

T = TypeVar("T")
BROKER = 0  # the id of an in-memory cluster's one broker


class MemoryRefusal(RuntimeError):
    """The in-memory cluster answered a request with an error: the cause of a port's error that is no
    cluster failure (Kafka's error code plays this part)."""


def _answered(exc: BaseException | None) -> bool:
    return exc is not None and (isinstance(exc, MemoryRefusal) or _answered(exc.__cause__))


class _OnCluster:
    def __init__(self, config: ClusterConfig, memory: MemoryCluster, *, timeout_s: float) -> None:
        self.cluster, self.memory, self._timeout_s = config, memory, timeout_s

    @property
    def timeout_s(self) -> float:
        return self._timeout_s

    def _reachable(self, what: str, error: type[Exception]) -> None:
        if self.memory.unreachable is not None:
            raise error(f"cluster {self.cluster.alias}: {what} failed: {self.memory.unreachable}")

    def _log(self, key: Key, what: str) -> MemoryPartition:
        self._reachable(what, BrowseError)
        log = self.memory.partitions.get(key)
        if log is None:
            raise BrowseError(f"cluster {self.cluster.alias}: {what} failed") from MemoryRefusal(
                f"unknown topic or partition {key[0]}[{key[1]}]"
            )
        return log


class MemoryTopicReads(_OnCluster):
    """`TopicReads` on an in-memory cluster."""

    def topics(self) -> list[TopicListing]:
        self._reachable("listing topics", BrowseError)
        counts: dict[str, int] = {}
        for topic, _ in self.memory.partitions:
            counts[topic] = counts.get(topic, 0) + 1
        return [TopicListing(name, counts[name]) for name in sorted(counts)]

    def partition_count(self, topic: str) -> int:
        count = {listing.name: listing.partitions for listing in self.topics()}.get(topic)
        if count is None:
            raise UnknownTopic(f"cluster {self.cluster.alias} has no topic {topic!r}")
        return count

    def earliest_offsets(self, partitions: Iterable[Key]) -> dict[Key, int]:
        return {key: self._log(key, "reading earliest offsets").low for key in partitions}

    def end_offsets(self, partitions: Iterable[Key]) -> dict[Key, int]:
        return {key: self._log(key, "reading end offsets").end for key in partitions}

    def offsets_at(self, partitions: Iterable[Key], timestamp_ms: int) -> dict[Key, int]:
        found = {}
        for key in partitions:
            log = self._log(key, "reading offsets by time")
            later = (r.offset() for r in log.records if r.timestamp()[1] >= timestamp_ms)
            found[key] = next(later, -1)
        return found

    def partition_offsets(self, topic: str) -> list[PartitionOffsets]:
        logs = [self._log((topic, p), "reading offsets") for p in range(self.partition_count(topic))]
        return [PartitionOffsets(p, log.low, log.end) for p, log in enumerate(logs)]

    def read(
        self, topic: str, partition: int, *, start: int, max_records: int, stop_before: int | None = None
    ) -> RecordPage:
        key = (topic, partition)
        stops = None if stop_before is None else {key: stop_before}
        return self.read_many({key: start}, max_records=max_records, stop_before=stops)[key]

    def read_many(
        self,
        starts: Mapping[Key, int],
        *,
        max_records: int,
        stop_before: Mapping[Key, int] | None = None,
        keep: Callable[[KafkaRecord], bool] | None = None,
        max_kept: int | None = None,
    ) -> dict[Key, RecordPage]:
        """Partition after partition, in the order of `starts` (Kafka interleaves them): once `max_kept`
        records are kept, the partition being read and the ones after it are incomplete."""
        pages, kept = {}, 0
        for key, start in starts.items():
            log = self._log(key, f"reading {key[0]}[{key[1]}]")
            first = max(start, log.low)
            stop = min((stop_before or {}).get(key, log.end), log.end)
            window = log.records[first - log.low : max(stop - log.low, 0)][: max(max_records, 0)]
            shown: list[KafkaRecord] = []
            scanned = 0
            for stored in window:
                if max_kept is not None and kept >= max_kept:
                    break
                scanned += 1
                record = record_of(stored)
                if keep is None or keep(record):
                    shown.append(record)
                    kept += 1
            # Done at its end, `stop_before` or `max_records`; stopped by `max_kept` before those, it is
            # not (Kafka's reader has not seen the partition's end either).
            cut = max_kept is not None and kept >= max_kept and scanned < max_records
            complete = scanned == len(window) and not cut
            pages[key] = RecordPage(shown, complete, scanned, first + scanned if scanned else None)
        return pages


class MemoryClusterDescriptions(MemoryTopicReads):
    """`ClusterDescriptions` of an in-memory cluster: one broker (BROKER) leads every partition; a topic's
    configs are those `MemoryCluster.configs` sets on it."""

    def cluster_id(self) -> str | None:
        self._reachable("describing the cluster", BrowseError)
        return f"memory-{self.cluster.bootstrap_servers}"

    def describe_cluster(self) -> ClusterInfo:
        host, _, port = self.cluster.bootstrap_servers.partition(",")[0].rpartition(":")
        broker = Broker(id=BROKER, host=host, port=int(port or 0), rack=None)
        return ClusterInfo(self.cluster_id(), BROKER, (broker,), None, "not reported: an in-memory cluster")

    def describe_topic(self, topic: str) -> TopicInfo:
        count = self.partition_count(topic)
        overrides = dict(self.memory.configs.get(topic, {}))
        return TopicInfo(
            name=topic,
            partitions=tuple(PartitionReplicas(p, BROKER, (BROKER,), (BROKER,)) for p in range(count)),
            configs=tuple(
                TopicConfig(name, value, "topic", False) for name, value in sorted(overrides.items())
            ),
            overrides=overrides,
        )


class MemoryGroupAdmin(_OnCluster):
    """`GroupAdmin` on an in-memory cluster."""

    def list_groups(self) -> list[str]:
        return [listing.group for listing in self.list_group_states()]

    def list_group_states(self) -> list[GroupListing]:
        self._reachable("listing consumer groups", GroupAdminError)
        groups = self.memory.groups
        return [GroupListing(name, groups[name].state, groups[name].simple) for name in sorted(groups)]

    def describe(self, groups: Sequence[str]) -> dict[str, GroupDescription]:
        self._reachable("describing consumer groups", GroupAdminError)
        described = {}
        for name in groups:
            group = self.memory.groups.get(name)
            described[name] = (
                GroupDescription(name, "DEAD", ())
                if group is None
                else GroupDescription(name, group.state, group.members, "" if group.simple else "range")
            )
        return described

    def committed_offsets(self, group: str) -> dict[Key, CommittedOffset]:
        return self.committed_offsets_of([group])[group]

    def committed_offsets_of(self, groups: Sequence[str]) -> dict[str, dict[Key, CommittedOffset]]:
        self._reachable("reading committed offsets", GroupAdminError)
        return {name: dict(g.committed) if (g := self.memory.groups.get(name)) else {} for name in groups}

    def alter_offsets(self, group: str, offsets: Mapping[Key, int]) -> dict[Key, str]:
        if self.memory.unreachable is not None:
            return dict.fromkeys(offsets, self.memory.unreachable)
        members = group in self.memory.groups and self.memory.groups[group].members
        refused = {
            key: "Broker: Unknown member" if members else "Broker: Unknown topic or partition"
            for key in offsets
            if members or key not in self.memory.partitions
        }
        self.memory.commit(group, {key: offset for key, offset in offsets.items() if key not in refused})
        return refused

    def newest_checkpoints(
        self, topic: str, *, group: str
    ) -> tuple[dict[Key, tuple[Checkpoint, int | None]], bool]:
        self._reachable(f"reading checkpoints topic {topic}", GroupAdminError)
        log = self.memory.partitions.get((topic, 0))
        newest: dict[Key, tuple[Checkpoint, int | None]] = {}
        found, _ = decode_records([] if log is None else log.records, Checkpoint.decode)
        for record, checkpoint in found:
            if checkpoint.group == group:
                kind, stamp = record.timestamp()
                newest[(checkpoint.topic, checkpoint.partition)] = (checkpoint, stamp if kind else None)
        return newest, True

    def delete_group(self, group: str) -> None:
        self._reachable(f"deleting group {group}", GroupAdminError)
        if group in self.memory.groups and self.memory.groups[group].members:
            raise GroupNotEmpty(
                f"cluster {self.cluster.alias}: group {group} has members: Broker: The group is not empty"
            )
        self.memory.groups.pop(group, None)


class MemoryFlowClusters(FlowReads):
    """`FlowClusters` on in-memory clusters: MM2's internal topics (offset syncs, checkpoints, heartbeats)
    are read from their records, as the Kafka reader reads them."""

    def __init__(self, clusters: MemoryClusters, **flow: Any) -> None:
        super().__init__(**flow)
        self._clusters = clusters
        self._syncs_position: int | None = None  # None: not read yet

    def _memory(self, cluster: ClusterConfig) -> MemoryCluster:
        memory = self._clusters.cluster(cluster.bootstrap_servers)
        if memory.unreachable is not None:
            raise FailoverIOError(f"cluster {cluster.alias}: {memory.unreachable}")
        return memory

    def _groups(self, cluster: ClusterConfig) -> MemoryGroupAdmin:
        return self._clusters.group_admin(cluster, timeout_s=self.timeout_s)

    def reachable(self, cluster: ClusterConfig) -> tuple[bool, str]:
        reason = self._clusters.cluster(cluster.bootstrap_servers).unreachable
        return reason is None, reason or "1 broker(s), in memory"

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]:
        counts: dict[str, int] = {}
        for topic, _ in self._memory(cluster).partitions:
            counts[topic] = counts.get(topic, 0) + 1
        return counts

    def group_names(self, cluster: ClusterConfig) -> list[str]:
        return sorted(self._memory(cluster).groups)

    def end_offsets(self, cluster: ClusterConfig, partitions: Iterable[Key]) -> dict[Key, int]:
        logs = self._memory(cluster).partitions
        return {key: logs[key].end for key in partitions if key in logs}

    def committed_offsets(
        self, cluster: ClusterConfig, groups: Sequence[str]
    ) -> dict[str, dict[Key, CommittedOffset]]:
        try:
            return self._groups(cluster).committed_offsets_of(groups)
        except GroupAdminError as exc:
            raise FailoverIOError(str(exc)) from exc

    def group_states(self, cluster: ClusterConfig, groups: Sequence[str]) -> dict[str, str]:
        self._memory(cluster)
        return {group: described.state for group, described in self._groups(cluster).describe(groups).items()}

    def alter_offsets(self, cluster: ClusterConfig, group: str, offsets: Mapping[Key, int]) -> dict[Key, str]:
        return self._groups(cluster).alter_offsets(group, offsets)

    def refresh_offset_syncs(self) -> OffsetSyncStore:
        memory = self._memory(offset_syncs_cluster(self.flow, source=self.source, target=self.target))
        topic = self.policy.flow_offset_syncs_topic(self.flow)
        syncs, self._syncs_position = read_new(
            memory, topic, OffsetSync.decode, start=self._syncs_position or 0
        )
        self.store.update_all(syncs)
        return self.store

    @property
    def offset_syncs_complete(self) -> bool:
        return self._syncs_position is not None

    def latest_checkpoints(self, groups: Sequence[str] | None) -> dict[str, dict[Key, Checkpoint]]:
        topic = self.policy.checkpoints_topic(self.flow.source)
        checkpoints = decoded(self._memory(self.target), topic, Checkpoint.decode)
        names = sorted({cp.group for cp in checkpoints}) if groups is None else groups
        return {group: remote.latest_checkpoints(checkpoints, group=group) for group in names}

    def newest_heartbeat_ms(self) -> int | None:
        memory = self._clusters.cluster(self.target.bootstrap_servers)
        ours = [
            heartbeat.timestamp_ms
            for heartbeat in decoded(memory, self.policy.heartbeats_topic(), Heartbeat.decode)
            if (heartbeat.source_cluster_alias, heartbeat.target_cluster_alias)
            == (self.flow.source, self.flow.target)
        ]
        return max(ours, default=None)

    def first_unreplicated(
        self, starts: Mapping[Key, int | None]
    ) -> tuple[dict[Key, failover.UnreplicatedRecord], set[Key]]:
        """No transaction in memory: every record is committed."""
        memory = self._clusters.cluster(self.source.bootstrap_servers)
        if memory.unreachable is not None:
            return {}, set(starts)
        found, unsettled = {}, set()
        for key, start in starts.items():
            log = memory.partitions.get(key)
            if log is None:
                unsettled.add(key)
                continue
            first = log.low if start is None else max(start, log.low)
            if first < log.end:
                kind, stamp = log.records[first - log.low].timestamp()
                found[key] = failover.UnreplicatedRecord(first, stamp if kind else None)
        return found, unsettled

    def next_records(
        self,
        cluster: ClusterConfig,
        *,
        starts: Mapping[Key, int] | None = None,
        group: str | None = None,
        partitions: list[Key] | None = None,
        wait_for: AbstractSet[Key] = frozenset(),
        timeout_s: float | None = None,
        tick: Callable[[], None] = lambda: None,
    ) -> dict[Key, MirroredRecord | None]:
        """No record arrives while it reads: a partition of `wait_for` at its end is None at once."""
        memory = self._memory(cluster)
        if group is not None:
            committed = self._groups(cluster).committed_offsets(group)
            starts = {key: c.offset for key, c in committed.items() if key in set(partitions or [])}
        found: dict[Key, MirroredRecord | None] = {}
        for key, start in (starts or {}).items():
            tick()
            log = memory.partitions.get(key)
            if log is None:
                raise DrillIOError(f"cluster {cluster.alias}: {key[0]}[{key[1]}] does not exist")
            first = max(start, log.low)
            found[key] = mirrored_record(log.records[first - log.low]) if first < log.end else None
        return found

    def close(self) -> None:
        pass


class MemoryClusterProbe:
    """`ClusterProbe` of an in-memory cluster: `MemoryClusters.check` each time."""

    def __init__(self, clusters: MemoryClusters, cluster: ClusterConfig, *, timeout_s: float) -> None:
        self._clusters, self._cluster, self._timeout_s = clusters, cluster, timeout_s

    def check(self) -> ClusterCheck:
        return self._clusters.check(self._cluster, timeout_s=self._timeout_s)


class MemoryClusters:
    """`Clusters` held in this process, one `MemoryCluster` per bootstrap address (made when first named)."""

    def __init__(self) -> None:
        self._clusters: dict[str, MemoryCluster] = {}

    def cluster(self, bootstrap_servers: str) -> MemoryCluster:
        return self._clusters.setdefault(bootstrap_servers, MemoryCluster())

    def clear(self) -> None:
        """Forget every cluster (a test's clean start)."""
        self._clusters.clear()

    def topic_reads(self, cluster: ClusterConfig, *, timeout_s: float) -> MemoryTopicReads:
        return MemoryTopicReads(cluster, self.cluster(cluster.bootstrap_servers), timeout_s=timeout_s)

    def cluster_descriptions(self, cluster: ClusterConfig, *, timeout_s: float) -> MemoryClusterDescriptions:
        return MemoryClusterDescriptions(
            cluster, self.cluster(cluster.bootstrap_servers), timeout_s=timeout_s
        )

    def partition_counts(self, cluster: ClusterConfig, *, timeout_s: float) -> dict[str, int]:
        try:
            return {t.name: t.partitions for t in self.topic_reads(cluster, timeout_s=timeout_s).topics()}
        except BrowseError as exc:
            raise TopicAdminError(str(exc)) from exc

    def check(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterCheck:
        reason = self.cluster(cluster.bootstrap_servers).unreachable
        if reason is not None:
            return ClusterCheck(ok=False, failure=FailureKind.REFUSED, message=reason)
        topics = len(self.topic_reads(cluster, timeout_s=timeout_s).topics())
        return ClusterCheck(True, 1, topics, 0.0, message=f"1 broker(s), {topics} topic(s)")

    def probe(self, cluster: ClusterConfig, *, timeout_s: float) -> MemoryClusterProbe:
        return MemoryClusterProbe(self, cluster, timeout_s=timeout_s)

    def group_admin(self, cluster: ClusterConfig, *, timeout_s: float | None = None) -> MemoryGroupAdmin:
        memory = self.cluster(cluster.bootstrap_servers)
        return MemoryGroupAdmin(cluster, memory, timeout_s=10.0 if timeout_s is None else timeout_s)

    def topic_sizes(
        self,
        cluster: ClusterConfig,
        *,
        leaders: Mapping[str, Mapping[int, int]] | None,
        brokers: Iterable[int] | None,
        timeout_s: float,
    ) -> dict[str, TopicSizes]:
        """One broker (BROKER) holds every partition; a log's size is its records' key and value bytes."""
        memory = self.cluster(cluster.bootstrap_servers)
        if memory.unreachable is not None:
            raise SizesUnread(f"cluster {cluster.alias} did not answer: {memory.unreachable}")
        topics = sorted(leaders or {t for t, _ in memory.partitions})
        asked = brokers is None or BROKER in brokers
        return {
            topic: TopicSizes(
                topic,
                tuple(
                    PartitionSize(
                        p,
                        (leaders or {}).get(topic, {}).get(p, -1),
                        (ReplicaSize(BROKER, log.size_bytes, 0),) if asked else (),
                    )
                    for (t, p), log in sorted(memory.partitions.items())
                    if t == topic
                ),
            )
            for topic in topics
        }

    def flow_clusters(self, **flow: Any) -> MemoryFlowClusters:
        """`Clusters.flow_clusters`' arguments (`FlowReads`')."""
        return MemoryFlowClusters(self, **flow)

    def flow_verifier(self, **flow: Any) -> MemoryFlowVerifier:
        """`Clusters.flow_verifier`'s arguments."""
        return MemoryFlowVerifier(self.cluster, **flow)

    def read_takeover_plan(self, flow: FlowConfig, *, timeout_s: float, **kwargs: Any) -> TakeoverPlan:
        return takeover_reads.read_takeover_plan(MemoryTakeoverIO(self, timeout_s=timeout_s), flow, **kwargs)

    def apply_takeover(
        self, plan: TakeoverPlan, *, target: ClusterConfig, source_alias: str, timeout_s: float
    ) -> dict[Key, int]:
        io = MemoryTakeoverIO(self, timeout_s=timeout_s)
        return takeover_reads.apply_takeover(io, plan, target=target, source_alias=source_alias)

    def unreachable(self, cluster: ClusterConfig, *, timeout_s: float) -> str | None:
        return self.cluster(cluster.bootstrap_servers).unreachable

    def is_cluster_failure(self, exc: BaseException) -> bool:
        return not _answered(exc)
