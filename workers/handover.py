"""A warm shutdown's hand-over (SIGTERM, a rolling upgrade or a scale-down): `DRAINING`
(`workers.replication`) ends the running slices early, and once they have ended `hand_over_chains` stops
each chain's bridge, settles its task (nothing in flight, positions persisted), gives its lease to a new
chain and sends that chain's first slice to the shared queue, where another worker takes it at once (the
lease TTL is no longer the pause). The successor's side is `workers.replication`'s take-over slice.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor

from django.conf import settings

from workers import context
from workers.leases import LeaseKeeper, new_token, task_lease_key
from workers.plans import TaskRef
from workers.replication import (
    DRAINING,
    HAND_OVER_POLL_S,
    HAND_OVER_WAIT_S,
    RUNNING,
    STATS,
    TASKS,
    close_quietly,
    slice_bridge,
)

log = logging.getLogger(__name__)

# send(ref, chain, takes_over): enqueue the first slice of `chain` on the shared queue; with takes_over,
# that slice prepares its task and waits until the chain it succeeds gives it the lease.
SendFirstSlice = Callable[[TaskRef, str, bool], None]
# successor_seen(ref): whether another worker is seen taking slices from the task's shared queue.
SuccessorSeen = Callable[[TaskRef], bool]


class Drain:
    """A warm shutdown's hand-over, started when it begins (`start`), finished before the process
    exits (`finish`): chains move as soon as the running slices have ended, not after Celery's own
    teardown."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None

    def start(self, *, send: SendFirstSlice, successor_seen: SuccessorSeen) -> None:
        DRAINING.set()
        if self._thread is None:
            self._thread = threading.Thread(
                target=self._run, args=(send, successor_seen), name="drain", daemon=True
            )
            self._thread.start()

    def _run(self, send: SendFirstSlice, successor_seen: SuccessorSeen) -> None:
        RUNNING.wait_idle(timeout_s=settings.MIRRORPLANE_LEASE_TTL_S)
        hand_over_chains(send=send, prepared=successor_seen)

    def finish(self, *, send: SendFirstSlice, unstarted: Iterable[tuple[TaskRef, str]]) -> None:
        """Wait for the hand-over, then hand over what it could not see (slices received meanwhile)."""
        if self._thread is not None:
            self._thread.join(settings.MIRRORPLANE_LEASE_TTL_S + HAND_OVER_WAIT_S)
        hand_over_chains(send=send, unstarted=unstarted, prepared=None)


DRAIN = Drain()


def hand_over_chains(
    *,
    send: SendFirstSlice,
    unstarted: Iterable[tuple[TaskRef, str]] = (),
    prepared: SuccessorSeen | None = None,
) -> list[TaskRef]:
    """Give every chain this worker holds to a new chain on the shared queue; the tasks handed over.

    Called at a warm shutdown once no slice runs here any more. `unstarted` are chains whose slice this
    worker received but will not run (Celery drops them at shutdown). Each task is settled before its
    lease moves, so the next worker resumes exactly where this one stopped (exactly_once stays exact).
    `prepared`: for the tasks it answers True (another worker is seen on the task's queue), the
    successor's first slice is sent first and builds its task (clients connected) while this worker's
    bridge keeps replicating; the lease moves when it says it is ready (or after HAND_OVER_WAIT_S, when
    no worker took it), so records pause only for the settle and the successor's start of its
    partitions, not for its clients' connections. A task no other worker is seen to serve (the last
    worker of its pool stopping) is handed over at once: no successor could be ready, and waiting
    HAND_OVER_WAIT_S for one only delayed the stop.
    """
    chains = {**dict(unstarted), **STATS.chains()}
    if not chains:
        return []
    with ThreadPoolExecutor(max_workers=min(len(chains), 8), thread_name_prefix="hand-over") as pool:
        moved = pool.map(
            lambda item: _hand_over(*item, send=send, prepared=prepared is not None and prepared(item[0])),
            chains.items(),
        )
        return [ref for ref, ok in zip(chains, moved, strict=True) if ok]


def _hand_over(ref: TaskRef, chain: str, *, send: SendFirstSlice, prepared: bool) -> bool:
    leases, key, ttl_s = context.leases(), task_lease_key(ref), settings.MIRRORPLANE_LEASE_TTL_S
    entry = TASKS.take(ref)
    successor = new_token()
    try:
        if prepared:
            if entry is not None:  # keep replicating until the successor is ready
                entry.stop_bridge()
                entry.bridge = slice_bridge(ref, entry, chain, max_s=HAND_OVER_WAIT_S)
            send(ref, successor, True)
            _wait_ready(leases, key, successor)
        if entry is not None:
            entry.stop_bridge()
            leases.hold(key, chain, ttl_s=ttl_s)
            with LeaseKeeper(leases, key, chain, ttl_s=ttl_s):  # a slow settle must not let it expire
                errors = entry.task.settle()
            if errors:
                log.warning("task %s: settling before the hand-over: %s", ref, "; ".join(map(str, errors)))
        if not leases.transfer(key, chain, successor, ttl_s=ttl_s):
            log.info("task %s: chain %s no longer holds its lease; nothing to hand over", ref, chain[:8])
            return False
        if not prepared:
            send(ref, successor, False)
        STATS.chain_step(ref, chain, continues=False)
        log.info(
            "task %s: chain %s handed over to chain %s on the shared queue", ref, chain[:8], successor[:8]
        )
        return True
    except Exception:  # the lease then expires and the supervisor restarts the chain
        log.exception("task %s: hand-over failed; the chain restarts when its lease expires", ref)
        return False
    finally:
        if entry is not None:
            close_quietly(entry)


def _wait_ready(leases, key: str, successor: str) -> bool:
    deadline = time.monotonic() + HAND_OVER_WAIT_S
    while not leases.is_ready(key, successor):
        if time.monotonic() > deadline:
            log.warning(
                "lease %s: no successor ready after %g s; handing it over anyway", key, HAND_OVER_WAIT_S
            )
            return False
        time.sleep(HAND_OVER_POLL_S)
    return True
