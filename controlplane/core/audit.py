"""The audit log: every write of the control plane records who did what, with which outcome; its reads
(`audit_list`, filtered by `AuditFilter` on the audit page and the API).

`audited_attempt` wraps a write so that a refusal or a failure is audited too (outcome "refused" or
"failure"); `audit_record` writes one event; secrets never reach it (only their names, masked).
"""

from __future__ import annotations

import contextlib
import datetime
from typing import Any

import django_filters
from django.core.exceptions import ValidationError
from django.db import transaction
from django.db.models import QuerySet

from controlplane.core.client_address import current_client_address
from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditAction, AuditEvent, AuditOutcome


# -- audit ------------------------------------------------------------------------------------------------
def _actor_name(actor) -> str:
    return getattr(actor, "username", "") or "system"


def audit_record(
    *,
    actor,
    action: str,
    object_type: str,
    object_id: object = "",
    object_repr: str = "",
    before: Any = None,
    after: Any = None,
    outcome: str = AuditOutcome.SUCCESS,
    detail: str = "",
    actor_name: str = "",
) -> AuditEvent:
    """Record who did what to which object, with its before/after (callers pass secret-free views).
    `actor_name` names an actor who has no user here (someone an identity provider vouched for, refused)."""
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=(actor_name or _actor_name(actor))[:150],
        action=action,
        object_type=object_type,
        object_id=str(object_id or ""),
        object_repr=object_repr[:300],
        before=before,
        after=after,
        outcome=outcome,
        detail=detail,
        client_address=current_client_address(),
    )


_METHOD_ACTIONS = {"POST": AuditAction.CREATE, "PUT": AuditAction.UPDATE, "PATCH": AuditAction.UPDATE}


def audit_role_refusal(
    *,
    actor,
    method: str,
    path: str,
    object_type: str,
    object_id: object = "",
    action: str | None = None,
    message: str,
) -> AuditEvent:
    """A write refused for the actor's role (API or web), recorded before its body is read: who, which
    request, why. `action` when it is an audit action (pause, delete...), else the method's."""
    if action is None or action not in AuditAction.values:
        action = _METHOD_ACTIONS.get(method, AuditAction.DELETE)
    return audit_record(
        actor=actor,
        action=action,
        object_type=object_type.lower()[:30],
        object_id=object_id,
        object_repr=path,
        outcome=AuditOutcome.REFUSED,
        detail=f"{method} {path}: {message}",
    )


@contextlib.contextmanager
def audited_attempt(*, actor, action: str, object_type: str, object_id: object = "", object_repr: str = ""):
    """Run a change atomically; when it is refused, roll it back and record the refusal."""
    try:
        with transaction.atomic():
            yield
    except (ServiceValidationError, ServiceConflict) as exc:
        audit_record(
            actor=actor,
            action=action,
            object_type=object_type,
            object_id=object_id,
            object_repr=object_repr,
            outcome=AuditOutcome.REFUSED,
            detail=str(exc),
        )
        raise


def audit_list() -> QuerySet[AuditEvent]:
    return AuditEvent.objects.select_related("actor")


class UtcIsoDateTimeField(django_filters.fields.IsoDateTimeField):
    """ISO 8601 date-time read in UTC: any offset Python accepts (up to 23:59) reaches the database as
    UTC, which PostgreSQL always accepts (it refuses offsets beyond 15:59)."""

    def to_python(self, value):
        parsed = super().to_python(value)
        if parsed is None:
            return None
        try:
            return parsed.astimezone(datetime.UTC)
        except OverflowError:
            raise ValidationError("date-time out of range", code="invalid") from None


class UtcIsoDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcIsoDateTimeField


class AuditFilter(django_filters.FilterSet):
    actor = django_filters.CharFilter(field_name="actor_name")
    action = django_filters.ChoiceFilter(choices=AuditAction.choices)
    outcome = django_filters.ChoiceFilter(choices=AuditOutcome.choices)
    at_after = UtcIsoDateTimeFilter(
        field_name="at", lookup_expr="gte", help_text="events at or after (ISO 8601)"
    )
    at_before = UtcIsoDateTimeFilter(
        field_name="at", lookup_expr="lte", help_text="events at or before (ISO 8601)"
    )

    class Meta:
        model = AuditEvent
        fields = ["actor", "action", "object_type", "object_id", "outcome"]
