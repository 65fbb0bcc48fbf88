"""Clusters, flows, audit events and the live status tables. Data only: rules live in the domain packages
(controlplane.flows, controlplane.status, controlplane.operations...).

Flow columns map 1:1 to `replication.config.FlowConfig` fields (same names, MM2's defaults taken from the
engine's table), so `controlplane.flows.engine.flow_to_config` is a plain field copy.
"""

from __future__ import annotations

from django.conf import settings
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
INT32_MAX = 2**31 - 1


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


class PartitionState(models.TextChoices):
    """Burrow's partition status vocabulary."""

    OK = "OK"
    WARN = "WARN"
    STOP = "STOP"
    STALL = "STALL"
    REWIND = "REWIND"
    ERR = "ERR"


class FlowPartitionStatus(models.Model):
    """The latest replication state of one source partition of a flow (written by the workers)."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="partition_statuses")
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    remote_topic = models.CharField(max_length=249)
    task_index = models.IntegerField(default=0)
    source_end_offset = models.BigIntegerField(null=True, blank=True)
    replicated_offset = models.BigIntegerField(null=True, blank=True, help_text="next source offset to copy")
    records_behind = models.BigIntegerField(
        null=True, blank=True, help_text="source end offset - next offset to replicate (docs/lag.md)"
    )
    seconds_behind = models.FloatField(
        null=True, blank=True, help_text="age of the oldest source record not yet replicated (docs/lag.md)"
    )
    record_age_ms = models.BigIntegerField(null=True, blank=True)
    replication_latency_ms = models.BigIntegerField(null=True, blank=True)
    latency_counts = models.JSONField(
        default=list,
        blank=True,
        help_text="records by replication latency since the task started, per replication.metrics."
        "LATENCY_BUCKETS_MS bucket (and the overflow)",
    )
    latency_sum_ms = models.FloatField(default=0.0, help_text="the sum of those records' latencies")
    record_rate = models.FloatField(
        default=0.0, help_text="records/s replicated, over the engine's rate window"
    )
    byte_rate = models.FloatField(default=0.0, help_text="value bytes/s replicated, over the same window")
    record_count = models.BigIntegerField(
        default=0, help_text="records the owning task replicated since it started (MM2 record-count)"
    )
    byte_count = models.BigIntegerField(
        default=0, help_text="value bytes the owning task replicated since it started (MM2 byte-count)"
    )
    records_aborted = models.BigIntegerField(
        default=0,
        help_text="transactional flows: records the target acknowledged in a transaction that was aborted "
        "since the owning task started (never replicated; not in record_count)",
    )
    last_error = models.TextField(
        blank=True, default="", help_text="the task's last error; empty when healthy"
    )
    state = models.CharField(max_length=10, choices=PartitionState.choices, default=PartitionState.OK)
    observed_at = models.DateTimeField(help_text="when the worker measured these figures (end of a slice)")

    class Meta:
        ordering = ["topic", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow", "topic", "partition"], name="one_status_per_flow_partition"
            )
        ]


class FlowTaskStatus(models.Model):
    """One replication task's roll-up of the partitions it replicates, written every slice (one row per
    flow task): what the flow's roll-up (pages, /metrics, the status API, alert evaluation) reads, so
    none of them reads every partition row. Its `observed_at` also vouches for the freshness of its
    partitions' rows, which the workers rewrite only when they change (controlplane.status.runtime)."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="task_statuses")
    task_index = models.IntegerField()
    partitions = models.IntegerField(default=0, help_text="source partitions the task replicates")
    state_counts = models.JSONField(default=dict, blank=True, help_text="partitions by Burrow state")
    records_behind = models.BigIntegerField(
        null=True, blank=True, help_text="sum over the partitions whose lag is known (docs/lag.md)"
    )
    seconds_behind = models.FloatField(
        null=True, blank=True, help_text="the worst known partition's seconds behind (docs/lag.md)"
    )
    undated = models.BooleanField(
        default=False,
        help_text="a partition is behind with no known age: the task's seconds behind is a bound",
    )
    position = models.BigIntegerField(default=0, help_text="sum of the partitions' replicated offsets")
    record_rate = models.FloatField(default=0.0)
    byte_rate = models.FloatField(default=0.0)
    record_count = models.BigIntegerField(default=0)
    byte_count = models.BigIntegerField(default=0)
    records_aborted = models.BigIntegerField(default=0, help_text="summed over the partitions")
    latency_counts = models.JSONField(default=list, blank=True, help_text="summed over the partitions")
    latency_sum_ms = models.FloatField(default=0.0)
    worst = models.JSONField(
        default=list,
        blank=True,
        help_text="the task's worst partitions, worst first (a few, with their figures)",
    )
    last_error = models.TextField(blank=True, default="")
    observed_at = models.DateTimeField(help_text="the end of the task's last slice")
    rows_current_at = models.DateTimeField(
        null=True, blank=True, help_text="every partition row of the task is current as of this time at least"
    )

    class Meta:
        ordering = ["flow", "task_index"]
        constraints = [
            models.UniqueConstraint(fields=["flow", "task_index"], name="one_status_per_flow_task")
        ]


