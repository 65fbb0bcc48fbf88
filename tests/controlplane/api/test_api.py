"""REST API: CRUD, errors (400 at the field, 401 vs 403, 404), roles per endpoint, secrets never returned."""

from __future__ import annotations

import json
import re

import pytest
from django.conf import settings

from controlplane.core.models import AuditEvent
from controlplane.flows import services
from controlplane.flows.models import Cluster, Flow

pytestmark = pytest.mark.django_db

PASSWORD = "pw-Zx81-never-in-a-response"
ROLES = ["anonymous", "norole", "viewer", "operator", "admin"]
VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
RANK = {"anonymous": -1, "norole": 0, "viewer": 1, "operator": 2, "admin": 3}


@pytest.fixture
def flow(admin_user, two_clusters):
    a, b = two_clusters
    return services.flow_create(actor=admin_user, source=a, target=b, enabled=True)


def _endpoints(flow):
    cluster_id, flow_id = flow.source_id, flow.pk
    return [
        ("get", "/api/v1/clusters/", None, VIEWER),
        ("get", f"/api/v1/clusters/{cluster_id}/", None, VIEWER),
        ("post", "/api/v1/clusters/", {"alias": "C", "bootstrap_servers": "c:9092"}, ADMIN),
        ("patch", f"/api/v1/clusters/{cluster_id}/", {"bootstrap_servers": "a2.example:9092"}, ADMIN),
        ("put", f"/api/v1/clusters/{cluster_id}/", {"alias": "A", "bootstrap_servers": "a3:9092"}, ADMIN),
        ("post", f"/api/v1/clusters/{cluster_id}/check/", None, OPERATOR),
        ("get", "/api/v1/flows/", None, VIEWER),
        ("get", f"/api/v1/flows/{flow_id}/", None, VIEWER),
        ("get", f"/api/v1/flows/{flow_id}/status/", None, VIEWER),
        ("post", "/api/v1/flows/", {"source": "B", "target": "A"}, ADMIN),
        ("patch", f"/api/v1/flows/{flow_id}/", {"tasks_max": 2}, ADMIN),
        ("put", f"/api/v1/flows/{flow_id}/", {"source": "A", "target": "B", "enabled": True}, ADMIN),
        ("post", f"/api/v1/flows/{flow_id}/pause/", None, OPERATOR),
        ("post", f"/api/v1/flows/{flow_id}/resume/", None, OPERATOR),
        (
            "post",
            "/api/v1/mm2/import/",
            {"text": "clusters = Z\nZ.bootstrap.servers = z:1\n", "dry_run": True},
            ADMIN,
        ),
        ("get", "/api/v1/mm2/export/", None, VIEWER),
        ("get", "/api/v1/audit/", None, VIEWER),
        ("delete", f"/api/v1/flows/{flow_id}/", None, ADMIN),
    ]


ENDPOINT_COUNT = 18


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("index", range(ENDPOINT_COUNT))
def test_permission_matrix(client_as, flow, role, index):
    method, url, body, needed = _endpoints(flow)[index]
    response = getattr(client_as(role), method)(url, body, format="json")
    if role == "anonymous":
        assert response.status_code == 401, response.content
        assert response["WWW-Authenticate"] == "Token"
    elif RANK[role] < RANK[needed]:
        assert response.status_code == 403, response.content
        assert needed in response.json()["detail"]
    else:
        assert response.status_code in (200, 201, 204), response.content


def test_matrix_covers_every_endpoint(flow):
    assert len(_endpoints(flow)) == ENDPOINT_COUNT


def test_invalid_token_is_401(client_as):
    client = client_as("anonymous")
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get("/api/v1/flows/").status_code == 401


