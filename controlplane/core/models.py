"""The core's tables: the audit log (`controlplane.core.audit`) and how users authenticate besides their
password: API tokens (`controlplane.core.tokens`) and single sign-on identities (`controlplane.core.sso`).
Data only."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditAction(models.TextChoices):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"
    PAUSE = "pause"
    RESUME = "resume"
    IMPORT = "import"
    ROTATE_SECRETS_KEY = "rotate_secrets_key"
    FAILOVER = "failover"
    FAILBACK = "failback"
    DRILL = "drill"
    CUTOVER = "cutover"
    TAKEOVER = "takeover"  # a flow takes over from a stopped MM2 (its dry run or apply)
    RUN_REPORTS = "run_reports"
    SILENCE = "silence"
    UNSILENCE = "unsilence"
    TEST_CHANNEL = "test_channel"
    ROTATE_API_TOKEN = "rotate_api_token"
    SIGN_IN = (
        "sign_in"  # a sign-in through the OpenID Connect provider (its role from the groups, or a refusal)
    )


class ApiToken(models.Model):
    """A user's API token, stored as its SHA-256 digest (the key is shown once, when issued); one per
    user: issuing a new one (rotation) replaces it. Expired, it no longer authenticates."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_token")
    digest = models.CharField(max_length=64, unique=True)
    prefix = models.CharField(max_length=8, help_text="the key's first characters, to tell tokens apart")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="empty: never")

    def __str__(self) -> str:
        return f"{self.user} {self.prefix}…"


class SsoIdentity(models.Model):
    """The OpenID Connect identity a user signs in with: the provider's (issuer, subject), never the name,
    so a provider's user cannot take over a local account by choosing its username."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="sso_identity"
    )
    issuer = models.CharField(max_length=300)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique")]

    def __str__(self) -> str:
        return f"{self.user} ({self.issuer} {self.subject})"


class AuditOutcome(models.TextChoices):
    SUCCESS = "success"
    REFUSED = "refused"
    FAILURE = "failure"
    ACCEPTED = "accepted"  # an operation was requested and queued; its outcome is audited when it ends


class AuditEvent(models.Model):
    """Who did what, when, to which object, with the before/after state (secrets masked)."""

    at = models.DateTimeField(auto_now_add=True, db_index=True)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_name = models.CharField(
        max_length=150, help_text="the username at the time (kept if the user goes)"
    )
    action = models.CharField(max_length=30, choices=AuditAction.choices)
    object_type = models.CharField(max_length=30)
    object_id = models.CharField(max_length=100, blank=True, default="")
    object_repr = models.CharField(max_length=300, blank=True, default="")
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=10, choices=AuditOutcome.choices, default=AuditOutcome.SUCCESS)
    detail = models.TextField(blank=True, default="")
    client_address = models.CharField(
        max_length=45,
        blank=True,
        default="",
        help_text="where the request came from (TRUSTED_PROXY_COUNT hops back behind proxies); empty: a worker",
    )

    class Meta:
        ordering = ["-at", "-id"]
        indexes = [models.Index(fields=["object_type", "object_id"])]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.actor_name} {self.action} {self.object_type} {self.object_repr}"
