"""Kafka reads a web request makes (a flow's topics, browsing topics and consumer groups, offset mapping,
the failover plan): bounded, and refused at once while the cluster does not answer. Every cluster read of
a web request goes through `cluster_read` or `clusters_read`.

Each read gets what is left of the request's time for outbound calls (`controlplane.core.call_bounds`:
MIRRORPLANE_WEB_READ_TIMEOUT_S, 3 s by default, for all the request's Kafka reads and registry lookups
together); a cluster that has not answered for TCP_CHECK_AFTER_S is first asked for a TCP connection (a
refused port or an unknown host fails at once, a silent one within TCP_CHECK_TIMEOUT_S). A cluster that
did not answer one read opens its circuit breaker for every web process (`call_bounds.breaker_allow`, kept in
Redis, `replication.circuit_breaker`'s rule): reads of it are refused without a network call until the
pause ends, when one process makes the trial read, or a passing "Test connection" closes it
(`cluster_answered`), so a dead cluster costs the whole web one timeout per pause, not one per page view
nor one per process. Failures are `ClusterUnavailable` (HTTP 502) naming
the cluster and the broker's reason.

Only cluster failures count (`Clusters.is_cluster_failure`: unreachable, timed out,
credentials refused): a request the cluster answered with an error (an invalid offset or time, a partition
or group that is not there, an ACL on one topic) is the asker's, a 400 quoting the broker, and proves
the cluster answers, so a viewer's bad seeks never block the cluster's reads for everyone.
"""

from __future__ import annotations

import datetime
import re
import threading
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

from django.utils import timezone

from controlplane.core import call_bounds
from controlplane.core.errors import NON_FIELD, ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.flows import engine
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster
from replication.cluster_ports import UNAVAILABLE_ERRORS, BrowseError, UnknownTopic
from replication.config import ClusterConfig

T = TypeVar("T")

_answered_at: dict[str, float] = {}  # when each cluster last answered a read of this process
_lock = threading.Lock()
# A cluster that answered this recently is read at once; otherwise a TCP connection to its bootstrap
# servers is tried first, so a refused port or an unknown host fails in milliseconds, not a timeout.
TCP_CHECK_AFTER_S = 30.0
TCP_CHECK_TIMEOUT_S = 1.0


def _key(config: ClusterConfig) -> str:
    return f"cluster:{config.alias}|{config.bootstrap_servers}"


def cluster_read(
    cluster: Cluster, read: Callable[[ClusterConfig, float], T], *, now: float | None = None
) -> T:
    """`read(config, timeout_s)` on `cluster`, or ClusterUnavailable at once while its breaker is open."""
    return clusters_read([cluster], lambda configs, timeout_s: read(configs[0], timeout_s), now=now)


def clusters_read(
    clusters: Sequence[Cluster], read: Callable[[list[ClusterConfig], float], T], *, now: float | None = None
) -> T:
    """`read(configs, timeout_s)` of a read that needs every one of `clusters` (a flow's source and target),
    or ClusterUnavailable at once while one's breaker is open. A cluster failure counts against the
    clusters the error names (the adapters' errors start "cluster <alias>"), or all of them when it names
    none; an error naming a cluster not in `clusters` (one the read may do without) counts against none."""
    return configs_read([engine.cluster_to_config(cluster) for cluster in clusters], read, now=now)


def configs_read(
    configs: Sequence[ClusterConfig],
    read: Callable[[list[ClusterConfig], float], T],
    *,
    now: float | None = None,
) -> T:
    """`clusters_read` of clusters as the engine describes them, stored or not (an import's dry run reads
    the clusters of the file it previews)."""
    configs = list(configs)
    moment = time.time() if now is None else now
    for config in configs:
        _allow(config, moment)
    asked = ", ".join(f"cluster {config.alias}" for config in configs)
    timeout_s = call_bounds.timeout_s(asked)
    try:
        for config in configs:
            stale = moment - _answered_at.get(_key(config), float("-inf")) > TCP_CHECK_AFTER_S
            # A TCP handshake takes a round trip: a cluster that cannot complete one in a second does not answer.
            check_s = min(timeout_s, TCP_CHECK_TIMEOUT_S)
            if stale and (reason := clusters().unreachable(config, timeout_s=check_s)):
                raise BrowseError(
                    f"cluster {config.alias} ({config.bootstrap_servers}) is unreachable: {reason}"
                )
        result = read(configs, call_bounds.timeout_s(asked))
    except (UnknownTopic, ServiceValidationError, ServiceConflict):  # the cluster answered
        _record_answers(configs)
        raise
    except UNAVAILABLE_ERRORS as exc:
        if not clusters().is_cluster_failure(exc):
            _record_answers(configs)
            raise ServiceValidationError.single(
                NON_FIELD,
                f"{exc}. The cluster answered and refused this request: change what was asked for",
            ) from exc
        if call_bounds.had_fair_time(timeout_s) and not getattr(exc, "cut_short", False):
            for config in _blamed(exc, configs):
                _record(_key(config), str(exc))
        raise ClusterUnavailable(str(exc)) from exc
    _record_answers(configs)
    return result


def _allow(config: ClusterConfig, moment: float) -> None:
    state = call_bounds.breaker_allow(_key(config), now=moment)
    if state is not None:
        wait_s = max(state.retry_at - moment, 0)
        raise ClusterUnavailable(
            f"cluster {config.alias} did not answer the last {state.failures} read(s) "
            f"({state.last_error}); it is asked again in {wait_s:.0f} s. Check it with Test connection "
            "on the Clusters page"
        )


_NAMED_CLUSTER = re.compile(r"\b(?:cluster|source|target) ([A-Za-z0-9_-]+)")


def _blamed(exc: BaseException, configs: list[ClusterConfig]) -> list[ClusterConfig]:
    named = set(_NAMED_CLUSTER.findall(str(exc))) & set(Cluster.objects.values_list("alias", flat=True))
    if not named:
        return configs
    return [config for config in configs if config.alias in named]


def cluster_answered(cluster: Cluster) -> None:
    """The cluster answered a check ("Test connection"): its breaker closes for every web process."""
    _record_answers([engine.cluster_to_config(cluster)])


def _record_answers(configs: list[ClusterConfig]) -> None:
    for config in configs:
        _record(_key(config), None)


def _record(key: str, error: str | None) -> None:
    call_bounds.breaker_record(key, error=error, now=time.time())
    if error is None:
        with _lock:
            _answered_at[key] = time.time()


def timed(read: Callable[[], T]) -> tuple[T, datetime.datetime, float]:
    """`read()` with the moment it began and its duration in ms."""
    read_at = timezone.now()
    started = time.monotonic()
    value = read()
    return value, read_at, round((time.monotonic() - started) * 1000, 1)


def reset_breakers() -> None:
    """Forget every cluster's failures (tests)."""
    call_bounds.breakers_reset()
    with _lock:
        _answered_at.clear()
