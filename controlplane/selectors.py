"""Every read of the control plane: querysets for lists, engine answers for topics, MM2 export text."""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

from django.db.models import QuerySet

from controlplane import engine
from controlplane.errors import ClusterUnavailable, ServiceValidationError
from controlplane.models import (
    AuditEvent,
    Cluster,
    Flow,
    FlowEvent,
    FlowPartitionStatus,
    ReportDataset,
    ReportRow,
    ReportRun,
    ReportRunState,
)
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


# -- reports ----------------------------------------------------------------------------------------------
REPORT_ROWS_LIMIT = 20_000


def report_run_list() -> QuerySet[ReportRun]:
    return ReportRun.objects.select_related("requested_by")


def report_run_latest() -> ReportRun | None:
    return report_run_list().first()


def report_runs_to_dispatch() -> QuerySet[ReportRun]:
    """Queued runs nobody has handed to the reports queue yet (oldest first)."""
    return ReportRun.objects.filter(state=ReportRunState.QUEUED, dispatched_at__isnull=True).order_by("id")


def report_schedule_due(*, now: datetime.datetime, interval_s: float) -> bool:
    """True when no run is active and the last one was requested `interval_s` or more ago (or never)."""
    last = ReportRun.objects.order_by("-requested_at", "-id").first()
    return last is None or (not last.active and (now - last.requested_at).total_seconds() >= interval_s)


def report_dataset(name: str) -> ReportDataset:
    try:
        return ReportDataset(name)
    except ValueError:
        raise ServiceValidationError.single(
            "dataset", f"unknown report dataset {name!r}; datasets: {', '.join(ReportDataset.values)}"
        ) from None


def report_rows(
    *,
    dataset: str,
    flow_id: int | None = None,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
    limit: int = REPORT_ROWS_LIMIT,
) -> list[dict]:
    """A dataset's rows (oldest window first; the newest `limit` of them) for windows in [since, until).

    Capacity plans have no window: `since` and `until` do not apply to them.
    """
    dataset = report_dataset(dataset)
    rows = ReportRow.objects.filter(dataset=dataset)
    if flow_id is not None:
        rows = rows.filter(flow_id=flow_id)
    if dataset != ReportDataset.CAPACITY_PLAN:
        if since is not None:
            rows = rows.filter(window_start__gte=since)
        if until is not None:
            rows = rows.filter(window_start__lt=until)
    newest = rows.order_by("-window_start", "-id").values_list("data", flat=True)[:limit]
    return list(reversed(newest))


def report_flow_names() -> dict[int, str]:
    """Flow id -> name as the reports know them (flows deleted since keep their last name)."""
    usage = ReportRow.objects.filter(dataset=ReportDataset.DAILY_FLOW_USAGE).order_by("window_start")
    return {
        flow_id: data.get("flow_name", str(flow_id)) for flow_id, data in usage.values_list("flow_id", "data")
    }
