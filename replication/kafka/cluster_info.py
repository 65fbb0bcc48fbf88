"""What a cluster and one of its topics are, as a person looking at them asks: the cluster id, controller
and brokers (DescribeCluster), the Kafka version where a broker reports one, and a topic's partitions
with their replicas and every config with where its value comes from (Metadata, DescribeConfigs).

Each call is bounded by `timeout_s`. Errors are `BrowseError` naming the cluster and the broker's
reason; a topic the cluster does not have is `UnknownTopic` (the cluster answered).

A topic's size on disk needs DescribeLogDirs, which confluent-kafka does not expose: it is read by
`replication.kafka.log_dirs`. The Kafka version comes from ApiVersions
(`replication.kafka.api_versions`: the release line of the highest `metadata.version` the brokers
support, and the level the cluster is finalized at); where that is not read (over TLS, or a ZooKeeper-mode
broker), from `inter.broker.protocol.version` when a broker before Kafka 4.0 reports it among its configs
(what kafka-ui shows); else the page says why there is none.
"""

from __future__ import annotations

from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

from replication.cluster_ports import Broker, ClusterInfo, PartitionReplicas, TopicConfig, TopicInfo
from replication.kafka.admin import topic_overrides
from replication.kafka.api_versions import VersionUnread, read_kafka_version
from replication.kafka.browser import BrowseError, TopicBrowser

VERSION_CONFIG = "inter.broker.protocol.version"

# ConfigSource values as a page names them.
_SOURCE_LABELS = {
    ConfigSource.DYNAMIC_TOPIC_CONFIG.value: "set on the topic",
    ConfigSource.DYNAMIC_BROKER_CONFIG.value: "broker (dynamic)",
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value: "cluster default (dynamic)",
    ConfigSource.STATIC_BROKER_CONFIG.value: "broker (server.properties)",
    ConfigSource.DEFAULT_CONFIG.value: "Kafka default",
}


class ClusterInspector(TopicBrowser):
    """Describes one cluster and its topics, all its requests within `timeout_s` (as TopicBrowser reads)."""

    def _configs(self, kind: ResourceType, name: str, what: str) -> dict:
        try:
            futures = self._admin.describe_configs(
                [ConfigResource(kind, name)], request_timeout=self.timeout_s
            )
            return next(iter(futures.values())).result()
        except KafkaException as exc:
            raise self._fail(what, exc) from exc

    def _described(self):
        try:
            return self._admin.describe_cluster(request_timeout=self.timeout_s).result()
        except KafkaException as exc:
            raise self._fail("describing the cluster", exc) from exc

    def cluster_id(self) -> str | None:
        """The id the brokers report (one DescribeCluster request)."""
        return self._described().cluster_id

    def describe_cluster(self) -> ClusterInfo:
        described = self._described()
        brokers = tuple(
            sorted(
                (
                    Broker(id=node.id, host=node.host, port=node.port, rack=node.rack)
                    for node in described.nodes
                ),
                key=lambda broker: broker.id,
            )
        )
        version, detail = self._version(brokers)
        controller = described.controller
        return ClusterInfo(
            cluster_id=described.cluster_id,
            controller_id=controller.id if controller is not None else None,
            brokers=brokers,
            kafka_version=version,
            version_detail=detail,
        )

    def _version(self, brokers: tuple[Broker, ...]) -> tuple[str | None, str]:
        try:
            version = read_kafka_version(self.cluster, timeout_s=self.timeout_s)
        except VersionUnread as exc:
            unread = str(exc)
        else:
            if version.release:
                return version.release, (
                    f"metadata.version {version.name(version.finalized_level)} finalized; the brokers support up "
                    f"to {version.name(version.supported_level)} (ApiVersions)"
                )
            unread = (
                "ApiVersions names no metadata.version (a ZooKeeper-mode or non-Apache broker)"
                if version.supported_level is None
                else f"ApiVersions names metadata.version {version.name(version.supported_level)}, unknown here"
            )
        if brokers:
            try:
                entry = self._configs(
                    ConfigResource.Type.BROKER, str(brokers[0].id), f"describing broker {brokers[0].id}"
                ).get(VERSION_CONFIG)
            except BrowseError as exc:  # the version is not worth the page: say why it is missing
                return None, f"not reported: {unread}, and {exc}"
            if entry is not None and entry.value:
                return entry.value, f"{VERSION_CONFIG} of broker {brokers[0].id} ({unread})"
        return None, f"not reported: {unread}, and no broker names {VERSION_CONFIG} (Kafka 4.0 removed it)"

    def describe_topic(self, topic: str) -> TopicInfo:
        described = self.topic_metadata(topic)
        partitions = tuple(
            PartitionReplicas(
                partition=p.id, leader=p.leader, replicas=tuple(p.replicas), in_sync=tuple(p.isrs)
            )
            for p in sorted(described.partitions.values(), key=lambda p: p.id)
        )
        entries = self._configs(ConfigResource.Type.TOPIC, topic, f"describing the configs of topic {topic}")
        configs = tuple(
            TopicConfig(
                name=name,
                value=None if entry.is_sensitive else entry.value,
                source=_SOURCE_LABELS.get(int(getattr(entry.source, "value", entry.source)), "unknown"),
                is_default=bool(entry.is_default),
            )
            for name, entry in sorted(entries.items())
        )
        return TopicInfo(
            name=topic, partitions=partitions, configs=configs, overrides=topic_overrides(entries)
        )
