"""Small things that cost trust: the "not allowed" page, the favicon, the demo banner, the audit diff,
MM2 import placeholders."""

from __future__ import annotations

import re
import shlex

import pytest
from django.core.management import call_command
from django.http import HttpRequest
from django.urls import reverse

pytestmark = pytest.mark.django_db


def test_not_allowed_page_keeps_the_navigation_and_names_a_real_command(client_as, users):
    viewer = client_as("viewer")
    response = viewer.get(reverse("web:flow-create"))

    assert response.status_code == 403
    page = response.content.decode()
    assert 'aria-label="Main"' in page and reverse("web:flows") in page and "Log out" in page
    command = re.search(r"<code>python manage.py (.+?)</code>", page).group(1)
    assert command == "create_admin viewer --role admin"
    # The command exists and does what the page says: afterwards the same page opens.
    name, *args = shlex.split(command)
    call_command(name, *args)
    assert viewer.get(reverse("web:flow-create")).status_code == 200


def test_not_allowed_page_for_a_user_without_a_role_still_has_the_navigation(client_as):
    page = client_as("norole").get(reverse("web:flows")).content.decode()
    assert 'aria-label="Main"' in page and "no role" in page and "Log out" in page


def test_a_new_flow_defaults_to_enabled_and_the_preview_says_saving_starts_it(client_as, memory_clusters):
    from controlplane.flows import services
    from controlplane.flows.models import Flow

    memory_clusters.cluster("memory-a:9092").create("orders", 1)  # what the preview lists
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="memory-a:9092")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="memory-b:9092")
    admin = client_as("admin")

    form = admin.get(reverse("web:flow-create")).context["form"]
    assert form["enabled"].value() is True
    assert 'name="enabled"' in str(form["enabled"]) and "checked" in str(form["enabled"])

    fields = {
        "source": a.pk,
        "target": b.pk,
        "topics": ".*",
        "replication_policy_class": "DefaultReplicationPolicy",
    }
    fields["replication_policy_separator"] = "."
    enabled = admin.post(reverse("web:flow-preview"), fields | {"enabled": "on"}).content.decode()
    assert "replication of these topics starts when you create the flow" in enabled and "A.orders" in enabled
    disabled = admin.post(reverse("web:flow-preview"), fields).content.decode()
    assert "nothing replicates until you enable it" in disabled
    assert not Flow.objects.exists()  # a preview stores nothing


