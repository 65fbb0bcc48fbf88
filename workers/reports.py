"""Report runs: the Celery task on the `reports` queue, the in-process runner, and beat's dispatcher.

A run is a `ReportRun` row (controlplane). The API, the web UI and `manage.py run_reports --async` queue
one; beat queues one every REPORTS_INTERVAL_S and hands queued runs to the `reports` queue
(`dispatch_report_runs`, called from `workers.beat` at the supervisor's cadence). The task claims the
run, runs `dashboards.spark.jobs.run_reports` over METRICS_DIR with its ledger in REPORTS_STATE_DIR,
reports progress on the run, and stores the rows through `controlplane.reports.report_rows_store`
before the ledger moves on (a failed store is read again next run).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from controlplane import reports
from controlplane.flows import pools, selectors
from controlplane.reports.models import ReportRun, ReportTrigger
from workers.app import app

if TYPE_CHECKING:
    from dashboards.spark.jobs import ReportOptions

# The report job's modules (Spark, pandas, pyarrow.compute) are imported by the functions that run it:
# every worker process imports this module (the app's `include`) and beat too, and most of them never
# run a report; importing them cost each process's start about 0.4 CPU-s of its 2.

log = logging.getLogger(__name__)

Echo = Callable[[str, float], None]


def report_options() -> ReportOptions:
    """The job's options from settings; a flow's tasks are at most the largest `tasks.max` configured.

    The capacity plan's pools are today's: each flow's pool and each pool's live workers (unknown when
    Redis does not answer); a flow deleted since counts in the default pool.
    """
    from dashboards.spark.jobs import CapacityOptions, ReportOptions

    tasks_max = max(selectors.flow_list().values_list("tasks_max", flat=True), default=1)
    listed = pools.pool_list()
    return ReportOptions(
        window=timedelta(seconds=settings.REPORTS_WINDOW_S),
        capacity=CapacityOptions(
            worker_nic_mbps=settings.REPORTS_WORKER_NIC_MBPS,
            retention_hours=settings.REPORTS_RETENTION_HOURS,
            tasks_max=tasks_max,
            workers=settings.REPORTS_FLEET_WORKERS,
            per_task_mb_per_s=settings.REPORTS_TASK_MB_PER_S,
            plan_months=settings.REPORTS_PLAN_MONTHS,
            pools={flow.id: pool.name for pool in listed for flow in pool.flows},
            pool_workers=(
                {pool.name: len(pool.workers) for pool in listed}
                if all(pool.workers_known for pool in listed)
                else None
            ),
        ),
    )


def run_report(
    *,
    run_id: int,
    echo: Echo = lambda stage, fraction: None,
    lake_dir: Path | None = None,
    state_dir: Path | None = None,
    options: ReportOptions | None = None,
) -> ReportRun | None:
    """Claim queued run `run_id` and run it here; None when it is not queued (another process has it).

    A failing job fails the run with its error (logged with the traceback) instead of raising.
    """
    from dashboards.spark.jobs import REPORT_KEYS, run_reports
    from dashboards.spark.session import spark_session

    run = reports.report_run_start(run_id=run_id)
    if run is None:
        log.info("report run %s is not queued any more: skipped", run_id)
        return None

    def progress(stage: str, fraction: float) -> None:
        reports.report_run_progress(run=run, stage=stage, fraction=fraction)
        echo(stage, fraction)

    try:
        result = run_reports(
            spark=spark_session(),
            lake_dir=lake_dir or settings.METRICS_DIR,
            state_dir=state_dir or settings.REPORTS_STATE_DIR,
            options=options or report_options(),
            on_progress=progress,
            store_rows=lambda datasets: reports.report_rows_store(
                run=run, datasets=datasets, keys=REPORT_KEYS
            ),
        )
    except Exception as exc:
        log.exception("report run %s failed", run_id)
        return reports.report_run_finish(run=run, error=f"{type(exc).__name__}: {exc}")
    return reports.report_run_finish(
        run=run, samples_read=result.samples_read, partitions_read=len(result.partitions_read)
    )


@app.task(name="workers.reports.run_reports", ignore_result=True, acks_late=False)
def run_reports_task(run_id: int) -> None:
    # acks_late off: a run a worker died in is failed by its staleness, not run twice over.
    close_old_connections()
    run_report(run_id=run_id)


def dispatch_report_runs(*, send: Callable[[int], object] = run_reports_task.delay) -> list[int]:
    """Queue the scheduled run when it is due, then send every undispatched queued run to the queue."""
    if reports.report_schedule_due(now=timezone.now(), interval_s=settings.REPORTS_INTERVAL_S):
        # Someone asking at the same moment is refused or refuses this one: either run will do.
        with contextlib.suppress(reports.ReportRunActive):
            reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    sent = []
    for run in reports.report_runs_to_dispatch():
        send(run.pk)
        reports.report_run_dispatched(run=run)
        sent.append(run.pk)
    return sent
