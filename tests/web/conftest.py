"""Users per role and logged-in Django test clients for the web UI's view tests."""

from __future__ import annotations

import pytest
from django.test import Client

from controlplane import services
from controlplane.roles import Role


@pytest.fixture
def users(db) -> dict:
    """A user per role, plus `norole`: authenticated but holding no role."""
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
    """client_as("operator") -> a Django test client logged in as that role; "anonymous" is not logged in."""

    def make(role: str) -> Client:
        client = Client()
        if role != "anonymous":
            client.force_login(users[role])
        return client

    return make


@pytest.fixture
def flow(users):
    """A flow A->B between two clusters nobody needs to reach (view tests never talk to Kafka)."""
    admin = users["admin"]
    a = services.cluster_create(actor=admin, alias="A", bootstrap_servers="a.invalid:9092")
    b = services.cluster_create(actor=admin, alias="B", bootstrap_servers="b.invalid:9092")
    return services.flow_create(actor=admin, source=a, target=b, enabled=True)
