"""The reports page: the capacity plan, the report pages, and a report run requested by an operator."""

from __future__ import annotations

from django.contrib import messages
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from controlplane import reports
from controlplane.core.roles import Role
from controlplane.flows import pools
from controlplane.reports.models import ReportTrigger
from controlplane.web.access import back_url, operator_required, viewer_required

# The report dashboards' pages (charts) live in dashboards.views; this is their index and the run controls.
REPORT_PAGES = (
    ("reports-lag", "Lag", "records and seconds behind, per flow and partition"),
    ("reports-throughput", "Throughput", "records/s and MB/s with p50/p95/max"),
    ("reports-latency", "Latency", "record age and replication latency percentiles"),
    ("reports-status", "Status", "Burrow status per partition over time, and per flow"),
    ("reports-capacity", "Capacity", "projected load, tasks and workers needed, the verdict"),
)
RECENT_REPORT_RUNS = 10


def _report_run_context(request) -> dict:
    return {
        "run": reports.report_run_latest(),
        "can_run": request.web_role >= Role.OPERATOR,
    }


@viewer_required
def report_page(request):
    rows = reports.report_rows(dataset="capacity_plan")
    # In the plan's order: the fleet, then each pool's row followed by its flows'.
    plan = [row for row in rows if row.get("horizon_days") == 0]

    def scope(row: dict) -> tuple:
        return row["scope"], row.get("pool"), row["flow_name"]

    # What to add to last `plan_months`: that horizon's row of the same scope.
    ahead = {scope(row): row for row in rows if row.get("horizon_days") == 30 * (row.get("plan_months") or 0)}
    for row in plan:
        row["plan"] = ahead.get(scope(row))
        pool = row.get("pool")  # none on the fleet's rows (and on rows stored before pools were planned)
        row["pool_label"] = (
            "all" if row["scope"] == "overall" else "—" if pool is None else pools.pool_label(pool)
        )
        share = row.get("network_utilization")  # 0.000 would hide 0.014% of a 10 Gbit/s NIC
        row["network_share"] = "—" if share is None else "< 0.01%" if 0 < share < 0.0001 else f"{share:.2%}"
    return render(
        request,
        "web/reports.html",
        {
            **_report_run_context(request),
            "pages": REPORT_PAGES,
            "runs": reports.report_run_list()[:RECENT_REPORT_RUNS],
            "verdicts": plan,
        },
    )


@viewer_required
def reports_run_status(request):
    return render(request, "web/_report_run.html", _report_run_context(request))


@operator_required
@require_POST
def reports_run(request):
    try:
        reports.report_run_request(actor=request.user, trigger=ReportTrigger.USER)
    except reports.ReportRunActive as exc:
        messages.warning(request, str(exc))
    else:
        messages.success(request, "Report run queued: the reports worker picks it up within seconds.")
    return redirect(back_url(request, reverse("web:reports")))
