"""Worker pools (controlplane.flows.pools): the name rule, queues, the pools built from workers and flows, the
pool field through the service and the API (a bad name is a 400 at the field, nothing stored), the
pools endpoint, and the pool_without_workers rule (pure)."""

from __future__ import annotations

import dataclasses

import pytest

from controlplane.alerts.models import AlertRule
from controlplane.alerts.rules import evaluate
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditEvent
from controlplane.core.presence import Presence
from controlplane.flows import pools, services
from controlplane.flows.models import Flow
from tests.controlplane.alerts.test_alert_rules import HEALTHY, LIMITS, NOW


@pytest.mark.parametrize("name", ["", "payments", "a", "team-1", "x" * pools.MAX_POOL_NAME])
def test_pool_names_that_are_accepted(name):
    assert pools.pool_name_error(name) is None


@pytest.mark.parametrize(
    "name", ["Payments", "-x", "x-", "a b", "pay_ments", "x" * (pools.MAX_POOL_NAME + 1)]
)
def test_a_bad_pool_name_is_explained_with_the_fix(name):
    error = pools.pool_name_error(name)
    assert error is not None and repr(name) in error and "e.g. payments" in error


def test_a_pool_is_a_queue_and_back():
    assert pools.pool_queue("") == "replication"
    assert pools.pool_queue("payments") == "replication.payments"
    assert pools.pool_of_queue("replication") == ""
    assert pools.pool_of_queue("replication.payments") == "payments"
    assert pools.pool_of_queue("metadata") is None
    assert pools.pool_of_queue("replication.Bad") is None
    assert pools.pool_of_queue("w1@host.dq") is None


def _worker(name: str, *queues: str, leases: int = 0, rate: float = 0.0) -> Presence:
    return Presence(name, queues, 1, NOW - 2, {"leases_held": leases, "slices_per_s": rate, "slices": 9})


def test_pools_gather_their_live_workers_and_pinned_flows_and_flag_a_pool_nobody_consumes():
    flows = [
        ("", pools.PoolFlow(1, "A->B", True)),
        ("payments", pools.PoolFlow(2, "B->A", True)),
        ("payments", pools.PoolFlow(3, "A->C", False)),  # paused: nothing is waiting for it
        ("orders", pools.PoolFlow(4, "C->A", True)),
    ]
    workers = [
        _worker("w1", "replication", "metadata", leases=2, rate=1.5),
        _worker("w2", "replication.orders", leases=1, rate=0.5),
        _worker("w3", "replication.orders", "replication.spare"),
    ]
    by_name = {pool.name: pool for pool in pools.build_pools(flows=flows, workers=workers)}
    assert list(by_name) == ["", "orders", "payments", "spare"]
    assert [w.name for w in by_name[""].workers] == ["w1"] and by_name[""].flows_waiting == ()
    assert by_name["orders"].leases_held == 1 and by_name["orders"].slices_per_s == 0.5
    assert [f.name for f in by_name["payments"].flows_waiting] == ["B->A"]
    assert by_name["payments"].label == "payments" and by_name[""].label == "default"
    assert by_name["spare"].flows == () and by_name["spare"].live
    unknown = {pool.name: pool for pool in pools.build_pools(flows=flows, workers=None)}
    assert unknown["payments"].flows_waiting == ()  # Redis away: unknown, never flagged


@pytest.mark.django_db
def test_the_pool_is_validated_by_the_service_and_a_bad_name_changes_nothing(two_clusters, admin_user):
    a, b = two_clusters
    with pytest.raises(ServiceValidationError) as refused:
        services.flow_create(actor=admin_user, source=a, target=b, pool="Pay ments")
    assert "pool" in refused.value.errors and "e.g. payments" in refused.value.errors["pool"][0]
    assert not Flow.objects.exists()
    flow = services.flow_create(actor=admin_user, source=a, target=b, pool="payments")
    assert flow.pool == "payments"
    with pytest.raises(ServiceValidationError):
        services.flow_update(actor=admin_user, flow=flow, pool="-bad")
    flow.refresh_from_db()
    assert flow.pool == "payments"
    services.flow_update(actor=admin_user, flow=flow, pool="")
    flow.refresh_from_db()
    assert flow.pool == ""
    update = AuditEvent.objects.filter(object_type="flow", action="update").latest("pk")
    assert update.before["pool"] == "payments" and update.after["pool"] == ""


@pytest.mark.django_db
def test_the_api_takes_the_pool_refuses_a_bad_one_at_the_field_and_lists_pools(client_as, two_clusters):
    admin = client_as("admin")
    response = admin.post("/api/v1/flows/", {"source": "A", "target": "B", "pool": "Pay"}, format="json")
    assert response.status_code == 400 and "pool" in response.json() and not Flow.objects.exists()
    response = admin.post(
        "/api/v1/flows/", {"source": "A", "target": "B", "pool": "payments", "enabled": True}, format="json"
    )
    assert response.status_code == 201 and response.json()["pool"] == "payments"
    listed = {pool["name"]: pool for pool in client_as("viewer").get("/api/v1/pools/").json()}
    payments = listed["payments"]
    assert payments["queue"] == "replication.payments" and [f["name"] for f in payments["flows"]] == ["A->B"]
    if payments["workers_known"]:  # no worker of that pool runs in this test
        assert not payments["live"] and [f["name"] for f in payments["flows_waiting"]] == ["A->B"]
    status = client_as("viewer").get(f"/api/v1/flows/{response.json()['id']}/status/").json()
    assert status["pool"] == "payments"
    assert status["pool_without_workers"] is (status["pool_live_workers"] == 0)


def test_pool_without_workers_fires_for_a_pinned_flow_nobody_runs_and_inhibits_its_consequences():
    def rules(**changes):
        return evaluate(dataclasses.replace(HEALTHY, **changes), LIMITS, now=NOW)

    pinned_alone = rules(pool="payments", pool_workers=0, replication_workers=0, status="STALE")
    assert pinned_alone[AlertRule.POOL_WITHOUT_WORKERS].firing
    assert "payments" in pinned_alone[AlertRule.POOL_WITHOUT_WORKERS].message
    assert not pinned_alone[AlertRule.NO_LEASE_HOLDER].firing  # the cause pages, not its consequences
    assert not rules(pool="payments", pool_workers=1)[AlertRule.POOL_WITHOUT_WORKERS].firing
    assert not rules(pool="payments", pool_workers=None)[AlertRule.POOL_WITHOUT_WORKERS].firing
    assert not rules(pool="", pool_workers=0)[AlertRule.POOL_WITHOUT_WORKERS].firing
    assert not rules(pool="payments", pool_workers=0, runnable=False)[AlertRule.POOL_WITHOUT_WORKERS].firing