def test_the_api_keeps_mm2s_default_a_new_flow_is_disabled(client_as, flow):
    from controlplane.flows import services

    services.cluster_create(actor=None, alias="C", bootstrap_servers="c.invalid:9092")
    response = client_as("admin").post(
        "/api/v1/flows/",
        {"source": "A", "target": "C", "topics": ["orders.*"]},
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["enabled"] is False


def test_favicon_is_served_and_linked_from_every_page(client_as, flow):
    response = client_as("anonymous").get("/favicon.ico", follow=True)
    assert response.status_code == 200
    assert response.redirect_chain and response.redirect_chain[-1][0].endswith("favicon.svg")
    assert response["Content-Type"].startswith("image/svg+xml")
    body = b"".join(response.streaming_content) if response.streaming else response.content
    assert body.startswith(b"<svg")
    page = client_as("viewer").get(reverse("web:overview")).content.decode()
    assert '<link rel="icon" href="/static/favicon.svg" type="image/svg+xml">' in page
    login = client_as("anonymous").get(reverse("web:login")).content.decode()
    assert 'rel="icon"' in login


def test_demo_banner_links_a_page_the_demo_admin_sees_and_a_metrics_scrape_that_answers(client, settings):
    import argparse
    from urllib.parse import urlsplit

    from workers.demo import banner

    args = argparse.Namespace(
        url="http://127.0.0.1:8000/", login="demo:demo-password", dc1="d1:1", dc2="d2:2", rate=10.0
    )
    text = banner(args=args, flow_names=["dc1->dc2"], metrics_token="demo-scrape-token")
    assert "/admin/" not in text
    metrics_line = next(line for line in text.splitlines() if line.strip().startswith("metrics:"))
    header = re.search(r"-H '([^:]+): ([^']+)' (\S+)", metrics_line)
    settings.METRICS_BEARER_TOKEN, settings.METRICS_OPEN = "demo-scrape-token", False
    scrape = client.get(urlsplit(header.group(3)).path, headers={header.group(1): header.group(2)})
    assert scrape.status_code == 200 and b"mirrorplane_" in scrape.content
    web_line = next(line for line in text.splitlines() if line.strip().startswith("web:"))
    url = web_line.split()[1]
    call_command("create_admin", "demo", "--password", "demo-password")  # as `make demo` does
    assert client.login(request=HttpRequest(), username="demo", password="demo-password")
    response = client.get(urlsplit(url).path)
    assert response.status_code == 200 and b"Flows" in response.content


def test_audit_log_shows_changed_fields_before_and_after_with_secrets_masked(client_as, users, flow):
    from controlplane.flows import services

    services.flow_update(actor=users["admin"], flow=flow, topics=["orders.*"], tasks_max=3)
    services.cluster_update(
        actor=users["admin"],
        cluster=flow.source,
        changes={"bootstrap_servers": "a2.invalid:9092"},
        secret_changes={"client": {"sasl.password": "hunter2-very-secret"}},
    )

    page = client_as("viewer").get(reverse("web:audit")).content.decode()
    assert "hunter2-very-secret" not in page
    assert "{&#x27;" not in page and "{'" not in page  # no Python dict dump
    updates = " ".join(row for row in re.findall(r"<tr>.*?</tr>", page, re.S) if "<td>update</td>" in row)
    rows = re.findall(r"<li><code>([^<]+)</code>: (?:<del>([^<]*)</del> → )?<ins>([^<]*)</ins></li>", updates)
    assert ("topics", "[&quot;.*&quot;]", "[&quot;orders.*&quot;]") in rows
    assert ("tasks_max", "1", "3") in rows
    assert ("bootstrap_servers", "a.invalid:9092", "a2.invalid:9092") in rows
    assert ("secrets.client.sasl.password", "", "******") in rows  # added: only the (masked) value
    assert len(rows) == 4, rows  # unchanged fields are not listed


def test_audit_changes_of_a_create_a_delete_and_nested_settings():
    from controlplane.web.summaries import ABSENT, FieldChange, audit_changes

    assert audit_changes(None, {"alias": "A", "secrets": {}}) == [FieldChange("alias", ABSENT, "A")]
    assert audit_changes({"alias": "A"}, None) == [FieldChange("alias", "A", ABSENT)]
    assert audit_changes(
        {"client_properties": {"linger.ms": "5"}, "sasl_mechanism": None, "enabled": False},
        {"client_properties": {"linger.ms": "20"}, "sasl_mechanism": "PLAIN", "enabled": False},
    ) == [
        FieldChange("client_properties.linger.ms", "5", "20"),
        FieldChange("sasl_mechanism", "null", "PLAIN"),
    ]


README = __import__("pathlib").Path(__file__).resolve().parents[2] / "README.md"
SECRET = "s3cret-typed-in-the-browser"


def _readme_mm2_example() -> str:
    text = README.read_text(encoding="utf-8")
    return re.search(r"A minimal `mm2.properties`:\s*```properties\n(.*?)```", text, re.S).group(1)


def test_mm2_import_asks_for_a_missing_placeholder_write_only_and_imports_the_readme_example(
    client_as, monkeypatch
):
    from controlplane.core.models import AuditEvent
    from controlplane.flows import engine
    from controlplane.flows.models import Cluster

    monkeypatch.delenv("B_PASSWORD", raising=False)
    example = _readme_mm2_example()
    assert "${env:B_PASSWORD}" in example
    admin = client_as("admin")
    url = reverse("web:mm2-import")

    asked = admin.post(url, {"text": example, "dry_run": "1"})
    page = asked.content.decode()
    assert (
        asked.status_code == 200
        and "<code>${env:B_PASSWORD}</code>, which the server does not provide" in page
    )
    assert 'type="password" name="env_B_PASSWORD"' in page
    assert not Cluster.objects.exists()

    dry = admin.post(url, {"text": example, "dry_run": "1", "env_B_PASSWORD": SECRET})
    assert "Dry run: nothing changed yet" in dry.content.decode()
    assert SECRET not in dry.content.decode()
    assert not Cluster.objects.exists()

    applied = admin.post(url, {"text": example, "apply": "1", "env_B_PASSWORD": SECRET})
    assert applied.status_code == 200 and SECRET not in applied.content.decode()
    assert sorted(Cluster.objects.values_list("alias", flat=True)) == ["A", "B"]
    b_secrets = engine.cluster_secrets(Cluster.objects.get(alias="B"))
    assert f'password="{SECRET}";' in b_secrets["client"]["sasl.jaas.config"]  # stored encrypted
    for event in AuditEvent.objects.all():
        assert SECRET not in f"{event.before} {event.after} {event.detail} {event.object_repr}"
    assert SECRET not in admin.get(reverse("web:audit")).content.decode()


def test_missing_placeholders_lists_variables_without_a_default_that_the_environment_lacks():
    from replication.mm2file import missing_placeholders

    text = "a = ${env:ONE}\nb = x${env:TWO:-d}${env:THREE}\nc = ${env:ONE}\nd = ${file:/x:y}\n"
    assert missing_placeholders(text, environ={"THREE": "3"}) == ["ONE"]
    assert missing_placeholders(text, environ={}) == ["ONE", "THREE"]


def test_make_demo_again_keeps_a_flow_the_workers_faulted_before_kafka_answered(db):
    """`make demo KAFKA=apache` a second time: the workers start before the brokers answer and fault the
    stored flows; the setup brought them up to date and then asked to resume them, which a faulted flow
    refuses (the demo stopped with IllegalTransition). A faulted flow recovers by itself."""
    from controlplane.flows import lifecycle
    from controlplane.flows.models import FlowState
    from workers.demo import store_demo_flows

    servers = {"dc1": "127.0.0.1:19092", "dc2": "127.0.0.1:19093"}
    flows = store_demo_flows(servers=servers)
    assert {flow.exactly_once_transactions for flow in flows} == {False}  # DEMO_KAFKA unset: embedded
    assert lifecycle.transition(flow=flows[0], name="fault")
    lifecycle.transition(flow=flows[1], name="pause")
    again = {flow.name: flow for flow in store_demo_flows(servers=servers)}
    assert again[flows[0].name].state == FlowState.FAULTED
    assert again[flows[1].name].state == FlowState.ACTIVE  # a paused demo flow is resumed
