"""The Apache Kafka implementation of the control plane's ports (`replication.cluster_ports.Clusters`):
the adapters of this package, each port one of them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from replication.cluster_ports import ClusterCheck, Key, TopicSizes
from replication.config import ClusterConfig, FlowConfig
from replication.kafka.admin import ADMIN_TIMEOUT_S, TopicAdmin
from replication.kafka.browser import TopicBrowser
from replication.kafka.clients import is_cluster_failure
from replication.kafka.cluster_check import ClusterProbe, check_cluster, tcp_unreachable
from replication.kafka.cluster_info import ClusterInspector
from replication.kafka.failover_io import FailoverReader
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.log_dirs import read_topic_sizes
from replication.kafka.takeover_io import apply_takeover, read_takeover_plan
from replication.kafka.verification_io import FlowVerifier
from replication.takeover import TakeoverPlan


class KafkaClusters:
    """Clusters reached over the Kafka protocol (confluent-kafka's clients)."""

    def topic_reads(self, cluster: ClusterConfig, *, timeout_s: float) -> TopicBrowser:
        return TopicBrowser(cluster, timeout_s=timeout_s)

    def cluster_descriptions(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterInspector:
        return ClusterInspector(cluster, timeout_s=timeout_s)

    def partition_counts(self, cluster: ClusterConfig, *, timeout_s: float) -> dict[str, int]:
        return TopicAdmin(cluster, timeout_s=timeout_s).partition_counts()

    def check(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterCheck:
        return check_cluster(cluster, timeout_s=timeout_s)

    def probe(self, cluster: ClusterConfig, *, timeout_s: float) -> ClusterProbe:
        return ClusterProbe(cluster, timeout_s=timeout_s)

    def group_admin(self, cluster: ClusterConfig, *, timeout_s: float | None = None) -> GroupOffsetsAdmin:
        return GroupOffsetsAdmin(cluster, timeout_s=ADMIN_TIMEOUT_S if timeout_s is None else timeout_s)

    def topic_sizes(
        self,
        cluster: ClusterConfig,
        *,
        leaders: Mapping[str, Mapping[int, int]] | None,
        brokers: Iterable[int] | None,
        timeout_s: float,
    ) -> dict[str, TopicSizes]:
        return read_topic_sizes(cluster, leaders=leaders, brokers=brokers, timeout_s=timeout_s)

    def flow_clusters(self, **flow: Any) -> FailoverReader:
        """`Clusters.flow_clusters`' arguments (`FlowReads`')."""
        return FailoverReader(**flow)

    def flow_verifier(self, **flow: Any) -> FlowVerifier:
        """`Clusters.flow_verifier`'s arguments (`FlowVerifier`'s)."""
        return FlowVerifier(**flow)

    def read_takeover_plan(self, flow: FlowConfig, **kwargs: Any) -> TakeoverPlan:
        return read_takeover_plan(flow, **kwargs)

    def apply_takeover(
        self, plan: TakeoverPlan, *, target: ClusterConfig, source_alias: str, timeout_s: float
    ) -> dict[Key, int]:
        return apply_takeover(plan, target=target, source_alias=source_alias, timeout_s=timeout_s)

    def unreachable(self, cluster: ClusterConfig, *, timeout_s: float) -> str | None:
        return tcp_unreachable(cluster, timeout_s=timeout_s)

    def is_cluster_failure(self, exc: BaseException) -> bool:
        return is_cluster_failure(exc)


KAFKA = KafkaClusters()
