"""The report dashboards: Plotly charts first (built by `dashboards.figures`), the rows behind them beneath.

Read-only pages for every role (viewer and up); rows come from `controlplane.reports.selectors.report_rows`.
Each page shows the last `hours` of its dataset, counted back from its newest window (not from now: a
lake may stop growing), for one flow or all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.http import Http404
from django.shortcuts import render

from controlplane import reports
from controlplane.core.roles import Role
from controlplane.flows.pools import pool_label
from controlplane.web.access import viewer_required
from dashboards import figures

# The time-range picker: the last N of each dataset (counted back from its newest window), or custom.
RANGES = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
    "30d": timedelta(days=30),
}
DEFAULT_RANGE = "24h"
HOUR_CHOICES = (1, 6, 24, 168, 720)  # ?hours= (older links) maps onto the ranges
TABLE_ROWS = 200
Rows = list[dict]


@dataclass(frozen=True)
class Page:
    title: str
    dataset: str
    charts: Callable[[Rows], list]  # rows -> Plotly figures
    columns: Sequence[str]
    about: str
    newest_first: bool = True  # the table's order; else the rows' own (the capacity plan's grouping)


def _capacity_charts(plan: Rows) -> list:
    usage = reports.report_rows(dataset="daily_flow_usage")
    scopes = dict.fromkeys(row["flow_name"] for row in plan)  # the plan's order: fleet, then pool by pool
    return [figures.capacity_figure(plan, usage, flow=name) for name in scopes]


def _status_charts(rows: Rows) -> list:
    return [figures.status_heatmap(rows)]


PAGES = {
    "lag": Page(
        title="Lag",
        dataset="partition_lag",
        charts=lambda rows: [
            figures.lag_figure(rows, measure="records"),
            figures.lag_figure(rows, measure="seconds"),
        ],
        columns=(
            "window_start",
            "flow_name",
            "remote_topic",
            "partition",
            "records_behind_last",
            "records_behind_max",
            "seconds_behind_last",
            "seconds_behind_max",
            "samples",
            "partitions",
        ),
        about="Records behind (source end offset - the mirror's position) and seconds behind (how long ago "
        "the mirror's position was produced, interpolated between end-offset samples), max per window.",
    ),
    "throughput": Page(
        title="Throughput",
        dataset="flow_throughput",
        charts=lambda rows: [
            figures.throughput_figure(rows, unit="mb"),
            figures.throughput_figure(rows, unit="records"),
        ],
        columns=(
            "window_start",
            "flow_name",
            "remote_topic",
            "partition",
            "records_per_s",
            "records_per_s_p50",
            "records_per_s_p95",
            "records_per_s_max",
            "mb_per_s",
            "mb_per_s_p50",
            "mb_per_s_p95",
            "mb_per_s_max",
        ),
        about="Per window: what was replicated over the time slices covered; p50/p95/max of the per-slice "
        "rates. MB are 10^6 value bytes (as MM2's byte-rate).",
    ),
    "latency": Page(
        title="Latency",
        dataset="latency_percentiles",
        charts=lambda rows: [
            figures.latency_figure(rows, measure="replication_latency_ms"),
            figures.latency_figure(rows, measure="record_age_ms"),
        ],
        columns=(
            "window_start",
            "flow_name",
            "remote_topic",
            "partition",
            "replication_latency_ms_p50",
            "replication_latency_ms_p95",
            "replication_latency_ms_p99",
            "replication_latency_ms_max",
            "record_age_ms_p50",
            "record_age_ms_p95",
            "record_age_ms_p99",
            "record_age_ms_max",
        ),
        about="Percentiles of each slice's worst record: replication latency at the target's ack, record "
        "age at poll (both from the record's timestamp).",
    ),
    "status": Page(
        title="Status",
        dataset="partition_status",
        charts=_status_charts,
        columns=(
            "window_start",
            "flow_name",
            "remote_topic",
            "partition",
            "status",
            "records_behind",
            "next_offset",
            "last_sample_at",
            "window_samples",
            "partitions",
        ),
        about="Burrow's rules over the last samples of each partition at the end of every window: OK, WARN "
        "(lag never decreased), STALL (position never moved), REWIND (position went back), STOP (silent).",
    ),
    "capacity": Page(
        title="Capacity",
        dataset="capacity_plan",
        charts=_capacity_charts,
        columns=(
            "flow_name",
            "pool",
            "horizon_days",
            "verdict",
            "days_to_capacity",
            "runs_out_on",
            "fit_confidence",
            "current_mb_per_s",
            "growth_mb_per_s_per_day",
            "projected_mb_per_s",
            "partitions",
            "record_bytes",
            "input_mb_per_s",
            "network_latency_ms",
            "per_task_mb_per_s",
            "per_task_source",
            "saturated_windows",
            "capacity_mb_per_s",
            "network_utilization",
            "tasks",
            "tasks_needed",
            "tasks_to_add",
            "workers",
            "workers_needed",
            "workers_to_add",
            "network_to_add_mbps",
            "disk_growth_gb_per_day",
            "retention_disk_gb",
        ),
        about="Load is the daily p95 of 5-minute MB/s, at least the input (produced) MB/s. A task's capacity is the best MB/s it reached in a "
        "window where it was saturated (behind on records older than a slice at 90% of its slices or more, "
        "empty ones included, replicating, and busy all window), else the measured per-task maximum (REPORTS_TASK_MB_PER_S), else there is not enough data "
        "for a verdict. Tasks and workers needed at Cruise Control's 0.8 network threshold, at most 150 "
        "partitions per task and 20 tasks per worker. The fleet (overall) adds up all flows; each worker pool "
        "adds up its flows and is judged on the live workers consuming its queue (the fleet on "
        "REPORTS_FLEET_WORKERS). Days to capacity: when the "
        "load, growing at the fitted slope, reaches capacity x threshold (confidence from the fit's R² and "
        "days). Inputs: partitions, record size, input (produced) MB/s and network latency (poll to ack).",
        newest_first=False,
    ),
}


def _int_param(request, name: str, choices: Sequence[int] | None = None) -> int | None:
    try:
        value = int(request.GET.get(name, ""))
    except ValueError:
        return None
    return value if choices is None or value in choices else None


def _cell(value, column: str = "") -> str:
    if value is None:
        return "—"
    if column == "pool":
        return pool_label(value)
    if column == "network_utilization":  # a share: 0.000 would hide 0.014% of a 10 Gbit/s NIC
        return "< 0.01%" if 0 < value < 0.0001 else f"{value:.2%}"
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 1e6 else f"{value:,.0f}"
    return str(value)


@dataclass(frozen=True)
class TimeRange:
    name: str  # a RANGES key, or "custom"
    span: timedelta | None  # back from the newest window (not from now: a lake may stop growing)
    start: datetime | None = None  # custom: [start, end)
    end: datetime | None = None


def _instant(value: str, field: str, errors: list[str]) -> datetime | None:
    if not value:
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        errors.append(f"{field}: {value!r} is not a date and time; use YYYY-MM-DDTHH:MM (UTC)")
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def time_range(request, errors: list[str]) -> TimeRange:
    """?range=15m|1h|6h|24h|7d|30d, or ?from=&to= (UTC, either may be open) for a custom range."""
    start = _instant(request.GET.get("from", ""), "from", errors)
    end = _instant(request.GET.get("to", ""), "to", errors)
    if start and end and start >= end:
        errors.append("to: the end of a custom range must be after its start (from)")
        start = end = None
    if start or end:
        return TimeRange("custom", None, start, end)
    name = request.GET.get("range", "")
    if not name and (hours := _int_param(request, "hours", HOUR_CHOICES)):
        name = next((key for key, span in RANGES.items() if span == timedelta(hours=hours)), "")
    if name and name not in RANGES:
        errors.append(f"range: no range {name!r}; choose one of {', '.join(RANGES)}, or from/to")
        name = ""
    name = name or DEFAULT_RANGE
    return TimeRange(name, RANGES[name])


def _bounds(spec: Page, flow_id: int | None, chosen: TimeRange) -> tuple[datetime | None, datetime | None]:
    if chosen.span is None:
        return chosen.start, chosen.end
    newest = reports.report_rows(dataset=spec.dataset, flow_id=flow_id, limit=1)
    end = newest[0].get("window_end") or newest[0].get("window_start") if newest else None
    # The windows wholly inside the span that ends with the newest window.
    return (datetime.fromisoformat(end) - chosen.span if end else None), None


@viewer_required
def dashboard(request, page: str):
    spec = PAGES.get(page)
    if spec is None:
        raise Http404(f"no report page {page!r}")
    flow_id = _int_param(request, "flow")
    errors: list[str] = []
    chosen = time_range(request, errors)
    since, until = _bounds(spec, flow_id, chosen)
    rows = reports.report_rows(dataset=spec.dataset, flow_id=flow_id, since=since, until=until)
    charts = [figure.to_json() for figure in spec.charts(rows)] if rows else []
    shown = reversed(rows[-TABLE_ROWS:]) if spec.newest_first else rows[:TABLE_ROWS]
    table = [[_cell(row.get(column), column) for column in spec.columns] for row in shown]
    context = {
        "page": page,
        "spec": spec,
        "pages": PAGES,
        "charts": charts,
        "columns": spec.columns,
        "table": table,
        "row_count": len(rows),
        "flows": sorted(reports.report_flow_names().items(), key=lambda item: item[1]),
        "flow_id": flow_id,
        "range": chosen,
        "ranges": list(RANGES),
        "since": since,
        "until": until,
        "errors": errors,
        "run": reports.report_run_latest(),
        "can_run": request.web_role >= Role.OPERATOR,
    }
    if page == "status":
        context["flow_statuses"] = reports.report_rows(
            dataset="flow_status", flow_id=flow_id, since=since, until=until
        )[-TABLE_ROWS:][::-1]
    return render(request, "web/reports_dashboard.html", context, status=400 if errors else 200)
