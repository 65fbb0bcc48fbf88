"""The flow lifecycle: the transition table (pure), its writes, and that edits and imports leave it alone."""

from __future__ import annotations

import pytest
from django.test import Client
from django.utils import timezone

from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditEvent
from controlplane.flows import lifecycle, services
from controlplane.flows.models import Flow, FlowState
from controlplane.status import partition_writes, runtime
from replication.metrics import GapEvent, PartitionMetrics
from tests.controlplane.flows.test_mm2_import_export import ACTIVE_ACTIVE, ENV, _import

S = FlowState


@pytest.mark.parametrize(
    ("state", "name", "expected"),
    [
        (S.DISABLED, "enable", S.ACTIVE),
        (S.ACTIVE, "pause", S.PAUSED),
        (S.PAUSED, "pause", S.PAUSED),  # twice is no change, not an error
        (S.PAUSED, "resume", S.ACTIVE),
        (S.ACTIVE, "fault", S.FAULTED),
        (S.FAULTED, "recover", S.ACTIVE),
        (S.FAULTED, "begin_failover", S.FAILING_OVER),
        (S.FAILING_OVER, "complete_failover", S.FAILED_OVER),
        (S.FAILED_OVER, "begin_failback", S.FAILING_BACK),
        (S.FAILING_BACK, "complete_failback", S.PAUSED),
        (S.FAILING_BACK, "abort_failback", S.FAILED_OVER),
        # refused
        (S.DISABLED, "pause", None),
        (S.FAILED_OVER, "resume", None),
        (S.FAILED_OVER, "enable", None),
        (S.FAILED_OVER, "disable", None),
        (S.FAILING_OVER, "begin_failback", None),
        (S.ACTIVE, "begin_failback", None),
        (S.PAUSED, "fault", None),
        (S.FAILING_OVER, "pause", None),
    ],
)
def test_transition_table(state, name, expected):
    assert lifecycle.next_state(state=state, transition=name) == expected


def test_abort_failover_returns_where_it_came_from():
    assert (
        lifecycle.next_state(state=S.FAILING_OVER, transition="abort_failover", previous=S.PAUSED) == S.PAUSED
    )


def test_allowed_actions_drive_the_ui():
    assert lifecycle.allowed_actions(S.DISABLED) == {"enable"}
    assert lifecycle.allowed_actions(S.ACTIVE) == {"pause", "disable", "failover", "cutover"}
    assert lifecycle.allowed_actions(S.FAILING_OVER) == set()
    assert lifecycle.allowed_actions(S.FAILED_OVER) == {"failback"}
    assert lifecycle.allowed_actions(S.MIGRATED) == set()  # for good
    assert not lifecycle.is_runnable(S.FAILED_OVER) and lifecycle.is_runnable(S.FAULTED)
    assert lifecycle.is_runnable(S.MIGRATING) and not lifecycle.is_runnable(S.MIGRATED)


@pytest.fixture
def flow(admin_user, two_clusters):
    a, b = two_clusters
    return services.flow_create(actor=admin_user, source=a, target=b, enabled=True, topics=["orders"])


def test_refused_transition_names_the_state_and_what_is_allowed(flow):
    lifecycle.begin_failover(flow=flow)
    lifecycle.complete_failover(flow=flow)
    with pytest.raises(lifecycle.IllegalTransition, match=r"A->B is failed_over: .*allowed now: failback"):
        lifecycle.resume(flow=flow)
    assert Flow.objects.get(pk=flow.pk).state == S.FAILED_OVER


def test_fault_records_the_reason_and_recover_clears_it(flow):
    assert lifecycle.fault(flow_id=flow.pk, reason="source cluster A unreachable: timed out")
    stored = Flow.objects.get(pk=flow.pk)
    assert stored.state == S.FAULTED and stored.state_reason == "source cluster A unreachable: timed out"
    assert stored.state_changed_at is not None
    assert not lifecycle.fault(flow_id=flow.pk, reason="source cluster A unreachable: refused")
    assert Flow.objects.get(pk=flow.pk).state_reason == "source cluster A unreachable: refused"
    assert lifecycle.recover(flow_id=flow.pk)
    assert Flow.objects.get(pk=flow.pk).state == S.ACTIVE
    services.flow_pause(actor=None, flow=flow)
    assert not lifecycle.fault(flow_id=flow.pk, reason="x")  # a paused flow is not faulted
    assert Flow.objects.get(pk=flow.pk).state == S.PAUSED


