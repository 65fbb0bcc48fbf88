"""MM2 import of realistic files (active-active, SASL placeholders, deprecated names) and round-trip export."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditEvent
from controlplane.flows import engine, mm2, selectors, services
from controlplane.flows.models import Cluster, Flow
from replication.mm2file import parse_mm2
from replication.strimzi import parse_strimzi
from tests.strimzi_resource import RESOURCE, SECRETS, V1_RESOURCE

pytestmark = pytest.mark.django_db

ACTIVE_ACTIVE = """
# Three data centres, active-active between dc1 and dc2, dc3 a DR copy of both.
clusters = dc1, dc2, dc3
dc1.bootstrap.servers = dc1-k1.example:9092, dc1-k2.example:9092
dc2.bootstrap.servers = dc2-k1.example:9092
dc3.bootstrap.servers = dc3-k1.example:9093

dc3.security.protocol = SASL_SSL
dc3.sasl.mechanism = SCRAM-SHA-512
dc3.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="${env:DC3_USER}" password="${env:DC3_PASSWORD}";
dc3.producer.linger.ms = 50

replication.factor = 3
topics.blacklist = .*\\.tmp, __.*
sync.group.offsets.enabled = true

dc1->dc2.enabled = true
dc1->dc2.topics = orders.*, payments
dc2->dc1.enabled = true
dc2->dc1.topics = orders.*
dc1->dc3.enabled = true
dc2->dc3.enabled = true
dc2->dc3.groups.blacklist = test-.*
dc2->dc3.tasks.max = 4
dc2->dc3.producer.compression.type = zstd
"""
ENV = {"DC3_USER": "mirror-user", "DC3_PASSWORD": "Pw-ch4nge-me-9"}


def _import(admin_user, text=ACTIVE_ACTIVE, *, dry_run=False, environ=ENV):
    """Imports `text`, the placeholders typed as `environ` (the server allows none of its own)."""
    return mm2.mm2_import(actor=admin_user, text=text, dry_run=dry_run, placeholder_values=environ)


def test_dry_run_reports_changes_and_writes_nothing(admin_user):
    result = _import(admin_user, dry_run=True)
    assert not result.applied
    assert [(c.object_type, c.name, c.change) for c in result.changes] == [
        ("cluster", "dc1", "create"),
        ("cluster", "dc2", "create"),
        ("cluster", "dc3", "create"),
        ("flow", "dc1->dc2", "create"),
        ("flow", "dc2->dc1", "create"),
        ("flow", "dc1->dc3", "create"),
        ("flow", "dc2->dc3", "create"),
    ]
    assert any("topics.blacklist is deprecated" in warning for warning in result.warnings)
    dc3 = next(c for c in result.changes if c.name == "dc3")
    assert dc3.fields["secrets.client.sasl.jaas.config"] == {"before": None, "after": "******"}
    assert ENV["DC3_PASSWORD"] not in json.dumps([c.fields for c in result.changes])
    assert not Cluster.objects.exists() and not Flow.objects.exists() and not AuditEvent.objects.exists()


def test_import_stores_the_engines_reading(admin_user):
    _import(admin_user)
    parsed = parse_mm2(ACTIVE_ACTIVE, environ=ENV).config
    stored_flows = {flow.name: engine.flow_to_config(flow) for flow in selectors.flow_list()}
    assert stored_flows == {flow.name: flow for flow in parsed.flows}
    dc3 = Cluster.objects.get(alias="dc3")
    assert engine.cluster_to_config(dc3) == parsed.cluster("dc3")
    assert dc3.security_protocol == "SASL_SSL" and dc3.client_properties["producer"] == {"linger.ms": "50"}
    assert ENV["DC3_PASSWORD"] not in dc3.secrets_encrypted
    assert AuditEvent.objects.filter(action="import").count() == 7
    assert ENV["DC3_PASSWORD"] not in json.dumps(list(AuditEvent.objects.values("before", "after", "detail")))


def test_reimport_is_unchanged_and_a_change_is_a_diff(admin_user):
    _import(admin_user)
    assert {c.change for c in _import(admin_user, dry_run=True).changes} == {"unchanged"}
    changed = ACTIVE_ACTIVE.replace("dc2->dc3.tasks.max = 4", "dc2->dc3.tasks.max = 8")
    result = _import(admin_user, changed, dry_run=True)
    updates = [c for c in result.changes if c.change == "update"]
    assert [(c.name, c.fields) for c in updates] == [("dc2->dc3", {"tasks_max": {"before": 4, "after": 8}})]
    new_password = _import(admin_user, environ=ENV | {"DC3_PASSWORD": "other"}, dry_run=True)
    assert [c.name for c in new_password.changes if c.change == "update"] == ["dc3"]


def test_export_round_trips_through_the_engine(admin_user):
    _import(admin_user)
    exported = selectors.mm2_export()
    assert "DC3_SASL_JAAS_CONFIG" in exported and ENV["DC3_PASSWORD"] not in exported
    reread = parse_mm2(
        exported,
        environ={
            "DC3_SASL_JAAS_CONFIG": engine.cluster_to_config(Cluster.objects.get(alias="dc3")).client[
                "sasl.jaas.config"
            ]
        },
    ).config
    original = parse_mm2(ACTIVE_ACTIVE, environ=ENV).config
    assert reread.clusters == original.clusters
    assert {flow.name: flow for flow in reread.flows} == {flow.name: flow for flow in original.flows}
    # Importing the export (secrets from the environment) changes nothing.
    environ = {"DC3_SASL_JAAS_CONFIG": reread.cluster("dc3").client["sasl.jaas.config"]}
    assert {c.change for c in _import(admin_user, exported, dry_run=True, environ=environ).changes} == {
        "unchanged"
    }


def test_file_errors_name_line_property_and_fix(admin_user):
    broken = "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.topics = *.orders\n"
    with pytest.raises(ServiceValidationError) as caught:
        _import(admin_user, broken)
    detail = caught.value.details[0]
    assert detail["line"] == 4 and detail["property"] == "A->B.topics" and "did you mean" in detail["fix"]
    with pytest.raises(ServiceValidationError) as caught:
        _import(admin_user, ACTIVE_ACTIVE, environ={})
    assert "DC3_USER" in caught.value.errors["text"][0]
    assert not Cluster.objects.exists()
    assert AuditEvent.objects.filter(action="import", outcome="refused").count() == 2


def test_import_refuses_a_loop_with_stored_flows(admin_user, two_clusters):
    a, b = two_clusters
    services.flow_create(
        actor=admin_user,
        source=a,
        target=b,
        enabled=True,
        replication_policy_class="IdentityReplicationPolicy",
    )
    text = "clusters = A, B\nA.bootstrap.servers = a.example:9092\nB.bootstrap.servers = b.example:9092\n"
    text += "B->A.enabled = true\nB->A.replication.policy.class = IdentityReplicationPolicy\n"
    with pytest.raises(ServiceValidationError) as caught:
        _import(admin_user, text)
    assert "replication loop" in caught.value.errors["non_field_errors"][0]
    assert Flow.objects.count() == 1


def test_api_import_and_export(admin_client, monkeypatch, settings):
    monkeypatch.setenv("DC3_USER", ENV["DC3_USER"])
    monkeypatch.setenv("DC3_PASSWORD", ENV["DC3_PASSWORD"])
    settings.MIRRORPLANE_IMPORT_ENV_ALLOWED = ["DC3_USER"]  # the password is typed
    dry = admin_client.post(
        "/api/v1/mm2/import/",
        {"text": ACTIVE_ACTIVE, "dry_run": True, "placeholder_values": {"DC3_PASSWORD": "typed-pw"}},
        format="json",
    )
    assert dry.status_code == 200 and dry.json()["applied"] is False and len(dry.json()["changes"]) == 7
    assert not Cluster.objects.exists()
    done = admin_client.post(
        "/api/v1/mm2/import/",
        {"text": ACTIVE_ACTIVE, "placeholder_values": {"DC3_PASSWORD": "typed-pw"}},
        format="json",
    )
    assert done.status_code == 200 and done.json()["applied"] is True
    export = admin_client.get("/api/v1/mm2/export/")
    assert export["Content-Type"].startswith("text/plain")
    assert "dc2->dc3.tasks.max = 4" in export.content.decode()
    bad = admin_client.post("/api/v1/mm2/import/", {"text": "clusters = A\n"}, format="json")
    assert bad.status_code == 400 and bad.json()["details"][0]["property"] == "A.bootstrap.servers"


def test_management_commands(admin_user, tmp_path: Path, monkeypatch, settings):
    monkeypatch.setenv("DC3_USER", ENV["DC3_USER"])
    monkeypatch.setenv("DC3_PASSWORD", ENV["DC3_PASSWORD"])
    settings.MIRRORPLANE_IMPORT_ENV_ALLOWED = ["DC3_*"]
    path = tmp_path / "mm2.properties"
    path.write_text(ACTIVE_ACTIVE)
    out = io.StringIO()
    call_command("import_mm2", str(path), "--dry-run", stdout=out, stderr=io.StringIO())
    assert "create    flow dc2->dc3" in out.getvalue() and not Flow.objects.exists()
    call_command("import_mm2", str(path), stdout=io.StringIO(), stderr=io.StringIO())
    assert Flow.objects.count() == 4
    out = io.StringIO()
    call_command("export_mm2", stdout=out)
    assert out.getvalue() == selectors.mm2_export()
    path.write_text("clusters = A\n")
    with pytest.raises(CommandError, match="A.bootstrap.servers"):
        call_command("import_mm2", str(path), stdout=io.StringIO())
    token = io.StringIO()
    call_command("create_admin", "root", stdout=token)
    assert len(token.getvalue().strip()) == 43  # 256 random bits, URL-safe
    key = io.StringIO()
    call_command("rotate_secrets_key", "--generate", stdout=key, stderr=io.StringIO())
    assert len(key.getvalue().strip()) == 44


def test_import_refuses_an_invalid_enumerated_client_value_and_reports_worker_properties(admin_user):
    text = "clusters = A, B\nA.bootstrap.servers = a.example:9092\nB.bootstrap.servers = b.example:9092\n"
    text += "A->B.enabled = true\nB.status.storage.replication.factor = 1\nB.key.converter = x.Converter\n"
    with pytest.raises(ServiceValidationError) as caught:
        _import(admin_user, text + "A.security.protocol = abc\n")
    message = caught.value.errors["text"][0]
    assert "A.security.protocol: 'abc' is not a valid security.protocol" in message
    assert "PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL" in message
    assert not Cluster.objects.exists()

    result = _import(admin_user, text)
    assert sum("not applicable" in warning for warning in result.warnings) == 2
    assert Cluster.objects.get(alias="B").client_properties["client"] == {}


def test_cluster_api_refuses_worker_properties_and_bad_enumerated_values(admin_user):
    with pytest.raises(ServiceValidationError) as caught:
        services.cluster_create(
            actor=admin_user,
            alias="C",
            bootstrap_servers="c.example:9092",
            client_properties={"client": {"offset.storage.topic": "x"}, "producer": {"acks": "most"}},
        )
    messages = caught.value.errors["client_properties"]
    assert any("client.offset.storage.topic: a Kafka Connect worker property" in m for m in messages)
    assert any(
        "producer.acks: 'most' is not a valid acks; set acks to one of all, -1, 0, 1" in m for m in messages
    )


def test_api_imports_a_strimzi_resource_like_a_file_and_exports_it_back(admin_client, monkeypatch, settings):
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    settings.MIRRORPLANE_IMPORT_ENV_ALLOWED = list(SECRETS)
    dry = admin_client.post("/api/v1/mm2/import/", {"text": RESOURCE, "dry_run": True}, format="json")
    assert dry.status_code == 200 and dry.json()["applied"] is False
    assert [(c["object_type"], c["name"], c["change"]) for c in dry.json()["changes"]] == [
        ("cluster", "cluster-a", "create"),
        ("cluster", "cluster-b", "create"),
        ("flow", "cluster-a->cluster-b", "create"),
    ]
    flow_fields = dry.json()["changes"][2]["fields"]
    assert flow_fields["tasks_max"] == {"before": None, "after": 4}
    assert flow_fields["emit_heartbeats_enabled"]["after"] is False  # no heartbeatConnector
    assert any("spec: connectCluster, replicas, version" in warning for warning in dry.json()["warnings"])
    assert not Cluster.objects.exists()
    v1 = admin_client.post("/api/v1/mm2/import/", {"text": V1_RESOURCE, "dry_run": True}, format="json")
    assert v1.status_code == 200
    assert sorted(v1.json()["changes"], key=str) == sorted(dry.json()["changes"], key=str)  # v1's layout
    mixed = V1_RESOURCE.replace("  target:\n", "  connectCluster: cluster-b\n  target:\n")
    refused = admin_client.post("/api/v1/mm2/import/", {"text": mixed, "dry_run": True}, format="json")
    assert refused.status_code == 400 and refused.json()["details"][0]["property"] == "spec.connectCluster"
    assert not Cluster.objects.exists()

    oauth = RESOURCE.replace("type: scram-sha-512", "type: oauth")
    bad = admin_client.post("/api/v1/mm2/import/", {"text": oauth, "dry_run": True}, format="json")
    assert bad.status_code == 400
    assert bad.json()["details"][0]["property"] == "spec.clusters[0].authentication.type"
    assert bad.json()["details"][0]["line"] == 17

    done = admin_client.post("/api/v1/mm2/import/", {"text": RESOURCE}, format="json")
    assert done.status_code == 200 and done.json()["applied"] is True
    flow = Flow.objects.get(source__alias="cluster-a", target__alias="cluster-b")
    assert (flow.enabled, flow.tasks_max, flow.topics) == (True, 4, ["orders.*", "payments"])

    export = admin_client.get("/api/v1/mm2/export/?format=strimzi")
    assert export.status_code == 200 and export["Content-Type"].startswith("application/yaml")
    text = export.content.decode()
    assert "kind: KafkaMirrorMaker2" in text
    assert all(value not in text for value in SECRETS.values())
    secrets = {
        "MIRRORPLANE_CLUSTER_A_PASSWORD": SECRETS["MM2_USER_PASSWORD"],
        "MIRRORPLANE_CLUSTER_A_CA_CRT": SECRETS["CLUSTER_A_CLUSTER_CA_CERT_CRT"],
        "MIRRORPLANE_CLUSTER_B_CA_CRT": SECRETS["CLUSTER_B_CLUSTER_CA_CERT_CA_CRT"],
    }
    assert (
        parse_strimzi(text, environ=secrets).config.flows
        == parse_strimzi(RESOURCE, environ=SECRETS).config.flows
    )
    again = admin_client.post(
        "/api/v1/mm2/import/",
        {"text": text, "dry_run": True, "placeholder_values": secrets},
        format="json",
    )
    assert {c["change"] for c in again.json()["changes"]} == {"unchanged"}

    out = io.StringIO()
    call_command("export_mm2", "--format", "strimzi", stdout=out)
    assert out.getvalue() == text


SEEDS_UPPER = """
clusters = DC1, DC2
DC1.bootstrap.servers = DC1-K1.example:9092
DC2.bootstrap.servers = dc2-k1.example:9092
DC1->DC2.enabled = true
DC2->DC1.enabled = true
"""


def test_an_import_naming_known_clusters_by_other_aliases_is_refused_unless_forced(admin_user, admin_client):
    """Issue 28: the seeds' DC1/DC2 file on the demo's dc1/dc2 (same brokers) made duplicate clusters, and
    `.*` then copied copies back (DC1.dc2.inventory): loop detection compares aliases."""
    _import(admin_user)  # dc1, dc2, dc3 and their flows
    for dry_run in (True, False):  # the dry run says so too
        with pytest.raises(ServiceValidationError) as caught:
            _import(admin_user, SEEDS_UPPER, dry_run=dry_run)
        errors = caught.value.errors
        assert set(errors) == {"clusters.DC1.bootstrap_servers", "clusters.DC2.bootstrap_servers"}, errors
        assert (
            "DC1 is cluster dc1 under another alias (both list dc1-k1.example:9092)"
            in (errors["clusters.DC1.bootstrap_servers"][0])
        )
    assert not Cluster.objects.filter(alias__in=["DC1", "DC2"]).exists()
    refused = admin_client.post("/api/v1/mm2/import/", {"text": SEEDS_UPPER, "dry_run": True}, format="json")
    assert refused.status_code == 400 and "clusters.DC2.bootstrap_servers" in refused.json()
    forced = admin_client.post("/api/v1/mm2/import/", {"text": SEEDS_UPPER, "force": True}, format="json")
    assert forced.status_code == 200 and forced.json()["applied"] is True  # the admin insisted
    assert Cluster.objects.filter(alias__in=["DC1", "DC2"]).count() == 2


def test_one_file_naming_a_cluster_twice_is_refused():
    errors = mm2.same_cluster_errors(
        {"a": "k1:9092,k2:9092", "b": "K2:9092", "c": "k3:9092"}, {"c": "k3:9092"}
    )
    assert list(errors) == ["clusters.b.bootstrap_servers"]  # c is itself, stored: an update
    assert (
        "b is cluster a under another alias (both list k2:9092)" in errors["clusters.b.bootstrap_servers"][0]
    )
