"""A topic's details (partitions and their replicas, replication factor, retention, size on disk, every
config and where it comes from) and, for each flow that copies it or wrote it, what config sync will change on the copy;
and a cluster's id, controller, brokers and Kafka version.

Selectors only. Each Kafka read goes through `cluster_reads.cluster_read` (bounded, refused at once while
the cluster does not answer) and carries the moment it was made. The config diff is
`replication.connector.config_sync_preview`: the topic sync's own rule (`plan_topic_sync`,
`config.properties.exclude`), not a copy of it. A copy's other cluster that does not answer costs only
that diff (its `problem`), never the page.

The size on disk (every replica's log and the leaders', per partition, `controlplane.browse.topic_sizes`)
is a read of its own after the description, with its own moment, bounded as the others; a broker that
refuses it (no DESCRIBE on the cluster resource, the embedded broker) or does not answer costs only the
size (`SizesOnDisk.unknown` says why), never the page.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from controlplane.browse.records import Mirror, mirrors_by_topic
from controlplane.browse.seek import topic_name_error
from controlplane.browse.topic_sizes import SizesOnDisk, sizes_on_disk
from controlplane.core.errors import ClusterUnavailable, ServiceValidationError
from controlplane.flows import engine
from controlplane.flows.cluster_reads import cluster_read, timed
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster
from replication.cluster_ports import (
    ClusterInfo,
    PartitionReplicas,
    PartitionSize,
    TopicInfo,
    TopicSizes,
    UnknownTopic,
)
from replication.connector import ConfigSyncRow, TopicDescription, config_sync_preview
from replication.filters import ConfigPropertyFilter


@dataclass(frozen=True)
class ClusterDetails:
    cluster: Cluster
    info: ClusterInfo
    read_at: datetime.datetime
    read_ms: float


def cluster_details(*, cluster: Cluster) -> ClusterDetails:
    info, read_at, read_ms = timed(
        lambda: cluster_read(
            cluster,
            lambda config, timeout_s: (
                clusters().cluster_descriptions(config, timeout_s=timeout_s).describe_cluster()
            ),
        )
    )
    return ClusterDetails(cluster, info, read_at, read_ms)


@dataclass(frozen=True)
class ConfigSync:
    """What the config sync of `mirror.flow` does to the copy of `mirror.source_topic`."""

    mirror: Mirror
    enabled: bool  # sync.topic.configs.enabled
    rows: tuple[ConfigSyncRow, ...]  # empty when `problem` says why
    target_exists: bool
    read_at: datetime.datetime | None  # when the other side was read
    problem: str | None = None

    @property
    def changes(self) -> int:
        return sum(1 for row in self.rows if row.action in ("set", "set at creation"))


@dataclass(frozen=True)
class TopicDetails:
    cluster: Cluster
    info: TopicInfo
    read_at: datetime.datetime
    read_ms: float
    config_syncs: tuple[ConfigSync, ...]
    size: SizesOnDisk

    @property
    def sizes(self) -> TopicSizes | None:
        """The topic's size on disk, None when `size.unknown` says why."""
        return self.size.of(self.info.name)

    @property
    def partition_rows(self) -> list[tuple[PartitionReplicas, PartitionSize | None]]:
        """Each partition's replicas beside its size (None when the size is unknown)."""
        sizes = self.sizes
        return [(p, sizes.partition(p.partition) if sizes else None) for p in self.info.partitions]

    @property
    def retention_ms(self) -> str | None:
        return self.info.config("retention.ms")

    @property
    def retention_bytes(self) -> str | None:
        return self.info.config("retention.bytes")


def _describe(cluster: Cluster, topic: str) -> TopicInfo:
    return cluster_read(
        cluster,
        lambda config, timeout_s: (
            clusters().cluster_descriptions(config, timeout_s=timeout_s).describe_topic(topic)
        ),
    )


def _size(cluster: Cluster, info: TopicInfo) -> SizesOnDisk:
    return sizes_on_disk(
        cluster=cluster,
        leaders={info.name: {p.partition: p.leader for p in info.partitions}},
        brokers={broker for p in info.partitions for broker in p.replicas},
    )


def _description(info: TopicInfo) -> TopicDescription:
    return TopicDescription(name=info.name, partitions=len(info.partitions), configs=info.overrides)


def _config_sync(mirror: Mirror, here: TopicInfo) -> ConfigSync:
    """Reads the mirror's other side and compares the two by the topic sync's rule."""
    selection = engine.topic_selection(mirror.flow)
    enabled = selection.flow.sync_topic_configs_enabled
    other_topic = mirror.remote_topic if mirror.role == "source" else mirror.source_topic
    read_at = None
    try:
        other, read_at, _ = timed(lambda: _describe(mirror.other_cluster, other_topic))
    except UnknownTopic:
        if mirror.role == "target":
            return ConfigSync(
                mirror,
                enabled,
                (),
                True,
                None,
                f"its source topic {other_topic} is gone from {mirror.flow.source.alias}",
            )
        other = None
        read_at = datetime.datetime.now(tz=datetime.UTC)
    except (ClusterUnavailable, ServiceValidationError) as exc:
        return ConfigSync(mirror, enabled, (), False, None, str(exc))
    # A target's source topic that is gone returned above: `other` is None only for a source.
    source, target = (here, other) if mirror.role == "source" or other is None else (other, here)
    rows = config_sync_preview(
        decision=selection.decide(mirror.source_topic),
        source=_description(source),
        target=None if target is None else _description(target),
        flow=selection.flow,
        config_filter=ConfigPropertyFilter.for_flow(selection.flow),
    )
    return ConfigSync(mirror, enabled, rows, target is not None, read_at)


def topic_details(*, cluster: Cluster, topic: str) -> TopicDetails:
    """The topic as `cluster` describes it, and each flow's config sync of it or of its source."""
    if error := topic_name_error(topic):
        raise ServiceValidationError.single("topic", error)
    try:
        info, read_at, read_ms = timed(lambda: _describe(cluster, topic))
    except UnknownTopic as exc:
        raise ServiceValidationError.single("topic", f"{exc}: check the name on the topics page") from exc
    mirrors = mirrors_by_topic(cluster=cluster, topics=[topic])[topic]
    syncs = tuple(_config_sync(m, info) for m in mirrors)
    return TopicDetails(cluster, info, read_at, read_ms, syncs, _size(cluster, info))
