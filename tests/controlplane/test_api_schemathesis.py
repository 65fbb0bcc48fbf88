"""Property-based API run from the OpenAPI schema (schemathesis): no input makes the server fail (5xx)."""

from __future__ import annotations

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error

from controlplane import services
from controlplane.wsgi import application
from replication.kafka.embedded import free_port

schema = schemathesis.from_wsgi("/api/schema/", application)
# Cluster checks and topic listings of generated clusters would wait on DNS/connect timeouts; the 502
# path is covered in test_live_cluster. Everything else is exercised.
EXAMPLES_PER_OPERATION = 30


@pytest.fixture
def wsgi_keeps_test_connection():
    """Calling the WSGI app directly would close the test's DB connection after each request (Django's
    test client avoids that the same way)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


@pytest.fixture
def seeded_admin_token(tokens, admin_user, wsgi_keeps_test_connection):
    """An admin token, and a cluster pair with a flow so that small generated ids hit real objects."""
    a = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers=f"127.0.0.1:{free_port()}")
    b = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers=f"127.0.0.1:{free_port()}")
    services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    return tokens["admin"]


@pytest.mark.django_db
@schema.parametrize()
@settings(
    max_examples=EXAMPLES_PER_OPERATION,
    deadline=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_no_server_errors(case, seeded_admin_token):
    response = case.call(headers={"Authorization": f"Token {seeded_admin_token}"})
    case.validate_response(response, checks=(not_a_server_error,))
