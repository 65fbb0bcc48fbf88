"""Who may see and do what in the web UI: the pages hide actions by role, and the server refuses them."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.core.models import AuditEvent
from controlplane.flows.models import Cluster, Flow, FlowState
from controlplane.operations.models import Operation

pytestmark = pytest.mark.django_db

READ_PAGES = ["web:overview", "web:clusters", "web:flows", "web:audit", "web:reports", "web:mm2-export"]


@pytest.mark.parametrize("page", READ_PAGES)
def test_anonymous_users_are_sent_to_the_login_page(client_as, page):
    response = client_as("anonymous").get(reverse(page))

    assert response.status_code == 302
    assert response["Location"].startswith(reverse("web:login") + "?next=")


@pytest.mark.parametrize("page", READ_PAGES)
def test_a_user_without_a_role_is_refused_with_the_reason(client_as, page):
    response = client_as("norole").get(reverse(page))

    assert response.status_code == 403
    assert b"needs the <strong>viewer</strong> role; you have no role" in response.content


@pytest.mark.parametrize("page", READ_PAGES)
def test_viewers_read_every_page(client_as, flow, page):
    assert client_as("viewer").get(reverse(page)).status_code == 200


def test_viewers_see_no_actions_and_cannot_post_them(client_as, flow):
    viewer = client_as("viewer")
    page = viewer.get(reverse("web:flow", args=[flow.pk])).content.decode()
    for action in ("web:flow-pause", "web:flow-edit", "web:failover", "web:flow-delete"):
        assert reverse(action, args=[flow.pk]) not in page

    assert viewer.post(reverse("web:flow-pause", args=[flow.pk])).status_code == 403
    assert viewer.post(reverse("web:cluster-check", args=[flow.source.pk])).status_code == 403
    assert viewer.get(reverse("web:cluster-create")).status_code == 403
    assert viewer.get(reverse("web:flow-create")).status_code == 403
    assert viewer.get(reverse("web:mm2-import")).status_code == 403
    flow.refresh_from_db()
    assert flow.state == FlowState.ACTIVE


def test_operators_pause_and_resume_but_cannot_change_configuration(client_as, flow):
    operator = client_as("operator")
    page = operator.get(reverse("web:flow", args=[flow.pk])).content.decode()
    assert reverse("web:flow-pause", args=[flow.pk]) in page
    assert reverse("web:flow-edit", args=[flow.pk]) not in page

    response = operator.post(reverse("web:flow-pause", args=[flow.pk]), {"next": reverse("web:overview")})
    assert response.status_code == 302 and response["Location"] == reverse("web:overview")
    flow.refresh_from_db()
    assert flow.state == FlowState.PAUSED

    operator.post(reverse("web:flow-resume", args=[flow.pk]))
    flow.refresh_from_db()
    assert flow.state == FlowState.ACTIVE
    assert list(
        AuditEvent.objects.filter(object_type="flow", actor_name="operator").values_list("action", flat=True)
    ) == ["resume", "pause"]

    assert operator.post(reverse("web:flow-edit", args=[flow.pk]), {"topics": "x"}).status_code == 403
    assert operator.post(reverse("web:flow-delete", args=[flow.pk])).status_code == 403
    assert operator.post(reverse("web:cluster-delete", args=[flow.source.pk])).status_code == 403
    assert Flow.objects.filter(pk=flow.pk, topics=[".*"]).exists()


def test_pause_redirects_only_to_our_own_pages(client_as, flow):
    response = client_as("operator").post(
        reverse("web:flow-pause", args=[flow.pk]), {"next": "https://evil.example/"}
    )
    assert response["Location"] == reverse("web:flow", args=[flow.pk])


def test_admins_see_configuration_actions(client_as, flow):
    page = client_as("admin").get(reverse("web:clusters")).content.decode()
    assert "Add a cluster" in page and "Test connection" in page
    assert reverse("web:cluster-edit", args=[flow.source.pk]) in page


def test_login_page_logs_in_and_lands_on_the_overview(client_as, users):
    users["viewer"].set_password("a long pass phrase")
    users["viewer"].save()
    client = client_as("anonymous")

    wrong = client.post(reverse("web:login"), {"username": "viewer", "password": "nope"})
    assert wrong.status_code == 200 and b"Check the username and password" in wrong.content

    response = client.post(reverse("web:login"), {"username": "viewer", "password": "a long pass phrase"})
    assert response.status_code == 302 and response["Location"] == reverse("web:overview")


def test_deleting_a_cluster_a_flow_uses_says_what_to_do(client_as, flow):
    response = client_as("admin").post(reverse("web:cluster-delete", args=[flow.source.pk]), follow=True)

    assert b"used by flows A-&gt;B: delete them first" in response.content
    assert Cluster.objects.filter(pk=flow.source.pk).exists()


def test_failover_needs_the_operator_role_and_the_flows_name(client_as, flow):
    viewer = client_as("viewer")
    assert viewer.get(reverse("web:failover", args=[flow.pk])).status_code == 403
    # A viewer's request reaches the service, which refuses it and records the refusal.
    refused = viewer.post(reverse("web:failover-execute", args=[flow.pk]), {"confirm": "A->B"})
    assert b"failover needs the operator role; you have the viewer role" in refused.content
    assert AuditEvent.objects.filter(action="failover", outcome="refused", actor_name="viewer").exists()

    operator = client_as("operator")
    assert (
        reverse("web:failover-plan", args=[flow.pk])
        in operator.get(reverse("web:failover", args=[flow.pk])).content.decode()
    )
    response = operator.post(
        reverse("web:failover-execute", args=[flow.pk]), {"confirm": "A-B", "groups": ["orders"]}
    )
    assert b"Not started: nothing changed." in response.content
    assert b"type the flow&#x27;s name exactly (A-&gt;B) to confirm" in response.content
    flow.refresh_from_db()
    assert flow.state == FlowState.ACTIVE
    assert not Operation.objects.exists()
    assert AuditEvent.objects.filter(action="failover", outcome="refused", actor_name="operator").exists()


def test_a_failover_request_is_queued_at_once_and_the_page_follows_it(client_as, flow):
    operator = client_as("operator")
    response = operator.post(
        reverse("web:failover-execute", args=[flow.pk]), {"confirm": "A->B", "groups": ["orders"]}
    )
    assert response.status_code == 202
    operation = Operation.objects.get(flow=flow)
    assert (operation.phase, operation.active, operation.groups) == ("queued", True, ["orders"])
    polling = reverse("web:operation", args=[flow.pk, operation.pk])
    assert polling in response.content.decode() and b"waiting for a worker" in response.content
    accepted = AuditEvent.objects.get(action="failover", outcome="accepted")
    assert accepted.after["operation"] == operation.pk

    # The page shows the running operation and no second "Fail over" (neither form nor plan).
    page = operator.get(reverse("web:failover", args=[flow.pk])).content.decode()
    assert polling in page and reverse("web:failover-plan", args=[flow.pk]) not in page
    second = operator.post(
        reverse("web:failover-execute", args=[flow.pk]), {"confirm": "A->B", "groups": ["orders"]}
    )
    assert f"failover {operation.pk} of this flow is already queued".encode() in second.content
    assert Operation.objects.filter(flow=flow).count() == 1

    # When it has ended, the polled card asks for a reload: the page then shows the flow's new state.
    Operation.objects.filter(pk=operation.pk).update(active=False, outcome="failed", error="boom")
    ended = operator.get(polling + "?polling=1")
    assert ended["HX-Refresh"] == "true" and b"boom" in ended.content


def test_failover_cutover_and_drills_each_have_their_own_page_linked_by_tabs(client_as, flow):
    viewer, operator = client_as("viewer"), client_as("operator")
    pages = {name: reverse(f"web:{name}", args=[flow.pk]) for name in ("failover", "cutover", "drills")}
    for url in pages.values():
        assert viewer.get(url).status_code == 403  # operator pages, as the failover page
        page = operator.get(url).content.decode()
        assert all(f'href="{other}"' in page for other in pages.values())
        assert f'href="{url}" aria-current="page"' in page
    failover = operator.get(pages["failover"]).content.decode()
    assert "cutover-section" not in failover and "drill-section" not in failover
    cutover = operator.get(pages["cutover"]).content.decode()
    assert 'id="cutover-section"' in cutover and f'hx-post="{pages["cutover"]}"' in cutover
    drills = operator.get(pages["drills"]).content.decode()
    assert 'id="drill-section"' in drills and f'hx-post="{pages["drills"]}"' in drills
    # POST to the same URLs still queues (and audits a viewer's refusal)
    refused = viewer.post(pages["drills"], {"drill_groups": "g"})
    assert b"needs the operator role" in refused.content
    queued = operator.post(pages["cutover"], {"confirm": "A->B", "dry_run": "1"})
    assert queued.status_code == 202 and Operation.objects.get(flow=flow).kind == "cutover"
    assert "Last cutover" not in operator.get(pages["failover"]).content.decode()
