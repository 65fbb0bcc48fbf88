"""Endpoints that talk to a cluster: a flow's topics (its rule on the in-memory cluster; a source that does not
answer, on a closed port) and the cluster check, on the suite's Apache Kafka brokers."""

from __future__ import annotations

import socket

import pytest

from controlplane.flows import services
from replication.config import ClusterConfig
from replication.kafka.cluster_check import FailureKind, check_cluster
from replication.kafka.processes import free_port

pytestmark = pytest.mark.django_db


def test_flow_topics_against_the_source_cluster(admin_client, admin_user, memory_clusters, unique_name):
    """A rule (the flow's filter and the cycle check over what the source lists): on the in-memory cluster."""
    source = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers="memory-a:9092")
    target = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="unused.example:9092")
    orders, skipped, back = f"orders-{unique_name}", f"tmp-{unique_name}", f"B.orders-{unique_name}"
    for topic in (orders, skipped, back):
        memory_clusters.cluster("memory-a:9092").create(topic, 2)
    flow = services.flow_create(
        actor=admin_user, source=source, target=target, topics_exclude=["tmp-.*", "__.*"]
    )

    response = admin_client.get(f"/api/v1/flows/{flow.pk}/topics/")

    assert response.status_code == 200, response.content
    topics = {row["topic"]: row for row in response.json()}
    assert topics[orders] == {
        "topic": orders,
        "partitions": 2,
        "replicate": True,
        "remote_topic": f"A.{orders}",
        "reason": None,
        "detail": None,
    }
    assert topics[skipped]["reason"] == "filter" and "tmp-.*" in topics[skipped]["detail"]
    assert topics[back]["reason"] == "cycle" and not topics[back]["replicate"]


@pytest.mark.kafka
def test_flow_topics_when_the_source_does_not_answer_is_502(admin_client, admin_user, settings):
    settings.MIRRORPLANE_WEB_READ_TIMEOUT_S = 1.0
    source = services.cluster_create(
        actor=admin_user, alias="A", bootstrap_servers=f"127.0.0.1:{free_port()}"
    )
    target = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="b.example:9092")
    flow = services.flow_create(actor=admin_user, source=source, target=target)
    response = admin_client.get(f"/api/v1/flows/{flow.pk}/topics/")
    assert response.status_code == 502 and "cluster A" in response.json()["detail"]


@pytest.mark.kafka
def test_check_api_reports_brokers_and_topics(client_as, admin_user, cluster_a):
    cluster = services.cluster_create(
        actor=admin_user, alias="A", bootstrap_servers=cluster_a.bootstrap_servers
    )
    body = client_as("operator").post(f"/api/v1/clusters/{cluster.pk}/check/").json()
    assert body["ok"] is True and body["brokers"] == 1 and body["topic_count"] >= 0
    assert body["latency_ms"] > 0 and body["failure"] is None


@pytest.mark.kafka
def test_check_failure_kinds(cluster_a):
    assert (
        check_cluster(ClusterConfig("X", "no-such-host.invalid:9092"), timeout_s=1).failure is FailureKind.DNS
    )
    refused = check_cluster(ClusterConfig("X", f"127.0.0.1:{free_port()}"), timeout_s=1)
    assert refused.failure is FailureKind.REFUSED and "refused" in refused.message
    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts TCP, never speaks Kafka
        port = silent.getsockname()[1]
        assert (
            check_cluster(ClusterConfig("X", f"127.0.0.1:{port}"), timeout_s=1).failure is FailureKind.TIMEOUT
        )
    sasl = ClusterConfig(
        "A",
        cluster_a.bootstrap_servers,
        client={
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-256",
            "sasl.username": "u",
            "sasl.password": "p",
        },
    )
    assert check_cluster(sasl, timeout_s=1).failure is FailureKind.AUTH
