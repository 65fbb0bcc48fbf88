"""Services on PostgreSQL: the engine's rules at the field, loops refused, nothing half-saved, audit."""

from __future__ import annotations

import json
import logging

import pytest
from django.test import override_settings

from controlplane import core
from controlplane.core import crypto
from controlplane.core.errors import NON_FIELD, ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditEvent, AuditOutcome
from controlplane.flows import engine, selectors, services
from controlplane.flows.models import Cluster, Flow, FlowState
from replication.config import FLOW_PROPERTIES, IDENTITY_REPLICATION_POLICY, FlowConfig

pytestmark = pytest.mark.django_db

PASSWORD = "s3cr3t-Pa55word-never-shown"


def test_every_flow_config_field_is_a_flow_column():
    columns = {field.name for field in Flow._meta.get_fields()}
    missing = set(FlowConfig.__dataclass_fields__) - {"source", "target"} - columns
    assert not missing


def test_flow_defaults_are_mm2_defaults(admin_user, two_clusters):
    a, b = two_clusters
    flow = services.flow_create(actor=admin_user, source=a, target=b)
    assert engine.flow_to_config(flow) == FlowConfig(source="A", target="B")
    assert flow.state == FlowState.DISABLED


def test_cluster_secrets_are_encrypted_at_rest_and_masked_in_audit(admin_user, caplog):
    caplog.set_level(logging.DEBUG)
    cluster = services.cluster_create(
        actor=admin_user,
        alias="secure",
        bootstrap_servers="k1.example:9093,k2.example:9093",
        security_protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        secrets={"client": {"sasl.username": "mirror", "sasl.password": PASSWORD}},
    )
    stored = Cluster.objects.get(pk=cluster.pk)
    assert PASSWORD not in stored.secrets_encrypted
    assert engine.cluster_to_config(stored).client["sasl.password"] == PASSWORD
    services.cluster_update(
        actor=admin_user, cluster=stored, secret_changes={"client": {"sasl.password": "new-" + PASSWORD}}
    )
    audit = json.dumps(list(AuditEvent.objects.values()), default=str)
    assert PASSWORD not in audit and "mirror" not in audit
    assert "client.sasl.password" in audit
    assert AuditEvent.objects.filter(action="update", detail__contains="client.sasl.password").exists()
    assert PASSWORD not in caplog.text


def test_secret_removed_with_empty_value(admin_user):
    cluster = services.cluster_create(
        actor=admin_user,
        alias="C",
        bootstrap_servers="c:9092",
        secrets={"client": {"sasl.password": PASSWORD}},
    )
    services.cluster_update(
        actor=admin_user, cluster=cluster, secret_changes={"client": {"sasl.password": ""}}
    )
    assert engine.cluster_secrets(Cluster.objects.get(pk=cluster.pk))["client"] == {}


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"alias": "bad.alias"}, "alias"),
        ({"alias": "a->b"}, "alias"),
        ({"bootstrap_servers": "no-port"}, "bootstrap_servers"),
        ({"client_properties": {"client": {"sasl.password": "x"}}}, "client_properties"),
        ({"client_properties": {"nonsense": {}}}, "client_properties"),
        ({"client_properties": {"client": {"security.protocol": "SSL"}}}, "client_properties"),
    ],
)
def test_cluster_field_errors(admin_user, changes, field):
    with pytest.raises(ServiceValidationError) as caught:
        services.cluster_create(actor=admin_user, **({"alias": "ok", "bootstrap_servers": "h:1"} | changes))
    assert field in caught.value.errors
    assert not Cluster.objects.exists()
    assert AuditEvent.objects.get().outcome == AuditOutcome.REFUSED


