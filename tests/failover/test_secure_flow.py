"""A flow between clusters secured as production secures them (SASL_SSL with SCRAM-SHA-512, a test CA,
Kafka's authorizer), end to end through the REST API: clusters stored with write-only secrets, their
check, replication from the stored configuration, the message browser, and the failover plan (offsets
and groups read from both secured clusters). A wrong password gives a clear answer naming the cluster and the setting."""

from __future__ import annotations

import re

import pytest

from tests.failover.conftest import create_topic, produce_plain, read_partition, wait_for

# The mirror thread reads the stored flow over its own database connection: committed rows.
pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PASSWORD = "admin-secret"  # tests/conftest.py SCRAM_USERS


def _store(admin, secure_clusters, alias: str, *, password: str = PASSWORD) -> dict:
    response = admin.post(
        "/api/v1/clusters/",
        {
            "alias": alias,
            "bootstrap_servers": secure_clusters.brokers[alias.rstrip("x")].bootstrap_servers,
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_username": "admin",
            "sasl_password": password,
            "ssl_ca_pem": secure_clusters.ca_pem,
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert password not in response.content.decode()
    return response.json()


def test_a_sasl_ssl_flow_through_the_api_replicates_browses_and_fails_over(
    secure_clusters, client_as, mirrors, unique_name
):
    admin, operator, viewer = client_as("admin"), client_as("operator"), client_as("viewer")
    source, target = _store(admin, secure_clusters, "A"), _store(admin, secure_clusters, "B")
    for cluster in (source, target):
        check = operator.post(f"/api/v1/clusters/{cluster['id']}/check/").json()
        assert check["ok"] and check["brokers"] == 1, check

    wrong = _store(admin, secure_clusters, "Ax", password="not-the-password")
    refused = operator.post(f"/api/v1/clusters/{wrong['id']}/check/").json()
    assert not refused["ok"] and refused["failure"] == "auth"
    assert "cluster Ax" in refused["message"] and "sasl.password" in refused["message"]
    assert "not-the-password" not in refused["message"]

    topic, partitions = f"orders-{unique_name}", 2
    source_config = secure_clusters.config("A")
    create_topic(source_config, topic, partitions)
    produce_plain(source_config, topic, partitions=partitions, count=50, tag="secure")
    created = admin.post(
        "/api/v1/flows/",
        {"source": "A", "target": "B", "enabled": True, "topics": [re.escape(topic)]},
        format="json",
    )
    assert created.status_code == 201, created.content
    flow_id = created.json()["id"]
    mirror = mirrors(flow_id, topic, partitions)  # replication from the stored (decrypted) configuration
    target_config = secure_clusters.config("B")
    wait_for(
        lambda: all(
            [v for _, v in read_partition(target_config, f"A.{topic}", p)]
            == [v for _, v in read_partition(source_config, topic, p)]
            for p in range(partitions)
        ),
        what=f"replication over SASL_SSL (errors: {mirror.errors[:3]})",
    )

    records = viewer.get(
        f"/api/v1/clusters/{target['id']}/topics/A.{topic}/records/", {"partition": 0, "offset": 0}
    )
    assert records.status_code == 200, records.content
    assert [r["value"]["text"] for r in records.json()["records"]][:2] == ["secure-p0-0", "secure-p0-1"]

    plan = viewer.get(f"/api/v1/flows/{flow_id}/failover/plan/")
    assert plan.status_code == 200, plan.content
    mirror.stop()
    for each in (records, plan):
        assert PASSWORD not in each.content.decode()
