"""Periodic tasks beat queues at the supervisor's cadence (workers.beat): each at most once per interval,
its message expiring after one interval, so a backlog behind a busy or stopped worker never runs twice."""

from __future__ import annotations

import time
from collections.abc import Callable


class Cadence:
    """Queues `task` when its interval (`interval_s()`, read each time: a setting) has passed since it last
    did; an interval of 0 or less queues nothing."""

    def __init__(self, task, interval_s: Callable[[], float]) -> None:
        self.task, self.interval_s = task, interval_s
        self.next_at = 0.0

    def dispatch(self, *, now: float | None = None) -> bool:
        """Queue the task when it is due; True when it queued it."""
        interval = self.interval_s()
        now = time.monotonic() if now is None else now
        if interval <= 0 or now < self.next_at:
            return False
        self.next_at = now + interval
        self.task.apply_async(expires=interval)
        return True
