"""Every read of the control plane: querysets for lists, engine answers for topics, MM2 export text."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import QuerySet

from controlplane import engine
from controlplane.errors import ClusterUnavailable
from controlplane.models import AuditEvent, Cluster, Flow, FlowEvent, FlowPartitionStatus
from replication.config import ClusterConfig, Mm2Config
from replication.filters import TopicFilter
from replication.kafka.admin import TopicAdmin, TopicAdminError
from replication.mm2file import write_mm2
from replication.policy import TopicDecision, classify_topic, replication_policy_for

# How long a request waits for a cluster's metadata before answering 502.
TOPIC_LIST_TIMEOUT_S = 10.0

TopicLister = Callable[[ClusterConfig], dict[str, int]]


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.all()


def flow_list() -> QuerySet[Flow]:
    return Flow.objects.select_related("source", "target")


def audit_list() -> QuerySet[AuditEvent]:
    return AuditEvent.objects.select_related("actor")


def live_partition_counts(cluster: ClusterConfig) -> dict[str, int]:
    """Topic -> partition count, asked of the cluster now."""
    try:
        return TopicAdmin(cluster, timeout_s=TOPIC_LIST_TIMEOUT_S).partition_counts()
    except TopicAdminError as exc:
        raise ClusterUnavailable(str(exc)) from exc


@dataclass(frozen=True)
class FlowTopic:
    decision: TopicDecision
    partitions: int


def flow_topics(*, flow: Flow, list_topics: TopicLister = live_partition_counts) -> list[FlowTopic]:
    """Each topic of the flow's source cluster: replicated (with its remote name) or why not."""
    config = engine.flow_to_config(flow)
    aliases = list(Cluster.objects.values_list("alias", flat=True))
    policy = replication_policy_for(config, known_aliases=aliases)
    topic_filter = TopicFilter.for_flow(config)
    partitions = list_topics(engine.cluster_to_config(flow.source))
    return [
        FlowTopic(classify_topic(topic=topic, flow=config, policy=policy, topic_filter=topic_filter), count)
        for topic, count in sorted(partitions.items())
    ]


@dataclass(frozen=True)
class FlowStatus:
    flow: Flow
    partitions: QuerySet[FlowPartitionStatus]
    events: QuerySet[FlowEvent]


RECENT_EVENTS = 100


def flow_status(*, flow: Flow) -> FlowStatus:
    """Live per-partition state and the latest events (filled by the workers)."""
    return FlowStatus(
        flow=flow,
        partitions=flow.partition_statuses.all(),
        events=flow.events.all()[:RECENT_EVENTS],
    )


def mm2_export() -> str:
    """Every cluster and flow as mm2.properties; secrets are `${env:...}` placeholders, never values."""
    clusters = list(Cluster.objects.all())
    flows = [engine.flow_to_config(flow) for flow in flow_list()]
    config = Mm2Config(
        clusters=tuple(engine.cluster_to_config(cluster, secrets="placeholders") for cluster in clusters),
        flows=tuple(flows),
    )
    variables = sorted(
        engine.secret_placeholder(cluster.alias, scope, name)
        for cluster in clusters
        for scope, values in engine.cluster_secrets(cluster).items()
        for name in values
    )
    header = []
    if variables:
        header = [
            "# Secrets are not exported: set these environment variables where this file is used:",
            *(f"#   {variable}" for variable in variables),
        ]
    return "\n".join(header + [write_mm2(config)]) if header else write_mm2(config)
