"""End to end on a generated lake: `manage.py run_reports` runs the Spark job, stores rows, the API and the
dashboards show them; the pages for each role; a failing job fails its run."""

from __future__ import annotations

import html as html_entities
import json
import re
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from controlplane import reports
from controlplane.reports.models import ReportRow, ReportRun, ReportRunState, ReportTrigger
from dashboards.lakegen import generate_lake
from dashboards.spark.capacity import capacity_plan_from_usage
from dashboards.spark.jobs import REPORT_KEYS
from dashboards.views import PAGES
from tests.dashboards.test_capacity import usage_rows
from workers.reports import run_report

pytestmark = pytest.mark.django_db

DASHBOARDS = [f"reports-{page}" for page in PAGES]


@pytest.fixture
def lake_settings(settings, tmp_path):
    """A two-day lake (2 flows x 5 partitions, a sample every 10 minutes, flow 1 with incidents)."""
    generate_lake(
        tmp_path / "lake",
        flows=2,
        partitions=5,
        samples=2 * 144,
        start=datetime(2026, 1, 1, tzinfo=UTC),
        step_s=600,
    )
    settings.METRICS_DIR = tmp_path / "lake"
    settings.REPORTS_STATE_DIR = tmp_path / "state"
    settings.REPORTS_WINDOW_S = 1800
    return settings


def test_the_command_runs_the_job_stores_rows_and_every_role_sees_the_dashboards(
    spark, lake_settings, capsys, api_as, client_as
):
    call_command("run_reports")

    out = capsys.readouterr().out
    run = ReportRun.objects.get()
    assert run.state == ReportRunState.SUCCEEDED and not run.active and run.progress == 1.0
    assert "[  0%] listing lake partitions" in out and "[100%] done" in out
    assert f"report run {run.pk} succeeded: {run.samples_read} samples from 4 lake partition(s)" in out
    assert run.samples_read > 0
    assert run.rows_stored["partition_lag"] == ReportRow.objects.filter(dataset="partition_lag").count() > 0
    statuses = {row["status"] for row in reports.report_rows(dataset="partition_status", flow_id=1)}
    assert {"OK", "STALL", "REWIND", "WARN", "STOP"} <= statuses  # the generated incidents
    verdicts = reports.report_rows(dataset="capacity_plan")
    assert {(row["scope"], row["horizon_days"]) for row in verdicts} >= {("overall", 0), ("flow", 90)}

    # Incremental: nothing new in the lake, nothing read, rows kept.
    call_command("run_reports")
    again = ReportRun.objects.first()
    assert (again.state, again.samples_read, again.partitions_read) == (ReportRunState.SUCCEEDED, 0, 0)
    assert ReportRow.objects.filter(dataset="partition_lag").count() == run.rows_stored["partition_lag"]

    body = api_as("viewer").get("/api/v1/reports/flow_status/", {"flow": 1}).json()
    assert body["count"] > 0 and {row["flow_name"] for row in body["rows"]} == {"dc1->dc2#1"}

    for role in ("viewer", "operator", "admin"):
        client = client_as(role)
        index = client.get(reverse("web:reports")).content.decode()
        assert "RIGHT_SIZED" in index or "PROVISIONED" in index
        assert ("Run reports now" in index) == (role != "viewer")
        for page in DASHBOARDS:
            html = client.get(reverse(page), {"flow": 1, "hours": 168}).content.decode()
            figures = [json.loads(_unescape(m)) for m in re.findall(r'data-figure="([^"]*)"', html)]
            assert figures and all(f["data"] for f in figures), page
            assert html.index("report-chart-1") < html.index("<table")  # charts first, tables beneath


def _unescape(attribute: str) -> str:
    return html_entities.unescape(attribute)


def _figures(html: str) -> list[dict]:
    return [json.loads(_unescape(m)) for m in re.findall(r'data-figure="([^"]*)"', html)]


