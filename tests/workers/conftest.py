"""Workers tests: a dedicated Redis database, and (for the runtime tests) Celery worker processes."""

from __future__ import annotations

import os

import pytest
import redis

from workers import context

# A database number of the shared Redis that nothing else uses; only it is ever flushed.
TEST_REDIS_URL = os.environ.get("MIRRORPLANE_TEST_REDIS_URL", "redis://127.0.0.1:6379/15")


@pytest.fixture
def redis_url(settings) -> str:
    client = redis.Redis.from_url(TEST_REDIS_URL)
    client.flushdb()
    settings.REDIS_URL = TEST_REDIS_URL
    context.leases.cache_clear()
    yield TEST_REDIS_URL
    context.leases.cache_clear()
    client.flushdb()
    client.close()


@pytest.fixture
def celery_runtime(transactional_db, redis_url, tmp_path):
    """Worker and beat processes on the test database (committed rows: transactional_db)."""
    from harness.runtime import CeleryRuntime

    runtime = CeleryRuntime(workdir=tmp_path, redis_url=redis_url)
    yield runtime
    runtime.close()


@pytest.fixture
def make_flow(transactional_db, cluster_a, cluster_b):
    """make_flow(topics=[...], **settings) -> a stored, enabled flow A->B on the embedded clusters."""
    from controlplane.flows import services

    a = services.cluster_create(actor=None, alias="A", bootstrap_servers=cluster_a.bootstrap_servers)
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers=cluster_b.bootstrap_servers)

    def make(**settings):
        return services.flow_create(actor=None, source=a, target=b, enabled=True, **settings)

    return make
