"""Fixtures shared by the whole suite: two real embedded Kafka clusters on loopback."""

from __future__ import annotations

import uuid

import pytest

from replication.config import ClusterConfig
from replication.kafka.embedded import EmbeddedBroker, embedded_clusters


@pytest.fixture(scope="session")
def kafka_brokers() -> dict[str, EmbeddedBroker]:
    """Two embedded clusters, `A` and `B`, for the whole session (tests use unique topic names)."""
    with embedded_clusters(["A", "B"]) as brokers:
        yield brokers


@pytest.fixture(scope="session")
def cluster_a(kafka_brokers) -> ClusterConfig:
    return ClusterConfig(alias="A", bootstrap_servers=kafka_brokers["A"].bootstrap_servers)


@pytest.fixture(scope="session")
def cluster_b(kafka_brokers) -> ClusterConfig:
    return ClusterConfig(alias="B", bootstrap_servers=kafka_brokers["B"].bootstrap_servers)


@pytest.fixture
def unique_name(request) -> str:
    """A topic/group name no other test uses, so tests can share the session clusters."""
    stem = request.node.name.replace("[", "-").replace("]", "").replace("_", "-")[:40]
    return f"{stem}-{uuid.uuid4().hex[:8]}"


@pytest.fixture
def users(db) -> dict:
    """A user per role, plus `norole`: authenticated but holding no role (web and dashboards tests)."""
    from controlplane import services
    from controlplane.roles import Role

    result = {
        role.group_name: services.user_create_with_role(username=role.group_name, role=role)[0]
        for role in Role
    }
    norole, _ = services.user_create_with_role(username="norole", role=Role.VIEWER)
    norole.groups.clear()
    result["norole"] = norole
    return result


@pytest.fixture
def client_as(users):
    """client_as("operator") -> a Django test client logged in as that role; "anonymous" is not logged in.

    tests/controlplane overrides it with its token-authenticated API client."""
    from django.test import Client

    def make(role: str) -> Client:
        client = Client()
        if role != "anonymous":
            client.force_login(users[role])
        return client

    return make
