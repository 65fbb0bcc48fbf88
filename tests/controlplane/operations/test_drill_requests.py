"""Drill and cutover requests (no cluster is touched): roles, inputs and states refused and audited;
beat's schedule drills again, with the last drill's groups, once it is older than the interval."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.test import Client
from django.utils import timezone

from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditEvent
from controlplane.flows import lifecycle, services
from controlplane.operations import cutover, drills
from controlplane.operations.models import Operation

pytestmark = pytest.mark.django_db


@pytest.fixture
def flow(admin_user, two_clusters):
    a, b = two_clusters
    return services.flow_create(actor=admin_user, source=a, target=b, enabled=True, topics=["orders"])


def test_drill_and_cutover_requests_are_refused_with_the_reason_and_audited(flow, admin_user):
    viewer = get_user_model().objects.get(username="viewer")
    with pytest.raises(PermissionDenied, match="drill needs the operator role"):
        drills.drill_request(actor=viewer, flow=flow, groups=["billing"])
    with pytest.raises(ServiceValidationError, match="groups"):
        drills.drill_request(actor=admin_user, flow=flow, groups=[" "])
    with pytest.raises(ServiceValidationError, match="confirm"):
        cutover.cutover_request(actor=admin_user, flow=flow, confirm="B->A")
    with pytest.raises(ServiceValidationError, match="fence_s"):
        cutover.cutover_request(actor=admin_user, flow=flow, confirm="A->B", fence_s=0)
    with pytest.raises(ServiceValidationError, match="fence_timeout_s"):  # the fence could never pass
        cutover.cutover_request(actor=admin_user, flow=flow, confirm="A->B", fence_s=20, fence_timeout_s=10)
    queued = drills.drill_request(actor=admin_user, flow=flow, groups=["billing", "billing"])
    assert (queued.kind, queued.groups, queued.force) == ("drill", ["billing"], True)
    with pytest.raises(ServiceConflict, match=f"drill {queued.pk} of this flow is already queued"):
        cutover.cutover_request(actor=admin_user, flow=flow, confirm="A->B", dry_run=True)
    Operation.objects.filter(pk=queued.pk).update(active=False, outcome="succeeded")
    lifecycle.begin_failover(flow=flow)
    with pytest.raises(ServiceConflict, match="failing_over"):
        drills.drill_request(actor=admin_user, flow=flow, groups=["billing"])
    refused = AuditEvent.objects.filter(object_id=str(flow.pk), outcome="refused")
    assert sorted(refused.values_list("action", flat=True)) == ["cutover"] * 4 + ["drill"] * 3


def test_beat_drills_again_with_the_last_groups_once_the_interval_passed(flow, admin_user, settings):
    last = drills.drill_request(actor=admin_user, flow=flow, groups=["billing", "audit"])
    settings.MIRRORPLANE_DRILL_INTERVAL_S = 3600
    assert drills.request_scheduled_drills() == []  # the last one is active (and recent)
    Operation.objects.filter(pk=last.pk).update(
        active=False, outcome="succeeded", requested_at=timezone.now() - datetime.timedelta(hours=2)
    )
    (scheduled,) = drills.request_scheduled_drills()
    assert (scheduled.groups, scheduled.requested_by) == (["audit", "billing"], None)
    assert (scheduled.drain_timeout_s, scheduled.record_wait_s) == (30.0, 30.0)
    assert drills.request_scheduled_drills() == []  # the new one is recent
    settings.MIRRORPLANE_DRILL_INTERVAL_S = 0
    Operation.objects.filter(pk=scheduled.pk).update(
        active=False, requested_at=timezone.now() - datetime.timedelta(hours=2)
    )
    assert drills.request_scheduled_drills() == []  # off


def test_the_drills_and_cutover_pages_queue_them_and_say_why_not(flow, tokens):
    web = Client()
    web.force_login(get_user_model().objects.get(username="operator"))
    assert 'id="drill-section"' in web.get(f"/flows/{flow.pk}/drills/").content.decode()
    assert 'id="cutover-section"' in web.get(f"/flows/{flow.pk}/cutover/").content.decode()
    wrong = web.post(f"/flows/{flow.pk}/cutover/", {"confirm": "A-B", "fence_s": "5", "dry_run": "1"})
    assert wrong.status_code == 200 and "type the flow&#x27;s name exactly" in wrong.content.decode()
    waits = {"drain_timeout_s": "5", "record_wait_s": "20"}
    queued = web.post(f"/flows/{flow.pk}/drills/", {"drill_groups": "billing, audit", **waits})
    assert queued.status_code == 202, queued.content.decode()
    drill = Operation.objects.get(flow=flow, kind="drill")
    assert (drill.groups, drill.drain_timeout_s, drill.record_wait_s) == (["audit", "billing"], 5.0, 20.0)
    assert f'data-operation="{drill.pk}"' in queued.content.decode()
    assert 'id="drill-history"' in web.get(f"/flows/{flow.pk}/drills/").content.decode()  # no figures yet
    assert 'id="last-drill"' in web.get(f"/flows/{flow.pk}/").content.decode()
    busy = web.post(f"/flows/{flow.pk}/cutover/", {"confirm": "A->B", "fence_s": "5"})
    assert "already queued" in busy.content.decode()
    viewer = Client()
    viewer.force_login(get_user_model().objects.get(username="viewer"))
    refused = viewer.post(f"/flows/{flow.pk}/drills/", {"drill_groups": "billing"})
    assert "drill needs the operator role" in refused.content.decode()
