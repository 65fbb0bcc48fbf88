"""The report job's options from the web app: the capacity plan gets today's flows' pools and each pool's
live workers, read from the Flow rows and the workers' presence in Redis."""

from __future__ import annotations

import pytest

from controlplane.core import presence
from controlplane.flows import pools, services
from dashboards.spark import capacity
from workers.reports import report_options

pytestmark = pytest.mark.django_db


def test_the_capacity_plan_gets_each_flows_pool_and_each_pools_live_workers(redis_url, settings):
    a, b, c = (
        services.cluster_create(actor=None, alias=alias, bootstrap_servers=f"{alias.lower()}.example:9092")
        for alias in "ABC"
    )
    default = services.flow_create(actor=None, source=a, target=b)
    payments = services.flow_create(actor=None, source=b, target=a, pool="payments")
    orders = services.flow_create(actor=None, source=a, target=c, pool="orders")  # no worker consumes it
    for name, queues in (
        ("w1", ["replication", "metadata"]),
        ("w2", ["replication.payments"]),
        ("w3", ["replication.payments", "replication.spare"]),
    ):
        presence.announce(key=presence.worker_key(name), name=name, queues=queues, pid=1)

    plan = report_options().capacity

    assert plan.pools == {default.pk: "", payments.pk: "payments", orders.pk: "orders"}
    assert plan.pool_workers == {"": 1, "orders": 0, "payments": 2, "spare": 1}
    assert capacity.DEFAULT_POOL == pools.DEFAULT_POOL  # what a flow the plan is not told of falls in

    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # Redis away: the pools are known, their workers not
    away = report_options().capacity
    assert (away.pools, away.pool_workers) == (plan.pools, None)