def test_editing_a_failed_over_flow_leaves_its_state_alone(admin_user, flow):
    lifecycle.begin_failover(flow=flow)
    lifecycle.complete_failover(flow=flow)
    services.flow_update(actor=admin_user, flow=flow, topics=["orders", "payments"], enabled=True)
    stored = Flow.objects.get(pk=flow.pk)
    assert stored.state == S.FAILED_OVER and stored.topics == ["orders", "payments"]
    with pytest.raises(ServiceValidationError) as refused:
        services.flow_update(actor=admin_user, flow=stored, enabled=False, topics=["x"])
    assert "finish the failover or failback first" in refused.value.errors["enabled"][0]
    stored = Flow.objects.get(pk=flow.pk)
    assert stored.state == S.FAILED_OVER and stored.enabled and stored.topics == ["orders", "payments"]
    assert AuditEvent.objects.filter(action="update", outcome="refused").exists()


def test_enabled_edits_are_the_enable_and_disable_transitions(admin_user, flow):
    services.flow_pause(actor=admin_user, flow=flow)
    services.flow_update(actor=admin_user, flow=flow, tasks_max=2)
    assert Flow.objects.get(pk=flow.pk).state == S.PAUSED  # an edit is not a resume
    services.flow_update(actor=admin_user, flow=flow, enabled=False)
    assert Flow.objects.get(pk=flow.pk).state == S.DISABLED
    services.flow_update(actor=admin_user, flow=flow, enabled=True)
    assert Flow.objects.get(pk=flow.pk).state == S.ACTIVE


def test_reimport_leaves_paused_and_failed_over_flows_alone(admin_user):
    _import(admin_user)
    paused = Flow.objects.get(source__alias="dc1", target__alias="dc2")
    services.flow_pause(actor=admin_user, flow=paused)
    failed_over = Flow.objects.get(source__alias="dc2", target__alias="dc1")
    lifecycle.begin_failover(flow=failed_over)
    lifecycle.complete_failover(flow=failed_over)
    changed = ACTIVE_ACTIVE.replace("dc2->dc3.tasks.max = 4", "dc2->dc3.tasks.max = 8")
    _import(admin_user, changed)
    _import(admin_user, changed.replace("tasks.max = 8", "tasks.max = 6"), environ=ENV)
    assert Flow.objects.get(pk=paused.pk).state == S.PAUSED
    assert Flow.objects.get(pk=failed_over.pk).state == S.FAILED_OVER


def _partition(topic: str, *, stopped: bool) -> PartitionMetrics:
    return PartitionMetrics(
        topic=f"A.{topic}", partition=0, source_topic=topic, record_count=5, record_rate=0.0, byte_count=50,
        byte_rate=0.0, record_age_ms=None, replication_latency_ms=None, records_behind=0, seconds_behind=0.0,
        source_end_offset=10, next_offset=10, skipped_count=0, gap_count=1, lost_records=3, stopped=stopped,
        last_error=None,
    )  # fmt: skip


def test_a_data_loss_stop_faults_the_flow_with_why_until_no_partition_is_stopped(client_as, admin_user, flow):
    now = timezone.now()
    gap = GapEvent(
        "orders", 0, expected_offset=4, resumed_offset=4, lost_records=3, detected_at=0, reason="retention"
    )
    partition_writes.partition_statuses_save(
        flow_id=flow.pk,
        task_index=0,
        partitions=[_partition("orders", stopped=True)],
        task_error=None,
        at=now,
    )
    runtime.flow_gap_record(flow_id=flow.pk, gap=gap, remote_topic="A.orders", stopped=True, at=now)
    stored = Flow.objects.get(pk=flow.pk)
    assert stored.state == S.FAULTED
    assert stored.state_reason.startswith("data loss stopped orders[0]: 3 records gone from the source")
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get(f"/flows/{flow.pk}/").content.decode()
    assert "faulted" in page and "data loss stopped orders[0]" in page
    api = client_as("viewer").get(f"/api/v1/flows/{flow.pk}/").json()
    assert api["state"] == "faulted" and "data.loss.policy = stop" in api["state_reason"]
    # still stopped: the flow stays faulted; once the partition runs again it recovers
    partition_writes.partition_statuses_save(
        flow_id=flow.pk,
        task_index=0,
        partitions=[_partition("orders", stopped=True)],
        task_error=None,
        at=now,
    )
    assert Flow.objects.get(pk=flow.pk).state == S.FAULTED
    partition_writes.partition_statuses_save(
        flow_id=flow.pk,
        task_index=0,
        partitions=[_partition("orders", stopped=False)],
        task_error=None,
        at=now,
    )
    assert Flow.objects.get(pk=flow.pk).state == S.ACTIVE
