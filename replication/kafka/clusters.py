"""The Apache Kafka implementation of the control plane's ports (`replication.cluster_ports.Clusters`):
the adapters of this package, each port one of them."""

from __future__ import annotations

from replication.config import ClusterConfig
from replication.kafka.browser import TopicBrowser
from replication.kafka.clients import is_cluster_failure
from replication.kafka.cluster_check import tcp_unreachable
from replication.kafka.groups import GroupOffsetsAdmin


class KafkaClusters:
    """Clusters reached over the Kafka protocol (confluent-kafka's clients)."""

    def topic_reads(self, cluster: ClusterConfig, *, timeout_s: float) -> TopicBrowser:
        return TopicBrowser(cluster, timeout_s=timeout_s)

    def group_admin(self, cluster: ClusterConfig, *, timeout_s: float) -> GroupOffsetsAdmin:
        return GroupOffsetsAdmin(cluster, timeout_s=timeout_s)

    def unreachable(self, cluster: ClusterConfig, *, timeout_s: float) -> str | None:
        return tcp_unreachable(cluster, timeout_s=timeout_s)

    def is_cluster_failure(self, exc: BaseException) -> bool:
        return is_cluster_failure(exc)


KAFKA = KafkaClusters()
