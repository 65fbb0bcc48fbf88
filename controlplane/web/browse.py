"""The topic and message browser's pages: a cluster's topics and its brokers, a topic's details (replicas,
configs, what config sync will change), partitions and records, and a
mirrored topic's records beside their copies on the target. Viewers may read (values of masked topics
hidden); every Kafka read is bounded (controlplane.browse)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render

from controlplane import browse
from controlplane.browse import record_export, record_search
from controlplane.core.errors import ClusterUnavailable, ServiceValidationError
from controlplane.flows import selectors
from controlplane.web.access import viewer_required
from controlplane.web.listing import Filter, ListSpec, Sort, list_page


def _field_errors(exc: ServiceValidationError) -> list[str]:
    return [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]


def _cluster(alias: str):
    return get_object_or_404(selectors.cluster_list(), alias=alias)


TOPIC_KINDS = (
    ("topic", "topic"),
    ("replicated", "replicated by a flow"),
    ("mirrored", "mirrored (a copy)"),
    ("internal", "internal"),
)


def topic_kind(name: str, mirrors: list, aliases: set[str]) -> str:
    """internal (Kafka's, MM2's), mirrored (a flow's copy, or named `<cluster alias>.<topic>` as MM2's
    default policy names them), replicated (a flow copies it) or topic."""
    if name.startswith(("_", "mm2-")) or name.endswith(".internal") or name == "heartbeats":
        return "internal"
    if any(m.role != "source" for m in mirrors) or ("." in name and name.split(".", 1)[0] in aliases):
        return "mirrored"
    return "replicated" if mirrors else "topic"


def topic_list_spec(aliases: set[str]) -> ListSpec:
    """Rows are (topic, its mirrors, its size on disk or None) as `browse.TopicList.rows` gives them."""
    return ListSpec(
        sorts=(
            Sort("name", key=lambda r: r[0].name),
            Sort("partitions", key=lambda r: r[0].partitions),
            Sort("size", key=lambda r: -1 if r[2] is None else r[2].total_bytes),
        ),
        default_sort="name",
        search_text=lambda r: r[0].name,
        search_label="Search topic names",
        filters=(Filter("kind", "Kind", TOPIC_KINDS, key=lambda r: topic_kind(r[0].name, r[1], aliases)),),
        page_size=100,
    )


@viewer_required
def topic_list(request):
    clusters = list(selectors.cluster_list().order_by("alias"))
    chosen = next(
        (c for c in clusters if c.alias == request.GET.get("cluster")), clusters[0] if clusters else None
    )
    context: dict = {"clusters": clusters, "cluster": chosen}
    status = 200
    if chosen is not None:
        try:
            context["listing"] = listing = browse.topic_list(cluster=chosen)
            context["topics"] = rows = list_page(
                request, topic_list_spec({c.alias for c in clusters}), listing.rows
            )
            status = 400 if rows.errors else 200
        except ClusterUnavailable as exc:
            context["problem"] = str(exc)
    return render(request, "web/topics.html", context, status=status)


def _read_into(context: dict, key: str, read) -> int:
    """`context[key] = read()`, or the form's errors (400) or the cluster's problem (502); the status."""
    try:
        context[key] = read()
    except ServiceValidationError as exc:
        context["errors"] = _field_errors(exc)
        return 400
    except ClusterUnavailable as exc:
        context["problem"] = str(exc)
        return exc.http_status
    return 200


def _records_page(request, context: dict, read) -> int:
    """Fills `context` with the seek parsed from the query and the page `read(seek)` returns (or the form's
    errors, or the cluster's problem) and the format choices; returns the page's status: 200, 400 for a bad
    seek, 502 for an unreachable cluster."""

    def page():
        context["seek"] = seek = browse.parse_seek(request.GET)
        return read(seek)

    status = _read_into(context, "page", page)
    context["formats"] = [fmt.value for fmt in browse.ValueFormat]
    context["max_records"] = browse.MAX_RECORDS
    return status


@viewer_required
def topic_detail(request, alias: str, topic: str):
    cluster = _cluster(alias)
    context: dict = {"cluster": cluster, "topic": topic, "query": request.GET}
    status = _records_page(
        request,
        context,
        lambda seek: browse.topic_records(cluster=cluster, topic=topic, seek=seek, role=request.web_role),
    )
    return render(request, "web/topic.html", context, status=status)


@viewer_required
def topic_search(request, alias: str, topic: str):
    """Search every partition of the topic (key, value, JSON path, header, time range); runs when the form
    was sent, within the bounds of controlplane.browse.record_search; `export=json` or `csv` answers the
    result as a file to download; `tail=1` shows the live tail (topic_tail polls) instead."""
    cluster = _cluster(alias)
    tail_params = [
        (name, value) for name, value in request.GET.items() if name in record_search.SEARCH_PARAMETERS
    ]
    context: dict = {
        "cluster": cluster,
        "topic": topic,
        "query": request.GET,
        "formats": [fmt.value for fmt in browse.ValueFormat],
        "max_scanned": record_search.max_scanned_bound(),
        "max_records": browse.MAX_RECORDS,
        "default_matches": record_search.DEFAULT_MATCHES,
        "tail_params": tail_params,
        "stop_tail": urlencode([*tail_params, ("search", "1")]),
        "tailing": bool(request.GET.get("tail")),
        "tail_keep": TAIL_ROWS_KEPT,
        "exports": {
            fmt.value: urlencode({**request.GET.dict(), "export": fmt.value})
            for fmt in record_export.ExportFormat
        },
    }
    export = request.GET.get("export", "")
    if export and export not in {fmt.value for fmt in record_export.ExportFormat}:
        context["errors"] = [f"export: '{export[:20]}' is not an export format: use json or csv"]
        return render(request, "web/topic_search.html", context, status=400)
    status = 200
    searching = (
        any(request.GET.get(name) for name in record_search.SEARCH_PARAMETERS) or "search" in request.GET
    )
    if searching and not context["tailing"]:
        status = _read_into(
            context,
            "page",
            lambda: record_search.topic_search(
                cluster=cluster,
                topic=topic,
                search=record_search.parse_search(request.GET),
                role=request.web_role,
            ),
        )
    if export and status == 200 and "page" in context:
        fmt = record_export.ExportFormat(export)
        response = HttpResponse(
            record_export.search_export(context["page"], fmt),
            content_type="text/csv; charset=utf-8"
            if fmt is record_export.ExportFormat.CSV
            else "application/json",
        )
        name = record_export.export_name(context["page"], fmt)
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        return response
    return render(request, "web/topic_search.html", context, status=status)


TAIL_ROWS_KEPT = 500  # a live tail's rows on the page (the newest)
# htmx stops polling on this status: a tail whose read failed says why and stops.
STOP_POLLING = 286


@viewer_required
def topic_tail(request, alias: str, topic: str):
    """The live tail's poll (an htmx fragment): the matching records that came after `positions`, newest
    first, and the positions to go on from; a refusal or a cluster that does not answer stops the tail
    and says why."""
    cluster = _cluster(alias)
    context: dict = {"cluster": cluster, "topic": topic}
    status = _read_into(
        context,
        "page",
        lambda: record_search.topic_tail(
            cluster=cluster,
            topic=topic,
            search=record_search.parse_search(request.GET),
            positions=request.GET.get("positions", ""),
            role=request.web_role,
        ),
    )
    return render(request, "web/_tail_rows.html", context, status=200 if status == 200 else STOP_POLLING)


@viewer_required
def topic_details(request, alias: str, topic: str):
    """The topic page's details fragment (loaded after the page, its reads apart from the records'):
    replicas, configs, and what each flow's config sync will change on the copy."""
    cluster = _cluster(alias)
    context: dict = {"cluster": cluster, "topic": topic}
    status = _read_into(context, "details", lambda: browse.topic_details(cluster=cluster, topic=topic))
    return render(request, "web/_topic_details.html", context, status=status)


@viewer_required
def cluster_detail(request, pk: int):
    """A cluster as its brokers describe it: id, controller, brokers, Kafka version, with the read's age."""
    cluster = get_object_or_404(selectors.cluster_list(), pk=pk)
    context: dict = {"cluster": cluster}
    status = _read_into(context, "details", lambda: browse.cluster_details(cluster=cluster))
    return render(request, "web/cluster.html", context, status=status)


@viewer_required
def record_copies(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    topic = request.GET.get("topic", "")
    context: dict = {"flow": flow, "topic": topic, "query": request.GET, "hidden_topic": [("topic", topic)]}
    status = _records_page(
        request,
        context,
        lambda seek: browse.record_copies(flow=flow, topic=topic, seek=seek, role=request.web_role),
    )
    return render(request, "web/topic_compare.html", context, status=status)
