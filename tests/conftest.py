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
