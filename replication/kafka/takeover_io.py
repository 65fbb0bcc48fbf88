"""The Apache Kafka side of taking a flow over from a stopped MM2 (`replication.takeover_reads` runs the
steps): the Connect offsets, offset-syncs and checkpoints topics read with `InternalTopicReader`, the
partitions' tails with `PartitionReader`, the positions stored with `KafkaPositionStore` (reading them
moves any still under their legacy name, as every reader of positions does: `replication.kafka.positions`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from confluent_kafka import KafkaException

from replication import takeover_reads
from replication.cluster_ports import ClusterCheck, Key
from replication.config import ClusterConfig, FlowConfig
from replication.kafka.admin import TopicAdmin, TopicAdminError
from replication.kafka.cluster_check import check_cluster
from replication.kafka.internal_topics import InternalTopicError, InternalTopicReader
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import PartitionReader, PartitionReadError
from replication.takeover import TakeoverPlan
from replication.task_io import Tail

T = TypeVar("T")
TAKEOVER_TIMEOUT_S = 10.0


class KafkaTakeoverIO:
    """`TakeoverIO` on Apache Kafka, every request bounded by `timeout_s`."""

    client_errors: tuple[type[Exception], ...] = (
        KafkaException,
        TopicAdminError,
        PartitionReadError,
        InternalTopicError,
    )

    def __init__(self, *, timeout_s: float) -> None:
        self.timeout_s = timeout_s

    def check(self, cluster: ClusterConfig) -> ClusterCheck:
        return check_cluster(cluster, timeout_s=self.timeout_s)

    def partition_counts(self, cluster: ClusterConfig) -> dict[str, int]:
        return TopicAdmin(cluster, timeout_s=self.timeout_s).partition_counts()

    def read_topic(
        self,
        cluster: ClusterConfig,
        topic: str,
        *,
        decode: Callable[[bytes, Any], T],
        partition: int = 0,
        tombstones: bool = False,
    ) -> tuple[list[T], int]:
        reader = InternalTopicReader(
            cluster,
            topic,
            decode=decode,
            batch=10_000,
            timeout_s=self.timeout_s,
            partition=partition,
            tombstones=tombstones,
        )
        try:
            return reader.read_new(), reader.skipped_records
        finally:
            reader.close()

    def tails(
        self, cluster: ClusterConfig, keys: Sequence[Key]
    ) -> tuple[dict[Key, Tail], dict[Key, Exception]]:
        reader = PartitionReader(cluster, timeout_s=self.timeout_s)
        try:
            tails, failures = reader.tails(keys)
            return tails, dict(failures)
        finally:
            reader.close()

    def positions(self, target: ClusterConfig, *, source_alias: str) -> KafkaPositionStore:
        return KafkaPositionStore(target, source_alias=source_alias)


def read_takeover_plan(
    flow: FlowConfig, *, timeout_s: float = TAKEOVER_TIMEOUT_S, **kwargs: Any
) -> TakeoverPlan:
    """`takeover_reads.read_takeover_plan` on Apache Kafka."""
    return takeover_reads.read_takeover_plan(KafkaTakeoverIO(timeout_s=timeout_s), flow, **kwargs)


def apply_takeover(
    plan: TakeoverPlan, *, target: ClusterConfig, source_alias: str, timeout_s: float = TAKEOVER_TIMEOUT_S
) -> dict[Key, int]:
    """`takeover_reads.apply_takeover` on Apache Kafka."""
    return takeover_reads.apply_takeover(
        KafkaTakeoverIO(timeout_s=timeout_s), plan, target=target, source_alias=source_alias
    )