class FlowEventKind(models.TextChoices):
    ERROR = "error"
    DATA_LOSS_GAP = "data_loss_gap"
    WARNING = "warning"
    INFO = "info"
    DATA_MISMATCH = "data_mismatch"  # the verifier found the target differing from the source


class FlowEvent(models.Model):
    """Something that happened to a flow: an error, or a data-loss gap (source offsets gone before copied)."""

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="events")
    at = models.DateTimeField(db_index=True)
    kind = models.CharField(max_length=20, choices=FlowEventKind.choices)
    topic = models.CharField(max_length=249, blank=True, default="")
    partition = models.IntegerField(null=True, blank=True)
    first_offset = models.BigIntegerField(null=True, blank=True, help_text="first offset of a gap")
    last_offset = models.BigIntegerField(null=True, blank=True, help_text="last offset of a gap (inclusive)")
    message = models.TextField()
    detail = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-at", "-id"]


# -- operations (failover, failback: durable jobs run by workers.operations) -----------------------------
class OperationKind(models.TextChoices):
    FAILOVER = "failover"
    FAILBACK = "failback"
    DRILL = "drill"  # a failover rehearsed on shadow groups: production untouched
    CUTOVER = "cutover"  # a migration's end: the source fenced, drained, verified; the flow migrated
    TAKEOVER = "takeover"  # take a flow over from a stopped MM2: read its state, store the resume points


class OperationPhase(models.TextChoices):
    """Where an operation is; a worker that takes it over resumes here (every phase is idempotent)."""

    QUEUED = "queued"  # waiting for an operations worker
    PLANNING = "planning"  # reading both clusters: checks, the drain's end offsets, the reverse flow
    DRAINING = "draining"  # replication copies every record that was there when the operation started
    MOVING_GROUPS = "moving_groups"  # writing the groups' translated offsets
    SHADOWING = "shadowing"  # drill: shadow groups at the translated offsets, their next records compared
    FENCING = "fencing"  # cutover: the source's end offsets must stay still (producers stopped)
    VERIFYING = "verifying"  # cutover: the drained ranges compared, source against target
    STORING = "storing"  # takeover: the resume positions written to the position topic
    DONE = "done"


class OperationOutcome(models.TextChoices):
    PENDING = "pending"  # queued or running
    SUCCEEDED = "succeeded"
    FAILED = "failed"  # an error or a drain timeout; the flow is back where it was
    REFUSED = "refused"  # failed checks (without force): nothing changed


