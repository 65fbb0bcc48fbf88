"""The alerts' tables: alerts (one firing of a rule for a flow), silences, notification channels and the
notifications queued to them (`controlplane.alerts.notifications`). Data only."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from controlplane.alerts import rules
from controlplane.flows.models import Flow


class AlertRule(models.TextChoices):
    """The rules Mirrorplane evaluates itself (controlplane.alerts.rules); deploy/ ships the same ones."""

    RPO_SECONDS = rules.RPO_SECONDS, "RPO budget exceeded (seconds behind)"
    RPO_RECORDS = rules.RPO_RECORDS, "RPO budget exceeded (records behind)"
    STALE_STATUS = rules.STALE_STATUS, "status stale"
    HEARTBEAT_MISSING = rules.HEARTBEAT_MISSING, "heartbeat missing"
    DATA_LOSS_GAP = rules.DATA_LOSS_GAP, "data-loss gap"
    FLOW_FAULTED = rules.FLOW_FAULTED, "flow faulted"
    NO_LEASE_HOLDER = rules.NO_LEASE_HOLDER, "no worker holds the flow's tasks"
    POOL_WITHOUT_WORKERS = rules.POOL_WITHOUT_WORKERS, "the flow's worker pool has no live worker"
    OFFSET_SYNCS_STOPPED = rules.OFFSET_SYNCS_STOPPED, "offset syncs stopped (failover would be inexact)"
    VERIFICATION_MISMATCH = rules.VERIFICATION_MISMATCH, "target data differs from the source"
    READINESS_LOW = rules.READINESS_LOW, "failover readiness below the threshold"


class AlertState(models.TextChoices):
    FIRING = "firing"
    RESOLVED = "resolved"


class Alert(models.Model):
    """One firing of a rule for a flow, from when it fired until it resolved (then it is history)."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="alerts")
    rule = models.CharField(max_length=30, choices=AlertRule.choices)
    state = models.CharField(max_length=10, choices=AlertState.choices, default=AlertState.FIRING)
    fired_at = models.DateTimeField(db_index=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    figure = models.FloatField(null=True, blank=True, help_text="the measured figure, last evaluated")
    fired_figure = models.FloatField(null=True, blank=True, help_text="the figure when it fired")
    threshold = models.FloatField(null=True, blank=True)
    unit = models.CharField(max_length=20, blank=True, default="")
    observed_at = models.DateTimeField(null=True, blank=True, help_text="when the figure was measured")
    message = models.TextField(blank=True, default="")
    silenced = models.BooleanField(
        default=False, help_text="an active silence covers it (while firing; when it resolved, once resolved)"
    )

    class Meta:
        ordering = ["-fired_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow", "rule"], condition=Q(state="firing"), name="one_firing_alert_per_flow_rule"
            )
        ]

    def __str__(self) -> str:
        return f"{self.rule} of flow {self.flow_id} ({self.state})"


class AlertSilence(models.Model):
    """No notification for matching alerts until `expires_at` (they still fire and show, marked)."""

    flow = models.ForeignKey(
        Flow, null=True, blank=True, on_delete=models.CASCADE, related_name="silences", help_text="empty: all"
    )
    rule = models.CharField(max_length=30, choices=AlertRule.choices, blank=True, default="")
    expires_at = models.DateTimeField(db_index=True)
    reason = models.CharField(max_length=500, blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-expires_at", "-id"]


class ChannelKind(models.TextChoices):
    WEBHOOK = "webhook", "webhook (generic JSON)"
    SLACK = "slack", "Slack-compatible incoming webhook"
    EMAIL = "email", "email"


class NotificationChannel(models.Model):
    """Where alert notifications go. A webhook URL may hold a token: it is encrypted at rest
    (controlplane.core.crypto) and never returned, logged or audited, only a masked form of it."""

    name = models.CharField(max_length=100, unique=True)
    kind = models.CharField(max_length=10, choices=ChannelKind.choices)
    enabled = models.BooleanField(default=True)
    url_encrypted = models.TextField(blank=True, default="")
    url_hint = models.CharField(
        max_length=300, blank=True, default="", help_text="scheme://host/... (masked)"
    )
    email_to = models.JSONField(default=list, blank=True)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True, default="")
    failing = models.BooleanField(default=False, help_text="its last delivery attempt failed")
    created_at = models.DateTimeField(auto_now_add=True)

    SECRET_COLUMNS = ("url_encrypted",)  # re-encrypted by controlplane.core.secrets_key_rotate

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class NotificationState(models.TextChoices):
    PENDING = "pending"  # queued or being retried
    SENT = "sent"
    FAILED = "failed"  # retries exhausted


class AlertNotification(models.Model):
    """One message to one channel: an alert firing or resolving, or a channel test (no alert)."""

    channel = models.ForeignKey(NotificationChannel, on_delete=models.CASCADE, related_name="notifications")
    alert = models.ForeignKey(
        Alert, null=True, blank=True, on_delete=models.CASCADE, related_name="notifications"
    )
    event = models.CharField(max_length=10, help_text="firing, resolved or test")
    state = models.CharField(
        max_length=10, choices=NotificationState.choices, default=NotificationState.PENDING
    )
    attempts = models.IntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="handed to the delivery task")
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]
