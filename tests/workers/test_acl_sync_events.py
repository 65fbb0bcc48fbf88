"""A flow's metadata run whose target has no authorizer reports "ACL sync unsupported by cluster X" as a
flow warning, once per cluster, however often the run repeats and whichever process runs it."""

from __future__ import annotations

import json

import pytest

from controlplane.status.models import FlowEvent, FlowEventKind
from replication.acls import TopicAcl
from replication.kafka.acls import TopicAclAdmin
from tests.replication.test_source_task import create_topics
from workers import metadata

pytestmark = [pytest.mark.kafka]


def _store_flow(client, secure_clusters, cluster_b, topic: str) -> int:
    """A flow from the secured cluster A (an authorizer, topic ACLs) to plain cluster B (no authorizer)."""

    def post(url: str, body: dict) -> dict:
        response = client.post(url, json.dumps(body), content_type="application/json")
        assert response.status_code == 201, response.content
        return response.json()

    source = secure_clusters.config("A")
    post(
        "/api/v1/clusters/",
        {
            "alias": "A",
            "bootstrap_servers": source.bootstrap_servers,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": source.client["sasl.username"],
            "sasl_password": source.client["sasl.password"],
            "ssl_ca_pem": secure_clusters.ca_pem,
        },
    )
    post("/api/v1/clusters/", {"alias": "B", "bootstrap_servers": cluster_b.bootstrap_servers})
    flow = post(
        "/api/v1/flows/",
        {
            "source": "A",
            "target": "B",
            "enabled": True,
            "topics": [topic],
            "sync_topic_acls_interval_seconds": 1,
        },
    )
    return flow["id"]


def test_acl_sync_unsupported_is_a_warning_event_reported_once(
    secure_clusters, cluster_b, client_as, redis_url, unique_name
):
    """The source has an ACL to copy, the target has no authorizer (Apache Kafka answers CreateAcls with
    SECURITY_DISABLED): one warning naming the target, however often the run repeats and whichever
    process runs it."""
    topic = f"orders-{unique_name}"
    source = secure_clusters.config("A")
    create_topics(source, [topic], 1)
    TopicAclAdmin(source).create([TopicAcl(topic, "LITERAL", "User:reader", "*", "READ", "ALLOW")])
    flow_id = _store_flow(client_as("admin"), secure_clusters, cluster_b, topic)
    try:
        metadata.flow_metadata(flow_id=flow_id, token="test")
        metadata._CACHE[flow_id].topic_sync._scheduler._last_run.clear()  # every job due again
        metadata.flow_metadata(flow_id=flow_id, token="test")
        metadata._entry(None, flow_id)  # as another worker process: a fresh cache entry
        metadata.flow_metadata(flow_id=flow_id, token="test")
    finally:
        metadata._entry(None, flow_id)
    warnings = FlowEvent.objects.filter(flow_id=flow_id, kind=FlowEventKind.WARNING)
    assert list(warnings.values_list("message", flat=True)) == [
        "ACL sync unsupported by cluster B: no authorizer is configured (SECURITY_DISABLED); topic ACLs are "
        "not synced"
    ]
    assert not FlowEvent.objects.filter(flow_id=flow_id, kind=FlowEventKind.ERROR).exists()


def test_no_acl_warning_when_acl_sync_is_disabled(make_flow, redis_url, unique_name):
    flow = make_flow(topics=[f"{unique_name}.*"], sync_topic_acls_enabled=False)
    try:
        metadata.flow_metadata(flow_id=flow.pk, token="test")
    finally:
        metadata._entry(None, flow.pk)
    assert not FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.WARNING).exists()
