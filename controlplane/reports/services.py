"""Report runs and their rows: a run is requested (by an operator or the schedule, one at a time),
dispatched, started, advanced and finished by the worker that computes it; its rows are stored in
batches.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from django.conf import settings as django_settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from controlplane.core.audit import audit_record, audited_attempt
from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditAction
from controlplane.reports.models import ReportDataset, ReportRow, ReportRun, ReportRunState, ReportTrigger


# -- reports ----------------------------------------------------------------------------------------------
class ReportRunActive(ServiceConflict):
    """A report run was asked for while another is queued or running: one run at a time."""

    def __init__(self, run: ReportRun) -> None:
        self.run = run
        super().__init__(
            f"report run {run.pk} is already {run.state} ({run.progress:.0%} done, requested "
            f"{run.requested_at:%Y-%m-%d %H:%M:%S} UTC): wait for it to finish, then ask again"
        )


def _fail_stale_report_runs() -> int:
    """Fail active runs without progress for REPORTS_RUN_TIMEOUT_S: their worker died or never came."""
    timeout_s = django_settings.REPORTS_RUN_TIMEOUT_S
    now = timezone.now()
    return ReportRun.objects.filter(
        active=True, updated_at__lt=now - datetime.timedelta(seconds=timeout_s)
    ).update(
        state=ReportRunState.FAILED,
        active=False,
        finished_at=now,
        updated_at=now,
        error=f"no progress for {timeout_s:g} s: the worker running it stopped, or no reports worker took it",
    )


def report_run_request(*, actor, trigger: str) -> ReportRun:
    """Queue a report run (a worker runs it); refused with ReportRunActive while another is active.

    Users' and commands' requests are audited, refusals too; the schedule's are not (one per interval).
    """
    _fail_stale_report_runs()
    audited = trigger != ReportTrigger.SCHEDULE
    attempt = (
        audited_attempt(actor=actor, action=AuditAction.RUN_REPORTS, object_type="report_run")
        if audited
        else transaction.atomic()
    )
    with attempt:
        active = ReportRun.objects.filter(active=True).first()
        if active is not None:
            raise ReportRunActive(active)
        try:
            with transaction.atomic():
                run = ReportRun.objects.create(
                    trigger=trigger, requested_by=actor if getattr(actor, "pk", None) else None
                )
        except IntegrityError:  # another request won the race for the one active slot
            raise ReportRunActive(ReportRun.objects.get(active=True)) from None
        if audited:
            audit_record(
                actor=actor,
                action=AuditAction.RUN_REPORTS,
                object_type="report_run",
                object_id=run.pk,
                object_repr=f"report run {run.pk}",
                after={"trigger": trigger},
            )
    return run


def report_run_dispatched(*, run: ReportRun) -> None:
    ReportRun.objects.filter(pk=run.pk).update(dispatched_at=timezone.now())


def report_run_start(*, run_id: int) -> ReportRun | None:
    """Claim a queued run for this process; None when it is not queued (taken, finished or failed)."""
    now = timezone.now()
    claimed = ReportRun.objects.filter(pk=run_id, state=ReportRunState.QUEUED).update(
        state=ReportRunState.RUNNING, started_at=now, updated_at=now, stage="starting"
    )
    return ReportRun.objects.get(pk=run_id) if claimed else None


def report_run_progress(*, run: ReportRun, stage: str, fraction: float) -> None:
    ReportRun.objects.filter(pk=run.pk).update(
        stage=stage[:100], progress=min(max(fraction, 0.0), 1.0), updated_at=timezone.now()
    )


def report_run_finish(
    *, run: ReportRun, error: str = "", samples_read: int = 0, partitions_read: int = 0
) -> ReportRun:
    run.refresh_from_db()
    run.state = ReportRunState.FAILED if error else ReportRunState.SUCCEEDED
    run.active = False
    run.finished_at = timezone.now()
    run.error = error
    if not error:
        run.progress, run.stage = 1.0, "done"
    run.samples_read, run.partitions_read = samples_read, partitions_read
    run.save()
    return run


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None  # JSON has no NaN; a missing measure reads as null
    return value


def _window_start(row: Mapping[str, Any]) -> datetime.datetime | None:
    start = row.get("window_start") or row.get("date")
    if isinstance(start, datetime.datetime):
        return start if timezone.is_aware(start) else timezone.make_aware(start, datetime.UTC)
    if isinstance(start, datetime.date):
        return datetime.datetime.combine(start, datetime.time(), tzinfo=datetime.UTC)
    return None


def _row_key(row: Mapping[str, Any], columns: Sequence[str]) -> str:
    values = [_json_value(row[column]) for column in columns]
    return hashlib.sha256(json.dumps(values, sort_keys=True).encode()).hexdigest()


REPORT_ROWS_BATCH = 2000


def report_rows_store(
    *,
    run: ReportRun,
    datasets: Mapping[str, Sequence[Mapping[str, Any]]],
    keys: Mapping[str, Sequence[str] | None],
) -> dict[str, int]:
    """Upsert each dataset's rows by its key columns (`keys`); a dataset keyed None replaces its rows.

    One transaction: readers see a run's rows all or not at all. Returns the rows stored per dataset.
    """
    unknown = sorted(set(datasets) - set(ReportDataset.values))
    if unknown:
        raise ServiceValidationError.single("dataset", f"unknown report datasets: {', '.join(unknown)}")
    stored: dict[str, int] = {}
    with transaction.atomic():
        for dataset, rows in datasets.items():
            columns = keys[dataset]
            by_key = {}
            for index, row in enumerate(rows):
                key = _row_key(row, columns) if columns is not None else _row_key({"i": index}, ["i"])
                by_key[key] = ReportRow(
                    dataset=dataset,
                    key=key,
                    flow_id=row.get("flow_id"),
                    window_start=_window_start(row),
                    data={name: _json_value(value) for name, value in row.items()},
                    run=run,
                )
            if columns is None:
                ReportRow.objects.filter(dataset=dataset).delete()
            ReportRow.objects.bulk_create(
                by_key.values(),
                batch_size=REPORT_ROWS_BATCH,
                update_conflicts=True,
                unique_fields=["dataset", "key"],
                update_fields=["flow_id", "window_start", "data", "run"],
            )
            stored[dataset] = len(by_key)
        ReportRun.objects.filter(pk=run.pk).update(rows_stored=stored, updated_at=timezone.now())
    return stored
