"""Which runtime processes are alive: every Celery worker and beat announce themselves in Redis.

A worker writes `mirrorplane:presence:worker:<hostname>` every MIRRORPLANE_PRESENCE_INTERVAL_S with a
TTL of three intervals (its queues, pid and the time it was observed); beat writes
`mirrorplane:presence:beat` at each supervisor run. A process that dies stops writing and its key
expires, so "seen recently" is a real observation with its age, never a remembered state. The readiness
endpoint, the pages' "no worker is running" banner and the fleet views read them here.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import redis
from django.conf import settings

from controlplane.core.shared_redis import redis_client

PREFIX = "mirrorplane:presence:"
WORKER_PREFIX = f"{PREFIX}worker:"
BEAT_KEY = f"{PREFIX}beat"


@dataclass(frozen=True)
class Presence:
    name: str  # the Celery hostname (worker) or "beat"
    queues: tuple[str, ...]
    pid: int
    observed_at: float  # epoch seconds
    # a worker's slices, slice_errors, leases_held (counts) and slices_per_s
    stats: Mapping[str, float] = field(default_factory=dict)

    def age_s(self, now: float) -> float:
        return max(0.0, now - self.observed_at)


def _client() -> redis.Redis:
    return redis_client(timeout_s=2)


def _ttl_s() -> int:
    return max(1, round(settings.MIRRORPLANE_PRESENCE_INTERVAL_S * 3))


def announce(
    *,
    key: str,
    name: str,
    queues: Sequence[str],
    pid: int,
    stats: Mapping[str, float] | None = None,
    now: float | None = None,
) -> None:
    """Record that `name` is alive now (the key expires after three intervals without news)."""
    value = {
        "name": name,
        "queues": list(queues),
        "pid": pid,
        "observed_at": time.time() if now is None else now,
        "stats": dict(stats or {}),
    }
    _client().set(key, json.dumps(value), ex=_ttl_s())


def withdraw(*, key: str) -> None:
    """A process that stops cleanly says so at once (instead of expiring)."""
    _client().delete(key)


def worker_key(hostname: str) -> str:
    return f"{WORKER_PREFIX}{hostname}"


def _parse(raw: bytes | str | None) -> Presence | None:
    if raw is None:
        return None
    value = json.loads(raw)
    return Presence(
        value["name"],
        tuple(value["queues"]),
        int(value["pid"]),
        float(value["observed_at"]),
        {name: count for name, count in value.get("stats", {}).items() if isinstance(count, int | float)},
    )


def workers_seen() -> list[Presence]:
    """Every worker whose presence has not expired, by name. Raises redis.RedisError when Redis is away."""
    client = _client()
    keys = sorted(client.scan_iter(match=f"{WORKER_PREFIX}*", count=500))
    found = [_parse(raw) for raw in client.mget(keys)] if keys else []
    return [presence for presence in found if presence is not None]


def others_consuming(queue: str, *, own: str | None) -> list[Presence]:
    """The workers other than `own` seen taking slices from `queue`. Raises redis.RedisError when Redis
    is away."""
    return [worker for worker in workers_seen() if worker.name != own and queue in worker.queues]


def beat_seen() -> Presence | None:
    return _parse(_client().get(BEAT_KEY))
