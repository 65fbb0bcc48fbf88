"""Alert silences: an operator mutes a rule (or every rule) of a flow (or of every flow) for a while; audited."""

from __future__ import annotations

import datetime

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from controlplane.core import audit_record, audited_attempt
from controlplane.core.errors import ServiceValidationError
from controlplane.models import (
    AlertRule,
    AlertSilence,
    AuditAction,
    Flow,
)


def active_silences(*, now: datetime.datetime) -> QuerySet[AlertSilence]:
    return AlertSilence.objects.filter(expires_at__gt=now)


# -- silences ---------------------------------------------------------------------------------------------
MAX_SILENCE_S = 30 * 24 * 3600


def silence_create(
    *,
    actor,
    expires_at: datetime.datetime | None = None,
    duration_s: float | None = None,
    flow: Flow | None = None,
    rule: str = "",
    reason: str = "",
) -> AlertSilence:
    """Silence notifications of `rule` (empty: every rule) of `flow` (None: every flow) until it expires
    (operator; audited). Firing alerts it covers are not re-notified; new ones are marked silenced."""
    now = timezone.now()
    with audited_attempt(
        actor=actor, action=AuditAction.SILENCE, object_type="silence", object_repr=reason[:100]
    ):
        errors: dict[str, list[str]] = {}
        if rule and rule not in AlertRule.values:
            errors["rule"] = [f"unknown rule {rule!r}; rules: {', '.join(AlertRule.values)}"]
        if expires_at is None and duration_s is not None:
            if not isinstance(duration_s, int | float) or duration_s <= 0 or duration_s > MAX_SILENCE_S:
                errors["duration_s"] = [f"must be a number of seconds between 1 and {MAX_SILENCE_S}"]
            else:
                expires_at = now + datetime.timedelta(seconds=duration_s)
        if expires_at is None and "duration_s" not in errors:
            errors["expires_at"] = ["give expires_at (a future time) or duration_s (seconds)"]
        elif expires_at is not None and not (
            now < expires_at <= now + datetime.timedelta(seconds=MAX_SILENCE_S)
        ):
            errors["expires_at"] = ["must be in the future, at most 30 days ahead"]
        if errors:
            raise ServiceValidationError(errors)
        silence = AlertSilence.objects.create(
            flow=flow,
            rule=rule,
            expires_at=expires_at,
            reason=reason,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(
            actor=actor,
            action=AuditAction.SILENCE,
            object_type="silence",
            object_id=silence.pk,
            object_repr=silence_description(silence),
            after={
                "flow": flow.name if flow else None,
                "rule": rule or None,
                "expires_at": expires_at.isoformat(),
                "reason": reason,
            },
        )
    return silence


def silence_expire(*, actor, silence: AlertSilence) -> AlertSilence:
    """End a silence now (operator; audited)."""
    with transaction.atomic():
        before = silence.expires_at
        silence.expires_at = min(before, timezone.now())
        silence.save(update_fields=["expires_at"])
        audit_record(
            actor=actor,
            action=AuditAction.UNSILENCE,
            object_type="silence",
            object_id=silence.pk,
            object_repr=silence_description(silence),
            before={"expires_at": before.isoformat()},
            after={"expires_at": silence.expires_at.isoformat()},
        )
    return silence


def silence_description(silence: AlertSilence) -> str:
    flow = silence.flow.name if silence.flow_id else "every flow"
    rule = silence.get_rule_display() if silence.rule else "every rule"
    return f"{rule} of {flow}"
