"""Per-worker-process singletons: the Redis leases client, the metrics lake buffer, the worker's name."""

from __future__ import annotations

import functools
import os
import socket

from django.conf import settings

from workers.lake import MetricsLake
from workers.leases import RedisLeases


@functools.cache
def leases() -> RedisLeases:
    return RedisLeases.from_url(settings.REDIS_URL)


@functools.cache
def metrics_lake() -> MetricsLake:
    return MetricsLake(
        settings.METRICS_DIR,
        flush_interval_s=settings.METRICS_FLUSH_INTERVAL_S,
        flush_rows=settings.METRICS_FLUSH_ROWS,
    )


def worker_name() -> str:
    """host:pid, the lake's `worker` column (a prefork child has its own pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"