class Operation(models.Model):
    """One failover or failback of a flow: its request, phase, progress, typed results and outcome.

    At most one active operation per flow (`one_active_operation_per_flow`). The worker running it holds
    a lease: `worker` and `heartbeat_at`, renewed while it runs; beat hands an operation whose heartbeat
    is older than OPERATION_LEASE_S to another worker, which resumes at `phase`.
    """

    kind = models.CharField(max_length=10, choices=OperationKind.choices)
    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="operations")
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # What was asked.
    groups = models.JSONField(default=list, blank=True, help_text="consumer groups to move")
    force = models.BooleanField(default=False, help_text="go on despite failed checks or a drain timeout")
    timeout_s = models.FloatField(
        help_text="longest drain before the operation gives up (or, forced, goes on)"
    )
    # Where it is.
    phase = models.CharField(max_length=20, choices=OperationPhase.choices, default=OperationPhase.QUEUED)
    outcome = models.CharField(
        max_length=10, choices=OperationOutcome.choices, default=OperationOutcome.PENDING
    )
    active = models.BooleanField(default=True, help_text="queued or running (one per flow)")
    progress = models.FloatField(default=0.0, help_text="0..1")
    message = models.CharField(max_length=500, blank=True, default="", help_text="what is happening now")
    error = models.TextField(blank=True, default="")
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="last handed to the queue")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=200, blank=True, default="", help_text="the lease holder")
    heartbeat_at = models.DateTimeField(null=True, blank=True, help_text="the lease holder's last sign")
    attempts = models.IntegerField(default=0, help_text="workers that took it (more than 1: resumed)")
    # What the planning phase found.
    previous_state = models.CharField(max_length=20, blank=True, default="", help_text="state to return to")
    source_reachable = models.BooleanField(null=True, blank=True)
    records_at_risk = models.BigIntegerField(null=True, blank=True)
    plan = models.JSONField(null=True, blank=True, help_text="the failover plan as checked (audited)")
    failover = models.ForeignKey(
        "self",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="failback: the failover it reverses",
    )
    reverse_flow = models.ForeignKey(
        Flow,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="failback: the flow that replicates back",
    )
    reverse_flow_created = models.BooleanField(default=False)
    topics_back = models.JSONField(default=list, blank=True, help_text="failback: topics replicated back")
    # The drain: what must be copied (per partition: topic, partition, remote_topic, end) and how far.
    drain_partitions = models.JSONField(default=list, blank=True)
    drain_started_at = models.DateTimeField(null=True, blank=True)
    drain_records_at_start = models.BigIntegerField(null=True, blank=True)
    drain_records_remaining = models.BigIntegerField(null=True, blank=True)
    drain_partitions_remaining = models.JSONField(default=list, blank=True, help_text="up to 20 of them")
    drain_partition_count_remaining = models.IntegerField(null=True, blank=True)
    drain_observed_at = models.DateTimeField(null=True, blank=True)
    drain_done = models.BooleanField(default=False)
    # Drills and cutovers.
    dry_run = models.BooleanField(
        default=False, help_text="cutover: check every step, write nothing; takeover: read MM2's state only"
    )
    fence_s = models.FloatField(
        null=True, blank=True, help_text="cutover: how long the source's end offsets must stay still"
    )
    result = models.JSONField(
        null=True,
        blank=True,
        help_text="drill: RPO, RTO estimate, timings; cutover: each step's evidence; takeover: the request, "
        "the plan per partition, the positions written",
    )

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow"], condition=Q(active=True), name="one_active_operation_per_flow"
            )
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.pk} of flow {self.flow_id} ({self.phase}, {self.outcome})"

    # `timeout_s` is one stored column (the API's `timeout_s` of every kind) that means a different wait
    # per use; the code reads it by these names. A column per meaning would need a migration that moves
    # every stored operation's value, for no change of behaviour.
    @property
    def drain_timeout_s(self) -> float:
        """Failover, failback, cutover and drill: the longest drain before giving up (or, forced, going on)."""
        return self.timeout_s

    @property
    def fence_timeout_s(self) -> float:
        """Cutover: how long the fence waits for the source's end offsets to stay still."""
        return self.timeout_s

    @property
    def record_wait_s(self) -> float:
        """Drill: how long it waits for the copy of a group's next record still on its way to the target."""
        return self.timeout_s

    @property
    def client_timeout_s(self) -> float:
        """Takeover: the bound of each read and write of MM2's topics and the target."""
        return self.timeout_s


class GroupOutcome(models.TextChoices):
    WRITTEN = "written"
    UNCHANGED = "unchanged"
    REFUSED = "refused"


