"""Thin web views: parse a form, call one service or selector, render. Roles as in the API: viewers read,
operators also pause, resume and test connections, admins change configuration."""

from __future__ import annotations

import os
import time

from django.contrib import messages
from django.contrib.auth import views as auth_views
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from controlplane import (
    alerts,
    assurance,
    engine,
    lifecycle,
    operations,
    pools,
    selectors,
    services,
    takeover,
    verification,
)
from controlplane import failover as flow_failover
from controlplane.api.views import CHECK_TIMEOUT_S, AuditFilter
from controlplane.errors import ClusterUnavailable, RateLimited, ServiceConflict, ServiceValidationError
from controlplane.models import (
    AuditAction,
    AuditOutcome,
    Flow,
    FlowState,
    Operation,
    OperationKind,
    ReportTrigger,
    SecurityProtocol,
)
from controlplane.roles import Role
from controlplane.web import drills as web_drills
from controlplane.web import summaries
from controlplane.web.access import admin_required, operator_required, signed_in_required, viewer_required
from controlplane.web.forms import PREVIEW_FIELDS, ClusterForm, FlowForm, Mm2ImportForm
from controlplane.web.listing import Filter, ListSpec, Sort, list_page
from replication.kafka.cluster_check import check_cluster
from replication.strimzi import missing_placeholders
from replication.takeover import MM2_SOURCE_CONNECTOR

AUDIT_PAGE_SIZE = 50

login = auth_views.LoginView.as_view(
    template_name="web/login.html", next_page="web:overview", redirect_authenticated_user=True
)
logout = auth_views.LogoutView.as_view(next_page="web:login")


def _back(request, default: str) -> str:
    """The page a POST came from (when it is ours), else `default`."""
    target = request.POST.get("next", "")
    if url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


# -- overview ---------------------------------------------------------------------------------------------
def _firing_first(flow_summaries: list) -> tuple[list, dict]:
    """The summaries with flows that have firing alerts first, and flow id -> its firing alerts."""
    firing = alerts.firing_by_flow()
    return sorted(flow_summaries, key=lambda summary: summary.flow.pk not in firing), firing


def _overview_context() -> dict:
    live = selectors.live_status()
    clusters = list(selectors.cluster_list())
    ordered, firing = _firing_first(live.flows)
    return {
        "summaries": ordered,
        "pool_waiting": [summary for summary in live.flows if summary.pool_without_workers],
        "firing": firing,
        "clusters": clusters,
        "topology": summaries.topology(clusters=clusters, summaries=live.flows),
        "readiness": assurance.flow_readiness_all(live.flows).values(),
        "healths": selectors.HEALTHS,
        "activity": live.replication,
        "back": reverse("web:overview"),
    }


@viewer_required
def overview(request):
    return render(request, "web/overview.html", _overview_context())


@viewer_required
def overview_live(request):
    return render(request, "web/_overview_live.html", _overview_context())


# -- pools ------------------------------------------------------------------------------------------------
@viewer_required
def pool_list(request):
    return render(request, "web/pools.html", {"pools": pools.pool_list(), "now": time.time()})


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
    result = check_cluster(engine.cluster_to_config(cluster), timeout_s=CHECK_TIMEOUT_S)
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


def flow_list_spec() -> ListSpec:
    """The flows list: firing alerts first unless sorted; filters by state, health and either cluster."""
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
            Filter("health", "Health", [(h, h) for h in selectors.HEALTHS], key=lambda s: s.health),
            Filter(
                "cluster",
                "Cluster",
                [(c.alias, c.alias) for c in selectors.cluster_list()],
                key=_flow_clusters,
            ),
        ),
    )


@viewer_required
def flow_list(request):
    ordered, firing = _firing_first(selectors.flow_summaries())
    listing = list_page(request, flow_list_spec(), ordered)
    return render(
        request,
        "web/flows.html",
        {
            "listing": listing,
            "summaries": listing.rows,
            "firing": firing,
            "activity": selectors.replication_activity(),
            "has_clusters": selectors.cluster_list().count() >= 2,
        },
        status=400 if listing.errors else 200,
    )


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
            if form.rpo_budget() != vars(alerts.rpo_budget_of(flow=flow)):
                alerts.rpo_budget_set(actor=request.user, flow=flow, **form.rpo_budget())
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


