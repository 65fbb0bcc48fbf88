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

from replication.browse import KafkaRecord, PartitionOffsets, record_of
from replication.checkpoint import CommittedOffset
from replication.cluster_ports import (
    BrowseError,
    GroupAdminError,
    GroupNotEmpty,
    Key,
    PartitionSize,
    RecordPage,
    ReplicaSize,
    SizesUnread,
    TopicListing,
    TopicSizes,
    UnknownTopic,
)
from replication.config import ClusterConfig
from replication.consumer_groups import GroupDescription, GroupListing
from replication.memory.task_io import MemoryCluster, MemoryPartition

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

    def delete_group(self, group: str) -> None:
        self._reachable(f"deleting group {group}", GroupAdminError)
        if group in self.memory.groups and self.memory.groups[group].members:
            raise GroupNotEmpty(
                f"cluster {self.cluster.alias}: group {group} has members: Broker: The group is not empty"
            )
        self.memory.groups.pop(group, None)


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

    def group_admin(self, cluster: ClusterConfig, *, timeout_s: float) -> MemoryGroupAdmin:
        return MemoryGroupAdmin(cluster, self.cluster(cluster.bootstrap_servers), timeout_s=timeout_s)

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

    def unreachable(self, cluster: ClusterConfig, *, timeout_s: float) -> str | None:
        return self.cluster(cluster.bootstrap_servers).unreachable

    def is_cluster_failure(self, exc: BaseException) -> bool:
        return not _answered(exc)
