"""Strimzi KafkaMirrorMaker2 resources read as the mm2.properties they mean, and written back."""

from __future__ import annotations

import pytest

from replication.config import ClusterConfig, FlowConfig, Mm2Config
from replication.mm2file import Mm2FileError, parse_mm2
from replication.strimzi import (
    is_strimzi_resource,
    missing_placeholders,
    parse_mirrormaker,
    parse_strimzi,
    write_strimzi,
)
from tests.strimzi_resource import RESOURCE, SECRETS, V1_RESOURCE


def _errors(text: str, environ=SECRETS) -> list[Mm2FileError]:
    with pytest.raises(Mm2FileError) as caught:
        parse_strimzi(text, source_name="kmm2.yaml", environ=environ)
    return list(caught.value.errors)


def test_a_resource_reads_as_the_clusters_and_flows_strimzi_runs():
    parsed = parse_strimzi(RESOURCE, source_name="kmm2.yaml", environ=SECRETS)
    config = parsed.config
    assert config.cluster("cluster-a") == ClusterConfig(
        alias="cluster-a",
        bootstrap_servers="cluster-a-kafka-bootstrap:9093",
        client={
            "security.protocol": "SASL_SSL",
            "ssl.ca.pem": "-----BEGIN CERTIFICATE-----A",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
            'username="mm2-user" password="p"w";',
        },
    )
    assert config.cluster("cluster-b").client == {
        "security.protocol": "SSL",
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----B",
    }
    assert config.cluster("cluster-b").consumer == {"fetch.max.bytes": "1048576"}
    (flow,) = config.flows
    assert flow == FlowConfig(
        source="cluster-a",
        target="cluster-b",
        enabled=True,
        topics=("orders.*", "payments"),
        groups=(".*",),
        groups_exclude=("test-.*",),
        tasks_max=4,
        replication_factor=3,
        sync_topic_acls_enabled=False,
        replication_policy_separator="_",
        sync_group_offsets_enabled=True,
        emit_checkpoints_interval_seconds=20,
        emit_heartbeats_enabled=False,  # no heartbeatConnector: Strimzi runs none
        extra={"producer.compression.type": "zstd"},
    )
    assert config.flow_defaults == {"emit_heartbeats_enabled": False}  # pairs without a mirror
    warnings = "\n".join(parsed.warnings)
    assert "line 5: spec: connectCluster, replicas, version: the Connect deployment" in warnings
    assert (
        "line 29: spec.clusters[1].config.config.storage.replication.factor: a Kafka Connect worker"
        in warnings
    )


def test_secrets_are_placeholders_named_after_the_secret_and_key():
    assert missing_placeholders(RESOURCE, environ={"MM2_USER_PASSWORD": "x"}) == [
        "CLUSTER_A_CLUSTER_CA_CERT_CRT",
        "CLUSTER_B_CLUSTER_CA_CERT_CA_CRT",
    ]
    (error,) = _errors(RESOURCE, environ={k: v for k, v in SECRETS.items() if k != "MM2_USER_PASSWORD"})
    assert (error.line, error.property_name) == (16, "spec.clusters[0].authentication")
    assert "MM2_USER_PASSWORD is not set" in error.reason
    assert (
        error.fix
        == "export MM2_USER_PASSWORD with the value of key 'password' of the Kubernetes Secret mm2-user"
    )


def test_which_connectors_are_listed_decides_what_runs():
    mirrors = """
  mirrors:
  - sourceCluster: a
    targetCluster: b
    heartbeatConnector: {}
  - sourceCluster: b
    targetCluster: a
    sourceConnector:
      state: stopped
      config:
        topics: ignored.*
    checkpointConnector:
      config:
        emit.checkpoints.enabled: false
    topicsPattern: kept.*
"""
    parsed = parse_strimzi(_two_clusters(mirrors), environ={})
    heartbeats_only, stopped = parsed.config.flows
    assert (heartbeats_only.enabled, heartbeats_only.emit_heartbeats_enabled) == (False, True)
    assert not heartbeats_only.emit_checkpoints_enabled
    assert (stopped.enabled, stopped.emit_heartbeats_enabled, stopped.emit_checkpoints_enabled) == (
        False,
        False,
        False,
    )
    assert stopped.topics == ("kept.*",)
    assert any(
        "spec.mirrors[1].sourceConnector.config.topics: spec.mirrors[1].topicsPattern is set: 'kept.*'" in w
        for w in parsed.warnings
    )


def _two_clusters(mirrors: str) -> str:
    return (
        "apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker2\nspec:\n  clusters:\n"
        "  - alias: a\n    bootstrapServers: a.example:9092\n"
        "  - alias: b\n    bootstrapServers: b.example:9092\n" + mirrors
    )


