"""Per-worker-process singletons: the Redis leases client, the metrics lake buffer, the worker's name."""

from __future__ import annotations

import functools
import os
import socket

from django.conf import settings

from replication.circuit_breaker import BreakerPolicy
from workers.clusters import ClusterHealth
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


@functools.cache
def cluster_health() -> ClusterHealth:
    return ClusterHealth(
        timeout_s=settings.MIRRORPLANE_CLUSTER_TIMEOUT_S,
        probe_interval_s=settings.MIRRORPLANE_CLUSTER_PROBE_INTERVAL_S,
        policy=BreakerPolicy(
            failure_threshold=settings.MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT,
            max_backoff_s=settings.MIRRORPLANE_CLUSTER_BACKOFF_MAX_S,
        ),
    )


def worker_name() -> str:
    """host:pid, the lake's `worker` column (a prefork child has its own pid)."""
    return f"{socket.gethostname()}:{os.getpid()}"
