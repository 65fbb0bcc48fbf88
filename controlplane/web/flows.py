"""Clusters and flows on the web: lists, forms, the flow page, pause/resume/delete, the MM2 import and
export. Roles as in the API: viewers read, operators also pause, resume and test connections, admins
change configuration."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TypedDict

from django.contrib import messages
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.template.loader import render_to_string
from django.urls import reverse
from django.utils.http import urlencode
from django.utils.safestring import mark_safe
from django.views.decorators.http import require_POST

from controlplane import alerts, assurance
from controlplane.assurance import verification
from controlplane.core import microcache
from controlplane.core.errors import ClusterUnavailable, RateLimited, ServiceConflict, ServiceValidationError
from controlplane.flows import engine, mm2, selectors, services
from controlplane.flows.models import Flow, FlowState, SecurityProtocol
from controlplane.status import activity, partitions, rollup
from controlplane.web import summaries
from controlplane.web.access import admin_required, back_url, operator_required, viewer_required
from controlplane.web.forms import PREVIEW_FIELDS, ClusterForm, FlowForm, Mm2ImportForm
from controlplane.web.listing import Filter, KeyedRows, ListSpec, Sort, list_page
from controlplane.web.operations import last_drill
from replication.strimzi import missing_placeholders

# -- clusters ---------------------------------------------------------------------------------------------
CLUSTER_LIST = ListSpec(
    sorts=(Sort("alias"), Sort("bootstrap", field="bootstrap_servers"), Sort("security", field="security_protocol"),
           Sort("updated", field="updated_at")),
    default_sort="alias",
    search_fields=("alias", "bootstrap_servers"),
    search_label="Search alias or bootstrap servers",
    filters=(Filter("security", "Security", SecurityProtocol.choices, field="security_protocol"),),
)  # fmt: skip


@viewer_required
def cluster_list(request):
    listing = list_page(request, CLUSTER_LIST, selectors.cluster_list())
    clusters = [(cluster, engine.secret_names(engine.cluster_secrets(cluster))) for cluster in listing.rows]
    return render(
        request,
        "web/clusters.html",
        {"clusters": clusters, "listing": listing},
        status=400 if listing.errors else 200,
    )


def _cluster_form_page(request, *, cluster=None):
    form = ClusterForm(request.POST or None, cluster=cluster)
    if request.method == "POST" and form.is_valid():
        try:
            if cluster is None:
                cluster = services.cluster_create(
                    actor=request.user, **form.columns(), secrets=form.secret_changes()
                )
                messages.success(request, f"Cluster {cluster.alias} created. Next: test its connection.")
            else:
                cluster = services.cluster_update(
                    actor=request.user,
                    cluster=cluster,
                    changes=form.columns(),
                    secret_changes=form.secret_changes(),
                )
                messages.success(request, f"Cluster {cluster.alias} saved.")
            return redirect("web:clusters")
        except ServiceValidationError as exc:
            form.add_service_errors(exc)
    return render(request, "web/cluster_form.html", {"form": form, "cluster": cluster})


@admin_required
def cluster_create(request):
    return _cluster_form_page(request)


@admin_required
def cluster_edit(request, pk: int):
    return _cluster_form_page(request, cluster=get_object_or_404(selectors.cluster_list(), pk=pk))


@require_POST
@operator_required
def cluster_check(request, pk: int):
    cluster = get_object_or_404(selectors.cluster_list(), pk=pk)
    try:
        result = selectors.cluster_check(cluster=cluster, actor=request.user)
    except ServiceValidationError as exc:
        context = {"cluster": cluster, "refused": " ".join(m for ms in exc.errors.values() for m in ms)}
        return render(request, "web/_cluster_check.html", context, status=400)
    except RateLimited as exc:
        response = render(
            request, "web/_cluster_check.html", {"cluster": cluster, "refused": str(exc)}, status=429
        )
        response["Retry-After"] = str(exc.retry_after_s)
        return response
    return render(request, "web/_cluster_check.html", {"cluster": cluster, "check": result})


@require_POST
@admin_required
def cluster_delete(request, pk: int):
    cluster = get_object_or_404(selectors.cluster_list(), pk=pk)
    try:
        services.cluster_delete(actor=request.user, cluster=cluster)
        messages.success(request, f"Cluster {cluster.alias} deleted.")
    except ServiceConflict as exc:
        messages.error(request, f"Cluster not deleted: {exc}.")
    return redirect("web:clusters")


# -- flows ------------------------------------------------------------------------------------------------
def _flow_clusters(summary) -> set[str]:
    return {summary.flow.source.alias, summary.flow.target.alias}


# What the flows list shows, sorts, searches and filters by of a flow itself (its name is its clusters').
LIST_FLOW_FIELDS = ("state", "topics")


def flow_list_spec(*, cluster_aliases: Sequence[str]) -> ListSpec:
    """The flows list: firing alerts first unless sorted; filters by state, health and either cluster (of
    `cluster_aliases`)."""
    return ListSpec(
        sorts=(
            Sort("name", key=lambda s: s.flow.name),
            Sort("state", key=lambda s: s.flow.state),
            Sort("partitions", key=lambda s: s.partition_count),
            Sort("records_behind", key=lambda s: s.records_behind),
            Sort("seconds_behind", key=lambda s: s.seconds_behind),
            Sort("observed", key=lambda s: s.observed_at),
        ),
        search_text=lambda s: " ".join([s.flow.name, *map(str, s.flow.topics or [])]),
        search_label="Search name or topics",
        filters=(
            Filter("state", "State", FlowState.choices, key=lambda s: s.flow.state),
            Filter("health", "Health", [(h, h) for h in rollup.HEALTHS], key=lambda s: s.health),
            Filter(
                "cluster",
                "Cluster",
                [(alias, alias) for alias in cluster_aliases],
                key=_flow_clusters,
            ),
        ),
    )


@viewer_required
def flow_list(request):
    """Flows with firing alerts first, then by name: the live roll-ups of the page's flows only, unless a
    search, filter or sort needs every flow's. Every viewer of the same page and role within a moment shares
    one rendering of it (`core.microcache`: a change of configuration is seen at once, what the workers
    report is at most seconds old and the page says when it was put together); the pause and resume
    dialogs, with the viewer's own CSRF token, are rendered for each request."""
    (content, status, any_rows), built_at = microcache.shared(
        "flows-page", (request.get_full_path(), request.web_role), lambda: _flow_list_content(request)
    )
    return render(
        request,
        "web/flows.html",
        {"content": content, "any_rows": any_rows, "built_at": built_at},
        status=status,
    )


