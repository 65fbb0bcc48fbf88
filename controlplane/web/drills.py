"""Drills and cutovers on the web: the drill form and history on the failover page (and the last drill
on the flow page), the cutover form; the requests go to `controlplane.drills.drill_request` and
`controlplane.cutover.cutover_request` (operator, audited)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from controlplane import cutover, drills, operations, selectors
from controlplane.errors import ServiceConflict, ServiceValidationError
from controlplane.models import Flow, Operation, OperationKind
from controlplane.web.access import signed_in_required

HISTORY = 10


def drill_history(flow: Flow) -> QuerySet[Operation]:
    """The flow's newest drills (results prefetched): the history the failover page shows."""
    return operations.operation_list().filter(flow=flow, kind=OperationKind.DRILL)[:HISTORY]


def queue_operation(
    request, pk: int, kind: str, queue, *, bad_number: str = "give the seconds as numbers, e.g. 30"
) -> HttpResponse:
    """Queue through `queue(flow)` (202 and the operation's polling card) or show why not (a number that
    does not parse: `bad_number`); the services audit both. Failover, failback, drills and cutovers."""
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    context: dict = {"flow": flow, "kind": kind}
    try:
        operation = queue(flow)
    except ValueError:
        context["errors"] = [bad_number]
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
        timeout_s = float(request.POST.get("timeout_s") or drills.DEFAULT_DRILL_WAIT_S)
        return drills.drill_request(actor=request.user, flow=flow, groups=groups, timeout_s=timeout_s)

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
            fence_s=float(request.POST.get("fence_s") or cutover.DEFAULT_FENCE_S),
            timeout_s=float(request.POST.get("timeout_s") or operations.DEFAULT_DRAIN_TIMEOUT_S),
        )

    return queue_operation(request, pk, OperationKind.CUTOVER, queue)