def test_regex_error_is_at_its_field_with_reason_and_fix(admin_user, two_clusters):
    a, b = two_clusters
    with pytest.raises(ServiceValidationError) as caught:
        services.flow_create(
            actor=admin_user, source=a, target=b, topics=["orders", "*.audit"], groups_exclude=["(?P<x>a)"]
        )
    errors = caught.value.errors
    assert set(errors) == {"topics", "groups_exclude"}
    assert "*.audit" in errors["topics"][0] and "did you mean" in errors["topics"][0]
    assert "Fix:" in errors["groups_exclude"][0]
    assert not Flow.objects.exists()


def test_int_ranges_come_from_the_engine(admin_user, two_clusters):
    a, b = two_clusters
    with pytest.raises(ServiceValidationError) as caught:
        services.flow_create(
            actor=admin_user, source=a, target=b, emit_checkpoints_interval_seconds=0, tasks_max=0
        )
    assert set(caught.value.errors) == {"emit_checkpoints_interval_seconds", "tasks_max"}


def test_separator_inside_an_alias_is_refused(admin_user):
    a = services.cluster_create(actor=admin_user, alias="us_east", bootstrap_servers="a:9092")
    b = services.cluster_create(actor=admin_user, alias="eu", bootstrap_servers="b:9092")
    with pytest.raises(ServiceValidationError) as caught:
        services.flow_create(actor=admin_user, source=a, target=b, replication_policy_separator="_")
    assert "replication_policy_separator" in caught.value.errors


def test_source_must_differ_from_target_and_pairs_are_unique(admin_user, two_clusters):
    a, b = two_clusters
    with pytest.raises(ServiceValidationError) as caught:
        services.flow_create(actor=admin_user, source=a, target=a)
    assert "target" in caught.value.errors
    services.flow_create(actor=admin_user, source=a, target=b)
    with pytest.raises(ServiceValidationError) as caught:
        services.flow_create(actor=admin_user, source=a, target=b)
    assert "already exists" in caught.value.errors[NON_FIELD][0]
    assert Flow.objects.count() == 1


def test_identity_active_active_loop_refused_with_explanation(admin_user, two_clusters):
    a, b = two_clusters
    a_to_b = services.flow_create(
        actor=admin_user,
        source=a,
        target=b,
        enabled=True,
        replication_policy_class=IDENTITY_REPLICATION_POLICY,
    )
    with pytest.raises(ServiceValidationError) as caught:
        services.flow_create(
            actor=admin_user,
            source=b,
            target=a,
            enabled=True,
            replication_policy_class=IDENTITY_REPLICATION_POLICY,
        )
    message = caught.value.errors[NON_FIELD][0]
    assert "A->B->A" in message and "provenance.header.enabled" in message
    assert Flow.objects.count() == 1
    refused = AuditEvent.objects.get(outcome=AuditOutcome.REFUSED)
    assert "loop" in refused.detail
    # The fix the explanation names (headers on every flow of the cycle) is accepted.
    services.flow_update(actor=admin_user, flow=a_to_b, provenance_header_enabled=True)
    services.flow_create(
        actor=admin_user,
        source=b,
        target=a,
        enabled=True,
        replication_policy_class=IDENTITY_REPLICATION_POLICY,
        provenance_header_enabled=True,
    )
    with pytest.raises(ServiceValidationError):  # without the header on B->A it loops again
        services.flow_update(
            actor=admin_user, flow=Flow.objects.get(source=b), provenance_header_enabled=False
        )


def test_default_policy_active_active_is_allowed(admin_user, two_clusters):
    a, b = two_clusters
    services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    services.flow_create(actor=admin_user, source=b, target=a, enabled=True)
    assert Flow.objects.filter(state=FlowState.ACTIVE).count() == 2


def test_update_validation_failure_changes_nothing(admin_user, two_clusters):
    a, b = two_clusters
    flow = services.flow_create(actor=admin_user, source=a, target=b, topics=["orders"])
    with pytest.raises(ServiceValidationError):
        services.flow_update(actor=admin_user, flow=flow, topics=["payments"], tasks_max=-3)
    assert Flow.objects.get(pk=flow.pk).topics == ["orders"]