def _flow_list_content(request) -> tuple[str, int, bool]:
    """The flows page's content (its listing, its table and pager) without the viewer's own parts: the
    HTML, the status and whether any flow is on the page."""
    flow_ids, firing = summaries.flows_firing_first(selectors.flow_ids_by_name(), flow_id=int)
    rows = KeyedRows(
        flow_ids, lambda page: rollup.flow_summaries(flow_ids=page, flow_fields=LIST_FLOW_FIELDS)
    )
    aliases = selectors.cluster_aliases()  # a filter's; a flow needs two
    listing = list_page(request, flow_list_spec(cluster_aliases=aliases), rows)
    content = render_to_string(
        "web/_flows_content.html",
        {
            "listing": listing,
            "summaries": listing.rows,
            "firing": firing,
            "activity": activity.replication_activity_shared(),
            "has_clusters": len(aliases) >= 2,
            "dialogs": False,
        },
        request=request,
    )
    return mark_safe(content), 400 if listing.errors else 200, bool(listing.rows)


def _flow_form_page(request, *, flow=None):
    form = FlowForm(request.POST or None, flow=flow)
    if request.method == "POST" and form.is_valid():
        try:
            if flow is None:
                flow = services.flow_create(
                    actor=request.user,
                    source=form.cleaned_data["source"],
                    target=form.cleaned_data["target"],
                    **form.settings(),
                )
                messages.success(request, f"Flow {flow.name} created.")
            else:
                flow = services.flow_update(actor=request.user, flow=flow, **form.settings())
                messages.success(request, f"Flow {flow.name} saved.")
            if form.rpo_budget() != vars(assurance.rpo_budget_of(flow=flow)):
                assurance.rpo_budget_set(actor=request.user, flow=flow, **form.rpo_budget())
            return redirect("web:flow", pk=flow.pk)
        except ServiceValidationError as exc:
            form.add_service_errors(exc)
    return render(request, "web/flow_form.html", {"form": form, "flow": flow})


