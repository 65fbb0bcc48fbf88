"""Kafka reads a web request makes (browsing topics, consumer groups): bounded, and refused at once while
the cluster does not answer.

Each read gets MIRRORPLANE_CLUSTER_TIMEOUT_S (the bound of every admin request, 5 s by default); a
cluster that has not answered for TCP_CHECK_AFTER_S is first asked for a TCP connection (a refused port
or an unknown host fails at once instead of after the timeout). A cluster
that failed MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT reads in a row opens its circuit breaker in this
process (`replication.circuit_breaker`, the workers' rule): reads of it are refused without a network call
until the backoff ends, so a dead cluster costs a web worker one timeout per backoff period, not one per
page view. Failures are `ClusterUnavailable` (HTTP 502) naming the cluster and the broker's reason.

Only cluster failures count (`replication.kafka.clients.is_cluster_failure`: unreachable, timed out,
credentials refused): a request the cluster answered with an error (an invalid offset or time, a partition
or group that is not there, an ACL on one topic) is the asker's, a 400 quoting the broker, and proves
the cluster answers, so a viewer's bad seeks never block the cluster's reads for everyone.
"""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from django.conf import settings
from django.utils import timezone

from controlplane.core.errors import NON_FIELD, ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.flows import engine
from controlplane.models import Cluster
from replication import circuit_breaker as breaker
from replication.circuit_breaker import BreakerPolicy, BreakerState
from replication.config import ClusterConfig
from replication.kafka.browser import BrowseError, UnknownTopic
from replication.kafka.clients import is_cluster_failure
from replication.kafka.cluster_check import tcp_unreachable
from replication.kafka.failover_io import FailoverIOError
from replication.kafka.groups import GroupAdminError

T = TypeVar("T")

# What a cluster that does not answer raises from the adapters (UnknownTopic is an answer).
UNAVAILABLE_ERRORS = (BrowseError, GroupAdminError, FailoverIOError)

_breakers: dict[str, BreakerState] = {}
_answered_at: dict[str, float] = {}  # when each cluster last answered a read
_lock = threading.Lock()
# A cluster that answered this recently is read at once; otherwise a TCP connection to its bootstrap
# servers is tried first, so a refused port or an unknown host fails in milliseconds, not a timeout.
TCP_CHECK_AFTER_S = 30.0


def read_timeout_s() -> float:
    return settings.MIRRORPLANE_CLUSTER_TIMEOUT_S


def _policy() -> BreakerPolicy:
    return BreakerPolicy(
        failure_threshold=settings.MIRRORPLANE_CLUSTER_FAILURES_TO_FAULT,
        max_backoff_s=settings.MIRRORPLANE_CLUSTER_BACKOFF_MAX_S,
    )


def _key(config: ClusterConfig) -> str:
    return f"{config.alias}|{config.bootstrap_servers}"


def cluster_read(
    cluster: Cluster, read: Callable[[ClusterConfig, float], T], *, now: float | None = None
) -> T:
    """`read(config, timeout_s)` on `cluster`, or ClusterUnavailable at once while its breaker is open."""
    config = engine.cluster_to_config(cluster)
    key = _key(config)
    moment = time.time() if now is None else now
    with _lock:
        allowed, _breakers[key] = breaker.allow(_breakers.get(key, BreakerState()), now=moment)
        state = _breakers[key]
    if not allowed:
        wait_s = max(state.retry_at - moment, 0)
        raise ClusterUnavailable(
            f"cluster {cluster.alias} did not answer the last {state.failures} read(s) "
            f"({state.last_error}); it is asked again in {wait_s:.0f} s. Check it with Test connection "
            "on the Clusters page"
        )
    try:
        stale = moment - _answered_at.get(key, float("-inf")) > TCP_CHECK_AFTER_S
        if stale and (reason := tcp_unreachable(config, timeout_s=read_timeout_s())):
            raise BrowseError(
                f"cluster {cluster.alias} ({config.bootstrap_servers}) is unreachable: {reason}"
            )
        result = read(config, read_timeout_s())
    except (UnknownTopic, ServiceValidationError, ServiceConflict):  # the cluster answered
        _record(key, None)
        raise
    except UNAVAILABLE_ERRORS as exc:
        if not is_cluster_failure(exc):
            _record(key, None)
            raise ServiceValidationError.single(
                NON_FIELD,
                f"{exc}. The cluster answered and refused this request: change what was asked for",
            ) from exc
        _record(key, str(exc))
        raise ClusterUnavailable(str(exc)) from exc
    _record(key, None)
    return result


def _record(key: str, error: str | None) -> None:
    with _lock:
        state = _breakers.get(key, BreakerState())
        if error is None:
            _breakers[key] = breaker.record_success(state)
            _answered_at[key] = time.time()
        else:
            _breakers[key] = breaker.record_failure(state, now=time.time(), error=error, policy=_policy())


def timed(read: Callable[[], T]) -> tuple[T, datetime.datetime, float]:
    """`read()` with the moment it began and its duration in ms."""
    read_at = timezone.now()
    started = time.monotonic()
    value = read()
    return value, read_at, round((time.monotonic() - started) * 1000, 1)


def reset_breakers() -> None:
    """Forget every cluster's failures (tests, and after a cluster is edited)."""
    with _lock:
        _breakers.clear()
        _answered_at.clear()
