"""Operations (failover, failback, drill, cutover, takeover): durable jobs a request queues and a worker
runs, phase by phase (drills: `controlplane.operations.drills`; cutovers: `controlplane.operations.cutover`; taking a flow over
from MM2: `controlplane.operations.takeover`).

A request (API, web UI, command line) checks what it can without touching a cluster (the role, the
confirmation, the groups, the flow's lifecycle state, one operation per flow), stores an `Operation`
and audits it as `accepted`; every refusal is audited as `refused`. Beat hands queued operations to
the `operations` queue (`workers.operations`); the worker that takes one holds a lease on its row (the
`worker` token and `heartbeat_at`, renewed at every step), and `controlplane.operations.runner` runs its phases.
An operation whose worker stops renewing for OPERATION_LEASE_S is handed to another worker, which
resumes at the recorded phase: every phase is idempotent. The outcome is audited by whoever finishes it.
"""

from __future__ import annotations

import datetime
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from controlplane import core
from controlplane.core import ratelimit
from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditOutcome
from controlplane.core.roles import Role, role_of
from controlplane.flows import lifecycle
from controlplane.flows.models import Flow
from controlplane.operations.models import (
    GroupOutcome,
    Operation,
    OperationGroupResult,
    OperationKind,
    OperationOutcome,
    OperationPhase,
)
from replication.policy import is_identity_policy_class

DEFAULT_DRAIN_TIMEOUT_S = 300.0
MAX_DRAIN_TIMEOUT_S = 3600.0


class OperationActive(ServiceConflict):
    """The flow already has a queued or running operation: one at a time per flow."""

    def __init__(self, operation: Operation) -> None:
        self.operation = operation
        super().__init__(
            f"{operation.kind} {operation.pk} of this flow is already {operation.phase} "
            f"(requested {operation.requested_at:%Y-%m-%d %H:%M:%S} UTC): follow it, or wait for it to end"
        )


class LeaseLost(Exception):
    """Another worker took the operation over (this one was too slow to renew): stop without writing."""


# -- audit ------------------------------------------------------------------------------------------------
def audit(*, actor, kind: str, flow: Flow, outcome: str, detail: str = "", after: Any = None) -> None:
    core.audit_record(
        actor=actor,
        action=kind,
        object_type="flow",
        object_id=flow.pk,
        object_repr=flow.name,
        outcome=outcome,
        detail=detail,
        after=after,
    )


def require_operator(*, actor, kind: str, flow: Flow) -> None:
    """Operators and admins only; the command line (no actor) runs as the system. Refusals are audited."""
    if actor is None:
        return
    role = role_of(actor)
    if role is None or role < Role.OPERATOR:
        held = "no role" if role is None else f"the {role.group_name} role"
        message = f"{kind} needs the operator role; you have {held}"
        audit(actor=actor, kind=kind, flow=flow, outcome=AuditOutcome.REFUSED, detail=message)
        raise PermissionDenied(message)


# -- request ----------------------------------------------------------------------------------------------
def check_confirmation(*, flow: Flow, confirm: str) -> None:
    if confirm != flow.name:
        raise ServiceValidationError.single(
            "confirm", f"type the flow's name exactly ({flow.name}) to confirm; got {confirm!r}"
        )


def clean_groups(groups: Sequence[str] | None) -> list[str]:
    return sorted({group.strip() for group in groups or () if group.strip()})


def check_drain_timeout(drain_timeout_s: float) -> None:
    if not 0 <= drain_timeout_s <= MAX_DRAIN_TIMEOUT_S:
        raise ServiceValidationError.single(
            "drain_timeout_s", f"give a drain timeout between 0 and {MAX_DRAIN_TIMEOUT_S:g} seconds"
        )


def check_allowed(*, flow: Flow, kind: str) -> None:
    if kind not in lifecycle.allowed_actions(flow.state):
        raise lifecycle.IllegalTransition(flow_name=flow.name, state=flow.state, transition=f"begin_{kind}")


def last_failover(flow: Flow) -> Operation | None:
    """The flow's newest succeeded failover: the groups it moved and their topics are failback's input."""
    return (
        Operation.objects.filter(flow=flow, kind=OperationKind.FAILOVER, outcome=OperationOutcome.SUCCEEDED)
        .prefetch_related("group_results")
        .first()
    )


def moved_groups(failover: Operation | None) -> list[OperationGroupResult]:
    """The groups a failover moved (offsets written or already there), with their topics."""
    if failover is None:
        return []
    return [r for r in failover.group_results.all() if r.outcome != GroupOutcome.REFUSED]


def _check_provenance(*, flow: Flow, force: bool) -> None:
    if (
        is_identity_policy_class(flow.replication_policy_class)
        and not flow.provenance_header_enabled
        and not force
    ):
        raise ServiceConflict(
            f"{flow.name} uses IdentityReplicationPolicy without provenance.header.enabled: the records it "
            f"mirrored to {flow.target.alias} carry no mark, so the reverse flow would copy them back as "
            "duplicates. Use force to accept that"
        )


