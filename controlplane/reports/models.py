"""The reports' tables: report runs and their rows (computed by the Spark jobs in `dashboards.spark`, stored
through `controlplane.reports.report_rows_store`). Data only."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


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