def test_pause_resume_idempotent_and_audited(admin_user, two_clusters):
    a, b = two_clusters
    flow = services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    flow = services.flow_pause(actor=admin_user, flow=flow)
    flow = services.flow_pause(actor=admin_user, flow=flow)
    assert flow.state == FlowState.PAUSED
    flow = services.flow_resume(actor=admin_user, flow=flow)
    assert flow.state == FlowState.ACTIVE
    actions = list(
        AuditEvent.objects.filter(object_type="flow").order_by("id").values_list("action", flat=True)
    )
    assert actions == ["create", "pause", "resume"]
    pause = AuditEvent.objects.get(action="pause")
    assert pause.before == {"state": "active"} and pause.after == {"state": "paused"}
    assert pause.actor_name == "admin"


def test_cluster_in_use_cannot_be_deleted(admin_user, two_clusters):
    a, b = two_clusters
    services.flow_create(actor=admin_user, source=a, target=b)
    with pytest.raises(ServiceConflict, match="A->B"):
        services.cluster_delete(actor=admin_user, cluster=a)
    assert Cluster.objects.filter(pk=a.pk).exists()


def test_secrets_key_rotation(admin_user):
    cluster = services.cluster_create(
        actor=admin_user,
        alias="A",
        bootstrap_servers="a:9092",
        secrets={"client": {"sasl.password": PASSWORD}},
    )
    old_token = Cluster.objects.get(pk=cluster.pk).secrets_encrypted
    new_key = crypto.generate_key()
    assert core.secrets_key_rotate(actor=admin_user, new_key=new_key) == {
        "clusters": 1,
        "notification channels": 0,
    }
    rotated = Cluster.objects.get(pk=cluster.pk)
    assert rotated.secrets_encrypted != old_token
    with override_settings(MIRRORPLANE_SECRETS_KEYS=[new_key]):
        assert engine.cluster_secrets(rotated)["client"]["sasl.password"] == PASSWORD
    with (
        override_settings(MIRRORPLANE_SECRETS_KEYS=[crypto.generate_key()]),
        pytest.raises(crypto.SecretsKeyError),
    ):
        engine.cluster_secrets(rotated)
    event = AuditEvent.objects.get(action="rotate_secrets_key")
    assert new_key not in json.dumps([event.detail, event.before, event.after])


def test_flow_topics_classifies_with_the_engine(admin_user, two_clusters):
    a, b = two_clusters
    flow = services.flow_create(actor=admin_user, source=a, target=b, topics_exclude=["secret-.*"])
    live = {"orders": 3, "B.orders": 1, "__consumer_offsets": 50, "secret-keys": 1, "heartbeats": 1}
    topics = {t.decision.topic: t for t in selectors.flow_topics(flow=flow, list_topics=lambda cluster: live)}
    assert topics["orders"].decision.remote_topic == "A.orders" and topics["orders"].partitions == 3
    assert topics["B.orders"].decision.reason == "cycle"
    assert topics["__consumer_offsets"].decision.reason == "internal"
    assert topics["secret-keys"].decision.reason == "filter"
    assert topics["heartbeats"].decision.replicate


def test_model_columns_round_trip_every_flow_property(admin_user, two_clusters):
    a, b = two_clusters
    changed = {
        prop.field: (not prop.default) if prop.kind is bool else prop.default
        for prop in FLOW_PROPERTIES
        if prop.kind is bool and prop.field != "enabled"
    }
    flow = services.flow_create(
        actor=admin_user, source=a, target=b, tasks_max=4, offset_lag_max=0, **changed
    )
    config = engine.flow_to_config(Flow.objects.get(pk=flow.pk))
    assert config.tasks_max == 4 and config.offset_lag_max == 0
    assert all(getattr(config, name) == value for name, value in changed.items())
