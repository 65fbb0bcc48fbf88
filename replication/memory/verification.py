"""A flow's verification on in-memory clusters (`replication.verification_reads` runs it): ranges read
from the partitions' logs (no transaction in memory: every record is readable at once), the offset syncs
from their topic's records, the groups and topics as the clusters hold them (one broker holds every
partition)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from replication.browse import mirrored_record
from replication.cluster_ports import FailoverIOError, GroupAdminError, Key, RangeNotReadable, TopicAdminError
from replication.config import ClusterConfig, FlowConfig, offset_syncs_cluster
from replication.connector import TopicDescription, TopicSelection
from replication.formats import OffsetSync
from replication.memory.internal_topics import read_new
from replication.memory.task_io import MemoryCluster, MemoryGroup
from replication.policy import replication_policy_for
from replication.verification import MirroredRecord, PartitionEnds
from replication.verification_reads import RangeVerifier, ReadRequest, TopicsRead, groups_active, topic_parity


class MemoryRangeReads:
    """`RangeReads` of an in-memory cluster: no transaction in memory, every record is readable at once."""

    def __init__(self, config: ClusterConfig, memory: MemoryCluster) -> None:
        self.cluster, self.memory = config, memory

    def read_ranges(self, requests: Mapping[Key, ReadRequest]) -> dict[Key, list[MirroredRecord] | Exception]:
        found: dict[Key, list[MirroredRecord] | Exception] = {}
        for (topic, partition), (start, end, limit) in requests.items():
            log = self.memory.partitions.get((topic, partition))
            if self.memory.unreachable is not None:
                found[(topic, partition)] = TimeoutError(
                    f"cluster {self.cluster.alias}: reading {topic}[{partition}]: {self.memory.unreachable}"
                )
            elif log is None or (limit is None and log.end < end):
                found[(topic, partition)] = RangeNotReadable(
                    f"cluster {self.cluster.alias}: {topic}[{partition}] is readable up to offset "
                    f"{0 if log is None else log.end} only, before {end}"
                )
            else:
                window = log.records[max(start - log.low, 0) : max(end - log.low, 0)]
                found[(topic, partition)] = [mirrored_record(r) for r in window[:limit]]
        return found

    def close(self) -> None:
        pass


class MemoryFlowVerifier(RangeVerifier):
    """`FlowVerification` on in-memory clusters: the offset syncs read from their topic's records; one
    broker holds every partition."""

    def __init__(
        self,
        clusters: Callable[[str], MemoryCluster],
        *,
        flow: FlowConfig,
        source: ClusterConfig,
        target: ClusterConfig,
        known_aliases: Sequence[str],
        timeout_s: float,
        schema_ids: Callable[[], Mapping[int, int] | None] | None = None,
    ) -> None:
        self._source_memory = clusters(source.bootstrap_servers)
        self._target_memory = clusters(target.bootstrap_servers)
        super().__init__(
            source=MemoryRangeReads(source, self._source_memory),
            target=MemoryRangeReads(target, self._target_memory),
            schema_ids=schema_ids,
        )
        policy = replication_policy_for(flow, known_aliases=known_aliases)
        self._flow, self._source_config, self._target_config = flow, source, target
        self._topics = TopicSelection.of(flow, policy)
        self._syncs_cluster = offset_syncs_cluster(flow, source=source, target=target)
        self._syncs_memory = clusters(self._syncs_cluster.bootstrap_servers)
        self._syncs_topic = policy.flow_offset_syncs_topic(flow)
        self._syncs_position = 0

    def refresh_syncs(self) -> None:
        if self._syncs_memory.unreachable is not None:
            raise FailoverIOError(f"cluster {self._syncs_cluster.alias}: {self._syncs_memory.unreachable}")
        syncs, self._syncs_position = read_new(
            self._syncs_memory, self._syncs_topic, OffsetSync.decode, start=self._syncs_position
        )
        self.store.update_all(syncs)

    def partition_ends(self, partitions: Sequence[tuple[str, int, str]]) -> dict[Key, PartitionEnds]:
        """A cluster that does not answer lists nothing (the Kafka reader leaves out what it could not list)."""
        source, target = self._source_memory, self._target_memory
        ends = {}
        for topic, partition, remote_topic in partitions:
            log = None if source.unreachable else source.partitions.get((topic, partition))
            copy = None if target.unreachable else target.partitions.get((remote_topic, partition))
            if log is not None:
                ends[(topic, partition)] = PartitionEnds(log.low, log.end, None if copy is None else copy.end)
        return ends

    def groups_active_on_target(self) -> list[str]:
        groups = self._reachable_groups(self._target_memory, self._target_config)
        return groups_active(self._flow, sorted(groups), state=lambda group: groups[group].state)

    def topic_parity(self) -> tuple[list[str], list[str]]:
        return topic_parity(
            self._flow,
            self._topics,
            target_alias=self._target_config.alias,
            source=self._topics_read(self._source_memory, self._source_config),
            target=self._topics_read(self._target_memory, self._target_config),
            target_brokers=lambda: 1,
        )

    @staticmethod
    def _reachable_groups(memory: MemoryCluster, config: ClusterConfig) -> dict[str, MemoryGroup]:
        if memory.unreachable is not None:
            raise GroupAdminError(f"cluster {config.alias}: listing consumer groups: {memory.unreachable}")
        return memory.groups

    @staticmethod
    def _topics_read(memory: MemoryCluster, config: ClusterConfig) -> TopicsRead:
        def counts() -> dict[str, int]:
            if memory.unreachable is not None:
                raise TopicAdminError(f"cluster {config.alias}: listing topics: {memory.unreachable}")
            found: dict[str, int] = {}
            for topic, _ in memory.partitions:
                found[topic] = found.get(topic, 0) + 1
            return found

        def describe(partition_counts: Mapping[str, int]) -> dict[str, TopicDescription]:
            return {
                name: TopicDescription(name, count, dict(memory.configs.get(name, {})))
                for name, count in partition_counts.items()
            }

        return TopicsRead(counts, describe)

    def close(self) -> None:
        pass
