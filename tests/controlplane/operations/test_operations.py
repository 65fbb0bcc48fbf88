"""Operations without a cluster: the request's checks and audit, one per flow, the lease, beat's choice."""

from __future__ import annotations

import datetime
import io

import pytest
from django.core.management import call_command
from django.utils import timezone

from controlplane import operations
from controlplane.core.models import AuditEvent
from controlplane.flows import lifecycle, services
from controlplane.operations.models import GroupOutcome, Operation, OperationOutcome

pytestmark = pytest.mark.django_db


@pytest.fixture
def flow(two_clusters, admin_user):
    a, b = two_clusters
    return services.flow_create(actor=admin_user, source=a, target=b, enabled=True)


def request_failover(actor, flow, **changes) -> Operation:
    arguments = {"confirm": flow.name, "groups": ["billing"]} | changes
    return operations.operation_request(actor=actor, kind="failover", flow=flow, **arguments)


def test_a_request_is_queued_audited_and_answered_with_its_url(client_as, flow):
    response = client_as("operator").post(
        f"/api/v1/flows/{flow.pk}/failover/", {"groups": ["billing"], "confirm": "A->B"}, format="json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert response["Location"] == body["url"] == f"http://testserver/api/v1/operations/{body['id']}/"
    assert (body["kind"], body["phase"], body["outcome"], body["groups"]) == (
        "failover",
        "queued",
        "pending",
        ["billing"],
    )
    assert client_as("viewer").get(body["url"]).json()["id"] == body["id"]
    listed = client_as("viewer").get(f"/api/v1/operations/?flow={flow.pk}&active=true").json()
    assert [row["id"] for row in listed["results"]] == [body["id"]]
    event = AuditEvent.objects.get(action="failover", outcome="accepted")
    assert (event.actor_name, event.after["operation"]) == ("operator", body["id"])


def test_one_operation_per_flow_a_second_request_gets_409_with_the_running_one(client_as, flow, admin_user):
    running = request_failover(admin_user, flow)
    response = client_as("operator").post(
        f"/api/v1/flows/{flow.pk}/failover/", {"groups": ["billing"], "confirm": "A->B"}, format="json"
    )
    assert response.status_code == 409
    assert response.json()["operation"]["id"] == running.pk
    assert f"failover {running.pk} of this flow is already queued" in response.json()["detail"]
    assert AuditEvent.objects.filter(action="failover", outcome="refused", actor_name="operator").count() == 1
    assert Operation.objects.count() == 1


def test_the_flows_state_must_allow_it(client_as, flow, admin_user):
    lifecycle.pause(flow=flow)
    lifecycle.begin_failover(flow=flow)
    lifecycle.complete_failover(flow=flow)
    refused = client_as("operator").post(
        f"/api/v1/flows/{flow.pk}/failover/", {"groups": ["g"], "confirm": "A->B"}, format="json"
    )
    assert refused.status_code == 409 and "failed_over" in refused.json()["detail"]
    # Failback without a failover operation on record: the groups must be named.
    no_groups = client_as("operator").post(
        f"/api/v1/flows/{flow.pk}/failback/", {"confirm": "A->B"}, format="json"
    )
    assert no_groups.status_code == 400 and "groups" in no_groups.json()
    named = client_as("operator").post(
        f"/api/v1/flows/{flow.pk}/failback/", {"confirm": "A->B", "groups": ["g"]}, format="json"
    )
    assert named.status_code == 202 and named.json()["groups"] == ["g"]


def test_failback_moves_back_the_groups_the_last_failover_moved(flow, admin_user):
    failover = request_failover(admin_user, flow, groups=["billing", "shipping", "busy"])
    operations.operation_store_group(
        operation=failover,
        group="billing",
        outcome=GroupOutcome.WRITTEN,
        written={},
        topics=["orders"],
        detail="",
    )
    operations.operation_store_group(
        operation=failover,
        group="shipping",
        outcome=GroupOutcome.UNCHANGED,
        written={},
        topics=["parcels"],
        detail="",
    )
    operations.operation_store_group(
        operation=failover,
        group="busy",
        outcome=GroupOutcome.REFUSED,
        written={},
        topics=["x"],
        detail="active",
    )
    Operation.objects.filter(pk=failover.pk).update(active=False, outcome=OperationOutcome.SUCCEEDED)
    for step in (lifecycle.begin_failover, lifecycle.complete_failover):
        step(flow=flow)
    failback = operations.operation_request(actor=admin_user, kind="failback", flow=flow, confirm="A->B")
    assert failback.groups == ["billing", "shipping"] and failback.failover_id == failover.pk


def test_the_lease_lets_one_worker_run_an_operation_and_another_take_over_a_dead_ones(
    flow, admin_user, settings
):
    settings.MIRRORPLANE_OPERATION_LEASE_S = 30
    operation = request_failover(admin_user, flow)
    assert list(operations.operations_to_dispatch()) == [operation]
    operations.operation_dispatched(operation=operation)
    assert not operations.operations_to_dispatch().exists()  # sent, and the lease not yet expired

    first = operations.operation_claim(operation_id=operation.pk, worker="w1")
    assert first is not None and first.attempts == 1
    assert operations.operation_claim(operation_id=operation.pk, worker="w2") is None  # w1 is alive
    operations.operation_renew(operation=first, phase="draining")

    # w1 stops renewing (killed): after the lease, beat sends it again and w2 takes it over.
    old = timezone.now() - datetime.timedelta(seconds=31)
    Operation.objects.filter(pk=operation.pk).update(heartbeat_at=old, dispatched_at=old)
    assert list(operations.operations_to_dispatch()) == [operation]
    second = operations.operation_claim(operation_id=operation.pk, worker="w2")
    assert (second.phase, second.attempts) == ("draining", 2)
    with pytest.raises(operations.LeaseLost):
        operations.operation_renew(operation=first, progress=0.5)  # w1 comes back: it must stop
    assert not operations.operation_finish(operation=first, outcome=OperationOutcome.SUCCEEDED)
    assert operations.operation_finish(operation=second, outcome=OperationOutcome.SUCCEEDED)
    assert operations.operation_claim(operation_id=operation.pk, worker="w3") is None  # finished


def test_the_command_queues_with_async(flow):
    out = io.StringIO()
    call_command("failover", "A->B", "--groups", "billing", "--confirm", "A->B", "--async", stdout=out)
    operation = Operation.objects.get()
    assert out.getvalue().strip() == f"failover operation {operation.pk} queued"
    assert operation.requested_by is None and operation.active
    assert AuditEvent.objects.get(action="failover", outcome="accepted").actor_name == "system"
