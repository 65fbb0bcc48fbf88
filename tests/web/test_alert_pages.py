"""Alert pages through the real views: the RPO budget in the flow form and page, silences and channels
(field errors, state unchanged, roles), firing flows first with a marker."""

from __future__ import annotations

from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from controlplane import alerts, assurance
from controlplane.alerts.models import AlertSilence, NotificationChannel
from controlplane.flows import services
from tests.status_reports import stored_report
from tests.web.test_pages import _flow_form

pytestmark = pytest.mark.django_db


def test_the_flow_form_sets_the_rpo_budget_and_the_flow_page_shows_it(client_as, flow):
    admin = client_as("admin")
    edit = reverse("web:flow-edit", args=[flow.pk])
    data = _flow_form(flow.source, flow.target)
    bad = admin.post(edit, data | {"rpo_seconds_behind": "-5", "rpo_records_behind": "x"})
    assert set(bad.context["form"].errors) == {"rpo_seconds_behind", "rpo_records_behind"}
    assert assurance.rpo_budget_of(flow=flow) == assurance.DEFAULT_BUDGET
    assert (
        admin.post(edit, data | {"rpo_seconds_behind": "15", "rpo_records_behind": "5000"}).status_code == 302
    )
    assert assurance.rpo_budget_of(flow=flow) == assurance.RpoBudget(15.0, 5000)
    page = client_as("viewer").get(reverse("web:flow", args=[flow.pk])).content.decode()
    assert 'id="rpo-budget"' in page and "5,000 records" in page


def test_silence_and_channel_forms_name_the_field_and_change_nothing(client_as, flow):
    operator, admin = client_as("operator"), client_as("admin")
    bad = operator.post(reverse("web:silence-create"), {"duration_h": "0", "rule": "nope"})
    assert bad.status_code == 400 and set(bad.context["silence_form"].errors) == {"duration_h", "rule"}
    assert not AlertSilence.objects.exists()
    assert client_as("viewer").post(reverse("web:silence-create"), {"duration_h": "1"}).status_code == 403

    assert operator.post(reverse("web:channel-create"), {"name": "x"}).status_code == 403
    for data, field in (
        ({"name": "hook", "kind": "webhook", "url": "file:///etc/passwd"}, "url"),
        ({"name": "hook", "kind": "pager", "url": "https://x.example/"}, "kind"),
    ):
        response = admin.post(reverse("web:channel-create"), data | {"enabled": "on"})
        assert response.status_code == 400 and field in response.context["form"].errors
    assert not NotificationChannel.objects.exists()
    ok = admin.post(
        reverse("web:channel-create"),
        {"name": "hook", "kind": "webhook", "url": "https://hooks.example/T0/secret", "enabled": "on"},
    )
    assert ok.status_code == 302
    page = admin.get(reverse("web:alerts")).content.decode()
    assert "https://hooks.example/***" in page and "secret" not in page and "Send test" in page


def test_flows_with_firing_alerts_come_first_with_a_marker(client_as, flow, users, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    c = services.cluster_create(actor=None, alias="0first", bootstrap_servers="c.invalid:9092")
    other = services.flow_create(actor=users["admin"], source=c, target=flow.target, enabled=True)
    stored_report(
        flow=flow, topic="t", partition=0, remote_topic="A.t", records_behind=1, seconds_behind=999,
        observed_at=timezone.now(),
    )  # fmt: skip
    alerts.alerts_evaluate()
    viewer = client_as("viewer")
    for page in (viewer.get(reverse("web:flows")), viewer.get(reverse("web:overview"))):
        html = unescape(page.content.decode()).split('<table class="flows">')[1]
        assert html.index(flow.name) < html.index(other.name)  # alphabetically it would come second
        assert "1 alert firing" in html


def test_the_alert_row_silences_its_alert_and_the_overview_stops_counting_it(client_as, flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    stored_report(
        flow=flow, topic="t", partition=0, remote_topic="A.t", records_behind=1, seconds_behind=999,
        observed_at=timezone.now(),
    )  # fmt: skip
    (alert,) = alerts.alerts_evaluate().fired
    operator = client_as("operator")
    page = operator.get(reverse("web:alerts")).content.decode()
    row = page.split(f'id="alert-{alert.pk}"')[1].split("</tr>")[0]
    assert 'class="row-action"' in row and ">Silence</button>" in row
    assert f'name="rule" value="{alert.rule}"' in row and f'name="flow" value="{flow.pk}"' in row
    assert "1 alert firing" in operator.get(reverse("web:overview")).content.decode()

    data = {"flow": flow.pk, "rule": alert.rule, "duration_h": "2", "reason": "silenced from its alert row"}
    assert operator.post(reverse("web:silence-create"), data).status_code == 302
    page = operator.get(reverse("web:alerts")).content.decode()
    row = page.split(f'id="alert-{alert.pk}"')[1].split("</tr>")[0]
    assert '<span class="badge paused">silenced</span>' in row and "row-action" not in row
    assert "Firing (1, 1 silenced)" in page
    assert "alert firing" not in operator.get(reverse("web:overview")).content.decode()
    assert "alert firing" not in operator.get(reverse("web:flows")).content.decode()
    flow_page = operator.get(reverse("web:flow-live", args=[flow.pk])).content.decode()
    assert "· silenced" in flow_page
    viewer_page = client_as("viewer").get(reverse("web:alerts")).content.decode()
    assert ">Silence</button>" not in viewer_page  # viewers read; operators silence
