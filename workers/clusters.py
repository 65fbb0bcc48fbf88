"""This worker process's view of each cluster: a probe and a circuit breaker per cluster, shared by every
flow of that cluster (`replication.circuit_breaker` decides; this module does the I/O and the locking).

A flow's metadata run asks `ClusterHealth.check` for its source and target before touching them. A
cluster that answered within MIRRORPLANE_CLUSTER_PROBE_INTERVAL_S costs nothing; otherwise one probe
(a metadata request bounded by MIRRORPLANE_CLUSTER_TIMEOUT_S) runs, while other flows of the same cluster
do not wait for it. An open breaker refuses at once until its backoff ends, so flows of an unreachable
cluster hold metadata threads only for one trial probe per backoff period.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field

from controlplane.flows.clusters import clusters
from replication import circuit_breaker as breaker
from replication.circuit_breaker import BreakerPhase, BreakerPolicy, BreakerState
from replication.cluster_ports import ClusterCheck, ClusterProbe, FailureKind
from replication.config import ClusterConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Verdict:
    reachable: bool  # the flow's metadata work may call the cluster now
    error: str = ""  # why not: the last failed probe's reason
    confirmed: bool = False  # the breaker is open: the cluster counts as unreachable


@dataclass
class _Cluster:
    probe: ClusterProbe
    state: BreakerState = field(default_factory=BreakerState)
    checked_at: float = float("-inf")
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def healthy(self) -> bool:
        return self.state.phase is BreakerPhase.CLOSED and self.state.failures == 0


class ClusterHealth:
    def __init__(self, *, timeout_s: float, probe_interval_s: float, policy: BreakerPolicy) -> None:
        self.timeout_s, self.probe_interval_s, self.policy = timeout_s, probe_interval_s, policy
        self._clusters: dict[str, _Cluster] = {}
        self._lock = threading.Lock()

    def _entry(self, cluster: ClusterConfig) -> _Cluster:
        key = repr(cluster)  # the whole connection config: an edited cluster is a new one
        with self._lock:
            entry = self._clusters.get(key)
            if entry is None:
                probe = clusters().probe(cluster, timeout_s=self.timeout_s)
                entry = self._clusters[key] = _Cluster(probe)
            return entry

    def check(self, cluster: ClusterConfig, *, now: float) -> Verdict:
        entry = self._entry(cluster)
        if not entry.lock.acquire(blocking=False):  # another flow is probing it now: do not queue up
            if entry.healthy:
                return Verdict(reachable=True)
            return Verdict(reachable=False, error=entry.state.last_error, confirmed=entry.state.is_open)
        try:
            allowed, entry.state = breaker.allow(entry.state, now=now)
            if not allowed:
                return Verdict(reachable=False, error=entry.state.last_error, confirmed=True)
            if entry.healthy and now - entry.checked_at < self.probe_interval_s:
                return Verdict(reachable=True)
            try:
                result = entry.probe.check()
            except Exception as exc:  # a failure: a trial that never reports would stay HALF_OPEN
                log.exception("probing cluster %s failed", cluster.alias)
                result = ClusterCheck(
                    ok=False, failure=FailureKind.OTHER, message=f"the probe failed: {exc!r}"
                )
            entry.checked_at = done = time.time()
            if result.ok:
                entry.state = breaker.record_success(entry.state)
                return Verdict(reachable=True)
            entry.state = breaker.record_failure(
                entry.state, now=done, error=result.message, policy=self.policy
            )
            return Verdict(reachable=False, error=result.message, confirmed=entry.state.is_open)
        finally:
            entry.lock.release()
