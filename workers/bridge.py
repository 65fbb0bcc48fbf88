"""Replication between two slices of a chain on the same worker, so records do not wait in the hand-over.

A Celery slice ends, stores its status and metric samples, re-enqueues its chain, and the next slice
reads the flow and its plan before it replicates again: measured 15-200 ms per hand-over on a busy
2-core machine, during which nothing was produced (every record arriving then waited for the next
slice). A `SliceBridge` keeps the cached task replicating on its own thread through that gap:

- only when the next slice goes to this worker's own queue without a pause (`workers.replication`
  decides), so no other worker may run these partitions meanwhile;
- holding the chain's lease as a slice does (`LeaseKeeper`), for `max_s` at most: if the next slice
  does not come by then, the bridge settles the task (everything acknowledged, positions persisted)
  and stops, as a slice that settles would have;
- taking `max_records` at most (MIRRORPLANE_SLICE_MAX_RECORDS): what it replicates counts towards the
  next slice's limit (`slice_records_left`), so a slice and the bridge before it stay within the limit
  together; a bridge that reached it waits, replicating nothing, for the next slice;
- the next slice stops it first (`stop()`, which returns within one fetch wait, or one flush step of a
  settle under way: records keep flowing until then) and reports what it did with its own result
  (`merge_results`); closing the cached task stops it too.

The task is only ever used by one thread at a time: the slice that started the bridge no longer touches
it (its metrics snapshot is taken before), and the next slice touches it only after `stop()`.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time

from replication.source import MirrorSourceTask, SliceResult
from workers.leases import LeaseKeeper, RedisLeases

log = logging.getLogger(__name__)


class SliceBridge:
    def __init__(
        self,
        task: MirrorSourceTask,
        *,
        max_s: float,
        max_records: int,
        name: str,
        leases: RedisLeases,
        lease_key: str,
        chain: str,
        lease_ttl_s: float,
    ) -> None:
        self._task = task
        self._max_s, self._max_records = max_s, max_records
        self._lease = (leases, lease_key, chain)
        self._lease_ttl_s = lease_ttl_s
        self._interrupt = threading.Event()
        self._result: SliceResult | None = None
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            deadline = time.monotonic() + self._max_s
            with LeaseKeeper(*self._lease, ttl_s=self._lease_ttl_s):  # renewed as during a slice
                self._result = self._task.run_slice(
                    max_records=self._max_records,
                    max_seconds=self._max_s,
                    settle=False,
                    interrupt=self._interrupt,
                )
                # Its record limit or its time: leave nothing in flight (a fenced task has nothing left).
                if not self._interrupt.is_set() and not self._task.fenced:
                    # The next slice coming meanwhile gives the settle up: it takes the task with what is
                    # in flight (records to a partition not served yet may wait there for 30 s).
                    settled = self._task.run_slice(
                        max_records=0, max_seconds=0, settle=True, settle_until=self._interrupt
                    )
                    self._result = merge_results(self._result, settled)
                    # At its record limit: hold the lease, replicating nothing, until the next slice.
                    self._interrupt.wait(max(deadline - time.monotonic(), 0.0))
        except BaseException as exc:  # reported by stop(), in the slice that takes the task
            self._failure = exc

    @property
    def ended(self) -> bool:
        """It stopped by itself (its time ran out) or was stopped."""
        return not self._thread.is_alive()

    def stop(self) -> SliceResult | None:
        """Stop replicating (within one fetch wait, or one flush step of its settle) and report what was
        done; a failure is raised here."""
        self._interrupt.set()
        self._thread.join()
        if self._failure is not None:
            raise RuntimeError(f"replicating between slices failed: {self._failure}") from self._failure
        return self._result


def merge_results(earlier: SliceResult | None, later: SliceResult) -> SliceResult:
    """One result for two consecutive runs of a task: counts added, events and errors of both, the
    positions and state of the later."""
    if earlier is None:
        return later
    return dataclasses.replace(
        later,
        records=earlier.records + later.records,
        bytes=earlier.bytes + later.bytes,
        gap_events=(*earlier.gap_events, *later.gap_events),
        errors=(*earlier.errors, *later.errors),
    )


def slice_records_left(*, max_records: int, carried: SliceResult | None) -> int:
    """Records the next slice may still take after the bridge before it took some of its limit."""
    return max(max_records - (carried.records if carried is not None else 0), 0)


def bridge_max_s(*, slice_s: float, lease_ttl_s: float) -> float:
    """How long a bridge may run: one slice (a worker busy with other chains runs at most one bridge per
    chain besides its pool), and a third of the lease TTL (the time between two renewals)."""
    return min(slice_s, lease_ttl_s / 3)
