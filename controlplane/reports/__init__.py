"""Reports: report runs (requested, dispatched, run by the workers' Spark jobs) and their rows.

Its tables are in `controlplane.reports.models` (import a model from there)."""

from controlplane.reports.selectors import (
    REPORT_ROWS_LIMIT,
    report_dataset,
    report_flow_names,
    report_rows,
    report_run_latest,
    report_run_list,
    report_runs_to_dispatch,
    report_schedule_due,
)
from controlplane.reports.services import (
    REPORT_ROWS_BATCH,
    ReportRunActive,
    report_rows_store,
    report_run_dispatched,
    report_run_finish,
    report_run_progress,
    report_run_request,
    report_run_start,
)

__all__ = [
    "REPORT_ROWS_LIMIT",
    "report_dataset",
    "report_flow_names",
    "report_rows",
    "report_run_latest",
    "report_run_list",
    "report_runs_to_dispatch",
    "report_schedule_due",
    "REPORT_ROWS_BATCH",
    "ReportRunActive",
    "report_rows_store",
    "report_run_dispatched",
    "report_run_finish",
    "report_run_progress",
    "report_run_request",
    "report_run_start",
]
