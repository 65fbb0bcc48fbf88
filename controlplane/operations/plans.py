"""The failover page's plan, computed by the operations workers and kept with its age.

Reading a plan opens clients on both clusters and samples arrivals for a second: 6-17 s inside a web
request, more when a cluster does not answer. The page asks for one (`plan_request`); beat's operation
dispatcher sends the requested flows to the `operations` queue (`plans_requested`); a worker computes
the plan (`plan_compute`) and keeps it in the cache with the time it was read; the page shows the last
one with its age and asks again once it is older than PLAN_FRESH_S, polling until the fresh one is in.
The API's `GET flows/{id}/failover/plan/` still reads a plan when asked (a script wants the answer).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from django.core.cache import cache

from controlplane.core.errors import ClusterUnavailable
from controlplane.flows.models import Flow
from controlplane.operations.failover import failover_plan
from replication import failover

PLAN_KEY = "failover-plan:{}"
REQUESTS_KEY = "failover-plan:requested"  # {flow id: when the page asked}
PLAN_FRESH_S = 30.0  # the page asks for a new plan once the one it shows is older
PLAN_KEPT_S = 3600  # an older plan is gone: the page waits for a new one rather than show it
WORKERS_LATE_S = 20.0  # asked this long ago and still no plan: say the operations workers may be down


@dataclass(frozen=True)
class StoredPlan:
    plan: failover.FailoverPlan | None  # None when it could not be read: `problem` says why
    problem: str
    computed_at: float  # epoch seconds

    def age_s(self, now: float | None = None) -> float:
        return max(0.0, (time.time() if now is None else now) - self.computed_at)

    @property
    def fresh(self) -> bool:
        return self.age_s() < PLAN_FRESH_S


def plan_stored(flow: Flow) -> StoredPlan | None:
    return cache.get(PLAN_KEY.format(flow.pk))


def plan_request(flow: Flow) -> None:
    """Ask the operations workers for a fresh plan of `flow` (beat sends it within its interval)."""
    requested = cache.get(REQUESTS_KEY) or {}
    requested.setdefault(flow.pk, time.time())
    cache.set(REQUESTS_KEY, requested, timeout=PLAN_KEPT_S)


def plans_requested() -> list[int]:
    """The flows whose plan was asked for since the last call (beat's dispatcher sends them)."""
    requested = cache.get(REQUESTS_KEY) or {}
    if requested:
        cache.delete(REQUESTS_KEY)
    return sorted(requested)


def plan_compute(flow_id: int) -> StoredPlan | None:
    """Read the plan of a flow now (an operations worker) and keep it; None when the flow is gone."""
    flow = Flow.objects.select_related("source", "target").filter(pk=flow_id).first()
    if flow is None:
        return None
    read_at = time.time()
    try:
        stored = StoredPlan(failover_plan(flow=flow), "", read_at)
    except ClusterUnavailable as exc:
        problem = f"The plan could not be read: {exc}. Check both clusters with Test connection."
        stored = StoredPlan(None, problem, read_at)
    cache.set(PLAN_KEY.format(flow.pk), stored, timeout=PLAN_KEPT_S)
    return stored
