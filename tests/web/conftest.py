"""Fixtures of the web UI's view tests (users per role and logged-in clients are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from controlplane.flows import services


@pytest.fixture
def flow(users):
    """A flow A->B between two clusters nobody needs to reach (view tests never talk to Kafka)."""
    admin = users["admin"]
    a = services.cluster_create(actor=admin, alias="A", bootstrap_servers="a.invalid:9092")
    b = services.cluster_create(actor=admin, alias="B", bootstrap_servers="b.invalid:9092")
    return services.flow_create(actor=admin, source=a, target=b, enabled=True)
