"""`python manage.py run_reports [--async]`: run the report job here (progress printed) or queue it."""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from controlplane import reports
from controlplane.reports.models import ReportRunState, ReportTrigger
from workers.reports import run_report


class Command(BaseCommand):
    help = (
        "Compute the reports (lag, throughput, latency, status, capacity) from the metrics lake now, in this "
        "process; with --async, queue a run for the reports workers instead (Celery beat hands it over)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--async", dest="queue_only", action="store_true", help="queue the run and return its id"
        )

    def handle(self, *args, queue_only: bool, **options):
        try:
            run = reports.report_run_request(actor=None, trigger=ReportTrigger.COMMAND)
        except reports.ReportRunActive as exc:
            raise CommandError(str(exc)) from None
        if queue_only:
            self.stdout.write(f"report run {run.pk} queued")
            return
        finished = run_report(run_id=run.pk, echo=self._echo)
        if finished is None or finished.state != ReportRunState.SUCCEEDED:
            raise CommandError(f"report run {run.pk} failed: {finished.error if finished else 'not run'}")
        counts = ", ".join(f"{name} {count}" for name, count in sorted(finished.rows_stored.items()))
        self.stdout.write(
            f"report run {run.pk} succeeded: {finished.samples_read} samples from "
            f"{finished.partitions_read} lake partition(s); rows stored: {counts or 'none'}"
        )

    def _echo(self, stage: str, fraction: float) -> None:
        self.stdout.write(f"[{fraction:4.0%}] {stage}")
