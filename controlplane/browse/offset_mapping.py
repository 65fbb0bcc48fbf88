"""Offset mapping for applications that keep offsets outside Kafka: a read of the flow's offset syncs
and the target's topics, then `replication.offset_mapping` (exact translation, per-item errors).

Rate-limited per user (each request reads the offset-syncs topic); the batch size is bounded by
OFFSET_MAPPING_MAX_ITEMS. Reads only: any role may call it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from django.conf import settings

from controlplane.core import ratelimit
from controlplane.core.errors import ClusterUnavailable, ServiceValidationError
from controlplane.flows import engine
from controlplane.flows.cluster_reads import clusters_read
from controlplane.flows.models import Flow
from replication.cluster_ports import FlowClusters
from replication.offset_mapping import Direction, MappedTopic, OffsetMapping, OffsetQuery, map_offsets


def mapped_topics(reader: FlowClusters, *, names: Iterable[str], direction: Direction) -> list:
    """The replicated topics among `names` (source names, or remote names from the target), with the
    remote topic's partition count on the target; names the flow does not replicate are left out."""
    counts = reader.partition_counts(reader.target)
    found = []
    for name in set(names):
        source = name if direction == Direction.SOURCE_TO_TARGET else reader.policy.upstream_topic(name)
        if source is None or reader.policy.is_heartbeats_topic(source):
            continue
        decision = reader.topics.decide(source)
        if not decision.replicate or decision.remote_topic not in counts:
            continue
        if direction == Direction.TARGET_TO_SOURCE and decision.remote_topic != name:
            continue
        found.append(MappedTopic(source, decision.remote_topic, counts[decision.remote_topic]))
    return found


def offsets_map(*, flow: Flow, actor, direction: str, queries: Sequence[OffsetQuery]) -> list[OffsetMapping]:
    """Translate `queries` between the flow's source and target (see the module docstring)."""
    limit = settings.OFFSET_MAPPING_MAX_ITEMS
    if not queries:
        raise ServiceValidationError.single("offsets", "give at least one {topic, partition, offset}")
    if len(queries) > limit:
        raise ServiceValidationError.single(
            "offsets", f"{len(queries)} items: at most {limit} per request; split the batch"
        )
    ratelimit.hit(
        scope="offset_mapping",
        user_id=getattr(actor, "pk", None),
        limit=settings.OFFSET_MAPPING_RATE_PER_MINUTE,
        window_s=60,
    )

    def read(configs, timeout_s: float):
        reader = engine.flow_reader(flow, timeout_s=timeout_s)
        try:
            names = {q.topic for q in queries}
            return mapped_topics(
                reader, names=names, direction=Direction(direction)
            ), reader.refresh_offset_syncs()
        finally:
            reader.close()

    try:
        topics, store = clusters_read([flow.source, flow.target], read)
    except ClusterUnavailable as exc:
        raise ClusterUnavailable(f"reading the offset syncs of {flow.name}: {exc}") from exc
    return map_offsets(queries, direction=Direction(direction), topics=topics, store=store)
