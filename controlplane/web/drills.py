"""Drills on the web: the form and history on the failover page (and the last drill on the flow page);
the request goes to `controlplane.drills.drill_request` (operator, audited)."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_POST

from controlplane import drills, operations, selectors
from controlplane.errors import ServiceConflict, ServiceValidationError
from controlplane.models import Flow, Operation, OperationKind
from controlplane.web.access import signed_in_required

HISTORY = 10


def drill_history(flow: Flow) -> QuerySet[Operation]:
    """The flow's newest drills (results prefetched): the history the failover page shows."""
    return operations.operation_list().filter(flow=flow, kind=OperationKind.DRILL)[:HISTORY]


# Signed in is enough to reach the service: it refuses (and audits) anyone below operator.
@require_POST
@signed_in_required
def drill_execute(request, pk: int):
    flow = get_object_or_404(selectors.flow_list(), pk=pk)
    context: dict = {"flow": flow, "kind": OperationKind.DRILL}
    groups = [g for g in request.POST.get("groups", "").replace(",", " ").split() if g]
    try:
        timeout_s = float(request.POST.get("timeout_s") or drills.DEFAULT_DRILL_WAIT_S)
        operation = drills.drill_request(actor=request.user, flow=flow, groups=groups, timeout_s=timeout_s)
    except ValueError:
        context["errors"] = ["timeout_s: give the wait in seconds, e.g. 30"]
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
