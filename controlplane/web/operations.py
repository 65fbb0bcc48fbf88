"""Operations on the web: the failover page (plan, failover, failback, the drill form and history, the
cutover form), an operation's polling card, and taking a flow over from MM2. Every request goes to its
kind's module in controlplane.operations (operator, audited); `queue_operation` renders the answer of
all five."""

from __future__ import annotations

import time

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from controlplane import assurance, operations
from controlplane.core.errors import RateLimited, ServiceConflict, ServiceValidationError
from controlplane.core.statements import first_row, statement
from controlplane.flows import engine, lifecycle, selectors
from controlplane.flows.models import Flow
from controlplane.operations import cutover, drills, failback, plans, takeover
from controlplane.operations.models import Operation, OperationKind
from controlplane.status import rollup
from controlplane.web.access import operator_required, signed_in_required, viewer_required
from controlplane.web.waits import form_seconds, form_waits
from replication.takeover import MM2_SOURCE_CONNECTOR

HISTORY = 10


def drill_history(flow: Flow) -> QuerySet[Operation]:
    """The flow's newest drills (results prefetched): the history the failover page shows."""
    return operations.operation_list().filter(flow=flow, kind=OperationKind.DRILL)[:HISTORY]


def last_drill(flow: Flow) -> Operation | None:
    """The flow's newest drill as the flow page's line shows it: its own row only (the history's joins
    and prefetches compiled about 1.8 ms per flow page for columns the line does not show)."""
    rows = _last_drill(flow_id=flow.pk)
    return rows[0] if rows else None


@statement
def _last_drill(flow_id: int):
    return first_row(Operation.objects.filter(flow_id=flow_id, kind=OperationKind.DRILL))


def queue_operation(request, pk: int, kind: str, queue) -> HttpResponse:
    """Queue through `queue(flow)` (202 and the operation's polling card) or show why not (a field's
    message for a number that does not parse); the services audit both. Failover, failback, drills and cutovers."""
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    context: dict = {"flow": flow, "kind": kind}
    try:
        # The role before the form: a refusal is audited, whatever the form holds.
        operations.require_operator(actor=request.user, kind=kind, flow=flow)
        operation = queue(flow)
    except operations.OperationActive as exc:
        context |= {"errors": [str(exc)], "operation": exc.operation}
    except ServiceValidationError as exc:
        context["errors"] = [f"{name}: {text}" for name, texts in exc.errors.items() for text in texts]
    except (ServiceConflict, PermissionDenied) as exc:
        context["errors"] = [str(exc)]
    else:
        context["operation"] = operation
        return render(request, "web/_operation_started.html", context, status=202)
    return render(request, "web/_operation_refused.html", context)


# Signed in is enough to reach the services: they refuse (and audit) anyone below operator.
@require_POST
@signed_in_required
def drill_execute(request, pk: int):
    def queue(flow: Flow) -> Operation:
        groups = [g for g in request.POST.get("drill_groups", "").replace(",", " ").split() if g]
        waits = form_waits(request.POST, OperationKind.DRILL)
        return drills.drill_request(actor=request.user, flow=flow, groups=groups, **waits)

    return queue_operation(request, pk, OperationKind.DRILL, queue)


@require_POST
@signed_in_required
def cutover_execute(request, pk: int):
    def queue(flow: Flow) -> Operation:
        return cutover.cutover_request(
            actor=request.user,
            flow=flow,
            confirm=request.POST.get("confirm", ""),
            dry_run=bool(request.POST.get("dry_run")),
            fence_s=form_seconds(request.POST, "fence_s", cutover.DEFAULT_FENCE_S),
            **form_waits(request.POST, OperationKind.CUTOVER),
        )

    return queue_operation(request, pk, OperationKind.CUTOVER, queue)


def _failback_preview(flow: Flow) -> dict:
    """What a failback would do: the groups the last failover moved, the topics that flow back, the
    reverse flow (and what it gains: it is never narrowed)."""
    failover = operations.last_failover(flow)
    moved = operations.moved_groups(failover)
    topics = sorted({topic for result in moved for topic in result.topics})
    reverse = failback.reverse_flow_of(flow)
    merged = failback.reverse_flow_settings(flow, reverse, topics=topics)["topics"]
    return {
        "failover": failover,
        "groups": moved,
        "topics": topics,
        "reverse": reverse,
        "reverse_name": f"{flow.target.alias}->{flow.source.alias}",
        "added": [pattern for pattern in merged if reverse is None or pattern not in reverse.topics],
    }