def _flow_detail_context(flow: Flow) -> dict:
    status = selectors.flow_status(flow=flow)
    errors = summaries.last_errors(status.events)
    budget = alerts.rpo_budget_of(flow=flow)
    return {
        "flow": flow,
        "summary": status,
        "partitions": [(p, errors.get((p.row.topic, p.row.partition))) for p in status.partitions],
        "events": status.events,
        "activity": selectors.replication_activity(),
        "budget": budget,
        "rpo": assurance.flow_rpo(status, budget=budget),
        "readiness": assurance.flow_readiness(status),
        "verification": verification.verification_status(flow=flow),
        "flow_alerts": list(alerts.alerts_firing().filter(flow=flow)),
        "pool_waiting": [status] if status.pool_without_workers else [],
        "last_drill": web_drills.drill_history(flow).first(),
        "back": reverse("web:flow", args=[flow.pk]),
    }


@viewer_required
def flow_detail(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    return render(request, "web/flow_detail.html", _flow_detail_context(flow))


@viewer_required
def flow_live(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    return render(request, "web/_flow_live.html", _flow_detail_context(flow))


@require_POST
@operator_required
def flow_pause(request, pk: int):
    flow = services.flow_pause(actor=request.user, flow=get_object_or_404(selectors.flow_list(), pk=pk))
    messages.success(request, f"Flow {flow.name} paused: positions are kept; Resume continues from there.")
    return redirect(_back(request, reverse("web:flow", args=[flow.pk])))


@require_POST
@operator_required
def flow_resume(request, pk: int):
    flow = services.flow_resume(actor=request.user, flow=get_object_or_404(selectors.flow_list(), pk=pk))
    messages.success(request, f"Flow {flow.name} resumed.")
    return redirect(_back(request, reverse("web:flow", args=[flow.pk])))


@require_POST
@admin_required
def flow_delete(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    name = flow.name
    services.flow_delete(actor=request.user, flow=flow)
    messages.success(request, f"Flow {name} deleted. Its remote topics on the target are kept.")
    return redirect("web:flows")


def _failback_preview(flow: Flow) -> dict:
    """What a failback would do: the groups the last failover moved, the topics that flow back, the
    reverse flow (and what it gains: it is never narrowed)."""
    failover = operations.last_failover(flow)
    moved = operations.moved_groups(failover)
    topics = sorted({topic for result in moved for topic in result.topics})
    reverse = flow_failover.reverse_flow_of(flow)
    merged = flow_failover.reverse_flow_settings(flow, reverse, topics=topics)["topics"]
    return {
        "failover": failover,
        "groups": moved,
        "topics": topics,
        "reverse": reverse,
        "reverse_name": f"{flow.target.alias}->{flow.source.alias}",
        "added": [pattern for pattern in merged if reverse is None or pattern not in reverse.topics],
    }


def _failover_page_context(flow: Flow) -> dict:
    active = operations.operation_active(flow)
    latest = active or operations.operation_latest(flow)
    allowed = lifecycle.allowed_actions(flow.state) if active is None else frozenset()
    context = {
        "flow": flow,
        "active": active,
        "latest": None if active else latest,
        "allowed": allowed,
        "stale": active is not None and operations.lease_stale(active),
        "readiness": assurance.flow_readiness(selectors.flow_status(flow=flow)),
        "drills": list(web_drills.drill_history(flow)),
    }
    if "failback" in allowed:
        context["failback"] = _failback_preview(flow)
    if (
        latest
        and latest.kind == OperationKind.FAILBACK
        and latest.outcome == "succeeded"
        and "resume" in allowed
    ):
        context["next_step"] = latest
    return context


@operator_required
def failover(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    return render(request, "web/failover.html", _failover_page_context(flow))


@operator_required
def failover_plan(request, pk: int):
    """The read-only plan (the dry run): checklist, records at risk, each group's translated offsets."""
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    context = {"flow": flow}
    try:
        context["plan"] = flow_failover.failover_plan(flow=flow, actor=request.user)
    except ClusterUnavailable as exc:
        context["problem"] = f"The plan could not be read: {exc}. Check both clusters with Test connection."
    except RateLimited as exc:
        context["problem"] = f"The plan was not read: {exc}."
    return render(request, "web/_failover_plan.html", context)


@viewer_required
def operation_status(request, pk: int, operation_id: int):
    """The operation's card, polled while it runs; when it has ended the page reloads to show the
    flow's new state and the actions it allows (one truthful state, no leftovers)."""
    operation = get_object_or_404(operations.operation_list(), pk=operation_id, flow_id=pk)
    context = {"operation": operation, "flow": operation.flow, "stale": operations.lease_stale(operation)}
    response = render(request, "web/_operation.html", context)
    if not operation.active and request.GET.get("polling"):
        response["HX-Refresh"] = "true"
    return response


def _request_operation(request, pk: int, *, kind: str, groups: list[str]) -> HttpResponse:
    """Queue the failover or failback (202 and its polling card) or show why not; the service audits both."""

    def queue(flow: Flow) -> Operation:
        return operations.operation_request(
            actor=request.user,
            kind=kind,
            flow=flow,
            confirm=request.POST.get("confirm", ""),
            groups=groups,
            force=bool(request.POST.get("force")),
            timeout_s=float(request.POST.get("timeout_s") or operations.DEFAULT_DRAIN_TIMEOUT_S),
        )

    return web_drills.queue_operation(
        request, pk, kind, queue, bad_number="timeout_s: give the drain timeout in seconds, e.g. 300"
    )


# Signed in is enough to reach the service: it refuses (and audits) anyone below operator.
@require_POST
@signed_in_required
def failover_execute(request, pk: int):
    return _request_operation(request, pk, kind=OperationKind.FAILOVER, groups=request.POST.getlist("groups"))


@require_POST
@signed_in_required
def failback_execute(request, pk: int):
    return _request_operation(request, pk, kind=OperationKind.FAILBACK, groups=request.POST.getlist("groups"))


# -- MM2 import / export ----------------------------------------------------------------------------------
@admin_required
def mm2_import(request):
    form = Mm2ImportForm(request.POST or None, request.FILES or None)
    context = {"form": form}
    if request.method == "POST" and form.is_valid():
        text = form.cleaned_data["text"]
        missing = missing_placeholders(text, environ=os.environ)
        typed = form.ask_for_placeholders(missing)
        unfilled = [name for name in missing if name not in typed]
        if unfilled:  # ask, keeping the text (an upload too) in the form; typed values are not shown again
            form.data = form.data.copy()
            form.data["text"] = text
            context["unfilled"] = unfilled
            return render(request, "web/mm2_import.html", context)
        dry_run = "apply" not in request.POST
        try:
            result = services.mm2_import(
                actor=request.user,
                text=text,
                dry_run=dry_run,
                environ={**os.environ, **typed},
                source_name="web import",
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


@operator_required
def mm2_takeover(request):
    """Take a flow over from a stopped MM2 (the MM2 import step after the import of the file): the form
    queues the dry run, a finished dry run offers apply; both are operations (`?operation=`), whose card
    polls while a worker runs them and then shows the plan per partition."""
    flows = list(selectors.flow_list().order_by("source__alias", "target__alias"))
    chosen = next((f for f in flows if str(f.pk) == request.POST.get("flow", request.GET.get("flow"))), None)
    shown = request.GET.get("operation", "")
    operation = (
        operations.operation_list().filter(pk=shown, flow=chosen, kind=OperationKind.TAKEOVER).first()
        if chosen and shown.isdigit() and len(shown) <= 18
        else None
    )
    context: dict = {
        "flows": flows,
        "chosen": chosen,
        "flow": chosen,
        "operation": operation,
        "stale": operation is not None and operations.lease_stale(operation),
        "offsets_topic": request.POST.get("offsets_topic", ""),
        "connector": request.POST.get("connector", MM2_SOURCE_CONNECTOR),
        "mm2_source_alias": request.POST.get("mm2_source_alias", ""),
        "default_offsets_topic": takeover.default_offsets_topic(chosen)
        if chosen
        else "mm2-offsets.<source>.internal",
    }
    if operation is not None and not request.POST:
        context |= {
            key: operation.result["request"][key]
            for key in ("offsets_topic", "connector", "mm2_source_alias")
        }
    if request.method != "POST":
        return render(request, "web/mm2_takeover.html", context)
    if chosen is None:
        context["errors"] = ["flow: choose the flow MM2 ran (import the MM2 file first)"]
        return render(request, "web/mm2_takeover.html", context, status=400)
    from_dry_run = request.POST.get("from_dry_run", "")
    try:
        queued = takeover.takeover_request(
            actor=request.user,
            flow=chosen,
            dry_run="apply" not in request.POST,
            offsets_topic=context["offsets_topic"],
            connector=context["connector"],
            mm2_source_alias=context["mm2_source_alias"],
            from_dry_run=int(from_dry_run) if from_dry_run.isdigit() and len(from_dry_run) <= 18 else None,
        )
    except operations.OperationActive as exc:
        context |= {"errors": [str(exc)], "operation": exc.operation}
        status = 409
    except ServiceValidationError as exc:
        context["errors"] = [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]
        status = 400
    except (ServiceConflict, RateLimited) as exc:
        context["errors"] = [str(exc)]
        status = 409 if isinstance(exc, ServiceConflict) else 429
    else:
        # Answered at once: the page of the queued operation, whose card polls until a worker ends it.
        response = redirect(f"{reverse('web:mm2-takeover')}?flow={chosen.pk}&operation={queued.pk}")
        response.status_code = 303
        return response
    return render(request, "web/mm2_takeover.html", context, status=status)


@viewer_required
def mm2_export(request):
    if request.GET.get("format") == "strimzi":
        response = HttpResponse(selectors.strimzi_export(), content_type="application/yaml; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="kafkamirrormaker2.yaml"'
        return response
    response = HttpResponse(selectors.mm2_export(), content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = 'attachment; filename="mm2.properties"'
    return response


# -- audit and reports ------------------------------------------------------------------------------------
AUDIT_LIST = ListSpec(
    sorts=(Sort("at"), Sort("actor", field="actor_name"), Sort("action"), Sort("object", field="object_repr"),
           Sort("outcome")),
    default_sort="-at",
    search_fields=("actor_name", "object_type", "object_repr", "object_id", "detail"),
    search_label="Search actor, object or detail",
    page_size=AUDIT_PAGE_SIZE,
)  # fmt: skip


@viewer_required
def audit(request):
    # The audit filters are the API's (django-filter); search, sort and pages the shared list helper's.
    filtered = AuditFilter(request.GET or None, queryset=selectors.audit_list())
    listing = list_page(request, AUDIT_LIST, filtered.qs)
    return render(
        request,
        "web/audit.html",
        {
            "filter": filtered,
            "listing": listing,
            "page": listing.page,
            "absent": summaries.ABSENT,  # a created field shows only its value
            "actions": AuditAction.choices,
            "outcomes": AuditOutcome.choices,
            "object_types": selectors.audit_list()
            .order_by("object_type")
            .values_list("object_type", flat=True)
            .distinct(),
        },
    )


# The report dashboards' pages (charts) live in dashboards.views; this is their index and the run controls.
REPORT_PAGES = (
    ("reports-lag", "Lag", "records and seconds behind, per flow and partition"),
    ("reports-throughput", "Throughput", "records/s and MB/s with p50/p95/max"),
    ("reports-latency", "Latency", "record age and replication latency percentiles"),
    ("reports-status", "Status", "Burrow status per partition over time, and per flow"),
    ("reports-capacity", "Capacity", "projected load, tasks and workers needed, the verdict"),
)
RECENT_REPORT_RUNS = 10


def _report_run_context(request) -> dict:
    return {
        "run": selectors.report_run_latest(),
        "can_run": request.web_role >= Role.OPERATOR,
    }


@viewer_required
def reports(request):
    rows = selectors.report_rows(dataset="capacity_plan")
    # In the plan's order: the fleet, then each pool's row followed by its flows'.
    plan = [row for row in rows if row.get("horizon_days") == 0]

    def scope(row: dict) -> tuple:
        return row["scope"], row.get("pool"), row["flow_name"]

    # What to add to last `plan_months`: that horizon's row of the same scope.
    ahead = {scope(row): row for row in rows if row.get("horizon_days") == 30 * (row.get("plan_months") or 0)}
    for row in plan:
        row["plan"] = ahead.get(scope(row))
        pool = row.get("pool")  # none on the fleet's rows (and on rows stored before pools were planned)
        row["pool_label"] = (
            "all" if row["scope"] == "overall" else "—" if pool is None else pools.pool_label(pool)
        )
        share = row.get("network_utilization")  # 0.000 would hide 0.014% of a 10 Gbit/s NIC
        row["network_share"] = "—" if share is None else "< 0.01%" if 0 < share < 0.0001 else f"{share:.2%}"
    return render(
        request,
        "web/reports.html",
        {
            **_report_run_context(request),
            "pages": REPORT_PAGES,
            "runs": selectors.report_run_list()[:RECENT_REPORT_RUNS],
            "verdicts": plan,
        },
    )


@viewer_required
def reports_run_status(request):
    return render(request, "web/_report_run.html", _report_run_context(request))


@operator_required
@require_POST
def reports_run(request):
    try:
        services.report_run_request(actor=request.user, trigger=ReportTrigger.USER)
    except services.ReportRunActive as exc:
        messages.warning(request, str(exc))
    else:
        messages.success(request, "Report run queued: the reports worker picks it up within seconds.")
    return redirect(_back(request, reverse("web:reports")))
