"""Celery beat's scheduler, with the supervisor inside it (`beat_scheduler` in settings_runtime).

The supervisor runs in the beat process itself, every MIRRORPLANE_SUPERVISE_INTERVAL_S, instead of as
a queued task: behind busy workers a queued supervisor run would wait for slices to finish, and a
backlog of them would expire unprocessed. Beat is a singleton by design, so there is one supervisor.
Failures (database or Redis briefly away) are logged and retried at the next interval.

At the same cadence beat queues the periodic report run (every REPORTS_INTERVAL_S, measured from the
last run requested, so a restarted beat does not run it early) and hands queued report runs, the API's
and the UI's too, to the `reports` queue (`workers.reports.dispatch_report_runs`), and sends operations
(failover, failback) that no worker runs, new or abandoned by a dead worker, to the `operations` queue
(`workers.operations.dispatch_operations`), and queues an evaluation of the alert rules every
ALERTS_EVALUATE_INTERVAL_S (`workers.alerts.dispatch_evaluation`), a verification run every
VERIFY_INTERVAL_S (`workers.verification.dispatch_verification`), and, while /metrics is scraped, its
rendering every METRICS_RENDER_INTERVAL_S (`workers.exposition.dispatch_render`).
"""

from __future__ import annotations

import logging
import os
import time

from celery.beat import PersistentScheduler
from django.conf import settings
from django.db import close_old_connections

log = logging.getLogger(__name__)


class SupervisingScheduler(PersistentScheduler):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._next_supervise = 0.0

    def tick(self, *args, **kwargs) -> float:
        now = time.monotonic()
        if now >= self._next_supervise:
            self._next_supervise = now + settings.MIRRORPLANE_SUPERVISE_INTERVAL_S
            self._supervise()
        return min(super().tick(*args, **kwargs), max(self._next_supervise - time.monotonic(), 0.0))

    def _supervise(self) -> None:
        # The tasks modules and the control plane's packages need the app (and Django's models) ready first.
        from controlplane.core import presence
        from workers import alerts, exposition, operations, reports, supervisor, tasks, verification

        close_old_connections()  # the database may have restarted since the last run
        try:
            presence.announce(key=presence.BEAT_KEY, name="beat", queues=[], pid=os.getpid())
        except Exception as exc:
            log.warning("beat presence not announced (retrying): %s", exc)
        try:
            supervisor.supervise(
                start_chain=lambda task, chain, queue: tasks.replicate_slice.apply_async(
                    (task.flow_id, task.task_index, chain, 0), queue=queue
                ),
                start_metadata=lambda flow_id, token: tasks.flow_metadata.delay(flow_id, token),
            )
        except Exception:
            log.exception("supervisor run failed; retrying in %gs", settings.MIRRORPLANE_SUPERVISE_INTERVAL_S)
        try:
            reports.dispatch_report_runs()
        except Exception:
            log.exception(
                "report dispatch failed; retrying in %gs", settings.MIRRORPLANE_SUPERVISE_INTERVAL_S
            )
        try:
            operations.dispatch_operations()
        except Exception:
            log.exception(
                "operation dispatch failed; retrying in %gs", settings.MIRRORPLANE_SUPERVISE_INTERVAL_S
            )
        try:
            alerts.dispatch_evaluation()
        except Exception:
            log.exception(
                "alert evaluation not queued; retrying in %gs", settings.MIRRORPLANE_SUPERVISE_INTERVAL_S
            )
        try:
            verification.dispatch_verification()
        except Exception:
            log.exception(
                "verification run not queued; retrying in %gs", settings.MIRRORPLANE_SUPERVISE_INTERVAL_S
            )
        try:
            exposition.dispatch_render()
        except Exception:
            log.exception(
                "/metrics rendering not queued; retrying in %gs", settings.MIRRORPLANE_SUPERVISE_INTERVAL_S
            )
