"""Report runs and rows in the database: one active run at a time, upserts by key, the API, beat's dispatch."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone

from controlplane import reports
from controlplane.core.models import AuditEvent
from controlplane.reports.models import ReportDataset, ReportRow, ReportRun, ReportRunState, ReportTrigger
from dashboards.spark.jobs import REPORT_KEYS
from workers.reports import dispatch_report_runs

pytestmark = pytest.mark.django_db

W0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


def lag_row(*, flow_id=1, partition=0, start=W0, behind=5, name="A->B"):
    return {
        "flow_id": flow_id,
        "flow_name": name,
        "source_topic": "orders",
        "remote_topic": "A.orders",
        "partition": partition,
        "window_start": start,
        "window_end": start + timedelta(minutes=5),
        "records_behind_max": behind,
        "seconds_behind_max": float("nan") if behind is None else 1.5,
    }


def test_the_web_app_knows_every_dataset_the_job_produces():
    assert set(ReportDataset.values) == set(REPORT_KEYS)


def test_one_run_at_a_time_and_a_refusal_names_the_active_run(users):
    first = reports.report_run_request(actor=users["operator"], trigger=ReportTrigger.USER)

    with pytest.raises(reports.ReportRunActive, match=f"report run {first.pk} is already queued") as refused:
        reports.report_run_request(actor=users["admin"], trigger=ReportTrigger.USER)

    assert refused.value.run == first
    assert [(e.actor_name, e.outcome) for e in AuditEvent.objects.filter(action="run_reports")] == [
        ("admin", "refused"),
        ("operator", "success"),
    ]
    reports.report_run_finish(run=first)
    assert reports.report_run_request(actor=users["admin"], trigger=ReportTrigger.USER).pk > first.pk


def test_a_run_without_progress_for_the_timeout_is_failed_and_no_longer_blocks(users, settings):
    settings.REPORTS_RUN_TIMEOUT_S = 60
    stuck = reports.report_run_request(actor=users["operator"], trigger=ReportTrigger.USER)
    reports.report_run_start(run_id=stuck.pk)
    ReportRun.objects.filter(pk=stuck.pk).update(updated_at=timezone.now() - timedelta(seconds=61))

    fresh = reports.report_run_request(actor=users["operator"], trigger=ReportTrigger.USER)

    stuck.refresh_from_db()
    assert (stuck.state, stuck.active) == (ReportRunState.FAILED, False)
    assert "no progress for 60 s" in stuck.error
    assert fresh.state == ReportRunState.QUEUED


def test_a_run_is_claimed_once():
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.COMMAND)

    assert reports.report_run_start(run_id=run.pk).state == ReportRunState.RUNNING
    assert reports.report_run_start(run_id=run.pk) is None


def test_rows_are_upserted_by_key_and_the_capacity_plan_is_replaced():
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    plan = [{"scope": "flow", "flow_id": 1, "flow_name": "A->B", "horizon_days": h} for h in (0, 7)]
    reports.report_rows_store(
        run=run,
        datasets={"partition_lag": [lag_row(behind=5), lag_row(partition=1)], "capacity_plan": plan},
        keys=REPORT_KEYS,
    )
    stored = reports.report_rows_store(
        run=run,
        # Same ids under a new flow name (a cluster alias changed): still the same row.
        datasets={"partition_lag": [lag_row(behind=None, name="A2->B")], "capacity_plan": plan[:1]},
        keys=REPORT_KEYS,
    )

    assert stored == {"partition_lag": 1, "capacity_plan": 1}
    rows = reports.report_rows(dataset="partition_lag")
    assert [(r["partition"], r["records_behind_max"], r["flow_name"]) for r in rows] == [
        (0, None, "A2->B"),
        (1, 5, "A->B"),
    ]
    assert rows[0]["seconds_behind_max"] is None  # NaN -> null
    assert rows[0]["window_start"] == W0.isoformat()
    assert reports.report_rows(dataset="capacity_plan") == plan[:1]
    run.refresh_from_db()
    assert run.rows_stored == stored


def test_rows_are_read_by_flow_and_half_open_time_range():
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    rows = [lag_row(flow_id=f, start=W0 + timedelta(minutes=5 * i)) for f in (1, 2) for i in range(4)]
    usage = [{"flow_id": 2, "flow_name": "B->C", "date": date(2026, 1, 5), "p95_mb_per_s": 1.0}]
    reports.report_rows_store(
        run=run, datasets={"partition_lag": rows, "daily_flow_usage": usage}, keys=REPORT_KEYS
    )

    picked = reports.report_rows(
        dataset="partition_lag", flow_id=2, since=W0 + timedelta(minutes=5), until=W0 + timedelta(minutes=15)
    )

    assert [(r["flow_id"], r["window_start"]) for r in picked] == [
        (2, (W0 + timedelta(minutes=5)).isoformat()),
        (2, (W0 + timedelta(minutes=10)).isoformat()),
    ]
    assert len(reports.report_rows(dataset="partition_lag", limit=3)) == 3
    assert reports.report_flow_names() == {2: "B->C"}
    assert ReportRow.objects.get(dataset="daily_flow_usage").window_start == W0.replace(hour=0)


def test_beat_queues_a_run_each_interval_and_hands_queued_runs_over_once(settings):
    settings.REPORTS_INTERVAL_S = 300
    sent = []

    first = dispatch_report_runs(send=sent.append)
    assert dispatch_report_runs(send=sent.append) == []  # active: not due, already handed over

    run = ReportRun.objects.get()
    assert (first, sent, run.trigger) == ([run.pk], [run.pk], ReportTrigger.SCHEDULE)
    assert run.dispatched_at is not None
    reports.report_run_finish(run=run)
    assert dispatch_report_runs(send=sent.append) == []  # finished, but requested less than 300 s ago
    ReportRun.objects.update(requested_at=timezone.now() - timedelta(seconds=301))
    assert len(dispatch_report_runs(send=sent.append)) == 1


# -- API ------------------------------------------------------------------------------------------------
RUN_URL = "/api/v1/reports/run/"


@pytest.mark.parametrize(("role", "code"), [("anonymous", 401), ("norole", 403), ("viewer", 403)])
def test_only_operators_and_admins_may_run_reports(api_as, role, code):
    response = api_as(role).post(RUN_URL)

    assert response.status_code == code
    assert not ReportRun.objects.exists()


def test_an_operator_queues_a_run_and_a_second_request_is_409_with_the_active_run(api_as):
    operator = api_as("operator")
    queued = operator.post(RUN_URL)
    again = api_as("admin").post(RUN_URL)

    assert queued.status_code == 202
    assert (queued.json()["state"], queued.json()["requested_by"]) == ("queued", "operator")
    assert again.status_code == 409
    assert again.json()["run"]["id"] == queued.json()["id"]
    assert "already queued" in again.json()["detail"]
    listed = api_as("viewer").get("/api/v1/reports/runs/").json()
    assert [r["id"] for r in listed["results"]] == [queued.json()["id"]]
    one = api_as("viewer").get(f"/api/v1/reports/runs/{queued.json()['id']}/").json()
    assert (one["progress"], one["stage"]) == (0.0, "")


def test_report_rows_as_json_and_clear_errors_for_bad_requests(api_as):
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    reports.report_rows_store(
        run=run,
        datasets={"partition_lag": [lag_row(flow_id=f, start=W0) for f in (1, 2)]},
        keys=REPORT_KEYS,
    )
    viewer = api_as("viewer")

    body = viewer.get("/api/v1/reports/partition_lag/", {"flow": 2, "since": "2026-01-05T12:00:00Z"}).json()
    unknown = viewer.get("/api/v1/reports/lagz/")
    bad_time = viewer.get("/api/v1/reports/partition_lag/", {"since": "yesterday"})
    backwards = viewer.get(
        "/api/v1/reports/partition_lag/", {"since": "2026-01-05T12:00:00Z", "until": "2026-01-05T11:00:00Z"}
    )

    assert (body["dataset"], body["count"], body["rows"][0]["flow_id"]) == ("partition_lag", 1, 2)
    assert math.isclose(body["rows"][0]["seconds_behind_max"], 1.5)
    assert unknown.status_code == 400
    assert "unknown report dataset 'lagz'; datasets: partition_lag" in unknown.json()["dataset"][0]
    assert bad_time.status_code == 400 and "since" in bad_time.json()
    assert backwards.status_code == 400 and backwards.json()["until"] == ["must be after since"]
    assert api_as("norole").get("/api/v1/reports/partition_lag/").status_code == 403