def test_every_problem_names_the_field_and_its_line():
    mirrors = """
  - alias: c
    bootstrapServers: c.example:9092
    authentication:
      type: oauth
  mirrors:
  - sourceCluster: a
    targetCluster: d
  - sourceCluster: a
    targetCluster: b
    sourceConnector:
      config:
        replication.policy.separator: "_"
    checkpointConnector:
      config:
        replication.policy.separator: "-"
"""
    errors = {error.property_name: error for error in _errors(_two_clusters(mirrors))}
    assert set(errors) == {
        "spec.clusters[2].authentication.type",
        "spec.mirrors[0].targetCluster",
        "spec.mirrors[1].checkpointConnector.config.replication.policy.separator",
    }
    assert errors["spec.clusters[2].authentication.type"].line == 13
    assert "'oauth' has no equivalent" in errors["spec.clusters[2].authentication.type"].reason
    assert (
        errors["spec.mirrors[0].targetCluster"].reason == "'d' is not the alias of a cluster in spec.clusters"
    )
    conflict = errors["spec.mirrors[1].checkpointConnector.config.replication.policy.separator"]
    assert "spec.mirrors[1].sourceConnector.config.replication.policy.separator (line 21)" in conflict.reason


def test_values_are_judged_by_the_mm2_properties_rules_naming_the_resources_field():
    mirrors = """
  mirrors:
  - sourceCluster: a
    targetCluster: b
    sourceConnector:
      tasksMax: 0
    topicsPattern: "*.orders"
"""
    errors = {error.property_name: error for error in _errors(_two_clusters(mirrors))}
    assert set(errors) == {"spec.mirrors[0].sourceConnector.tasksMax", "spec.mirrors[0].topicsPattern"}
    assert errors["spec.mirrors[0].sourceConnector.tasksMax"].line == 14
    assert errors["spec.mirrors[0].topicsPattern"].line == 15


def test_what_is_not_a_kafkamirrormaker2_is_refused_clearly():
    (error,) = _errors("apiVersion: kafka.strimzi.io/v1beta2\nkind: KafkaMirrorMaker\nspec: {}\n")
    assert (error.property_name, error.line) == ("kind", 2)
    assert "MirrorMaker 1" in error.fix
    (error,) = _errors("kind: KafkaMirrorMaker2\nspec:\n  clusters: [a\n")
    assert error.property_name == "YAML" and error.line == 4


def test_either_format_is_read_by_what_it_is():
    properties = (
        "clusters = A, B\nA.bootstrap.servers = a:1\nB.bootstrap.servers = b:1\nA->B.enabled = true\n"
    )
    assert not is_strimzi_resource(properties) and is_strimzi_resource(RESOURCE)
    assert parse_mirrormaker(properties, environ={}) == parse_mm2(properties, environ={})
    assert parse_mirrormaker(RESOURCE, environ=SECRETS).config.aliases == ("cluster-a", "cluster-b")


def test_written_resources_read_back_as_the_same_configuration_without_a_secret():
    config = parse_strimzi(RESOURCE, environ=SECRETS).config
    active_active = Mm2Config(
        clusters=(*config.clusters, ClusterConfig(alias="cluster-c", bootstrap_servers="c.example:9092")),
        flows=(
            *config.flows,
            FlowConfig(
                source="cluster-b",
                target="cluster-a",
                enabled=True,
                topics=("orders",),
                replication_policy_separator="_",
            ),
            FlowConfig(source="cluster-a", target="cluster-c", enabled=False, emit_checkpoints_enabled=False),
        ),
    )
    written = write_strimzi(active_active)
    assert written.count("kind: KafkaMirrorMaker2") == 3  # one per target cluster
    assert 'p"w' not in written and "BEGIN CERTIFICATE" not in written
    assert (
        "# Secret mirrorplane-cluster-a: ca.crt = cluster-a's CA certificates (PEM); password = " in written
    )
    secrets = {
        "MIRRORPLANE_CLUSTER_A_PASSWORD": 'p"w',
        "MIRRORPLANE_CLUSTER_A_CA_CRT": "-----BEGIN CERTIFICATE-----A",
        "MIRRORPLANE_CLUSTER_B_CA_CRT": "-----BEGIN CERTIFICATE-----B",
    }
    reread = parse_strimzi(written, environ=secrets).config
    assert reread.clusters == active_active.clusters
    assert {flow.name: flow for flow in reread.flows} == {flow.name: flow for flow in active_active.flows}


def test_a_missing_field_is_reported_at_its_parents_line():
    text = "kind: KafkaMirrorMaker2\nspec:\n  clusters:\n  - alias: a\n  mirrors:\n  - sourceCluster: a\n"
    errors = {(error.property_name, error.line, error.reason) for error in _errors(text)}
    assert errors == {
        ("spec.clusters[0].bootstrapServers", 4, "missing"),
        ("spec.mirrors[0].targetCluster", 6, "missing"),
    }


