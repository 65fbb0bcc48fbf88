"""The flows' tables: clusters and flows. Data only: the rules are in this package's modules (`services`
writes, `selectors` reads, `lifecycle` is the only writer of a flow's state).

Flow columns map 1:1 to `replication.config.FlowConfig` fields (same names, MM2's defaults taken from the
engine's table), so `controlplane.flows.engine.flow_to_config` is a plain field copy.
"""

from __future__ import annotations

from django.db import models
from django.db.models import F, Q

from replication.config import (
    FLOW_PROPERTIES,
    DataLossPolicy,
    DeliveryGuarantee,
    OffsetSyncsTopicLocation,
    SchemaIdMode,
)

_DEFAULTS = {prop.field: prop.default for prop in FLOW_PROPERTIES}


# Migrations need named, importable callables for mutable defaults.
def default_topics() -> list[str]:
    return list(_DEFAULTS["topics"])


def default_schemas_subjects() -> list[str]:
    return list(_DEFAULTS["schemas_subjects"])


def default_topics_exclude() -> list[str]:
    return list(_DEFAULTS["topics_exclude"])


def default_groups() -> list[str]:
    return list(_DEFAULTS["groups"])


def default_groups_exclude() -> list[str]:
    return list(_DEFAULTS["groups_exclude"])


def default_config_properties_exclude() -> list[str]:
    return list(_DEFAULTS["config_properties_exclude"])


def default_client_properties() -> dict[str, dict[str, str]]:
    return {"client": {}, "producer": {}, "consumer": {}, "admin": {}}


class SecurityProtocol(models.TextChoices):
    PLAINTEXT = "PLAINTEXT"
    SSL = "SSL"
    SASL_PLAINTEXT = "SASL_PLAINTEXT"
    SASL_SSL = "SASL_SSL"


class SaslMechanism(models.TextChoices):
    NONE = "", "none"
    PLAIN = "PLAIN"
    SCRAM_SHA_256 = "SCRAM-SHA-256"
    SCRAM_SHA_512 = "SCRAM-SHA-512"
    OAUTHBEARER = "OAUTHBEARER"
    GSSAPI = "GSSAPI"


class Cluster(models.Model):
    """A Kafka cluster as MM2 knows it (`<alias>.bootstrap.servers`, `<alias>.security.protocol`, ...).

    `client_properties` holds the non-secret client overrides by role: {"client": {...} (cluster-wide),
    "producer": {...}, "consumer": {...}, "admin": {...}}. `secrets_encrypted` holds, in the same shape,
    every secret property (SASL credentials, TLS key/certificate/CA, any password-like override),
    encrypted with MIRRORPLANE_SECRETS_KEY; it is never returned by the API nor written to the audit log.
    """

    alias = models.CharField(max_length=100, unique=True)
    bootstrap_servers = models.CharField(max_length=2000)
    security_protocol = models.CharField(
        max_length=20, choices=SecurityProtocol.choices, default=SecurityProtocol.PLAINTEXT
    )
    sasl_mechanism = models.CharField(max_length=20, choices=SaslMechanism.choices, default="", blank=True)
    client_properties = models.JSONField(default=default_client_properties)
    secrets_encrypted = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    SECRET_COLUMNS = ("secrets_encrypted",)  # re-encrypted by controlplane.core.secrets_key_rotate

    class Meta:
        ordering = ["alias"]

    def __str__(self) -> str:
        return self.alias


class FlowState(models.TextChoices):
    ACTIVE = "active"
    PAUSED = "paused"
    DISABLED = "disabled"
    FAULTED = "faulted"
    FAILING_OVER = "failing_over"
    FAILED_OVER = "failed_over"
    FAILING_BACK = "failing_back"
    MIGRATING = "migrating"  # a cutover runs: replication drains while the source is fenced
    MIGRATED = "migrated"  # cut over for good: clients use the target; replication stopped


