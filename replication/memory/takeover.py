"""Taking a flow over from a stopped MM2 on in-memory clusters (`replication.takeover_reads` runs the
steps): MM2's internal topics read from their records as the Kafka reader reads them (a record that does
not decode is skipped and counted), the partitions' tails from their logs, and Mirrorplane's positions
kept as records of its position topic on the target (`replication.position_records`), as on Kafka.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar

from replication.cluster_ports import BrowseError, ClusterCheck, Key, TopicAdminError
from replication.config import ClusterConfig
from replication.formats import decode_records
from replication.memory.task_io import MemoryCluster, MemoryReader
from replication.position_records import (
    decode_position,
    latest_positions,
    position_key,
    position_value,
    positions_topic,
)
from replication.task_io import PartitionReadError, Tail

T = TypeVar("T")


class _Clusters(Protocol):
    """What of `replication.memory.clusters.MemoryClusters` a takeover uses."""

    def cluster(self, bootstrap_servers: str) -> MemoryCluster: ...

    def check(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterCheck: ...

    def partition_counts(self, cluster: ClusterConfig, *, timeout_s: float) -> dict[str, int]: ...


class MemoryPositionStore:
    """Mirrorplane's positions of one source cluster's flows in its position topic on an in-memory
    target; a target that does not answer fails every call with its reason."""

    def __init__(self, memory: MemoryCluster, *, target: ClusterConfig, source_alias: str) -> None:
        self.memory, self.target, self.topic = memory, target, positions_topic(source_alias)

    def _reachable(self) -> None:
        if self.memory.unreachable is not None:
            raise PartitionReadError(f"cluster {self.target.alias}: {self.topic}: {self.memory.unreachable}")

    def load(self, *, flow: str, partitions: Sequence[Key]) -> dict[Key, int]:
        self._reachable()
        log = self.memory.partitions.get((self.topic, 0))
        stored = latest_positions(
            decode_position(r.key() or b"", r.value()) for r in (log.records if log else [])
        )
        return {key: stored[(flow, *key)] for key in partitions if (flow, *key) in stored}

    def save(self, *, flow: str, positions: Mapping[Key, int]) -> None:
        self._write(flow, {key: position_value(offset) for key, offset in positions.items()})

    def forget(self, *, flow: str, partitions: Sequence[Key]) -> None:
        self._write(flow, dict.fromkeys(partitions))

    def _write(self, flow: str, values: Mapping[Key, bytes | None]) -> None:
        self._reachable()
        self.memory.create(self.topic, 1)
        for (topic, partition), value in values.items():
            self.memory.append(self.topic, 0, key=position_key(flow, topic, partition), value=value)

    def close(self) -> None:
        pass


class MemoryTakeoverIO:
    """`TakeoverIO` on in-memory clusters."""

    client_errors: tuple[type[Exception], ...] = (BrowseError, TopicAdminError, PartitionReadError)

    def __init__(self, clusters: _Clusters, *, timeout_s: float) -> None:
        self._clusters, self.timeout_s = clusters, timeout_s

    def check(self, cluster: ClusterConfig) -> ClusterCheck:
        return self._clusters.check(cluster, timeout_s=self.timeout_s)

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]:
        return self._clusters.partition_counts(cluster, timeout_s=self.timeout_s)

    def read_topic(
        self,
        cluster: ClusterConfig,
        topic: str,
        *,
        decode: Callable[[bytes, Any], T],
        partition: int = 0,
        tombstones: bool = False,
    ) -> tuple[list[T], int]:
        memory = self._clusters.cluster(cluster.bootstrap_servers)
        if memory.unreachable is not None:
            raise BrowseError(f"cluster {cluster.alias}: reading {topic}: {memory.unreachable}")
        log = memory.partitions.get((topic, partition))
        found, malformed = decode_records([] if log is None else log.records, decode, tombstones=tombstones)
        return [value for _, value in found], len(malformed)

    def tails(
        self, cluster: ClusterConfig, keys: Sequence[Key]
    ) -> tuple[dict[Key, Tail], dict[Key, Exception]]:
        tails, failures = MemoryReader(self._clusters.cluster(cluster.bootstrap_servers)).tails(keys)
        return tails, dict(failures)

    def positions(self, target: ClusterConfig, *, source_alias: str) -> MemoryPositionStore:
        memory = self._clusters.cluster(target.bootstrap_servers)
        return MemoryPositionStore(memory, target=target, source_alias=source_alias)
