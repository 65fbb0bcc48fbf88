"""Reads of clusters and flows: the lists, a flow's topics on its source, and the MM2 export."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Literal

from django.conf import settings
from django.db.models import QuerySet

from controlplane.core import ratelimit
from controlplane.core.errors import ServiceValidationError
from controlplane.core.roles import Role
from controlplane.core.statements import statement
from controlplane.flows import engine
from controlplane.flows.cluster_reads import cluster_answered, cluster_read
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow
from replication.cluster_ports import ClusterCheck
from replication.config import Mm2Config
from replication.mm2file_writing import write_mm2
from replication.policy import TopicDecision
from replication.strimzi import write_strimzi

CHECK_TIMEOUT_S = 5.0
# Who reads credentials that are not secrets to the systems that take them (Strimzi's SASL username).
CREDENTIALS_ROLE = Role.OPERATOR

TopicLister = Callable[[Cluster], dict[str, int]]


def cluster_list() -> QuerySet[Cluster]:
    return Cluster.objects.all()


def flow_list(*, cluster_aliases_only: bool = False, fields: Sequence[str] | None = None) -> QuerySet[Flow]:
    """Flows with their clusters; `cluster_aliases_only`: only the aliases of the clusters read, what a list
    of flows names them by (their addresses, client properties and encrypted secrets cost a page of 50
    flows about 1 ms to read, for nothing it shows); `fields`: only those of the flow's own read too, and
    the aliases (a list that shows a few of a flow's 50 settings: about 2 ms less for a page of 50; a field
    not named is read by a statement of its own when used, once per flow)."""
    flows = Flow.objects.select_related("source", "target")
    if fields is not None:
        return flows.only(*fields, "source__alias", "target__alias")
    if not cluster_aliases_only:
        return flows
    return flows.defer(
        *(
            f"{side}__{field.name}"
            for side in ("source", "target")
            for field in Cluster._meta.concrete_fields
            if field.name not in ("id", "alias")
        )
    )


@statement
def flow_ids_by_name() -> QuerySet:
    """Every flow's id, in the flows' order (by name)."""
    return flow_list().values_list("pk", flat=True)


@statement
def cluster_aliases() -> QuerySet:
    """Every cluster's alias, in the clusters' order."""
    return cluster_list().values_list("alias", flat=True)


@statement
def flow_shown(pk: int) -> QuerySet[Flow]:
    """The flow `pk` as its pages show it (`flow_list(cluster_aliases_only=True)`), compiled once per process."""
    return flow_list(cluster_aliases_only=True).filter(pk=pk)


def of_flows(rows: QuerySet, flow_ids: Collection[int] | None, *, key: str = "flow_id") -> QuerySet:
    """The `rows` of the flows `flow_ids` (by their `key`: a flow key, or "pk" for flows), all of them when
    None: a page about some flows reads theirs, not every flow's."""
    return rows if flow_ids is None else rows.filter(**{f"{key}__in": flow_ids})


def live_partition_counts(cluster: Cluster) -> dict[str, int]:
    """Topic -> partition count, asked of the cluster now (behind its breaker, MIRRORPLANE_WEB_READ_TIMEOUT_S)."""
    return cluster_read(
        cluster, lambda config, timeout_s: clusters().partition_counts(config, timeout_s=timeout_s)
    )


@dataclass(frozen=True)
class FlowTopic:
    decision: TopicDecision
    partitions: int


def flow_topics(*, flow: Flow, list_topics: TopicLister = live_partition_counts) -> list[FlowTopic]:
    """Each topic of the flow's source cluster: replicated (with its remote name) or why not."""
    topics = engine.topic_selection(flow)
    partitions = list_topics(flow.source)
    return [FlowTopic(topics.decide(topic), count) for topic, count in sorted(partitions.items())]


def _stored_config(clusters: list[Cluster], *, secrets: Literal["values", "placeholders"]) -> Mm2Config:
    return Mm2Config(
        clusters=tuple(engine.cluster_to_config(cluster, secrets=secrets) for cluster in clusters),
        flows=tuple(engine.flow_to_config(flow) for flow in flow_list()),
    )


def strimzi_export(*, role: Role | None) -> str:
    """Every cluster and flow as Strimzi KafkaMirrorMaker2 resources; secrets are references to Kubernetes
    Secrets, never values (`write_strimzi` writes none of the values it is given). SASL usernames, which
    Strimzi takes in clear, only for operators and admins (viewers read no credential anywhere)."""
    clusters = list(Cluster.objects.all())
    stored_secrets = {
        cluster.alias: frozenset(
            (scope, name) for scope, values in engine.cluster_secrets(cluster).items() for name in values
        )
        for cluster in clusters
    }
    return write_strimzi(
        _stored_config(clusters, secrets="values"),
        secret_properties=stored_secrets,
        usernames=role is not None and role >= CREDENTIALS_ROLE,
    )


def mm2_export() -> str:
    """Every cluster and flow as mm2.properties; secrets are `${env:...}` placeholders, never values."""
    clusters = list(Cluster.objects.all())
    config = _stored_config(clusters, secrets="placeholders")
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


def cluster_check(*, cluster: Cluster, actor) -> ClusterCheck:
    """Whether the cluster answers with its stored settings (the "test connection" button), bounded, and
    how it fails (DNS, refused, timeout, TLS, authentication). Not a port scanner: only hosts
    MIRRORPLANE_CLUSTER_HOSTS_ALLOWED allows (a 400 otherwise), CLUSTER_CHECK_RATE_PER_MINUTE per user. A
    check that passes closes the cluster's breaker for the whole web (`cluster_reads`)."""
    if problem := engine.cluster_hosts_error(cluster):
        raise ServiceValidationError.single("bootstrap_servers", problem)
    ratelimit.hit(
        scope="cluster_check",
        user_id=getattr(actor, "pk", None),
        limit=settings.CLUSTER_CHECK_RATE_PER_MINUTE,
        window_s=60,
    )
    result = clusters().check(engine.cluster_to_config(cluster), timeout_s=CHECK_TIMEOUT_S)
    if result.ok:  # the probe the breaker waits for: reads of the cluster resume in every web process
        cluster_answered(cluster)
    return result