def test_the_capacity_pages_and_the_api_show_each_pools_rows_with_its_flows(spark, client_as, api_as):
    # B->A (41.5 MB/s, growing) runs on the one worker of pool payments; A->B (2) on the default pool's 3.
    usage = usage_rows(spark, 3, flows=((1, "A->B", 5.0),)).unionByName(
        usage_rows(spark, 3, flows=((2, "B->A", 5.0),), growth=20.0)
    )
    plan = capacity_plan_from_usage(
        usage,
        worker_nic_mbps=400,
        retention_hours=24,
        tasks_max=20,
        workers=4,
        pools={2: "payments"},
        pool_workers={"": 3, "payments": 1},
    )
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    datasets = {"daily_flow_usage": usage.toArrow().to_pylist(), "capacity_plan": plan.toArrow().to_pylist()}
    reports.report_rows_store(run=run, datasets=datasets, keys=REPORT_KEYS)

    rows = api_as("viewer").get("/api/v1/reports/capacity_plan/").json()["rows"]
    assert [
        (r["scope"], r["pool"], r["flow_name"], r["verdict"]) for r in rows if r["horizon_days"] == 0
    ] == [
        ("overall", None, "overall", "OVER_PROVISIONED"),
        ("pool", "", "pool default", "OVER_PROVISIONED"),
        ("flow", "", "A->B", "OVER_PROVISIONED"),
        ("pool", "payments", "pool payments", "UNDER_PROVISIONED"),
        ("flow", "payments", "B->A", "OVER_PROVISIONED"),
    ]

    index = client_as("viewer").get(reverse("web:reports")).content.decode()
    order = [
        "<strong>pool default</strong>",
        "<td>A-&gt;B</td>",
        "<strong>pool payments</strong>",
        "<td>B-&gt;A</td>",
    ]
    assert [index.index(cell) for cell in order] == sorted(index.index(cell) for cell in order)
    assert index.count('class="plan-group"') == 3  # the fleet's row and each pool's, above its flows
    payments = index[index.index("<strong>pool payments</strong>") :]
    assert "UNDER_PROVISIONED" in payments[: payments.index("</tr>")]  # 41.5 MB/s on 1 worker: needs 2

    page = client_as("viewer").get(reverse("reports-capacity")).content.decode()
    charts = {figure["layout"]["title"]["text"]: figure for figure in _figures(page)}
    assert list(charts) == [
        f"Capacity plan: {name}" for name in ("overall", "pool default", "A->B", "pool payments", "B->A")
    ]
    pool = charts["Capacity plan: pool payments"]
    assert pool["data"][0]["y"] == [1.5, 21.5, 41.5]  # its flow's measured days, not the fleet's
    assert "1 worker(s) (needs 2)" in pool["layout"]["annotations"][0]["text"]
    assert "<td>payments</td>" in page and "<td>default</td>" in page


@pytest.mark.parametrize("page", ["web:reports", *DASHBOARDS])
def test_pages_render_empty_for_every_role_and_refuse_a_user_without_one(client_as, page):
    for role in ("viewer", "operator", "admin"):
        response = client_as(role).get(reverse(page))
        assert response.status_code == 200, role
        assert b"No report has run yet" in response.content
    refused = client_as("norole").get(reverse(page))
    assert refused.status_code == 403
    assert b"needs the <strong>viewer</strong> role; you have no role" in refused.content
    assert client_as("anonymous").get(reverse(page)).status_code == 302


def test_the_run_button_queues_a_run_for_operators_only(client_as):
    assert client_as("viewer").post(reverse("web:reports-run")).status_code == 403
    assert not ReportRun.objects.exists()

    response = client_as("operator").post(
        reverse("web:reports-run"), {"next": reverse("reports-lag")}, follow=True
    )

    run = ReportRun.objects.get()
    assert (run.state, run.requested_by.username) == (ReportRunState.QUEUED, "operator")
    assert b"Report run queued" in response.content
    assert b'hx-trigger="every 2s"' in response.content  # the status polls while the run is active
    again = client_as("admin").post(reverse("web:reports-run"), follow=True)
    assert f"report run {run.pk} is already queued".encode() in again.content


def test_a_failing_job_fails_its_run_with_the_error(spark, settings, tmp_path):
    (tmp_path / "lake" / "date=2026-01-01" / "flow=1").mkdir(parents=True)
    (tmp_path / "lake" / "date=2026-01-01" / "flow=1" / "part-0.parquet").write_text("not parquet")
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.COMMAND)

    failed = run_report(run_id=run.pk, lake_dir=tmp_path / "lake", state_dir=tmp_path / "state")

    assert (failed.state, failed.active) == (ReportRunState.FAILED, False)
    assert failed.error and not ReportRow.objects.exists()
    assert not (tmp_path / "state" / "ledger.json").exists()  # nothing recorded: read again next run
    with pytest.raises(CommandError, match="failed"):
        settings.METRICS_DIR, settings.REPORTS_STATE_DIR = tmp_path / "lake", tmp_path / "state"
        call_command("run_reports")
