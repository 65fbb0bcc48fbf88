"""Liveness and readiness of the control plane, and what it can see of the runtime.

`/healthz` answers 200 while the web process serves requests (no dependency is checked: a liveness probe
that fails when the database is away would restart healthy web processes in a loop). `/readyz` checks
what a request needs: the database and Redis (503 when either fails), and reports the runtime it can
see: the workers seen recently per queue and beat, each with the age of its observation. Missing workers
do not make the web unready by default (the UI is what an operator needs most while workers are down);
`/readyz?require=workers` makes them count, for a probe that alerts on them.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

from django.conf import settings
from django.db import connection

from controlplane.core import presence

# The queues replication needs a consumer for (settings_runtime.CELERY_TASK_ROUTES).
RUNTIME_QUEUES = ("replication", "metadata")


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str
    observed_at: float


@dataclass
class Readiness:
    checks: list[Check] = field(default_factory=list)
    workers: list[dict] = field(default_factory=list)

    def ok(self, *, require: frozenset[str]) -> bool:
        return all(check.ok for check in self.checks if check.name in {"database", "redis"} | require)

    def to_dict(self, *, require: frozenset[str]) -> dict:
        return {
            "status": "ready" if self.ok(require=require) else "unready",
            "checks": [asdict(check) for check in self.checks],
            "workers": self.workers,
        }


def _database_check(now: float) -> Check:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as exc:
        return Check("database", False, f"database unreachable: {exc}", now)
    return Check("database", True, "answers", now)


def _runtime_checks(now: float) -> tuple[list[Check], list[dict]]:
    """Redis, then the workers per queue and beat, as Redis last saw them."""
    try:
        workers = presence.workers_seen()
        beat = presence.beat_seen()
    except Exception as exc:
        return [Check("redis", False, f"redis unreachable: {exc}", now)], []
    checks = [Check("redis", True, "answers", now)]
    seen_s = settings.MIRRORPLANE_PRESENCE_INTERVAL_S * 3
    for queue in RUNTIME_QUEUES:
        consumers = [w for w in workers if queue in w.queues]
        detail = (
            f"{len(consumers)} worker(s) consume {queue}"
            if consumers
            else f"no worker seen consuming {queue} in the last {seen_s:g} s: start one "
            f"(celery -A workers.app worker -Q {queue} ...)"
        )
        checks.append(Check(f"workers:{queue}", bool(consumers), detail, now))
    beat_detail = (
        f"beat seen {beat.age_s(now):.0f} s ago"
        if beat
        else f"beat not seen in the last {seen_s:g} s: nothing starts replication chains (start celery beat)"
    )
    checks.append(Check("beat", beat is not None, beat_detail, now))
    rows = [asdict(w) | {"age_s": round(w.age_s(now), 1)} for w in workers]
    return checks, rows


def readiness() -> Readiness:
    now = time.time()
    runtime_checks, workers = _runtime_checks(now)
    return Readiness(checks=[_database_check(now), *runtime_checks], workers=workers)


def requirements(raw: str | None) -> frozenset[str]:
    """`?require=workers` (comma-separated): also fail on the runtime checks named."""
    wanted = {part.strip() for part in (raw or "").split(",") if part.strip()}
    names: set[str] = set()
    if "workers" in wanted:
        names |= {f"workers:{queue}" for queue in RUNTIME_QUEUES}
    if "beat" in wanted:
        names.add("beat")
    return frozenset(names)
