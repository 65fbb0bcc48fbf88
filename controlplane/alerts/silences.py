"""Alert silences: an operator mutes a rule (or every rule) of a flow (or of every flow) for a while; audited.

A firing alert is marked `silenced` exactly while an active silence covers it, from the moment a silence
is made or ended (and at each evaluation, for silences that expire by themselves): the alert page, the
overview's and flow list's counts, the flow page and the API read that mark. A resolved alert keeps the
mark it had when it resolved."""

from __future__ import annotations

import datetime
from collections.abc import Sequence

from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from controlplane.alerts.models import Alert, AlertRule, AlertSilence, AlertState, NotificationChannel
from controlplane.alerts.notifications import notifications_queue
from controlplane.core import audit_record, audited_attempt
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditAction
from controlplane.flows.models import Flow


def active_silences(*, now: datetime.datetime) -> QuerySet[AlertSilence]:
    return AlertSilence.objects.filter(expires_at__gt=now)


def covered(silences: Sequence[AlertSilence], *, flow_id: int, rule: str) -> bool:
    """Whether one of `silences` covers the rule of the flow (an empty flow or rule covers every one)."""
    return any(s.flow_id in (None, flow_id) and s.rule in ("", rule) for s in silences)


def silence_marks_refresh(
    *,
    now: datetime.datetime,
    silences: list[AlertSilence] | None = None,
    channels: Sequence[NotificationChannel] | None = None,
    firing: Sequence[Alert] | None = None,
) -> list[int]:
    """Mark each firing alert silenced exactly while an active silence covers it. An alert whose silence
    ended while it still fires is notified as firing now: its channels heard nothing while it was silenced.
    Returns the ids of the notifications queued. `silences` (active at `now`), `channels` (the enabled
    ones) and `firing` (every firing alert whose mark may be out of date, locked): when read already (the
    alert evaluation, in its transaction)."""
    silences = list(active_silences(now=now)) if silences is None else silences
    queued: list[int] = []
    with transaction.atomic(savepoint=False):  # in the evaluation's transaction: no savepoint of its own
        if firing is None:
            firing = Alert.objects.select_for_update().filter(state=AlertState.FIRING)
        for alert in firing:
            mark = covered(silences, flow_id=alert.flow_id, rule=alert.rule)
            if mark == alert.silenced:
                continue
            alert.silenced = mark
            alert.save(update_fields=["silenced"])
            if not mark:
                if channels is None:
                    channels = NotificationChannel.objects.filter(enabled=True)
                queued += notifications_queue(alert=alert, event=AlertState.FIRING, channels=channels)
    return queued


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
    (operator; audited). Firing alerts it covers are marked silenced at once, and no channel hears of them
    while it lasts."""
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
        if errors or expires_at is None:  # no expires_at is an error above
            raise ServiceValidationError(errors)
        silence = AlertSilence.objects.create(
            flow=flow,
            rule=rule,
            expires_at=expires_at,
            reason=reason,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        silence_marks_refresh(now=now)
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
    """End a silence now (operator; audited): the firing alerts it alone covered are unmarked and notified
    (the next evaluation hands the notifications to the delivery task)."""
    with transaction.atomic():
        before = silence.expires_at
        silence.expires_at = min(before, timezone.now())
        silence.save(update_fields=["expires_at"])
        silence_marks_refresh(now=timezone.now())
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