def test_what_a_resource_cannot_hold_is_named_in_the_header_and_no_secret_is_written():
    kerberos = ClusterConfig(
        alias="a",
        bootstrap_servers="a.example:9092",
        client={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "GSSAPI",
            "sasl.jaas.config": 'com.sun.security.auth.module.Krb5LoginModule required password="pw-1";',
            "ssl.ca.pem": "CA-PEM",
            "sasl.kerberos.service.name": "kafka",
        },
        producer={"ssl.key.pem": "KEY-PEM"},
    )
    written = write_strimzi(
        Mm2Config(
            clusters=(kerberos, ClusterConfig(alias="b", bootstrap_servers="b.example:9092")),
            flows=(FlowConfig(source="a", target="b", enabled=True),),
        )
    )
    assert not any(secret in written for secret in ("pw-1", "CA-PEM", "KEY-PEM"))
    assert "# Not written: a.ssl.ca.pem (security.protocol SASL_PLAINTEXT uses no TLS)" in written
    assert "# Not written: a: SASL GSSAPI (set spec.clusters[].authentication)" in written
    assert "# Not written: a.producer.ssl.key.pem (a secret" in written
    assert "sasl.kerberos.service.name: kafka" in written


def test_kubectls_list_of_resources_reads_as_its_items_with_errors_at_the_items_fields():
    """`kubectl get kafkamirrormaker2 -o yaml` prints `kind: List` with the resources as items."""
    listed = "apiVersion: v1\nkind: List\nitems:\n" + "".join(
        f"  {'- ' if index == 0 else '  '}{line}\n"
        for index, line in enumerate(RESOURCE.splitlines())
        if line
    )
    assert is_strimzi_resource(listed)
    assert (
        parse_mirrormaker(listed, environ=SECRETS).config == parse_strimzi(RESOURCE, environ=SECRETS).config
    )
    (error,) = _errors(
        listed.replace("bootstrapServers: cluster-a-kafka-bootstrap:9093", "bootstrapServers: ''")
    )
    assert error.property_name.startswith("items[0].spec.clusters[0]")
    (error,) = _errors("apiVersion: v1\nkind: List\nitems: []\n")
    assert "no resource" in error.reason


def test_the_v1_layout_reads_as_the_same_clusters_and_flows_as_v1beta2():
    v1 = parse_strimzi(V1_RESOURCE, source_name="kmm2.yaml", environ=SECRETS)
    v1beta2 = parse_strimzi(RESOURCE, source_name="kmm2.yaml", environ=SECRETS)
    assert set(v1.config.aliases) == {"cluster-a", "cluster-b"}
    assert {c.alias: c for c in v1.config.clusters} == {c.alias: c for c in v1beta2.config.clusters}
    assert v1.config.flows == v1beta2.config.flows
    assert v1.config.flows[0].emit_heartbeats_enabled is False  # v1 runs no heartbeat connector
    warnings = "\n".join(v1.warnings)
    assert "spec.target.groupId: Kafka Connect's own" in warnings
    assert "line 5: spec: replicas, version: the Connect deployment" in warnings
    assert sorted(missing_placeholders(V1_RESOURCE, environ={})) == sorted(SECRETS)
    assert parse_mirrormaker(V1_RESOURCE, environ=SECRETS).config == v1.config


def test_the_v1_layout_is_never_mixed_with_v1beta2s_and_names_each_problem():
    target = "  target:\n    alias: b\n    bootstrapServers: b.example:9092\n"
    mixed = _errors(
        "apiVersion: kafka.strimzi.io/v1\nkind: KafkaMirrorMaker2\nspec:\n  connectCluster: b\n"
        + target
        + "  mirrors:\n  - sourceCluster: a\n    targetCluster: b\n"
        "  - source:\n      alias: b\n      bootstrapServers: b2.example:9092\n"
        "  - sourceConnector: {}\n"
    )
    errors = {error.property_name: error for error in mixed}
    assert set(errors) == {
        "spec.connectCluster",
        "spec.mirrors[0].sourceCluster",
        "spec.mirrors[0].targetCluster",
        "spec.mirrors[0].source",
        "spec.mirrors[1].source.alias",
        "spec.mirrors[2].source",
    }
    assert "use one layout" in errors["spec.connectCluster"].fix
    assert errors["spec.mirrors[0].sourceCluster"].line == 9
    assert "is the target's alias" in errors["spec.mirrors[1].source.alias"].reason
    (error,) = _errors(_two_clusters("  mirrors:\n  - source:\n      alias: c\n"))
    assert error.property_name == "spec.mirrors[0].source" and "use one layout" in error.fix
    (error,) = _errors("kind: KafkaMirrorMaker2\nspec:\n" + target)
    assert (error.property_name, error.reason) == ("spec.mirrors", "missing")
    (error,) = _errors(
        "kind: KafkaMirrorMaker2\nspec:\n  target:\n    bootstrapServers: b:1\n  mirrors: []\n"
    )
    assert error.property_name == "spec.target.alias"