@admin_required
def flow_create(request):
    return _flow_form_page(request)


@admin_required
def flow_edit(request, pk: int):
    return _flow_form_page(request, flow=get_object_or_404(selectors.flow_list(), pk=pk))


@require_POST
@admin_required
def flow_preview(request):
    """Which of the source cluster's topics the typed patterns replicate, under which names, and why not."""
    stored = selectors.flow_list().filter(pk=request.POST.get("flow") or None).first()
    form = FlowForm(request.POST, flow=stored)
    form.is_valid()
    context = {"form": form, "enabled": form.cleaned_data.get("enabled", False), "stored": stored}
    source, target = form.cleaned_data.get("source"), form.cleaned_data.get("target")
    invalid = [name for name in PREVIEW_FIELDS if name in form.errors]
    if source is None or target is None:
        context["problem"] = "Choose the source and target clusters to see which topics will replicate."
    elif invalid:
        context["problem"] = "Fix the patterns flagged above to see the preview."
    else:
        draft = Flow(source=source, target=target)
        for name in PREVIEW_FIELDS:
            setattr(draft, name, form.cleaned_data[name])
        try:
            topics = selectors.flow_topics(flow=draft)
            context["replicated"] = [t for t in topics if t.decision.replicate]
            context["excluded"] = [t for t in topics if not t.decision.replicate]
        except ClusterUnavailable as exc:
            context["problem"] = (
                f"Source cluster {source.alias} did not answer: {exc}. Check its bootstrap servers and "
                "use Test connection on the Clusters page."
            )
    return render(request, "web/_flow_preview.html", context)


VERIFICATION_ROWS = 20  # partitions the flow page's verification card lists


class PartitionQuery(TypedDict):
    q: str  # a part of a topic name
    state: str  # one of partitions.STATES, or "" (any)
    page: int


def _partition_query(request) -> tuple[PartitionQuery, list[str]]:
    """The partition table's topic search, state filter and page (`q`, `state`, `page`) from the query
    string; a state that is none is named with the choices, and ignored."""
    get = request.GET
    page = get.get("page", "1")
    query: PartitionQuery = {
        "q": get.get("q", "").strip()[:249],
        "state": get.get("state", ""),
        "page": int(page) if page.isdigit() and 0 < len(page) < 10 else 1,
    }
    errors = []
    if "\x00" in query["q"]:
        errors.append("q: no topic name holds a NUL character; search for part of a topic name")
        query["q"] = ""
    if query["state"] not in ("", *partitions.STATES):
        errors.append(
            f"state: no state {query['state']!r}; choose one of {', '.join(partitions.STATES)}, or any"
        )
        query["state"] = ""
    return query, errors


def _query_string(**params: object) -> str:
    """`?q=...&state=...&page=...` without the empty ones (and page 1)."""
    kept = {name: value for name, value in params.items() if value not in ("", None, 1)}
    return "?" + urlencode(kept) if kept else ""


