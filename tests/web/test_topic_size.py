"""A topic's size on disk on its details page, the topic list and in the API, on the suite's Apache Kafka brokers: each
partition's size grows by at least the value bytes written and is shown with the moment it was read; over
SASL_SSL a principal without DESCRIBE on the cluster resource gets the page with the broker's reason in
place of the size (never a 500), and an unreachable cluster is the page's 502 as before."""

from __future__ import annotations

import pytest
from django.urls import reverse

from controlplane.flows import cluster_reads, services
from replication.acls import TopicAcl
from replication.kafka.acls import TopicAclAdmin
from tests.conftest import SCRAM_USERS
from tests.failover.conftest import wait_for
from tests.replication.test_log_dirs import _write
from tests.web.mirroring import create_topic, stored_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]


@pytest.fixture(autouse=True)
def _fresh_breakers():
    cluster_reads.reset_breakers()


def test_the_size_grows_by_the_bytes_written_and_is_shown_with_its_age(
    client_as, users, cluster_a, unique_name
):
    stored = stored_cluster(actor=users["admin"], config=cluster_a)
    create_topic(cluster_a, unique_name, 2)
    viewer = client_as("viewer")
    empty = viewer.get(reverse("web:topic-details", args=["A", unique_name])).context["details"]
    assert empty.size.unknown is None and empty.sizes.total_bytes == 0

    written = _write(cluster_a, unique_name, partition=1, count=300)
    response = viewer.get(reverse("web:topic-details", args=["A", unique_name]))
    assert response.status_code == 200, response.content.decode()
    details = response.context["details"]
    sizes = details.sizes
    assert written < sizes.total_bytes < written * 1.2 and sizes.leader_bytes == sizes.total_bytes
    rows = {p.partition: size for p, size in details.partition_rows}
    assert rows[0].total_bytes == 0 and rows[1].leader_bytes == sizes.total_bytes
    body = response.content.decode()
    assert f'<strong class="size-total" data-bytes="{sizes.total_bytes}">' in body
    assert "over every replica" in body and "read at" in body and "ago" in body

    api = viewer.get(f"/api/v1/clusters/{stored.pk}/topics/{unique_name}/details/")
    assert api.status_code == 200, api.content.decode()
    answer = api.json()
    assert answer["size"]["unknown"] is None and answer["size"]["read_at"]
    assert answer["size"]["unreported_brokers"] == []
    assert written < answer["size"]["total_bytes"] == answer["size"]["leader_bytes"]
    by_partition = {p["partition"]: p for p in answer["partitions"]}
    assert by_partition[1]["size"]["replicas"][0]["broker"] == by_partition[1]["leader"]
    assert by_partition[1]["size"]["leader_bytes"] > written and by_partition[0]["size"]["total_bytes"] == 0
    assert answer["replication_factor"] == 1 and answer["read_at"]

    listed = viewer.get(reverse("web:topics"), {"cluster": "A", "q": unique_name, "sort": "-size"})
    assert listed.status_code == 200
    ((topic, _, size),) = listed.context["topics"].rows
    assert topic.name == unique_name and size.total_bytes == sizes.total_bytes
    assert f'data-bytes="{sizes.total_bytes}"' in listed.content.decode()
    assert "sizes on disk (every replica) read at" in listed.content.decode()
    api_list = viewer.get(f"/api/v1/clusters/{stored.pk}/topics/").json()
    assert api_list["sizes"]["unknown"] is None and api_list["sizes"]["read_at"]
    (row,) = [t for t in api_list["topics"] if t["name"] == unique_name]
    assert row["size_bytes"] == sizes.total_bytes


def test_a_principal_without_cluster_describe_sees_the_reason_over_sasl_ssl(
    client_as, users, secure_clusters, unique_name
):
    admin = secure_clusters.config("A")
    create_topic(admin, unique_name, 1)
    written = _write(admin, unique_name, partition=0, count=20)
    TopicAclAdmin(admin).create(
        [
            TopicAcl(unique_name, "LITERAL", "User:mirror", "*", operation, "ALLOW")
            for operation in ("DESCRIBE", "DESCRIBE_CONFIGS")
        ]
    )

    def stored(alias: str, user: str):
        return services.cluster_create(
            actor=users["admin"],
            alias=alias,
            bootstrap_servers=secure_clusters.brokers["A"].bootstrap_servers,
            security_protocol="SASL_SSL",
            sasl_mechanism="SCRAM-SHA-512",
            secrets={
                "client": {
                    "sasl.username": user,
                    "sasl.password": SCRAM_USERS[user],
                    "ssl.ca.pem": secure_clusters.ca_pem,
                }
            },
        )

    as_admin, as_mirror = stored("secureadmin", "admin"), stored("securemirror", "mirror")
    viewer = client_as("viewer")
    answer = viewer.get(f"/api/v1/clusters/{as_admin.pk}/topics/{unique_name}/details/").json()
    assert answer["size"]["total_bytes"] > written, answer["size"]

    url = reverse("web:topic-details", args=[as_mirror.alias, unique_name])
    response = wait_for(  # the ACLs reach the authorizer through the metadata log
        lambda: (r := viewer.get(url)).status_code == 200 and r, what="the topic described as mirror"
    )
    assert response.context["details"].sizes is None
    reason = "broker 1 refused DescribeLogDirs: CLUSTER_AUTHORIZATION_FAILED"
    assert f"size unknown: {reason}" in response.content.decode()
    answer = viewer.get(f"/api/v1/clusters/{as_mirror.pk}/topics/{unique_name}/details/").json()
    assert answer["size"] == {
        "read_at": None,
        "read_ms": None,
        "total_bytes": None,
        "leader_bytes": None,
        "unreported_brokers": [],
        "unknown": reason,
    }
    assert [p["size"] for p in answer["partitions"]] == [None]
    listed = viewer.get(f"/api/v1/clusters/{as_mirror.pk}/topics/").json()
    assert listed["sizes"]["unknown"] == reason
    assert unique_name in [t["name"] for t in listed["topics"]]
    assert all(t["size_bytes"] is None for t in listed["topics"])


def test_an_unreachable_cluster_is_a_502_with_its_reason_in_the_api(client_as, users, settings):
    settings.MIRRORPLANE_CLUSTER_TIMEOUT_S = 0.5
    gone = services.cluster_create(actor=users["admin"], alias="gonesize", bootstrap_servers="127.0.0.1:1")
    answer = client_as("viewer").get(f"/api/v1/clusters/{gone.pk}/topics/t/details/")
    assert answer.status_code == 502 and "cluster gonesize (127.0.0.1:1)" in answer.json()["detail"]