def _failback_groups(*, flow: Flow, groups: list[str]) -> tuple[Operation | None, list[str]]:
    failover = last_failover(flow)
    moved = {result.group for result in moved_groups(failover)}
    if not groups:
        if not moved:
            raise ServiceValidationError.single(
                "groups", f"no failover of {flow.name} moved a group: name the groups to move back"
            )
        return failover, sorted(moved)
    return failover, groups


def operation_request(
    *,
    actor,
    kind: str,
    flow: Flow,
    confirm: str,
    groups: Sequence[str] | None = None,
    force: bool = False,
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
) -> Operation:
    """Queue a failover or failback of `flow` (a worker runs it); refused, and audited, when the actor
    is below operator, the confirmation or the groups are wrong, the flow's state does not allow it, or
    another operation of the flow is active (OperationActive, with that operation)."""
    with locked_request(actor=actor, kind=kind, flow=flow) as flow:
        check_confirmation(flow=flow, confirm=confirm)
        check_drain_timeout(drain_timeout_s)
        refuse_if_active(flow)
        check_allowed(flow=flow, kind=kind)
        chosen, failover = clean_groups(groups), None
        if kind == OperationKind.FAILOVER and not chosen:
            raise ServiceValidationError.single("groups", "name at least one consumer group to move")
        if kind == OperationKind.FAILBACK:
            _check_provenance(flow=flow, force=force)
            failover, chosen = _failback_groups(flow=flow, groups=chosen)
        return queue(
            actor=actor,
            kind=kind,
            flow=flow,
            fields={
                "groups": chosen,
                "force": force,
                "drain_timeout_s": drain_timeout_s,
                "failover": failover,
            },
            audited={"groups": chosen, "force": force, "drain_timeout_s": drain_timeout_s},
        )


# -- the skeleton every kind's request shares ------------------------------------------------------------
@contextmanager
def locked_request(*, actor, kind: str, flow: Flow, rate_limit: str = "") -> Iterator[Flow]:
    """Operators only (a refusal audited), rate-limited per user when `rate_limit` names a scope, then the
    attempt audited (any refusal raised inside too) with the flow's row locked: the body checks its kind's
    inputs, calls `refuse_if_active`, checks the flow's state and `queue`s the operation."""
    require_operator(actor=actor, kind=kind, flow=flow)
    if rate_limit:
        ratelimit.hit(
            scope=rate_limit,
            user_id=getattr(actor, "pk", None),
            limit=settings.FAILOVER_PLAN_RATE_PER_MINUTE,
            window_s=60,
        )
    with core.audited_attempt(
        actor=actor, action=kind, object_type="flow", object_id=flow.pk, object_repr=flow.name
    ):
        yield Flow.objects.select_for_update().select_related("source", "target").get(pk=flow.pk)


def refuse_if_active(flow: Flow) -> None:
    """One operation per flow: OperationActive (with it) while another one is active."""
    active = Operation.objects.filter(flow=flow, active=True).first()
    if active is not None:
        raise OperationActive(active)


def queue(
    *, actor, kind: str, flow: Flow, fields: dict[str, Any], audited: dict[str, Any], detail: str = ""
) -> Operation:
    """Store the operation, queued, and audit it as accepted (`audited`: what the audit keeps of the
    request; `detail` follows "operation N queued")."""
    operation = operation_create(kind=kind, flow=flow, actor=actor, **fields)
    audit(
        actor=actor,
        kind=kind,
        flow=flow,
        outcome=AuditOutcome.ACCEPTED,
        detail=f"operation {operation.pk} queued{detail}",
        after={"operation": operation.pk, **audited},
    )
    return operation


def operation_create(*, kind: str, flow: Flow, actor, **fields: Any) -> Operation:
    """Store a new operation of `flow`, queued; OperationActive when another one is active (a
    concurrent request may have won the flow's one active slot)."""
    try:
        with transaction.atomic():
            return Operation.objects.create(
                kind=kind,
                flow=flow,
                requested_by=actor if getattr(actor, "pk", None) else None,
                message="waiting for an operations worker",
                **fields,
            )
    except IntegrityError:
        raise OperationActive(Operation.objects.get(flow=flow, active=True)) from None


# -- the worker's side: lease, progress, results, outcome -------------------------------------------------
def _lease_s() -> float:
    return settings.MIRRORPLANE_OPERATION_LEASE_S


def _lease_expired(now: datetime.datetime) -> Q:
    return Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=now - datetime.timedelta(seconds=_lease_s()))


