"""The topic and message browser's pages: a cluster's topics, a topic's partitions and records, and a
mirrored topic's records beside their copies on the target. Viewers may read (values of masked topics
hidden); every Kafka read is bounded (controlplane.browse)."""

from __future__ import annotations

from django.shortcuts import get_object_or_404, render

from controlplane import browse, selectors
from controlplane.errors import ClusterUnavailable, ServiceValidationError
from controlplane.web.access import viewer_required


def _field_errors(exc: ServiceValidationError) -> list[str]:
    return [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]


def _cluster(alias: str):
    return get_object_or_404(selectors.cluster_list(), alias=alias)


@viewer_required
def topic_list(request):
    clusters = list(selectors.cluster_list().order_by("alias"))
    chosen = next(
        (c for c in clusters if c.alias == request.GET.get("cluster")), clusters[0] if clusters else None
    )
    context: dict = {"clusters": clusters, "cluster": chosen}
    if chosen is not None:
        try:
            context["listing"] = browse.topic_list(cluster=chosen)
        except ClusterUnavailable as exc:
            context["problem"] = str(exc)
    return render(request, "web/topics.html", context)


@viewer_required
def topic_detail(request, alias: str, topic: str):
    cluster = _cluster(alias)
    context: dict = {"cluster": cluster, "topic": topic, "query": request.GET}
    status = 200
    try:
        seek = browse.parse_seek(request.GET)
        context["seek"] = seek
        context["page"] = browse.topic_records(cluster=cluster, topic=topic, seek=seek, role=request.web_role)
    except ServiceValidationError as exc:
        context["errors"] = _field_errors(exc)
        status = 400
    except ClusterUnavailable as exc:
        context["problem"] = str(exc)
        status = 502
    context["formats"] = [fmt.value for fmt in browse.ValueFormat]
    context["max_records"] = browse.MAX_RECORDS
    return render(request, "web/topic.html", context, status=status)


@viewer_required
def record_copies(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    topic = request.GET.get("topic", "")
    context: dict = {"flow": flow, "topic": topic, "query": request.GET, "hidden_topic": [("topic", topic)]}
    status = 200
    try:
        seek = browse.parse_seek(request.GET)
        context["seek"] = seek
        context["page"] = browse.record_copies(flow=flow, topic=topic, seek=seek, role=request.web_role)
    except ServiceValidationError as exc:
        context["errors"] = _field_errors(exc)
        status = 400
    except ClusterUnavailable as exc:
        context["problem"] = str(exc)
        status = 502
    context["formats"] = [fmt.value for fmt in browse.ValueFormat]
    context["max_records"] = browse.MAX_RECORDS
    return render(request, "web/topic_compare.html", context, status=status)
