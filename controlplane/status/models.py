"""The status tables: what the workers report (partition and task status, flow events, runtime signals:
written through `controlplane.status.runtime`) and the RPO budgets the status is judged against. Data only.

A budget is set through `controlplane.assurance.budgets` and read by `controlplane.status.budgets` (the health
rule, the live RPO and the alerts judge by it): its table lives here, in the lowest package that reads it.
"""

from __future__ import annotations

from django.db import models

from controlplane.flows.models import Flow


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
    topics = models.JSONField(
        default=list,
        # in the database too: a worker of the version before writes its rows without it during an upgrade
        db_default=models.Value([], output_field=models.JSONField()),
        blank=True,
        help_text="the source topics of the task's partitions, sorted (a reverse flow's readiness reads them)",
    )
    topic_figures = models.JSONField(
        default=list,
        db_default=models.Value([], output_field=models.JSONField()),  # as `topics`: an upgrade's old workers
        blank=True,
        help_text="the task's partitions rolled up per topic (controlplane.status.topic_rollups; [] above "
        "its topics limit): the live RPO per topic and /metrics read them, not the partition rows",
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
    acl_sync_unsupported = models.TextField(
        null=True,
        blank=True,
        help_text="why a cluster cannot take part in ACL sync, as the latest ACL sync pass found (no "
        "authorizer); empty when it could or ACL sync is off",
    )
    schemas_refused = models.JSONField(
        null=True,
        blank=True,
        help_text="source subject -> why the latest pass refuses it until someone acts (held records name it)",
    )
