"""Users per role with API tokens, API clients, and stored clusters, on the test database."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from controlplane import core
from controlplane.core.roles import Role
from controlplane.flows import services
from tests.conftest import web_reads_wait_for_a_loaded_machine


@pytest.fixture
def tokens(db) -> dict[str, str]:
    """An API token per role, plus `norole`: a user who authenticated but holds no role."""
    result = {
        role.group_name: core.user_create_with_role(username=role.group_name, role=role)[1] for role in Role
    }
    norole, result["norole"] = core.user_create_with_role(username="norole", role=Role.VIEWER)
    norole.groups.clear()
    return result


@pytest.fixture
def client_as(tokens):
    """client_as("operator") -> an APIClient authenticated with that role's token; "anonymous" has none."""

    def make(role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            client.credentials(HTTP_AUTHORIZATION=f"Token {tokens[role]}")
        return client

    return make


@pytest.fixture
def admin_client(client_as) -> APIClient:
    return client_as("admin")


@pytest.fixture
def admin_user(tokens):
    from django.contrib.auth import get_user_model

    return get_user_model().objects.get(username="admin")


@pytest.fixture
def two_clusters(admin_user):
    a = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers="a.example:9092")
    b = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="b.example:9092")
    return a, b


@pytest.fixture(autouse=True)
def _web_reads_wait_for_a_loaded_machine(settings):
    web_reads_wait_for_a_loaded_machine(settings)