def _flow_detail_context(request, flow: Flow) -> dict:
    """The flow page's live part: the roll-up, assurance, one page of partitions (worst first, searched
    and filtered as the query string asks), events and alerts."""
    status = rollup.flow_status(flow=flow)
    errors = summaries.last_errors(status.events)
    query, query_errors = _partition_query(request)
    shown = partitions.partition_page(
        flow=flow,
        budget=status.budget,
        search=query["q"],
        state=query["state"],
        page=query["page"],
        tasks=status.tasks,
    )
    base = reverse("web:flow", args=[flow.pk])
    search = {"q": query["q"], "state": query["state"]}
    verifications = verification.verification_statuses(flow_ids=[flow.pk])
    verified = verifications.get(flow.pk, verification.NOT_VERIFIED)
    rpo = assurance.flow_rpo(status, budget=status.budget, tasks=status.tasks)
    return {
        "flow": flow,
        "summary": status,
        "partitions": [(p, errors.get((p.row.topic, p.row.partition))) for p in shown.partitions],
        "partition_page": shown,
        "partition_query": query,
        "partition_errors": query_errors,
        "partition_states": partitions.STATES,
        "stall_explained": rollup.STALL_EXPLAINED,
        "partition_pages": {
            "previous": base + _query_string(**search, page=shown.number - 1) if shown.has_previous else "",
            "next": base + _query_string(**search, page=shown.number + 1) if shown.has_next else "",
            "first_row": (shown.number - 1) * shown.page_size + 1,
            "last_row": (shown.number - 1) * shown.page_size + len(shown.partitions),
        },
        "live_query": {**search, "page": shown.number},
        "events": status.events,
        "activity": activity.replication_activity_shared(),
        "budget": status.budget,
        "rpo": rpo,
        "readiness": assurance.flow_readiness(
            status, verifications=verifications, topics=[topic.topic for topic in rpo.topics]
        ),
        "verification": verified,
        # Worst first; every page of the list is the API's: flows/{id}/verification/.
        "verification_rows": verification.verification_page(
            flow=flow, page_size=VERIFICATION_ROWS, count=verified.partition_count
        ).partitions,
        "flow_alerts": alerts.alerts_firing_of(flow),
        "pool_waiting": [status] if status.pool_without_workers else [],
        "back": base,
    }


def _flow_live(request, flow: Flow) -> tuple[dict, str, int]:
    """The context with the live part rendered (`live_body`) and its version (a digest of it): a refresh
    that carries the version it shows (`v`) hears 204, no body, until something shown changes. Ages of
    stale figures are part of what is shown, so a page showing stale figures is refreshed each time."""
    context = _flow_detail_context(request, flow)
    body = render_to_string("web/_flow_live_body.html", context, request=request)
    version = hashlib.sha256(body.encode()).hexdigest()[:16]
    live_url = reverse("web:flow-live", args=[flow.pk]) + _query_string(**context["live_query"])
    live_url += ("&" if "?" in live_url else "?") + urlencode({"v": version})
    # The body is our template's output, escaped as it was rendered: it is placed as it is.
    context |= {"live_body": mark_safe(body), "live_url": live_url}
    return context, version, 400 if context["partition_errors"] else 200


def _flow_shown(pk: int) -> Flow:
    """The flow of a flow's page, read as it shows it; 404 when there is none."""
    found = selectors.flow_shown(pk=pk)
    if not found:
        raise Http404("No flow matches the given query.")
    return found[0]


def _flow_live_shared(request, flow: Flow) -> tuple[str, str, int]:
    """The live part (`_flow_live.html`), its version and status, as the page and its refresh show it:
    built once for the viewers of a role asking for the same flow and query within a moment
    (`core.microcache`; a change of configuration is seen at once)."""
    shown = request.GET.copy()
    shown.pop("v", None)

    def build() -> tuple[str, str, int]:
        context, version, status = _flow_live(request, flow)
        return render_to_string("web/_flow_live.html", context, request=request), version, status

    answer, _ = microcache.shared("flow-live", (flow.pk, shown.urlencode(), request.web_role), build)
    return answer


