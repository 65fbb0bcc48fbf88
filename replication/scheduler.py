"""`Scheduler`: which periodic jobs are due at a given time (MM2's Scheduler, time passed in).

Pure: it keeps when each job last ran and answers from `now`; callers do the work. A job runs on the
first call (MM2 runs every periodic task once at start), then each `interval_s`; a disabled job is
never due.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class PeriodicJob:
    name: str
    interval_s: float
    enabled: bool = True


class Scheduler:
    def __init__(self, jobs: Iterable[PeriodicJob]) -> None:
        self._jobs = {job.name: job for job in jobs}
        self._last_run: dict[str, float] = {}

    def due(self, *, now: float) -> tuple[str, ...]:
        """Names of the jobs due at `now`, in declaration order; they count as run at `now`."""
        due = tuple(name for name, job in self._jobs.items() if self._is_due(job, now=now))
        for name in due:
            self._last_run[name] = now
        return due

    def _is_due(self, job: PeriodicJob, *, now: float) -> bool:
        if not job.enabled:
            return False
        last = self._last_run.get(job.name)
        return last is None or now - last >= job.interval_s
