"""Alert notifications: channels (webhook, Slack-compatible, email), their messages, and one delivery.

A channel's URL may carry a token (Slack's incoming webhooks do): it is encrypted at rest with
controlplane.core.crypto, never returned by the API, and never logged, audited or stored in an error: only
its masked form (`scheme://host/***`) is. Email uses Django's mail settings (EMAIL_*).

`notification_deliver` makes one attempt and records its outcome on the notification and the channel
(the alert page shows a failing channel with its last error); the Celery task in workers.alerts retries
it with exponential backoff (`retry_delay_s`) and calls `notification_give_up` when retries run out.
"""

from __future__ import annotations

import http.client
import json
import logging
import urllib.error
import urllib.request
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.mail import send_mail
from django.core.validators import EmailValidator
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from controlplane.alerts.models import (
    Alert,
    AlertNotification,
    AlertState,
    ChannelKind,
    NotificationChannel,
    NotificationState,
)
from controlplane.core import audit_record, audited_attempt, crypto
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditAction
from controlplane.core.outbound import outbound_hosts, outbound_url_error
from controlplane.core.roles import Role
from replication import outbound

log = logging.getLogger(__name__)

TEST_EVENT = "test"
WEBHOOK_CREDENTIALS_FIX = (
    "a receiver that needs a secret takes it in the URL's path or query (Slack's token; the whole URL is "
    "stored encrypted and never shown)"
)


# Who reads why a delivery failed: the outcome of a request the server made (timed out, refused, HTTP 4xx)
# maps the network behind the URL; viewers read delivered or failed only.
DELIVERY_DETAIL_ROLE = Role.OPERATOR


class DeliveryFailed(Exception):
    """One attempt failed; the message is safe to show (no URL token)."""