def test_cluster_crud_and_secrets_write_only(admin_client):
    response = admin_client.post(
        "/api/v1/clusters/",
        {
            "alias": "prod",
            "bootstrap_servers": "k1.example:9093",
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "PLAIN",
            "sasl_username": "mirror",
            "sasl_password": PASSWORD,
            "ssl_ca_pem": "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
            "client_properties": {"producer": {"linger.ms": "20"}},
            "secret_properties": {"producer": {"ssl.keystore.password": PASSWORD}},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["secrets_set"] == [
        "client.sasl.password",
        "client.sasl.username",
        "client.ssl.ca.pem",
        "producer.ssl.keystore.password",
    ]
    assert body["client_properties"]["producer"] == {"linger.ms": "20"}
    cluster_id = body["id"]
    responses = [
        response,
        admin_client.get("/api/v1/clusters/"),
        admin_client.get(f"/api/v1/clusters/{cluster_id}/"),
        admin_client.patch(
            f"/api/v1/clusters/{cluster_id}/", {"sasl_password": PASSWORD + "2"}, format="json"
        ),
        admin_client.get("/api/v1/audit/"),
        admin_client.get("/api/v1/mm2/export/"),
    ]
    for each in responses:
        assert each.status_code == 200 or each.status_code == 201
        assert PASSWORD not in each.content.decode() and "mirror" not in each.content.decode().replace(
            "mirrorplane", ""
        )
        assert "BEGIN CERTIFICATE" not in each.content.decode()
    assert "${env\\:PROD_SASL_PASSWORD}" in responses[-1].content.decode()
    assert admin_client.delete(f"/api/v1/clusters/{cluster_id}/").status_code == 204
    assert not Cluster.objects.exists()


def test_field_errors_are_400_at_the_field(admin_client, two_clusters):
    response = admin_client.post(
        "/api/v1/flows/",
        {
            "source": "A",
            "target": "B",
            "topics": ["[unclosed"],
            "tasks_max": 0,
            "delivery_guarantee": "maybe",
        },
        format="json",
    )
    assert response.status_code == 400
    assert "delivery_guarantee" in response.json()  # shape errors first
    response = admin_client.post(
        "/api/v1/flows/",
        {"source": "A", "target": "B", "topics": ["[unclosed"], "tasks_max": 0},
        format="json",
    )
    assert response.status_code == 400
    errors = response.json()
    details = errors.pop("details")  # the same problems, typed: field, property_name, value, reason, fix
    assert set(errors) == {"topics", "tasks_max"}
    assert "[unclosed" in errors["topics"][0]
    assert [(d["field"], d["property_name"], d["value"]) for d in details] == [
        ("topics", "topics", "[unclosed"),
        ("tasks_max", "tasks.max", "0"),
    ]
    assert all(d["reason"] and d["fix"] for d in details)
    response = admin_client.post("/api/v1/flows/", {"source": "A", "target": "nowhere"}, format="json")
    assert response.status_code == 400 and "target" in response.json()
    response = admin_client.post(
        "/api/v1/flows/", {"source": "A", "target": "B", "topics": ["a,b"]}, format="json"
    )
    assert response.status_code == 400 and "topics" in response.json()
    assert not Flow.objects.exists()


def test_loop_refused_with_explanation(admin_client, two_clusters):
    identity = "IdentityReplicationPolicy"
    first = {"source": "A", "target": "B", "enabled": True, "replication_policy_class": identity}
    assert admin_client.post("/api/v1/flows/", first, format="json").status_code == 201
    response = admin_client.post("/api/v1/flows/", first | {"source": "B", "target": "A"}, format="json")
    assert response.status_code == 400
    assert re.search(
        r"replication loop A->B->A: .*provenance.header.enabled", response.json()["non_field_errors"][0]
    )


def test_unknown_ids_are_404(admin_client):
    for url in [
        "/api/v1/clusters/999/",
        "/api/v1/flows/999/",
        "/api/v1/flows/999/topics/",
        "/api/v1/audit/999/",
    ]:
        assert admin_client.get(url).status_code == 404, url
    assert admin_client.post("/api/v1/flows/999/pause/").status_code == 404
    assert admin_client.get("/api/v1/flows/99999999999999999999999/").status_code == 404


def test_cluster_in_use_delete_is_409(admin_client, flow):
    response = admin_client.delete(f"/api/v1/clusters/{flow.source_id}/")
    assert response.status_code == 409 and "A->B" in response.json()["detail"]


def test_lists_paginate_and_filter(admin_client, admin_user, flow):
    for alias in ["C1", "C2", "C3"]:
        services.cluster_create(actor=admin_user, alias=alias, bootstrap_servers=f"{alias}:9092")
    page = admin_client.get("/api/v1/clusters/?page_size=2&ordering=alias").json()
    assert page["count"] == 5 and [c["alias"] for c in page["results"]] == ["A", "B"] and page["next"]
    assert [
        c["alias"] for c in admin_client.get("/api/v1/clusters/?alias__icontains=c").json()["results"]
    ] == [
        "C1",
        "C2",
        "C3",
    ]
    assert admin_client.get("/api/v1/flows/?source=A").json()["count"] == 1
    assert admin_client.get("/api/v1/flows/?source=B").json()["count"] == 0
    assert admin_client.get("/api/v1/flows/?state=bogus").status_code == 400
    services.flow_pause(actor=admin_user, flow=flow)
    audit = admin_client.get("/api/v1/audit/?action=pause&object_type=flow").json()
    assert audit["count"] == 1 and audit["results"][0]["actor_name"] == "admin"
    assert admin_client.get("/api/v1/audit/?actor=nobody").json()["count"] == 0
    assert (
        admin_client.get("/api/v1/audit/?at_after=2000-01-01T00:00:00Z").json()["count"]
        == AuditEvent.objects.count()
    )


def test_pause_resume_and_status(client_as, flow):
    operator = client_as("operator")
    assert operator.post(f"/api/v1/flows/{flow.pk}/pause/").json()["state"] == "paused"
    status = operator.get(f"/api/v1/flows/{flow.pk}/status/").json()
    live_workers = status.pop("pool_live_workers")  # whatever workers this Redis has seen
    assert live_workers is None or live_workers >= 0
    assert status == {
        "id": flow.pk,
        "flow": "A->B",
        "state": "paused",
        "schemas": None,  # the flow syncs no schemas (docs/schemas.md)
        "state_reason": "",
        "enabled": True,
        "health": "paused",
        "status": "UNKNOWN",
        "records_behind": None,
        "seconds_behind": None,
        "seconds_behind_at_least": None,
        "observed_at": None,
        "age_s": None,
        "stale": False,
        "partition_count": 0,
        "pool": "",
        "pool_without_workers": False,
        "stale_after_s": settings.MIRRORPLANE_STALE_AFTER_S,
        "partitions": {
            "count": 0,
            "page": 1,
            "page_size": 50,
            "pages": 1,
            "next": None,
            "previous": None,
            "results": [],
        },
        "events": [],
    }
    assert operator.post(f"/api/v1/flows/{flow.pk}/resume/").json()["state"] == "active"


def test_malformed_input_is_400(admin_client, two_clusters):
    response = admin_client.generic("POST", "/api/v1/clusters/", "{not json", content_type="application/json")
    assert response.status_code == 400
    response = admin_client.post(
        "/api/v1/clusters/", {"alias": "x\x00y", "bootstrap_servers": "h:1"}, format="json"
    )
    assert response.status_code == 400
    response = admin_client.post(
        "/api/v1/flows/", {"source": "A", "target": "B", "tasks_max": 2**40}, format="json"
    )
    assert response.status_code == 400 and "tasks_max" in response.json()
    # A NUL byte reaches no query (PostgreSQL would refuse it with an error, not a 400).
    response = admin_client.post("/api/v1/flows/", {"source": "A", "target": "\x00"}, format="json")
    assert response.status_code == 400 and "target" in response.json()
    cluster = two_clusters[0]
    for scoped in ({"client": {"a\x00": "1"}}, {"\x00": {}}):  # its refusal's audit could not be stored
        response = admin_client.patch(
            f"/api/v1/clusters/{cluster.pk}/", {"secret_properties": scoped}, format="json"
        )
        assert response.status_code == 400 and "secret_properties" in response.json()


def test_swagger_ui_is_served_locally(client, tokens):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="viewer"))
    page = client.get("/api/docs/")
    assert page.status_code == 200
    html = page.content.decode()
    scripts = re.findall(r'src="([^"]+)"', html) + re.findall(r'href="([^"]+\.css)"', html)
    assert scripts and all(src.startswith("/static/") for src in scripts), scripts
    for src in scripts:
        asset = client.get(src)
        assert asset.status_code == 200, src
        b"".join(asset.streaming_content) if asset.streaming else asset.content
    schema = client.get("/api/schema/", HTTP_ACCEPT="application/json")
    assert schema.status_code == 200
    paths = json.loads(schema.content)["paths"]
    assert "/api/v1/flows/{id}/topics/" in paths and "/api/v1/mm2/export/" in paths


def test_session_login_works_for_the_api(client, tokens):
    from django.contrib.auth import get_user_model

    client.force_login(get_user_model().objects.get(username="viewer"))
    assert client.get("/api/v1/flows/").status_code == 200
    assert client.post("/api/v1/clusters/", {"alias": "X", "bootstrap_servers": "x:1"}).status_code == 403


def test_the_status_of_a_flow_that_does_not_exist_is_404(client_as, flow):
    response = client_as("viewer").get(f"/api/v1/flows/{flow.pk + 1000}/status/")
    assert response.status_code == 404, response.content
    assert client_as("viewer").get(f"/api/v1/flows/{flow.pk}/status/").status_code == 200