@viewer_required
def flow_detail(request, pk: int):
    """The flow page: its head read for this request, its live part shared with the other viewers of the
    flow and with the live refresh of every open page on it (`_flow_live_shared`)."""
    flow = _flow_shown(pk)
    live_html, _, status = _flow_live_shared(request, flow)
    context = {"flow": flow, "last_drill": last_drill(flow), "flow_live_html": mark_safe(live_html)}
    return render(request, "web/flow_detail.html", context, status=status)


@viewer_required
def flow_live(request, pk: int):
    """The flow page's live part, refreshed every 5 s by each page open on it: shared by the viewers of a
    role for a moment (`core.microcache`), as the flows list is; 204 while the version shown (`v`) holds."""
    html, version, status = _flow_live_shared(request, _flow_shown(pk))
    if status == 200 and request.GET.get("v") == version:
        return HttpResponse(status=204)  # htmx keeps what it shows
    return HttpResponse(html, status=status)


@require_POST
@operator_required
def flow_pause(request, pk: int):
    flow = services.flow_pause(actor=request.user, flow=get_object_or_404(selectors.flow_list(), pk=pk))
    messages.success(request, f"Flow {flow.name} paused: positions are kept; Resume continues from there.")
    return redirect(back_url(request, reverse("web:flow", args=[flow.pk])))


@require_POST
@operator_required
def flow_resume(request, pk: int):
    flow = services.flow_resume(actor=request.user, flow=get_object_or_404(selectors.flow_list(), pk=pk))
    messages.success(request, f"Flow {flow.name} resumed.")
    return redirect(back_url(request, reverse("web:flow", args=[flow.pk])))


@require_POST
@admin_required
def flow_delete(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    name = flow.name
    services.flow_delete(actor=request.user, flow=flow)
    messages.success(request, f"Flow {name} deleted. Its remote topics on the target are kept.")
    return redirect("web:flows")


# -- MM2 import / export ----------------------------------------------------------------------------------
@admin_required
def mm2_import(request):
    form = Mm2ImportForm(request.POST or None, request.FILES or None)
    context = {"form": form}
    if request.method == "POST" and form.is_valid():
        text = form.cleaned_data["text"]
        missing = missing_placeholders(text, environ=mm2.import_environ())
        typed = form.ask_for_placeholders(missing)
        unfilled = [name for name in missing if name not in typed]
        if unfilled:  # ask, keeping the text (an upload too) in the form; typed values are not shown again
            form.data = form.data.copy()
            form.data["text"] = text
            context["unfilled"] = unfilled
            return render(request, "web/mm2_import.html", context)
        dry_run = "apply" not in request.POST
        try:
            result = mm2.mm2_import(
                actor=request.user,
                text=text,
                dry_run=dry_run,
                placeholder_values=typed,
                source_name="web import",
                force=form.cleaned_data["force"],
            )
            context |= {"result": result, "text": text}
            if result.applied:
                messages.success(request, "Import applied. The audit log lists every change.")
        except ServiceValidationError as exc:
            # Parse errors carry their line and fix; semantic ones (loops, bad values) name the object.
            context["import_errors"] = exc.details or [
                {"reason": f"{field}: {message}"} for field, texts in exc.errors.items() for message in texts
            ]
    return render(request, "web/mm2_import.html", context)


@viewer_required
def mm2_export(request):
    if request.GET.get("format") == "strimzi":
        response = HttpResponse(
            selectors.strimzi_export(role=request.web_role), content_type="application/yaml; charset=utf-8"
        )
        response["Content-Disposition"] = 'attachment; filename="kafkamirrormaker2.yaml"'
        return response
    response = HttpResponse(selectors.mm2_export(), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="mm2.properties"'
    return response
