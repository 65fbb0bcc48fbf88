"""The assurance tables: continuous verification's progress per partition (`controlplane.assurance.verification`,
`workers.verification`) and what the verifier observed of a flow for its failover readiness. Data only."""

from __future__ import annotations

from django.db import models

from controlplane.flows.models import Flow


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


class VerificationBacklog(models.Model):
    """What the last verification run of a flow left waiting (`replication.verification_backlog`): written
    when it changes and at least every `BACKLOG_REFRESH_S` while the verifier runs, so its age says so."""

    flow = models.OneToOneField(
        Flow, on_delete=models.CASCADE, primary_key=True, related_name="verification_backlog"
    )
    partitions_waiting = models.IntegerField(default=0)
    records_waiting = models.BigIntegerField(default=0, help_text="source offsets no run verified yet")
    oldest_look_at = models.DateTimeField(
        null=True, blank=True, help_text="the least recent look at a waiting partition"
    )
    observed_at = models.DateTimeField()
