"""The report job through the real runtime: an operator asks for a run over the API, beat hands it to a
Celery worker on the `reports` queue, the worker runs Spark on the metrics lake and stores the rows."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from controlplane import core
from controlplane.core.roles import Role
from controlplane.reports.models import ReportRow, ReportRun, ReportRunState
from dashboards.lakegen import generate_lake
from harness.runtime import CeleryRuntime, wait_until

pytestmark = [pytest.mark.slow]


def test_an_api_request_is_run_by_a_reports_worker_and_its_rows_stored(transactional_db, redis_url, tmp_path):
    runtime = CeleryRuntime(
        workdir=tmp_path,
        redis_url=redis_url,
        env={"REPORTS_STATE_DIR": str(tmp_path / "state"), "REPORTS_WINDOW_S": "1800"},
    )
    generate_lake(
        runtime.metrics_dir,
        flows=1,
        partitions=3,
        samples=144,
        start=datetime(2026, 1, 1, tzinfo=UTC),
        step_s=600,
    )
    operator, _ = core.user_create_with_role(username="oncall", role=Role.OPERATOR, password="pw-oncall-1")
    api = APIClient()
    api.force_authenticate(operator)
    try:
        response = api.post("/api/v1/reports/run/")
        assert response.status_code == 202, response.content
        run_id = response.json()["id"]
        assert api.post("/api/v1/reports/run/").status_code == 409  # one run at a time

        runtime.start_worker("reports", queues="reports")
        runtime.start_beat()
        wait_until(
            lambda: (
                ReportRun.objects.get(pk=run_id).state in (ReportRunState.SUCCEEDED, ReportRunState.FAILED)
            ),
            timeout_s=240,
            what=f"report run {run_id} to finish (worker log: {tmp_path / 'reports.log'})",
        )
        run = api.get(f"/api/v1/reports/runs/{run_id}/").json()
        assert run["state"] == "succeeded", run["error"]
        assert run["progress"] == 1.0 and run["samples_read"] == 3 * 144
        assert ReportRow.objects.filter(dataset="partition_lag").count() > 0
        rows = api.get("/api/v1/reports/partition_status/").json()
        assert {row["partition"] for row in rows["rows"]} == {0, 1, 2}
    finally:
        runtime.close()
