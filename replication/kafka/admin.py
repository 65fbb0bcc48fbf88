"""Topic and config admin for topic metadata sync: the one adapter over confluent-kafka's AdminClient.

It describes topics as `connector.TopicDescription` (partition count + configs set on the topic) and
applies a `connector.TopicSyncPlan`'s changes. Errors are raised as `TopicAdminError` naming the topic,
the operation and the broker's own message.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
)

from replication.cluster_ports import TopicAdminError
from replication.config import ClusterConfig
from replication.connector import (
    CREATE_RECORDS_PER_REQUEST,
    NewRemoteTopic,
    TopicDescription,
    creation_batches,
)
from replication.kafka.clients import kafka_error_code, kafka_error_reason, make_admin

log = logging.getLogger(__name__)
K = TypeVar("K")

# Apache Kafka describes every topic config (30+ entries) and labels where each value comes from. Some
# Kafka-compatible brokers (tansu) describe only the configs set on the topic and label them
# DEFAULT_CONFIG; a reply this short with no DYNAMIC_TOPIC_CONFIG entry is read as "overrides only".
_FULL_DESCRIPTION_MIN_ENTRIES = 20


# Default request timeout of the admin adapters: short, so a cluster that does not answer holds a
# metadata worker thread seconds, not minutes (workers pass MIRRORPLANE_CLUSTER_TIMEOUT_S).
ADMIN_TIMEOUT_S = 10.0


def _source_of(entry: ConfigEntry) -> int:
    """The entry's ConfigSource value: librdkafka's answers carry an int, a ConfigEntry made here the enum."""
    source = entry.source
    return int(source.value) if isinstance(source, ConfigSource) else int(source)


def topic_overrides(entries: Mapping[str, ConfigEntry]) -> dict[str, str]:
    """The configs set on the topic itself: what the source says explicitly, nothing inherited.

    Broker-wide and default values are left out so config sync never pins the source cluster's
    defaults onto the target (where they would shadow the target's own defaults).
    """
    usable = [
        (name, value, _source_of(entry))
        for name, entry in entries.items()
        if (value := entry.value) is not None and not entry.is_sensitive and not entry.is_read_only
    ]
    dynamic_topic = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
    labels_sources = any(source == dynamic_topic for _, _, source in usable)
    if labels_sources or len(entries) >= _FULL_DESCRIPTION_MIN_ENTRIES:
        return {name: value for name, value, source in usable if source == dynamic_topic}
    return {name: value for name, value, _ in usable}


def _apply(request: Callable[[], Mapping[K, Future[Any]]], *, what: str) -> None:
    """Send an admin request and wait for every result; librdkafka may raise at either step."""
    try:
        for future in request().values():
            future.result()
    except KafkaException as exc:
        raise TopicAdminError(f"{what} failed: {kafka_error_reason(exc)}") from exc


def _error_code(exc: BaseException) -> int | None:
    cause = exc.__cause__ if isinstance(exc, TopicAdminError) else exc
    return None if cause is None else kafka_error_code(cause)


def _config_change_description(
    *, topic: str, alias: str, changes: Mapping[str, str], resets: tuple[str, ...]
) -> str:
    parts = []
    if changes:
        parts.append(f"setting {', '.join(sorted(changes))}")
    if resets:
        parts.append(f"resetting {', '.join(sorted(resets))} to the default")
    return f"{' and '.join(parts) or 'changing nothing'} on topic {topic} of cluster {alias}"


class TopicAdmin:
    """Admin operations on one cluster, with a fixed request timeout."""

    def __init__(self, cluster: ClusterConfig, *, timeout_s: float = ADMIN_TIMEOUT_S) -> None:
        self.cluster = cluster
        self.timeout_s = timeout_s
        self._admin = make_admin(cluster)

    def _metadata(self):
        try:
            return self._admin.list_topics(timeout=self.timeout_s)
        except KafkaException as exc:
            raise TopicAdminError(
                f"cluster {self.cluster.alias} ({self.cluster.bootstrap_servers}) did not answer a "
                f"metadata request within {self.timeout_s:g}s: {kafka_error_reason(exc)}"
            ) from exc

    def partition_counts(self) -> dict[str, int]:
        """Every topic and its partition count (topics being deleted or erroring are left out)."""
        return {
            name: len(topic.partitions)
            for name, topic in self._metadata().topics.items()
            if topic.error is None or topic.error.code() == KafkaError.NO_ERROR
        }

    def broker_count(self) -> int:
        return len(self._metadata().brokers)

    def describe_topics(self, partition_counts: Mapping[str, int]) -> dict[str, TopicDescription]:
        """Descriptions of the given topics, configs being the overrides set on each topic."""
        if not partition_counts:
            return {}
        futures = self._admin.describe_configs(
            [ConfigResource(ConfigResource.Type.TOPIC, name) for name in partition_counts],
            request_timeout=self.timeout_s,
        )
        descriptions: dict[str, TopicDescription] = {}
        for resource, future in futures.items():
            try:
                entries = future.result()
            except KafkaException as exc:
                # A topic deleted since listing: the next refresh will not list it either.
                log.warning(
                    "cluster %s: describing configs of %s failed: %s", self.cluster.alias, resource.name, exc
                )
                continue
            descriptions[resource.name] = TopicDescription(
                name=resource.name,
                partitions=partition_counts[resource.name],
                configs=topic_overrides(entries),
            )
        return descriptions

    def create_topics(
        self, topics: Iterable[NewRemoteTopic], *, records_per_request: int = CREATE_RECORDS_PER_REQUEST
    ) -> dict[str, TopicAdminError | None]:
        """Create each topic, in order, in requests the controller accepts (`connector.creation_batches`);
        an already existing topic (a concurrent creator) counts as created."""
        outcome: dict[str, TopicAdminError | None] = {}
        for batch in creation_batches(topics, records=records_per_request):
            new_topics = [
                NewTopic(topic.name, topic.partitions, topic.replication_factor, config=dict(topic.configs))
                for topic in batch
            ]
            for name, future in self._admin.create_topics(new_topics, request_timeout=self.timeout_s).items():
                try:
                    future.result()
                    outcome[name] = None
                except KafkaException as exc:
                    already_exists = _error_code(exc) == KafkaError.TOPIC_ALREADY_EXISTS
                    outcome[name] = (
                        None
                        if already_exists
                        else TopicAdminError(
                            f"creating topic {name} on cluster {self.cluster.alias} failed: {kafka_error_reason(exc)}"
                        )
                    )
        return outcome

    def set_topic_configs(
        self,
        topic: str,
        changes: Mapping[str, str],
        *,
        current: Mapping[str, str],
        resets: Iterable[str] = (),
    ) -> None:
        """SET `changes` and DELETE the overrides named in `resets` on `topic`, leaving the others in place.

        Uses IncrementalAlterConfigs (a DELETE puts the property back to the broker's default, as MM2's
        incremental config sync does); only a broker without it (Kafka < 2.3) gets the legacy
        AlterConfigs, which replaces the whole set, so it is sent `current` overrides plus `changes`
        minus `resets`.
        """
        resets = tuple(resets)
        operations = [
            ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
            for name, value in changes.items()
        ] + [ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) for name in resets]
        incremental = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=operations)
        what = _config_change_description(
            topic=topic, alias=self.cluster.alias, changes=changes, resets=resets
        )
        try:
            _apply(
                lambda: self._admin.incremental_alter_configs([incremental], request_timeout=self.timeout_s),
                what=what,
            )
            return
        except TopicAdminError as exc:
            if _error_code(exc) != KafkaError._UNSUPPORTED_FEATURE:
                raise
        log.info(
            "cluster %s lacks IncrementalAlterConfigs: using AlterConfigs for %s", self.cluster.alias, topic
        )
        replacement = {name: value for name, value in {**current, **changes}.items() if name not in resets}
        legacy = ConfigResource(ConfigResource.Type.TOPIC, topic, set_config=replacement)
        _apply(lambda: self._admin.alter_configs([legacy], request_timeout=self.timeout_s), what=what)

    def create_partitions(self, topic: str, *, current: int, desired: int) -> None:
        """Grow `topic` to `desired` partitions; TopicAdminError names the counts and the broker's reason."""
        _apply(
            lambda: self._admin.create_partitions(
                [NewPartitions(topic, desired)], request_timeout=self.timeout_s
            ),
            what=f"growing topic {topic} on cluster {self.cluster.alias} from {current} to {desired} partitions",
        )
