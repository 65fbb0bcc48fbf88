"""Topics' sizes on disk as a page shows them: what the brokers' log dirs held at `read_at`, or why that is
unknown. One read (`Clusters.topic_sizes`: Kafka's DescribeLogDirs) through `cluster_read`, bounded as
every web read; a refusal, a broker without the request or a cluster that did not answer is the
`unknown` reason, never an error of the page that asked (its other reads went first)."""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from controlplane.core.errors import ClusterUnavailable
from controlplane.flows.cluster_reads import cluster_read, timed
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster
from replication.cluster_ports import SizesUnread, TopicSizes


@dataclass(frozen=True)
class SizesOnDisk:
    topics: Mapping[str, TopicSizes] = field(default_factory=dict)  # empty when `unknown` says why
    read_at: datetime.datetime | None = None
    read_ms: float | None = None
    unknown: str | None = None

    def of(self, topic: str) -> TopicSizes | None:
        return self.topics.get(topic)


def sizes_on_disk(
    *, cluster: Cluster, leaders: Mapping[str, Mapping[int, int]] | None, brokers: Iterable[int] | None
) -> SizesOnDisk:
    """The sizes of the topics in `leaders` (topic -> partition -> leader) on `brokers`; None for both:
    every topic on every broker (one request a broker)."""

    def read(config, timeout_s: float) -> dict[str, TopicSizes]:
        return clusters().topic_sizes(config, leaders=leaders, brokers=brokers, timeout_s=timeout_s)

    try:
        topics, read_at, read_ms = timed(lambda: cluster_read(cluster, read))
    except (SizesUnread, ClusterUnavailable) as exc:
        return SizesOnDisk(unknown=str(exc))
    return SizesOnDisk(topics, read_at, read_ms)
