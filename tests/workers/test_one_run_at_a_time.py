"""The periodic runs several metadata workers may hold queued copies of go one at a time, on a lease that
lasts as long as the run (real Redis): a verification run of a 20,000-partition fleet outlasted the fixed
60 s key it used to take, and the next run went on beside it over the same partitions."""

from __future__ import annotations

import pytest

from workers import alerts, context, verification
from workers.leases import new_token


# The tasks close the thread's stale database connections first (`close_old_connections`): in an xdist
# worker whose earlier tests left a connection open, that touches the database.
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("module", "task", "body", "name"),
    [
        (verification, "verify_flows", "run_verification", "verification"),
        (alerts, "evaluate_alerts", "_evaluate", "alert-evaluation"),
    ],
)
def test_a_run_is_skipped_while_another_holds_its_lease_and_runs_once_it_is_free(
    redis_url, monkeypatch, module, task, body, name
):
    ran = []
    monkeypatch.setattr(module, body, lambda **_: ran.append(1))  # the run's body: only whether it ran
    leases = context.leases()
    key, other = f"mirrorplane:run:{name}", new_token()
    assert leases.try_acquire(key, other, ttl_s=30)
    getattr(module, task)()
    assert ran == []  # another worker's run is going on
    assert leases.holders([key]) == [other]  # and its lease is left to it
    leases.release(key, other)
    getattr(module, task)()
    assert ran == [1]
    assert leases.holders([key]) == [None]  # released after the run