def _switch_clients(flow: Flow) -> dict:
    """After a failover: which consumer groups to start on the target and what they read there (the
    replicated history under its remote names, where their offsets were written, and the topics' own names,
    where producers write from now on and where failback brings records home from)."""
    moved = operations.moved_groups(operations.last_failover(flow))
    selection = engine.topic_selection(flow)
    remote = {
        topic: selection.policy.format_remote_topic(flow.source.alias, topic)
        for result in moved
        for topic in result.topics
    }
    return {
        "groups": [
            {
                "group": result.group,
                "reads": sorted({remote[t] for t in result.topics} | set(result.topics)),
                "partitions_written": len(result.written),
            }
            for result in moved
        ],
        "producer_topics": sorted(remote),
        "renamed": any(topic != name for topic, name in remote.items()),
    }


# The three on-call pages of a flow (each its own URL, linked by one tab bar): failover and failback,
# the migration cutover, the drills. Each shows the flow's running operation, whatever its kind (one runs
# at a time), and the last operation of its own kinds.
PAGES = {
    "failover": (OperationKind.FAILOVER, OperationKind.FAILBACK),
    "cutover": (OperationKind.CUTOVER,),
    "drills": (OperationKind.DRILL,),
}


def _operations_page_context(flow: Flow, page: str) -> dict:
    active = operations.operation_active(flow)
    latest = operations.operation_latest(flow, kinds=PAGES[page])
    allowed = lifecycle.allowed_actions(flow.state) if active is None else frozenset()
    return {
        "flow": flow,
        "page": page,
        "active": active,
        "latest": None if active else latest,
        "allowed": allowed,
        "stale": active is not None and operations.lease_stale(active),
    }


def _failover_page_context(flow: Flow) -> dict:
    context = _operations_page_context(flow, "failover")
    latest, allowed = context["latest"], context["allowed"]
    context["readiness"] = assurance.flow_readiness(rollup.flow_status(flow=flow))
    if "failback" in allowed:
        context["failback"] = _failback_preview(flow)
        context["switch"] = _switch_clients(flow)
    if (
        latest
        and latest.kind == OperationKind.FAILBACK
        and latest.outcome == "succeeded"
        and "resume" in allowed
    ):
        context["next_step"] = latest
    return context


@operator_required
def failover_page(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    return render(request, "web/failover.html", _failover_page_context(flow))


@operator_required
def cutover_page(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    return render(request, "web/cutover.html", _operations_page_context(flow, "cutover"))


@operator_required
def drills_page(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    context = _operations_page_context(flow, "drills") | {"drills": list(drill_history(flow))}
    return render(request, "web/drills.html", context)


def drills_view(request, pk: int):
    """GET: the drills page; POST: run a drill."""
    return (drill_execute if request.method == "POST" else drills_page)(request, pk)


def cutover_view(request, pk: int):
    """GET: the cutover page; POST: queue a cutover (or its dry run)."""
    return (cutover_execute if request.method == "POST" else cutover_page)(request, pk)


@operator_required
def failover_plan(request, pk: int):
    """The read-only plan (the dry run): checklist, records at risk, each group's translated offsets.

    Read by the operations workers, never in this request (controlplane.operations.plans): the last plan
    with its age; when it is older than PLAN_FRESH_S (or `refresh=1`), a fresh one is asked for and this
    fragment polls itself (`since`: when it first asked) until it is in."""
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    stored = plans.plan_stored(flow)
    now = time.time()
    try:
        since = float(request.GET.get("since", ""))
    except ValueError:
        since = now
    since = min(since, now)
    wanted = stored is None or not stored.fresh or (request.GET.get("refresh") == "1" and stored.age_s() > 2)
    if wanted:
        plans.plan_request(flow)
    context = {
        "flow": flow,
        "stored": stored,
        "plan": stored.plan if stored else None,
        "problem": stored.problem if stored else "",
        "computing": wanted,
        "since": f"{since:.3f}",
        "waiting_s": now - since,
        "workers_late": wanted and now - since > plans.WORKERS_LATE_S,
    }
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
            **form_waits(request.POST, kind),
        )

    return queue_operation(request, pk, kind, queue)


# Signed in is enough to reach the service: it refuses (and audits) anyone below operator.
@require_POST
@signed_in_required
def failover_execute(request, pk: int):
    return _request_operation(request, pk, kind=OperationKind.FAILOVER, groups=request.POST.getlist("groups"))


@require_POST
@signed_in_required
def failback_execute(request, pk: int):
    return _request_operation(request, pk, kind=OperationKind.FAILBACK, groups=request.POST.getlist("groups"))


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
