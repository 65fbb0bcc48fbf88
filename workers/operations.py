"""Operations (failover, failback, drill, cutover, takeover): the Celery task on the `operations` queue
and beat's dispatcher, which also queues the scheduled drills (MIRRORPLANE_DRILL_INTERVAL_S).

The task claims the operation's lease and runs it (`controlplane.operations.runner.run_operation`) from its
recorded phase. Beat (`dispatch_operations`, at the supervisor's cadence) sends every active operation
nobody runs: new ones, and those whose worker stopped renewing its lease (killed, machine lost), which
another worker then resumes. A duplicate message is harmless: only the lease holder runs it. A worker
stopping warm (SIGTERM) hands its running operation over at the drain's next look instead of holding
the shutdown until the drain ends.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from celery import signals
from django.db import close_old_connections

from controlplane import operations
from controlplane.operations import drills, plans
from workers.app import app


def worker_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


@app.task(name="workers.operations.run_operation", ignore_result=True, acks_late=False)
def run_operation_task(operation_id: int) -> None:
    # acks_late off: a killed worker's operation is resumed through its lease by beat, not redelivered.
    close_old_connections()
    operations.run_operation(operation_id=operation_id, worker=worker_name())


@app.task(name="workers.operations.failover_plan", ignore_result=True)
def failover_plan_task(flow_id: int) -> None:
    """Read a flow's failover plan for its page and keep it with its age (controlplane.operations.plans)."""
    close_old_connections()
    plans.plan_compute(flow_id)


@signals.worker_shutting_down.connect
def _hand_over_on_shutdown(**_: object) -> None:
    """A warm shutdown does not wait for a drain: the running operation goes to another worker."""
    operations.STOPPING.set()


def dispatch_operations(
    *,
    send: Callable[[int], object] = run_operation_task.delay,
    send_plan: Callable[[int], object] = failover_plan_task.delay,
) -> list[int]:
    """Send the failover plans the pages asked for, queue the scheduled drills that are due, then send
    every active operation without a live lease holder to the queue; the operations' ids."""
    for flow_id in plans.plans_requested():
        send_plan(flow_id)
    drills.request_scheduled_drills()
    sent = []
    for operation in operations.operations_to_dispatch():
        send(operation.pk)
        operations.operation_dispatched(operation=operation)
        sent.append(operation.pk)
    return sent