class OperationGroupResult(models.Model):
    """What an operation did to one consumer group: the offsets written, and the topics it consumes."""

    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="group_results")
    group = models.CharField(max_length=255)
    outcome = models.CharField(max_length=10, choices=GroupOutcome.choices)
    written = models.JSONField(default=dict, blank=True, help_text='"topic[partition]" -> offset written')
    topics = models.JSONField(default=list, blank=True, help_text="the source topics the group consumes")
    detail = models.TextField(blank=True, default="")

    class Meta:
        ordering = ["group"]
        constraints = [
            models.UniqueConstraint(fields=["operation", "group"], name="one_result_per_operation_group")
        ]


class DrillOutcome(models.TextChoices):
    PASSED = "passed"  # the shadow group's next record on the target is the copy of the group's next one
    FAILED = "failed"


class DrillPartitionResult(models.Model):
    """A drill's verdict on one partition of one group: where the group is on the source, where the
    shadow group was put on the target (and the offset sync that proves it), and both next records."""

    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="drill_results")
    group = models.CharField(max_length=255)
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    remote_topic = models.CharField(max_length=249)
    source_offset = models.BigIntegerField(null=True, blank=True, help_text="the group's committed offset")
    target_offset = models.BigIntegerField(null=True, blank=True, help_text="translated: the shadow's")
    offset_sync = models.JSONField(null=True, blank=True, help_text="the sync the translation rests on")
    outcome = models.CharField(max_length=10, choices=DrillOutcome.choices)
    reason = models.TextField(blank=True, default="")
    source_record = models.JSONField(null=True, blank=True, help_text="offset, timestamp, digest")
    target_record = models.JSONField(null=True, blank=True, help_text="offset, timestamp, digest")

    class Meta:
        ordering = ["group", "topic", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["operation", "group", "topic", "partition"], name="one_drill_result_per_partition"
            )
        ]


class ShadowGroup(models.Model):
    """A consumer group a drill creates on the target, recorded BEFORE it is created there, so that a
    drill killed mid-way leaves a row to clean up (on resume) instead of a group on the cluster."""

    operation = models.ForeignKey(Operation, on_delete=models.CASCADE, related_name="shadow_groups")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=255)
    of_group = models.CharField(max_length=255, help_text="the real group it shadows")
    created_at = models.DateTimeField(auto_now_add=True)
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="null: may still exist on the cluster")

    class Meta:
        ordering = ["id"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="one_shadow_group_per_name")]


# -- reports (computed by the Spark jobs in dashboards.spark, stored by workers.reports) ------------------
class ReportDataset(models.TextChoices):
    """The datasets the report job produces (the keys of `dashboards.spark.jobs.REPORT_KEYS`)."""

    PARTITION_LAG = "partition_lag"
    FLOW_THROUGHPUT = "flow_throughput"
    LATENCY_PERCENTILES = "latency_percentiles"
    PARTITION_STATUS = "partition_status"
    FLOW_STATUS = "flow_status"
    DAILY_FLOW_USAGE = "daily_flow_usage"
    CAPACITY_PLAN = "capacity_plan"


class ReportRunState(models.TextChoices):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"


class ReportTrigger(models.TextChoices):
    USER = "user"  # the API or the web UI
    SCHEDULE = "schedule"  # Celery beat, every REPORTS_INTERVAL_S
    COMMAND = "command"  # manage.py run_reports


class ReportRun(models.Model):
    """One run of the report job: who asked, how far it got, what it read and stored."""

    state = models.CharField(max_length=10, choices=ReportRunState.choices, default=ReportRunState.QUEUED)
    active = models.BooleanField(default=True, help_text="queued or running (at most one run is)")
    trigger = models.CharField(max_length=10, choices=ReportTrigger.choices)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requested_at = models.DateTimeField(auto_now_add=True, db_index=True)
    dispatched_at = models.DateTimeField(null=True, blank=True, help_text="handed to the reports queue")
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True, help_text="last progress: a stale active run is failed")
    progress = models.FloatField(default=0.0, help_text="0..1")
    stage = models.CharField(max_length=100, blank=True, default="")
    error = models.TextField(blank=True, default="")
    samples_read = models.BigIntegerField(default=0)
    partitions_read = models.IntegerField(default=0)
    rows_stored = models.JSONField(default=dict, blank=True, help_text="rows stored per dataset")

    class Meta:
        ordering = ["-requested_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["active"], condition=Q(active=True), name="one_active_report_run")
        ]

    def __str__(self) -> str:
        return f"report run {self.pk} ({self.state})"