def operation_claim(*, operation_id: int, worker: str) -> Operation | None:
    """Take the lease of active operation `operation_id` for `worker`; None when it is finished or its
    lease holder is alive (another worker runs it)."""
    now = timezone.now()
    claimed = (
        Operation.objects.filter(pk=operation_id, active=True)
        .filter(_lease_expired(now))
        .update(worker=worker[:200], heartbeat_at=now, attempts=F("attempts") + 1)
    )
    if not claimed:
        return None
    Operation.objects.filter(pk=operation_id, started_at__isnull=True).update(started_at=now)
    return Operation.objects.select_related("flow__source", "flow__target", "requested_by").get(
        pk=operation_id
    )


def operation_renew(*, operation: Operation, **fields: Any) -> None:
    """Renew the lease and store `fields` (phase, progress, drain figures) on the row and on `operation`.

    Raises LeaseLost when another worker holds the lease now.
    """
    now = timezone.now()
    updated = Operation.objects.filter(pk=operation.pk, worker=operation.worker, active=True).update(
        heartbeat_at=now, **fields
    )
    if not updated:
        raise LeaseLost(f"operation {operation.pk} is run by another worker now")
    operation.heartbeat_at = now
    for name, value in fields.items():
        setattr(operation, name, value)


def operation_store_group(
    *, operation: Operation, group: str, outcome: str, written: dict, topics: list, detail: str
) -> OperationGroupResult:
    """Record (or, on a resumed run, replace) what the operation did to `group`."""
    result, _ = OperationGroupResult.objects.update_or_create(
        operation=operation,
        group=group,
        defaults={"outcome": outcome, "written": written, "topics": topics, "detail": detail},
    )
    return result


def operation_finish(*, operation: Operation, outcome: str, error: str = "", message: str = "") -> bool:
    """End the operation (its lease released); False when another worker holds it (nothing changed)."""
    now = timezone.now()
    fields: dict[str, Any] = {
        "outcome": outcome,
        "active": False,
        "finished_at": now,
        "heartbeat_at": now,
        "error": error,
        "message": message[:500],
    }
    if outcome == OperationOutcome.SUCCEEDED:
        fields |= {"phase": OperationPhase.DONE, "progress": 1.0}
    updated = Operation.objects.filter(pk=operation.pk, worker=operation.worker, active=True).update(**fields)
    for name, value in fields.items():
        setattr(operation, name, value)
    return bool(updated)


def operation_release(*, operation: Operation) -> None:
    """Give the lease up at once (this worker stops): beat sends the operation to another worker, which
    resumes it at its phase."""
    Operation.objects.filter(pk=operation.pk, worker=operation.worker, active=True).update(
        worker="", heartbeat_at=None, dispatched_at=None, message=f"{operation.phase}: handed over"
    )


# -- beat's side ------------------------------------------------------------------------------------------
def operations_to_dispatch(*, now: datetime.datetime | None = None) -> QuerySet[Operation]:
    """Active operations nobody runs: never taken, or their worker stopped renewing the lease; and not
    handed to the queue within the lease either (a message may wait for a busy worker that long)."""
    now = now or timezone.now()
    recent = now - datetime.timedelta(seconds=_lease_s())
    return (
        Operation.objects.filter(active=True)
        .filter(_lease_expired(now))
        .filter(Q(dispatched_at__isnull=True) | Q(dispatched_at__lt=recent))
        .order_by("id")
    )


def operation_dispatched(*, operation: Operation) -> None:
    Operation.objects.filter(pk=operation.pk).update(dispatched_at=timezone.now())


def lease_stale(operation: Operation, *, now: datetime.datetime | None = None) -> bool:
    """True when an operation a worker took has not been renewed within the lease (its worker died)."""
    if not operation.active or operation.heartbeat_at is None:
        return False
    return ((now or timezone.now()) - operation.heartbeat_at).total_seconds() > _lease_s()


# -- reads (here, not in selectors.py: the operation's reads and writes change together) -----------------
def operation_list() -> QuerySet[Operation]:
    return Operation.objects.select_related(
        "flow__source", "flow__target", "requested_by", "reverse_flow__source", "reverse_flow__target"
    ).prefetch_related("group_results", "drill_results")


def operation_active(flow: Flow) -> Operation | None:
    return operation_list().filter(flow=flow, active=True).first()


def operation_latest(flow: Flow, *, kinds: Iterable[str] | None = None) -> Operation | None:
    """The flow's newest operation (of one of `kinds` when given)."""
    found = operation_list().filter(flow=flow)
    return (found if kinds is None else found.filter(kind__in=list(kinds))).first()


class ChecksFailed(ServiceConflict):
    """The plan's checks failed and the operation was not forced: nothing changed."""


class HandedOver(Exception):
    """This process is stopping (a warm shutdown, a rolling upgrade): leave the operation to another."""


# Set when the worker process shuts down warm (workers.operations): a drain hands its operation over at
# its next look instead of holding the shutdown for up to its timeout.
STOPPING = threading.Event()
