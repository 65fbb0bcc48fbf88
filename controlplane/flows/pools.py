"""Worker pools: a flow pinned to a pool runs only on the workers that consume the pool's queue.

The seeds run MirrorMaker 2 as one instance per family of topics (a line of business, a team, an
application), so that one family's load or failure never costs another's. Here a pool is that instance:
the set of replication workers consuming `replication.<pool>` (`celery -A workers.app worker -Q
replication.payments`). A flow's `pool` names it; empty is the default pool, today's `replication`
queue. The supervisor sends a chain's first slice to its pool's queue, chains go back to it to
rebalance or when a worker stops (`workers.replication`), and a worker that does not consume it hands
the chain on after one slice (a pool changed while it ran).

Pools are not stored: a pool exists while a flow is pinned to it or a worker consumes its queue. Which
workers are alive comes from their presence (`controlplane.core.presence`); a flow pinned to a pool that no
live worker consumes is flagged (`Pool.flows_waiting`, the flow page, the overview, the
`pool_without_workers` alert rule).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

import redis
from django.conf import settings

from controlplane.core import presence
from controlplane.flows import lifecycle
from controlplane.flows.models import Flow

DEFAULT_POOL = ""
MAX_POOL_NAME = 40
POOL_NAME = re.compile(r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?")


def pool_name_error(pool: str) -> str | None:
    """Why `pool` is not a pool name (None when it is one; empty is the default pool)."""
    if pool == DEFAULT_POOL:
        return None
    if len(pool) > MAX_POOL_NAME or not POOL_NAME.fullmatch(pool):
        return (
            f"{pool!r} is not a pool name: use lowercase letters, digits and '-' (not first or last), "
            f"at most {MAX_POOL_NAME} characters, e.g. payments; leave it empty for the default pool"
        )
    return None


def pool_queue(pool: str) -> str:
    """The Celery queue of a pool's replication slices."""
    return settings.REPLICATION_QUEUE if pool == DEFAULT_POOL else f"{settings.REPLICATION_QUEUE}.{pool}"


def pool_of_queue(queue: str) -> str | None:
    """The pool a replication queue belongs to; None for any other queue."""
    if queue == settings.REPLICATION_QUEUE:
        return DEFAULT_POOL
    prefix = f"{settings.REPLICATION_QUEUE}."
    if queue.startswith(prefix) and pool_name_error(queue[len(prefix) :]) is None:
        return queue[len(prefix) :]
    return None


def pool_label(pool: str) -> str:
    return pool or "default"


@dataclass(frozen=True)
class PoolFlow:
    id: int
    name: str
    runnable: bool  # in a state the workers replicate


@dataclass(frozen=True)
class Pool:
    name: str  # "" for the default pool
    queue: str
    workers: tuple[presence.Presence, ...]  # alive now, with their age and statistics
    flows: tuple[PoolFlow, ...]
    workers_known: bool = True  # False when Redis did not answer: nothing is flagged then

    @property
    def label(self) -> str:
        return pool_label(self.name)

    @property
    def live(self) -> bool:
        return bool(self.workers)

    @property
    def flows_waiting(self) -> tuple[PoolFlow, ...]:
        """Runnable flows pinned here while no live worker consumes the pool's queue."""
        if not self.workers_known or self.live:
            return ()
        return tuple(flow for flow in self.flows if flow.runnable)

    @property
    def leases_held(self) -> int:
        return sum(int(worker.stats.get("leases_held", 0)) for worker in self.workers)

    @property
    def slices_per_s(self) -> float:
        return sum(worker.stats.get("slices_per_s", 0) for worker in self.workers)


def build_pools(
    *, flows: Iterable[tuple[str, PoolFlow]], workers: Sequence[presence.Presence] | None
) -> list[Pool]:
    """Pools from (pool, flow) pairs and the workers seen (None: Redis did not answer); the default pool
    first, then by name. A pure function: `pool_list` feeds it."""
    pinned: dict[str, list[PoolFlow]] = {DEFAULT_POOL: []}
    for pool, flow in flows:
        pinned.setdefault(pool, []).append(flow)
    consuming: dict[str, list[presence.Presence]] = {}
    for worker in workers or ():
        for queue in worker.queues:
            consumed = pool_of_queue(queue)
            if consumed is not None:
                consuming.setdefault(consumed, []).append(worker)
    names = sorted(set(pinned) | set(consuming))
    return [
        Pool(
            name=name,
            queue=pool_queue(name),
            workers=tuple(consuming.get(name, ())),
            flows=tuple(pinned.get(name, ())),
            workers_known=workers is not None,
        )
        for name in names
    ]


def pool_list() -> list[Pool]:
    """Every pool: the default one, those flows are pinned to, those workers consume."""
    rows = Flow.objects.select_related("source", "target").order_by("pool", "source__alias", "target__alias")
    flows = [
        (flow.pool, PoolFlow(flow.pk, flow.name, flow.state in lifecycle.RUNNABLE_STATES)) for flow in rows
    ]
    try:
        workers = presence.workers_seen()
    except redis.RedisError:
        workers = None
    return build_pools(flows=flows, workers=workers)


@dataclass(frozen=True)
class PoolCheck:
    """A flow's pool as its page and the overview show it."""

    pool: str
    live_workers: int | None  # None: Redis did not answer
    observed_at: float = field(default_factory=time.time)

    @property
    def label(self) -> str:
        return pool_label(self.pool)

    @property
    def without_workers(self) -> bool:
        return self.live_workers == 0


def flow_pool_checks(flows: Iterable[Flow]) -> dict[int, PoolCheck]:
    """Per flow: its pool and how many live workers consume it (one presence read for all)."""
    try:
        workers = presence.workers_seen()
    except redis.RedisError:
        workers = None
    counts: dict[str, int] = {}
    for worker in workers or ():
        for pool in {name for queue in worker.queues if (name := pool_of_queue(queue)) is not None}:
            counts[pool] = counts.get(pool, 0) + 1
    return {
        flow.pk: PoolCheck(flow.pool, None if workers is None else counts.get(flow.pool, 0)) for flow in flows
    }