class Flow(models.Model):
    """A replication flow `source->target` with every MM2 flow property (one flow per ordered pair)."""

    source = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="outgoing_flows")
    target = models.ForeignKey(Cluster, on_delete=models.PROTECT, related_name="incoming_flows")
    enabled = models.BooleanField(default=_DEFAULTS["enabled"])
    # The lifecycle (controlplane.flows.lifecycle is its only writer; settings edits never touch it).
    state = models.CharField(max_length=20, choices=FlowState.choices, default=FlowState.DISABLED)
    state_reason = models.TextField(blank=True, default="", help_text="why the flow is in its state")
    state_changed_at = models.DateTimeField(null=True, blank=True)

    topics = models.JSONField(default=default_topics)
    topics_exclude = models.JSONField(default=default_topics_exclude)
    groups = models.JSONField(default=default_groups)
    groups_exclude = models.JSONField(default=default_groups_exclude)
    config_properties_exclude = models.JSONField(default=default_config_properties_exclude)
    replication_policy_class = models.CharField(max_length=200, default=_DEFAULTS["replication_policy_class"])
    replication_policy_separator = models.CharField(
        max_length=20, default=_DEFAULTS["replication_policy_separator"]
    )
    replication_policy_internal_topic_separator_enabled = models.BooleanField(
        default=_DEFAULTS["replication_policy_internal_topic_separator_enabled"]
    )
    replication_factor = models.IntegerField(default=_DEFAULTS["replication_factor"])
    refresh_topics_enabled = models.BooleanField(default=_DEFAULTS["refresh_topics_enabled"])
    refresh_topics_interval_seconds = models.IntegerField(
        default=_DEFAULTS["refresh_topics_interval_seconds"]
    )
    sync_topic_configs_enabled = models.BooleanField(default=_DEFAULTS["sync_topic_configs_enabled"])
    sync_topic_configs_interval_seconds = models.IntegerField(
        default=_DEFAULTS["sync_topic_configs_interval_seconds"]
    )
    sync_topic_acls_enabled = models.BooleanField(default=_DEFAULTS["sync_topic_acls_enabled"])
    sync_topic_acls_interval_seconds = models.IntegerField(
        default=_DEFAULTS["sync_topic_acls_interval_seconds"]
    )
    refresh_groups_enabled = models.BooleanField(default=_DEFAULTS["refresh_groups_enabled"])
    refresh_groups_interval_seconds = models.IntegerField(
        default=_DEFAULTS["refresh_groups_interval_seconds"]
    )
    emit_checkpoints_enabled = models.BooleanField(default=_DEFAULTS["emit_checkpoints_enabled"])
    emit_checkpoints_interval_seconds = models.IntegerField(
        default=_DEFAULTS["emit_checkpoints_interval_seconds"]
    )
    sync_group_offsets_enabled = models.BooleanField(default=_DEFAULTS["sync_group_offsets_enabled"])
    sync_group_offsets_interval_seconds = models.IntegerField(
        default=_DEFAULTS["sync_group_offsets_interval_seconds"]
    )
    emit_heartbeats_enabled = models.BooleanField(default=_DEFAULTS["emit_heartbeats_enabled"])
    emit_heartbeats_interval_seconds = models.IntegerField(
        default=_DEFAULTS["emit_heartbeats_interval_seconds"]
    )
    heartbeats_replication_enabled = models.BooleanField(default=_DEFAULTS["heartbeats_replication_enabled"])
    offset_lag_max = models.IntegerField(default=_DEFAULTS["offset_lag_max"])
    offset_syncs_topic_location = models.CharField(
        max_length=10,
        choices=[(member.value, member.value) for member in OffsetSyncsTopicLocation],
        default=_DEFAULTS["offset_syncs_topic_location"].value,
    )
    tasks_max = models.IntegerField(default=_DEFAULTS["tasks_max"])
    checkpoints_topic_replication_factor = models.IntegerField(
        default=_DEFAULTS["checkpoints_topic_replication_factor"]
    )
    heartbeats_topic_replication_factor = models.IntegerField(
        default=_DEFAULTS["heartbeats_topic_replication_factor"]
    )
    offset_syncs_topic_replication_factor = models.IntegerField(
        default=_DEFAULTS["offset_syncs_topic_replication_factor"]
    )
    delivery_guarantee = models.CharField(
        max_length=20,
        choices=[(member.value, member.value) for member in DeliveryGuarantee],
        default=_DEFAULTS["delivery_guarantee"].value,
    )
    exactly_once_transactions = models.BooleanField(default=_DEFAULTS["exactly_once_transactions"])
    provenance_header_enabled = models.BooleanField(default=_DEFAULTS["provenance_header_enabled"])
    data_loss_policy = models.CharField(
        max_length=10,
        choices=[(member.value, member.value) for member in DataLossPolicy],
        default=_DEFAULTS["data_loss_policy"].value,
    )
    schemas_sync_mode = models.CharField(
        max_length=20,
        choices=[(member.value, member.value) for member in SchemaIdMode],
        default=_DEFAULTS["schemas_sync_mode"].value,
    )
    schemas_subjects = models.JSONField(default=default_schemas_subjects)
    schemas_subjects_exclude = models.JSONField(default=list, blank=True)
    schemas_sync_interval_seconds = models.IntegerField(default=_DEFAULTS["schemas_sync_interval_seconds"])
    # Flow-scoped client overrides (`A->B.producer.*`, `A->B.consumer.*`) and pass-through properties.
    extra = models.JSONField(default=dict)
    # The worker pool the flow runs on (controlplane.flows.pools; not an MM2 property): empty is the default.
    pool = models.CharField(max_length=40, blank=True, default="")

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["source__alias", "target__alias"]
        constraints = [
            models.UniqueConstraint(fields=["source", "target"], name="one_flow_per_ordered_pair"),
            models.CheckConstraint(condition=~Q(source=F("target")), name="flow_source_differs_from_target"),
        ]

    @property
    def name(self) -> str:
        return f"{self.source.alias}->{self.target.alias}"

    def __str__(self) -> str:
        return self.name
