"""The supervisor (run by beat every MIRRORPLANE_SUPERVISE_INTERVAL_S): keeps every runnable flow running.

For each enabled, unpaused flow it starts the metadata task unless one is pending, and starts a chain
for every task of the flow's plan whose lease is free (never taken, released, or expired because its
worker died): the lease is taken here with a new token, which names the chain.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from django.conf import settings

from controlplane.status import runtime
from workers import context
from workers.leases import metadata_lease_key, new_token, task_lease_key
from workers.plans import RunnableFlow, TaskRef, desired_tasks

log = logging.getLogger(__name__)


def supervise(
    *, start_chain: Callable[[TaskRef, str, str], None], start_metadata: Callable[[int, str], None]
) -> list[TaskRef]:
    """Start what is missing; the tasks whose chains were started. `start_chain(task, chain, queue)`
    sends a chain's first slice to its flow's pool queue (controlplane.flows.pools)."""
    leases = context.leases()
    ttl_s = settings.MIRRORPLANE_LEASE_TTL_S
    specs = runtime.runtime_flow_specs()
    for spec in specs:
        token = new_token()
        if leases.try_acquire(metadata_lease_key(spec.flow_id), token, ttl_s=ttl_s):
            start_metadata(spec.flow_id, token)
    flows = [RunnableFlow(spec.flow_id, spec.config_version, spec.flow.tasks_max) for spec in specs]
    queues = {spec.flow_id: spec.queue for spec in specs}
    plans = leases.plans([flow.flow_id for flow in flows])
    started: list[TaskRef] = []
    for task in desired_tasks(flows=flows, plans=plans):
        chain = new_token()
        if leases.try_acquire(task_lease_key(task), chain, ttl_s=ttl_s):
            start_chain(task, chain, queues[task.flow_id])
            started.append(task)
    if started:
        log.info(
            "started task chain(s): %s", ", ".join(f"flow {t.flow_id} task {t.task_index}" for t in started)
        )
    return started