# -- the secret URL ---------------------------------------------------------------------------------------
def mask_url(url: str) -> str:
    """`https://hooks.example.com/***`: enough to recognise the receiver, nothing of its token."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{f':{parts.port}' if parts.port else ''}/***"


def scrub(text: str, url: str) -> str:
    """`text` with the URL, its path and query replaced by the masked form (errors quote them)."""
    parts = urlsplit(url)
    for secret in (url, parts.path + (f"?{parts.query}" if parts.query else ""), parts.query, parts.path):
        if secret and secret != "/":
            text = text.replace(secret, "/***" if secret.startswith("/") else "***")
    return text


def channel_url(channel: NotificationChannel) -> str:
    return str(crypto.decrypt_json(channel.url_encrypted)) if channel.url_encrypted else ""


# -- channels (admin) -------------------------------------------------------------------------------------
def _channel_errors(*, name: Any, kind: Any, url: Any, email_to: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not isinstance(name, str) or not name.strip() or len(name) > 100:
        errors["name"] = ["give a name of 1 to 100 characters"]
    if kind not in ChannelKind.values:
        errors["kind"] = [f"unknown kind {kind!r}; kinds: {', '.join(ChannelKind.values)}"]
    elif kind == ChannelKind.EMAIL:
        if not isinstance(email_to, list | tuple) or not email_to:
            errors["email_to"] = ["give one or more addresses, e.g. oncall@example.com"]
        else:
            for address in email_to:
                try:
                    EmailValidator()(address)
                except ValidationError:
                    errors.setdefault("email_to", []).append(f"{address!r} is not an email address")
    elif problem := outbound_url_error(url, credentials_fix=WEBHOOK_CREDENTIALS_FIX):
        errors["url"] = [problem]
    return errors


def channel_snapshot(channel: NotificationChannel) -> dict[str, Any]:
    """What the API and the audit log may show: the URL only masked."""
    return {
        "name": channel.name,
        "kind": channel.kind,
        "enabled": channel.enabled,
        "url": channel.url_hint,
        "email_to": list(channel.email_to),
    }


def channel_save(
    *,
    actor,
    channel: NotificationChannel | None = None,
    name: str | None = None,
    kind: str | None = None,
    url: str | None = None,
    email_to: Sequence[str] | None = None,
    enabled: bool | None = None,
) -> NotificationChannel:
    """Create (`channel` None) or change a channel (admin; audited with the URL masked). Omitted values
    keep theirs (a stored URL is kept unless a new one is given). Bad input: a field error, no change."""
    creating = channel is None
    action = AuditAction.CREATE if creating else AuditAction.UPDATE
    with audited_attempt(
        actor=actor,
        action=action,
        object_type="notification_channel",
        object_id=getattr(channel, "pk", ""),
        object_repr=str(name or getattr(channel, "name", "")),
    ):
        channel = channel or NotificationChannel()
        before = None if creating else channel_snapshot(channel)
        name = channel.name if name is None else name
        kind = channel.kind if kind is None else kind
        url = channel_url(channel) if url is None else url
        email_to = list(channel.email_to) if email_to is None else list(email_to)
        errors = _channel_errors(name=name, kind=kind, url=url, email_to=email_to)
        if (
            "name" not in errors
            and NotificationChannel.objects.filter(name=name).exclude(pk=channel.pk).exists()
        ):
            errors["name"] = [f"a channel named {name!r} exists; choose another name"]
        if errors:
            raise ServiceValidationError(errors)
        channel.name, channel.kind = name.strip(), kind
        is_email = kind == ChannelKind.EMAIL
        channel.url_encrypted = "" if is_email else crypto.encrypt_json(url)
        channel.url_hint = "" if is_email else mask_url(url)
        channel.email_to = email_to if is_email else []
        if enabled is not None:
            channel.enabled = bool(enabled)
        channel.save()
        audit_record(
            actor=actor,
            action=action,
            object_type="notification_channel",
            object_id=channel.pk,
            object_repr=channel.name,
            before=before,
            after=channel_snapshot(channel),
        )
    return channel


def channel_delete(*, actor, channel: NotificationChannel) -> None:
    with transaction.atomic():
        before, pk = channel_snapshot(channel), channel.pk
        channel.delete()
        audit_record(
            actor=actor,
            action=AuditAction.DELETE,
            object_type="notification_channel",
            object_id=pk,
            object_repr=before["name"],
            before=before,
        )


def channel_test(*, actor, channel: NotificationChannel) -> AlertNotification:
    """A test message to the channel (admin; audited), handed to the delivery task by the next evaluation."""
    with transaction.atomic():
        notification = AlertNotification.objects.create(channel=channel, event=TEST_EVENT)
        audit_record(
            actor=actor,
            action=AuditAction.TEST_CHANNEL,
            object_type="notification_channel",
            object_id=channel.pk,
            object_repr=channel.name,
        )
    return notification


# -- messages (pure) --------------------------------------------------------------------------------------
def flow_link(flow_id: int) -> str:
    return f"{settings.MIRRORPLANE_BASE_URL}{reverse('web:flow', args=[flow_id])}"


def message_fields(notification: AlertNotification) -> dict[str, Any]:
    """The generic webhook's JSON body: rule, flow, state, the figure with observed_at, threshold, link."""
    alert: Alert | None = notification.alert
    if alert is None:
        return {
            "state": TEST_EVENT,
            "rule": None,
            "flow": None,
            "summary": f"test notification from Mirrorplane to channel {notification.channel.name}",
            "link": f"{settings.MIRRORPLANE_BASE_URL}{reverse('web:alerts')}",
        }
    flow = alert.flow
    return {
        "state": notification.event,
        "rule": alert.rule,
        "rule_title": alert.get_rule_display(),
        "flow": flow.name,
        "flow_id": flow.pk,
        "source": flow.source.alias,
        "target": flow.target.alias,
        "figure": alert.fired_figure if notification.event == AlertState.FIRING else alert.figure,
        "unit": alert.unit,
        "observed_at": alert.observed_at.isoformat() if alert.observed_at else None,
        "threshold": alert.threshold,
        "message": alert.message,
        "fired_at": alert.fired_at.isoformat(),
        "resolved_at": alert.resolved_at.isoformat() if alert.resolved_at else None,
        "summary": summary_line(alert, event=notification.event),
        "link": flow_link(flow.pk),
    }


def summary_line(alert: Alert, *, event: str) -> str:
    word = "FIRING" if event == AlertState.FIRING else "RESOLVED"
    return f"[{word}] {alert.get_rule_display()} on flow {alert.flow.name}: {alert.message}"


