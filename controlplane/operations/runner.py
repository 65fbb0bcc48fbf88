"""The runner: claim an operation and run its phases (the module of its kind: controlplane.operations.dispatch),
then end it: the outcome recorded and audited, the flow returned to where it was when it failed.

A worker that stops mid-operation (`requests.HandedOver`) releases it at its recorded phase, one that lost its
lease (`LeaseLost`) stops without touching it: another worker resumes it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.db import close_old_connections

from controlplane.core.errors import ClusterUnavailable, ServiceConflict
from controlplane.core.models import AuditOutcome
from controlplane.flows import lifecycle
from controlplane.flows.models import FlowState
from controlplane.operations import dispatch, requests
from controlplane.operations.models import Operation, OperationKind, OperationOutcome
from replication.cluster_ports import FailoverIOError

log = logging.getLogger(__name__)

Echo = Callable[[Operation], None]


def run_operation(*, operation_id: int, worker: str, echo: Echo = lambda operation: None) -> Operation | None:
    """Claim operation `operation_id` for `worker` and run it from its recorded phase to its end.

    None when it is finished or another worker holds it. Failures end the operation (`failed`, the flow
    back where it was) with the error, audited; they are not raised.
    """
    if requests.STOPPING.is_set():  # a message that reached a stopping worker: beat sends it again
        return None
    operation = requests.operation_claim(operation_id=operation_id, worker=worker)
    if operation is None:
        return None

    def step(**fields: Any) -> None:
        requests.operation_renew(operation=operation, **fields)
        echo(operation)

    run = dispatch.runner_of(operation.kind)
    try:
        step(message=f"{operation.phase}: taken by {worker}")
        run(operation, step)
    except requests.LeaseLost:
        log.warning("operation %s: another worker took it over; this one stops", operation.pk)
        return None
    except requests.HandedOver:
        requests.operation_release(operation=operation)
        log.info("operation %s: this worker stops; another resumes it at %s", operation.pk, operation.phase)
        return None
    except requests.ChecksFailed as exc:
        _abort(operation)  # a resumed planning may find failed checks after begin_failover
        _end(operation, OperationOutcome.REFUSED, error=str(exc))
    except Exception as exc:
        if not isinstance(exc, ServiceConflict | ClusterUnavailable | FailoverIOError):
            log.exception("operation %s failed", operation.pk)
        close_old_connections()  # the database may be why it failed
        _abort(operation)
        _end(operation, OperationOutcome.FAILED, error=f"{exc}" or type(exc).__name__)
    else:
        _end(operation, OperationOutcome.SUCCEEDED)
    echo(operation)
    return operation


def _abort(operation: Operation) -> None:
    """Return the flow from FAILING_OVER or MIGRATING (to its previous state) or FAILING_BACK (to
    FAILED_OVER)."""
    flow = operation.flow
    flow.refresh_from_db(fields=["state"])
    if operation.kind == OperationKind.FAILOVER and flow.state == FlowState.FAILING_OVER:
        lifecycle.abort_failover(flow=flow, previous=operation.previous_state)
    elif operation.kind == OperationKind.FAILBACK and flow.state == FlowState.FAILING_BACK:
        lifecycle.abort_failback(flow=flow)
    elif operation.kind == OperationKind.CUTOVER and flow.state == FlowState.MIGRATING:
        lifecycle.abort_cutover(flow=flow, previous=operation.previous_state)


AUDIT_OUTCOMES = {
    OperationOutcome.SUCCEEDED: AuditOutcome.SUCCESS,
    OperationOutcome.FAILED: AuditOutcome.FAILURE,
    OperationOutcome.REFUSED: AuditOutcome.REFUSED,
}


def _end(operation: Operation, outcome: str, *, error: str = "") -> None:
    flow = operation.flow
    flow.refresh_from_db(fields=["state"])
    message = f"{flow.name} is {flow.state}"
    if not requests.operation_finish(operation=operation, outcome=outcome, error=error, message=message):
        return  # another worker holds it now and will end it
    refused = [r.group for r in operation.group_results.all() if r.outcome == "refused"]
    detail = error or (f"groups refused: {', '.join(refused)}" if refused else "")
    if operation.force and outcome == OperationOutcome.SUCCEEDED:
        failed = [i["check"] for i in (operation.plan or {}).get("checklist", []) if i["status"] == "fail"]
        if failed:
            detail = f"forced past failed checks: {', '.join(failed)}. {detail}".strip()
    requests.audit(
        actor=operation.requested_by,
        kind=operation.kind,
        flow=flow,
        outcome=AUDIT_OUTCOMES[outcome],
        detail=detail,
        after=operation_summary(operation),
    )


def operation_summary(operation: Operation) -> dict:
    """What the audit log keeps of an operation: request, plan, drain, per-group results, outcome."""
    return {
        "operation": operation.pk,
        "kind": operation.kind,
        "outcome": operation.outcome,
        "phase": operation.phase,
        "groups": [
            {
                "group": r.group,
                "outcome": r.outcome,
                "written": r.written,
                "topics": r.topics,
                "detail": r.detail,
            }
            for r in operation.group_results.all()
        ],
        "force": operation.force,
        "records_at_risk": operation.records_at_risk,
        "drain": {
            "done": operation.drain_done,
            "records_remaining": operation.drain_records_remaining,
            "partitions": len(operation.drain_partitions),
        },
        "topics_back": operation.topics_back,
        "reverse_flow": operation.reverse_flow.name if operation.reverse_flow_id else None,
        "plan": operation.plan,
        "result": operation.result,
    }
