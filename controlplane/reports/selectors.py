"""Reads of report runs and their rows (the dashboards, the API, beat's schedule)."""

from __future__ import annotations

import datetime

from django.db.models import QuerySet

from controlplane.core.errors import ServiceValidationError
from controlplane.reports.models import ReportDataset, ReportRow, ReportRun, ReportRunState

# -- reports ----------------------------------------------------------------------------------------------
REPORT_ROWS_LIMIT = 20_000


def report_run_list() -> QuerySet[ReportRun]:
    return ReportRun.objects.select_related("requested_by")


def report_run_latest() -> ReportRun | None:
    return report_run_list().first()


def report_runs_to_dispatch() -> QuerySet[ReportRun]:
    """Queued runs nobody has handed to the reports queue yet (oldest first)."""
    return ReportRun.objects.filter(state=ReportRunState.QUEUED, dispatched_at__isnull=True).order_by("id")


def report_schedule_due(*, now: datetime.datetime, interval_s: float) -> bool:
    """True when no run is active and the last one was requested `interval_s` or more ago (or never)."""
    last = ReportRun.objects.order_by("-requested_at", "-id").first()
    return last is None or (not last.active and (now - last.requested_at).total_seconds() >= interval_s)


def report_dataset(name: str) -> ReportDataset:
    try:
        return ReportDataset(name)
    except ValueError:
        raise ServiceValidationError.single(
            "dataset", f"unknown report dataset {name!r}; datasets: {', '.join(ReportDataset.values)}"
        ) from None


def report_rows(
    *,
    dataset: str,
    flow_id: int | None = None,
    since: datetime.datetime | None = None,
    until: datetime.datetime | None = None,
    limit: int = REPORT_ROWS_LIMIT,
) -> list[dict]:
    """A dataset's rows (oldest window first; the newest `limit` of them) for windows in [since, until).

    Capacity plans have no window: `since` and `until` do not apply to them.
    """
    dataset = report_dataset(dataset)
    rows = ReportRow.objects.filter(dataset=dataset)
    if flow_id is not None:
        rows = rows.filter(flow_id=flow_id)
    if dataset != ReportDataset.CAPACITY_PLAN:
        if since is not None:
            rows = rows.filter(window_start__gte=since)
        if until is not None:
            rows = rows.filter(window_start__lt=until)
    newest = rows.order_by("-window_start", "-id").values_list("data", flat=True)[:limit]
    return list(reversed(newest))


def report_flow_names() -> dict[int, str]:
    """Flow id -> name as the reports know them (flows deleted since keep their last name)."""
    usage = ReportRow.objects.filter(dataset=ReportDataset.DAILY_FLOW_USAGE).order_by("window_start")
    return {
        flow_id: data.get("flow_name", str(flow_id)) for flow_id, data in usage.values_list("flow_id", "data")
    }
