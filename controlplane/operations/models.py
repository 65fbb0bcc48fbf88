"""The operations' tables: durable failover, failback, drill, cutover and takeover jobs (one `Operation`
row each, run by `controlplane.operations.run_operation`) and what they did per group, per drilled partition,
per shadow group. Data only."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q

from controlplane.flows.models import Cluster, Flow


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


# The waits each kind has, first the one the API's deprecated `timeout_s` of that kind answers with.
WAITS_OF_KIND: dict[str, tuple[str, ...]] = {
    OperationKind.FAILOVER: ("drain_timeout_s",),
    OperationKind.FAILBACK: ("drain_timeout_s",),
    OperationKind.DRILL: ("record_wait_s", "drain_timeout_s"),
    OperationKind.CUTOVER: ("drain_timeout_s", "fence_timeout_s"),
    OperationKind.TAKEOVER: ("client_timeout_s",),
}


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
    # What it waits for: one column per wait, null where its kind has no such wait (`WAITS_OF_KIND`).
    drain_timeout_s = models.FloatField(
        null=True,
        blank=True,
        help_text="failover, failback, drill, cutover: the longest drain before giving up (or, forced, "
        "going on)",
    )
    fence_timeout_s = models.FloatField(
        null=True, blank=True, help_text="cutover: how long the fence waits for the source to stay still"
    )
    record_wait_s = models.FloatField(
        null=True,
        blank=True,
        help_text="drill: how long to wait for the copy of a group's next record still on its way, and for "
        "the offset syncs to reach the group's offset",
    )
    client_timeout_s = models.FloatField(
        null=True, blank=True, help_text="takeover: the bound of each read and write of MM2's topics"
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
