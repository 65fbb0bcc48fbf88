"""Alert evaluation and notification delivery on the `metadata` queue, dispatched by beat.

Beat queues `evaluate_alerts` every ALERTS_EVALUATE_INTERVAL_S (`dispatch_evaluation`, called at the
supervisor's cadence; the message expires after one interval, so a backlog behind a stopped worker
never runs twice). The task reads the task leases from Redis (which tasks each runnable flow plans, which
of them someone holds) and the replication workers alive, calls `controlplane.alerts.evaluation.alerts_evaluate`,
and hands each notification it opened (and each channel test asked for) to `deliver_notification`: one attempt per run, retried with
exponential backoff (`controlplane.alerts.notifications.retry_delay_s`) up to ALERTS_NOTIFY_RETRIES times, so a
receiver that answers 500 or not at all costs its own retries, never an evaluation.
"""

from __future__ import annotations

import logging
from collections import Counter

from django.conf import settings
from django.db import close_old_connections

from controlplane import alerts
from controlplane.alerts import notifications
from controlplane.core import presence
from controlplane.status import runtime
from workers import context
from workers.app import app
from workers.cadence import Cadence
from workers.leases import one_at_a_time, task_lease_key
from workers.plans import RunnableFlow, desired_tasks

log = logging.getLogger(__name__)


def task_leases() -> dict[int, alerts.TaskLeases]:
    """Per runnable flow: tasks of its current plan, and how many of them have a lease holder."""
    leases = context.leases()
    specs = runtime.runtime_flow_specs()
    flows = [RunnableFlow(spec.flow_id, spec.config_version, spec.flow.tasks_max) for spec in specs]
    tasks = desired_tasks(flows=flows, plans=leases.plans([flow.flow_id for flow in flows]))
    holders = leases.holders([task_lease_key(task) for task in tasks])
    planned = Counter(task.flow_id for task in tasks)
    leased = Counter(task.flow_id for task, holder in zip(tasks, holders, strict=True) if holder)
    return {flow.flow_id: alerts.TaskLeases(planned[flow.flow_id], leased[flow.flow_id]) for flow in flows}


def _replication_workers() -> int | None:
    try:
        return sum(settings.REPLICATION_QUEUE in w.queues for w in presence.workers_seen())
    except Exception as exc:
        log.warning("workers' presence unknown (Redis): %s", exc)
        return None


@app.task(name="workers.alerts.evaluate_alerts", ignore_result=True)
def evaluate_alerts() -> None:
    """One evaluation at a time (several metadata workers may hold queued ones): the others skip."""
    close_old_connections()
    ttl_s = max(60, 6 * settings.ALERTS_EVALUATE_INTERVAL_S)
    with one_at_a_time(context.leases(), "alert-evaluation", ttl_s=ttl_s) as mine:
        if not mine:
            log.info("an alert evaluation is running elsewhere; skipping this one")
            return
        _evaluate()


# Beat: an evaluation every ALERTS_EVALUATE_INTERVAL_S; True when one was queued.
dispatch_evaluation = Cadence(evaluate_alerts, lambda: settings.ALERTS_EVALUATE_INTERVAL_S).dispatch


def _evaluate() -> None:
    try:
        tasks = task_leases()
    except Exception as exc:  # Redis away: the lease rule keeps its last observation
        log.warning("task leases unknown (Redis): %s", exc)
        tasks = None
    result = alerts.alerts_evaluate(tasks=tasks, replication_workers=_replication_workers())
    for alert in result.fired:
        log.warning("alert firing: %s of flow %s: %s", alert.rule, alert.flow_id, alert.message)
    for alert in result.resolved:
        log.info("alert resolved: %s of flow %s", alert.rule, alert.flow_id)
    for notification_id in notifications.notifications_to_dispatch():
        deliver_notification.delay(notification_id)


@app.task(name="workers.alerts.deliver_notification", bind=True, ignore_result=True, max_retries=None)
def deliver_notification(self, notification_id: int) -> None:
    try:
        notifications.notification_deliver(notification_id=notification_id)
    except notifications.DeliveryFailed:
        retries = self.request.retries
        if retries >= settings.ALERTS_NOTIFY_RETRIES:
            notifications.notification_give_up(notification_id=notification_id)
            return
        raise self.retry(countdown=notifications.retry_delay_s(retries)) from None
