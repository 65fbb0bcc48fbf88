"""A flow's metadata run whose target has no authorizer reports "ACL sync unsupported by cluster X" as a
flow warning, once per cluster, however often the run repeats and whichever process runs it; the readiness
score's ACL parity is n/a while that holds, and counts again from the first pass after the target has one."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from controlplane import assurance
from controlplane.flows.models import Cluster
from controlplane.status.models import FlowEvent, FlowEventKind, FlowSignals
from replication.acls import TopicAcl
from replication.kafka.acls import TopicAclAdmin
from tests.replication.test_source_task import create_topics
from workers import metadata

pytestmark = [pytest.mark.kafka]


def _acl_parity(flow_id: int):
    readiness = assurance.flow_readiness_all()[flow_id].readiness
    return next(reason for reason in readiness.reasons if reason.check == "acl_parity")


def _connection(secure_clusters, alias: str) -> dict:
    """The API fields of a connection to the secured cluster `alias` (SASL_SSL, SCRAM)."""
    config = secure_clusters.config(alias)
    return {
        "bootstrap_servers": config.bootstrap_servers,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_username": config.client["sasl.username"],
        "sasl_password": config.client["sasl.password"],
        "ssl_ca_pem": secure_clusters.ca_pem,
    }


def _store_flow(client, secure_clusters, cluster_b, topic: str) -> int:
    """A flow from the secured cluster A (an authorizer, topic ACLs) to plain cluster B (no authorizer)."""

    def post(url: str, body: dict) -> dict:
        response = client.post(url, json.dumps(body), content_type="application/json")
        assert response.status_code == 201, response.content
        return response.json()

    post("/api/v1/clusters/", {"alias": "A", **_connection(secure_clusters, "A")})
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
    warning = (
        "ACL sync unsupported by cluster B: no authorizer is configured (SECURITY_DISABLED); topic ACLs are "
        "not synced"
    )
    warnings = FlowEvent.objects.filter(flow_id=flow_id, kind=FlowEventKind.WARNING)
    assert list(warnings.values_list("message", flat=True)) == [warning]
    assert not FlowEvent.objects.filter(flow_id=flow_id, kind=FlowEventKind.ERROR).exists()
    assert FlowSignals.objects.get(flow_id=flow_id).acl_sync_unsupported == warning
    parity = _acl_parity(flow_id)
    assert (parity.status, parity.points, parity.message) == ("n/a", 0, warning)


def test_acl_parity_counts_again_once_the_target_has_an_authorizer(
    secure_clusters, cluster_b, client_as, redis_url, unique_name
):
    """The operator moves cluster B onto brokers with an authorizer (its connection edited in the API): the
    next pass copies the ACL, the flow's signals say ACL sync runs, and the readiness score judges ACL
    parity again instead of n/a for ever after the warning (which stays in the events, as history)."""
    topic = f"orders-{unique_name}"
    source = secure_clusters.config("A")
    create_topics(source, [topic], 1)
    acl = TopicAcl(topic, "LITERAL", "User:reader", "*", "READ", "ALLOW")
    TopicAclAdmin(source).create([acl])
    client = client_as("admin")
    flow_id = _store_flow(client, secure_clusters, cluster_b, topic)
    try:
        metadata.flow_metadata(flow_id=flow_id, token="test")
        assert _acl_parity(flow_id).status == "n/a"
        response = client.patch(
            f"/api/v1/clusters/{Cluster.objects.get(alias='B').pk}/",
            json.dumps(_connection(secure_clusters, "B")),
            content_type="application/json",
        )
        assert response.status_code == 200, response.content
        metadata.flow_metadata(flow_id=flow_id, token="test")
    finally:
        metadata._entry(None, flow_id)
    assert replace(acl, topic=f"A.{topic}") in TopicAclAdmin(secure_clusters.config("B")).topic_acls()
    assert FlowSignals.objects.get(flow_id=flow_id).acl_sync_unsupported is None
    parity = _acl_parity(flow_id)
    assert parity.status != "n/a" and parity.points == 0, parity
    assert FlowEvent.objects.filter(flow_id=flow_id, kind=FlowEventKind.WARNING).count() == 1


def test_no_acl_warning_when_acl_sync_is_disabled(make_flow, redis_url, unique_name):
    flow = make_flow(topics=[f"{unique_name}.*"], sync_topic_acls_enabled=False)
    try:
        metadata.flow_metadata(flow_id=flow.pk, token="test")
    finally:
        metadata._entry(None, flow.pk)
    assert not FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.WARNING).exists()
    assert FlowSignals.objects.get(flow=flow).acl_sync_unsupported is None