def slack_payload(fields: dict[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook body (`text` plus blocks); Mattermost and Rocket.Chat accept it too."""
    lines = [fields["summary"]]
    if fields.get("figure") is not None:
        lines.append(
            f"figure: {fields['figure']:g} {fields['unit']} (observed {fields['observed_at']}), "
            f"threshold: {fields['threshold'] if fields['threshold'] is not None else '-'}"
        )
    text = "\n".join(lines)
    return {
        "text": f"{text}\n{fields['link']}",
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": text}},
            {
                "type": "context",
                "elements": [{"type": "mrkdwn", "text": f"<{fields['link']}|Open in Mirrorplane>"}],
            },
        ],
    }


def email_text(fields: dict[str, Any]) -> tuple[str, str]:
    body = "\n".join(f"{key}: {value}" for key, value in fields.items() if value is not None)
    return fields["summary"][:200], body


# -- one delivery attempt ---------------------------------------------------------------------------------
def retry_delay_s(retries: int) -> float:
    """Exponential backoff: ALERTS_NOTIFY_BACKOFF_S, doubled per retry, capped."""
    return min(settings.ALERTS_NOTIFY_BACKOFF_S * 2**retries, settings.ALERTS_NOTIFY_BACKOFF_MAX_S)


def _post_json(url: str, body: dict[str, Any]) -> None:
    """One POST through the outbound policy (`replication.outbound`: the allowlist checked again, no
    redirect followed); a failure says what happened as a class, never the receiver's answer."""
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", "User-Agent": "Mirrorplane-alerts"},
        method="POST",
    )
    try:
        outbound.fetch(request, allowlist=outbound_hosts(), timeout_s=settings.ALERTS_NOTIFY_TIMEOUT_S)
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise DeliveryFailed(f"the receiver {outbound.outcome(exc)}") from None


def _send(notification: AlertNotification) -> None:
    channel = notification.channel
    fields = message_fields(notification)
    if channel.kind == ChannelKind.EMAIL:
        subject, body = email_text(fields)
        try:
            send_mail(subject, body, None, list(channel.email_to), fail_silently=False)
        except outbound.OutboundRefused as exc:  # the relay, under the policy (GuardedEmailBackend)
            raise DeliveryFailed(f"email not sent: the relay (EMAIL_HOST) was not contacted: {exc}") from None
        except Exception as exc:
            raise DeliveryFailed(f"email not sent: {exc}") from None
        return
    url = channel_url(channel)
    try:
        _post_json(url, slack_payload(fields) if channel.kind == ChannelKind.SLACK else fields)
    except DeliveryFailed as exc:
        raise DeliveryFailed(scrub(str(exc), url)) from None


def notification_deliver(*, notification_id: int) -> bool:
    """One attempt; True when sent (or nothing is left to send), DeliveryFailed when it failed."""
    notification = (
        AlertNotification.objects.select_related("channel", "alert__flow__source", "alert__flow__target")
        .filter(pk=notification_id)
        .first()
    )
    if notification is None or notification.state != NotificationState.PENDING:
        return True
    channel = notification.channel
    now = timezone.now()
    if not channel.enabled and notification.event != TEST_EVENT:  # disabled since it was queued
        notification.state, notification.last_error = NotificationState.FAILED, "channel disabled; not sent"
        notification.save(update_fields=["state", "last_error"])
        return True
    notification.attempts += 1
    notification.last_attempt_at = channel.last_attempt_at = now
    try:
        _send(notification)
    except DeliveryFailed as exc:
        notification.last_error = channel.last_error = str(exc)
        channel.failing = True
        notification.save(update_fields=["attempts", "last_attempt_at", "last_error"])
        channel.save(update_fields=["last_attempt_at", "last_error", "failing"])
        log.warning(
            "notification %s to channel %s (%s) failed (attempt %d): %s",
            notification.pk,
            channel.name,
            channel.url_hint or channel.kind,
            notification.attempts,
            exc,
        )
        raise
    notification.state, notification.sent_at = NotificationState.SENT, now
    notification.save(update_fields=["attempts", "last_attempt_at", "state", "sent_at"])
    channel.failing, channel.last_success_at = False, now
    channel.save(update_fields=["last_attempt_at", "failing", "last_success_at"])
    return True


def notification_give_up(*, notification_id: int) -> None:
    AlertNotification.objects.filter(pk=notification_id, state=NotificationState.PENDING).update(
        state=NotificationState.FAILED
    )


def notifications_queue(*, alert: Alert, event: str, channels: Sequence[NotificationChannel]) -> list[int]:
    """One pending notification of `event` (firing, resolved) of `alert` per channel; their ids."""
    made = AlertNotification.objects.bulk_create(
        [AlertNotification(channel=channel, alert=alert, event=event) for channel in channels]
    )
    return [notification.pk for notification in made]


def notifications_to_dispatch() -> list[int]:
    """Pending notifications nobody handed to the delivery task yet (evaluations' and tests'), marked
    handed over now: the caller queues each exactly once."""
    with transaction.atomic():
        ids = list(
            AlertNotification.objects.select_for_update(skip_locked=True)
            .filter(state=NotificationState.PENDING, dispatched_at__isnull=True)
            .order_by("id")
            .values_list("pk", flat=True)
        )
        AlertNotification.objects.filter(pk__in=ids).update(dispatched_at=timezone.now())
    return ids