class ReportRow(models.Model):
    """One row of a report dataset, upserted by its key: a later run's row replaces an earlier one."""

    dataset = models.CharField(max_length=40, choices=ReportDataset.choices)
    key = models.CharField(max_length=64, help_text="sha256 of the row's key columns (REPORT_KEYS)")
    flow_id = models.BigIntegerField(null=True, blank=True, help_text="no foreign key: reports outlive flows")
    window_start = models.DateTimeField(null=True, blank=True, help_text="window or day start (UTC)")
    data = models.JSONField()
    run = models.ForeignKey(ReportRun, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["dataset", "window_start", "id"]
        constraints = [
            models.UniqueConstraint(fields=["dataset", "key"], name="one_report_row_per_key"),
        ]
        indexes = [models.Index(fields=["dataset", "flow_id", "window_start"])]


# -- RPO budgets, runtime signals and alerts (controlplane.alerts, controlplane.alerts.notifications) ------------
DEFAULT_RPO_SECONDS = 60.0


class FlowRpoBudget(models.Model):
    """A flow's recovery point objective: how far behind it may be before an alert fires (docs/alerts.md).

    Kept apart from `Flow`, whose columns are MM2's flow properties. A flow without a row has the
    defaults: DEFAULT_RPO_SECONDS seconds behind, no records budget.
    """

    flow = models.OneToOneField(Flow, on_delete=models.CASCADE, primary_key=True, related_name="rpo_budget")
    seconds_behind = models.FloatField(
        default=DEFAULT_RPO_SECONDS, help_text="largest seconds_behind allowed (the RPO in time)"
    )
    records_behind = models.BigIntegerField(
        null=True, blank=True, help_text="largest records_behind allowed; empty: no records budget"
    )
    updated_at = models.DateTimeField(auto_now=True)


class FlowSignals(models.Model):
    """What the runtime last did for a flow, with when: written by the metadata task (heartbeats,
    checkpoints), the slices (offset syncs, records replicated) and the alert evaluation (task leases)."""

    flow = models.OneToOneField(Flow, on_delete=models.CASCADE, primary_key=True, related_name="signals")
    heartbeat_emitted_at = models.DateTimeField(null=True, blank=True)
    checkpoint_emitted_at = models.DateTimeField(null=True, blank=True)
    checkpoint_latency_ms = models.FloatField(
        null=True,
        blank=True,
        help_text="of the newest checkpoints: from reading the groups' source offsets to the target's ack, "
        "the worst group's (MM2 checkpoint-latency-ms)",
    )
    offset_sync_emitted_at = models.DateTimeField(null=True, blank=True)
    records_replicated_at = models.DateTimeField(
        null=True, blank=True, help_text="the last slice that replicated records"
    )
    tasks_planned = models.IntegerField(null=True, blank=True, help_text="tasks of the flow's current plan")
    tasks_leased = models.IntegerField(null=True, blank=True, help_text="of them, tasks whose lease is held")
    tasks_observed_at = models.DateTimeField(null=True, blank=True)
    schemas_synced_at = models.DateTimeField(
        null=True,
        blank=True,
        help_text="the schema sync's latest pass (replication.schemas.flow.SchemaSyncTask)",
    )
    schemas_subjects = models.IntegerField(null=True, blank=True, help_text="subjects the latest pass synced")
    schemas_versions_behind = models.IntegerField(
        null=True, blank=True, help_text="source versions not on the target registry after the latest pass"
    )
    schemas_errors = models.IntegerField(
        null=True, blank=True, help_text="subjects the latest pass could not sync (each a flow error event)"
    )
    schemas_id_map = models.JSONField(
        null=True, blank=True, help_text="source schema ID -> target schema ID, as the latest pass found them"
    )


class AlertRule(models.TextChoices):
    """The rules Mirrorplane evaluates itself (controlplane.alerts.rules); deploy/ ships the same ones."""

    RPO_SECONDS = "rpo_seconds_exceeded", "RPO budget exceeded (seconds behind)"
    RPO_RECORDS = "rpo_records_exceeded", "RPO budget exceeded (records behind)"
    STALE_STATUS = "stale_status", "status stale"
    HEARTBEAT_MISSING = "heartbeat_missing", "heartbeat missing"
    DATA_LOSS_GAP = "data_loss_gap", "data-loss gap"
    FLOW_FAULTED = "flow_faulted", "flow faulted"
    NO_LEASE_HOLDER = "no_lease_holder", "no worker holds the flow's tasks"
    POOL_WITHOUT_WORKERS = "pool_without_workers", "the flow's worker pool has no live worker"
    OFFSET_SYNCS_STOPPED = "offset_syncs_stopped", "offset syncs stopped (failover would be inexact)"
    VERIFICATION_MISMATCH = "verification_mismatch", "target data differs from the source"
    READINESS_LOW = "readiness_low", "failover readiness below the threshold"


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


# -- continuous verification (controlplane.assurance.verification, workers.verification) ---------------------------
class VerificationStatus(models.TextChoices):
    PENDING = "pending"  # nothing verified yet
    OK = "ok"  # every range checked matched
    MISMATCH = "mismatch"  # a range differs; re-checked every run until it matches
    UNVERIFIABLE = "unverifiable"  # no offset sync or no replicated record to verify against


class PartitionVerification(models.Model):
    """How far the target's copy of one source partition is verified equal to the source (docs/verification.md).

    Every record from `verified_from` up to `verified_up_to` (source offsets, exclusive) was compared with
    its copy; older data is sampled (`ranges_sampled`).
    """

    flow = models.ForeignKey(Flow, on_delete=models.CASCADE, related_name="verifications")
    topic = models.CharField(max_length=249)
    partition = models.IntegerField()
    remote_topic = models.CharField(max_length=249, blank=True, default="")
    status = models.CharField(
        max_length=12, choices=VerificationStatus.choices, default=VerificationStatus.PENDING
    )
    reason = models.TextField(blank=True, default="", help_text="the mismatch or why nothing is verifiable")
    verified_from = models.BigIntegerField(null=True, blank=True)
    verified_up_to = models.BigIntegerField(null=True, blank=True, help_text="source offset, exclusive")
    target_verified_up_to = models.BigIntegerField(
        null=True, blank=True, help_text="where the verified part ends on the target (exclusive)"
    )
    mismatch_offset = models.BigIntegerField(null=True, blank=True, help_text="first differing source offset")
    recheck_start = models.BigIntegerField(null=True, blank=True, help_text="the mismatching range")
    recheck_end = models.BigIntegerField(null=True, blank=True)
    records_verified = models.BigIntegerField(default=0)
    ranges_verified = models.BigIntegerField(default=0)
    ranges_sampled = models.BigIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)
    last_digest = models.CharField(max_length=64, blank=True, default="", help_text="of the last range")
    sync_upstream = models.BigIntegerField(null=True, blank=True, help_text="newest offset sync read")
    sync_downstream = models.BigIntegerField(null=True, blank=True)
    checked_at = models.DateTimeField(null=True, blank=True, help_text="the verifier's last look")
    verified_at = models.DateTimeField(null=True, blank=True, help_text="a range last verified clean")

    class Meta:
        ordering = ["flow", "topic", "partition"]
        constraints = [
            models.UniqueConstraint(
                fields=["flow", "topic", "partition"], name="one_verification_per_flow_partition"
            )
        ]


class FlowAssurance(models.Model):
    """What the verifier observed of a flow for its failover readiness, with when (docs/verification.md)."""

    flow = models.OneToOneField(Flow, on_delete=models.CASCADE, primary_key=True, related_name="assurance")
    groups_active_on_target = models.JSONField(default=list, blank=True)
    partition_problems = models.JSONField(default=list, blank=True)
    config_problems = models.JSONField(default=list, blank=True)
    observed_at = models.DateTimeField()
