"""Celery tasks: thin wrappers that parse arguments, call the runtime, and enqueue what comes next."""

from __future__ import annotations

import logging
import time

from celery import signals
from celery.utils.nodenames import worker_direct
from celery.worker import state as worker_state
from django.conf import settings

from controlplane.status import runtime
from replication.gc_settings import freeze_after_startup
from workers import context, handover, presence, replication
from workers import metadata as flow_metadata_work
from workers.app import app
from workers.leases import task_lease_key
from workers.plans import TaskRef

log = logging.getLogger(__name__)


@app.task(name="workers.tasks.flow_metadata", ignore_result=True)
def flow_metadata(flow_id: int, token: str) -> None:
    flow_metadata_work.flow_metadata(flow_id=flow_id, token=token)


@app.task(name="workers.tasks.replicate_slice", bind=True, ignore_result=True)
def replicate_slice(
    self, flow_id: int, task_index: int, chain: str, seq: int, takes_over: bool = False
) -> None:
    """Slice `seq` of the chain `chain` of (flow, task index); enqueues slice seq + 1 unless it ends.
    `takes_over`: the first slice of a chain handed over by a stopping worker."""
    ref = TaskRef(flow_id, task_index)
    if takes_over and replication.DRAINING.is_set():  # stopping too: another worker takes it over
        _send_first_slice(ref, chain, True)
        return
    following = replication.replicate_slice(ref=ref, chain=chain, seq=seq, takes_over=takes_over)
    if following is None or replication.DRAINING.is_set():  # draining: handed over at the shutdown
        return
    # The lease must outlive the wait before the next slice starts.
    ttl_s = settings.MIRRORPLANE_LEASE_TTL_S + following.countdown_s
    if not context.leases().hold(task_lease_key(ref), chain, ttl_s=ttl_s):
        replication.chain_ended(ref, chain)
        return
    options = {"countdown": following.countdown_s} if following.countdown_s else {}
    sticky = following.sticky and bool(self.request.hostname)
    if sticky:
        options["queue"] = worker_direct(self.request.hostname)
    elif following.queue:
        options["queue"] = following.queue  # the flow's pool (controlplane.flows.pools)
    if not sticky:  # before it is sent: this worker may take it again at once
        replication.chain_offered(ref, chain)
    replicate_slice.apply_async((flow_id, task_index, chain, seq + 1), **options)


@signals.worker_ready.connect
def _announce_presence(sender=None, **_: object) -> None:
    """From now on the worker is seen (controlplane.core.presence) with the queues it consumes."""
    queues = sorted(queue.name for queue in sender.app.amqp.queues.consume_from.values())
    replication.set_worker(name=sender.hostname, queues=queues)
    presence.start(hostname=sender.hostname, queues=[q for q in queues if not q.endswith(".dq")])


@signals.worker_ready.connect
def _freeze_startup_heap(**_: object) -> None:
    """Start-up done (Django, the modules, the pool): out of the cycle collector's walks from now on."""
    freeze_after_startup()


def _send_first_slice(ref: TaskRef, chain: str, takes_over: bool) -> None:
    replicate_slice.apply_async(
        (ref.flow_id, ref.task_index, chain, 0),
        {"takes_over": takes_over},
        queue=runtime.runtime_flow_queue(flow_id=ref.flow_id),
    )


def _successor_seen(ref: TaskRef) -> bool:
    return presence.others_consume(runtime.runtime_flow_queue(flow_id=ref.flow_id))


def _unstarted_slices() -> list[tuple[TaskRef, str]]:
    """Chains of the slices this worker received and will not run (Celery drops them at shutdown)."""
    return [
        (TaskRef(request.args[0], request.args[1]), request.args[2])
        for request in list(worker_state.reserved_requests)
        if request.name == replicate_slice.name and len(request.args) == 4
    ]


@signals.worker_shutting_down.connect
def _drain(**_: object) -> None:
    """A warm shutdown (SIGTERM) began: the running slices end now and their chains are handed over."""
    handover.DRAIN.start(send=_send_first_slice, successor_seen=_successor_seen)


@signals.worker_process_shutdown.connect
@signals.worker_shutdown.connect
def _flush_on_shutdown(**_: object) -> None:
    """A stopping worker hands its chains over (positions persisted, leases given to new chains on the
    shared queue) and writes its buffered metric samples."""
    started = time.monotonic()
    handover.DRAIN.finish(send=_send_first_slice, unstarted=_unstarted_slices())
    handed_over_s = time.monotonic() - started
    presence.stop()
    replication.TASKS.close_all()
    context.metrics_lake().flush()
    log.info(
        "stopping: chains handed over in %.2f s, clients closed and samples written in %.2f s",
        handed_over_s,
        time.monotonic() - started - handed_over_s,
    )
