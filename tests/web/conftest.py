"""Fixtures of the web UI's view tests (users per role and logged-in clients are in tests/conftest.py)."""

from __future__ import annotations

import pytest

from controlplane import core
from controlplane.core.roles import Role
from controlplane.flows import services
from harness.runtime import Gunicorn
from tests.conftest import web_reads_wait_for_a_loaded_machine
from tests.web.served import PASSWORD, web_env


@pytest.fixture
def flow(users):
    """A flow A->B between two clusters nobody needs to reach (view tests never talk to Kafka)."""
    admin = users["admin"]
    a = services.cluster_create(actor=admin, alias="A", bootstrap_servers="a.invalid:9092")
    b = services.cluster_create(actor=admin, alias="B", bootstrap_servers="b.invalid:9092")
    return services.flow_create(actor=admin, source=a, target=b, enabled=True)


@pytest.fixture(scope="module")
def web(django_db_setup, django_db_blocker, tmp_path_factory):
    """One gunicorn (the Dockerfile's: 1 sync worker, 30 s timeout) on the test database for the module."""
    with django_db_blocker.unblock():
        env = web_env()
    server = Gunicorn(env=env, log=tmp_path_factory.mktemp("web") / "gunicorn.log").start()
    yield server
    server.kill()


@pytest.fixture
def admin(transactional_db):
    """An admin `boss` with a password (for the pages) and an API token: (user, token)."""
    user, token = core.user_create_with_role(username="boss", role=Role.ADMIN)
    user.set_password(PASSWORD)
    user.save()
    return user, token


@pytest.fixture(autouse=True)
def _web_reads_wait_for_a_loaded_machine(settings):
    web_reads_wait_for_a_loaded_machine(settings)
