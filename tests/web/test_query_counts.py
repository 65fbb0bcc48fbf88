"""Issue 38 item 4: the pages and APIs a fleet of flows is watched through run a number of SQL statements
that does not grow with the flows (no N+1): the same count at 5 and at 40 flows (each with its status
rows), through the web's own request path."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.flows import services
from tests.status_reports import stored_report

PAGES = (
    "/",
    "/overview/live/",
    "/flows/",
    "/clusters/",
    "/pools/",
    "/alerts/",
    "/audit/",
    "/api/v1/flows/",
    "/api/v1/clusters/",
    "/api/v1/status/",
    "/api/v1/alerts/",
    "/metrics",
)


def _add_flows(admin, *, first: int, count: int) -> None:
    for index in range(first, first + count):
        source = services.cluster_create(
            actor=admin, alias=f"S{index}", bootstrap_servers=f"s{index}.invalid:9092"
        )
        target = services.cluster_create(
            actor=admin, alias=f"T{index}", bootstrap_servers=f"t{index}.invalid:9092"
        )
        flow = services.flow_create(actor=admin, source=source, target=target, enabled=True)
        for partition in range(3):
            stored_report(
                flow=flow,
                topic="orders",
                partition=partition,
                remote_topic=f"S{index}.orders",
                records_behind=partition,
                seconds_behind=float(partition),
                observed_at=timezone.now(),
            )


def _statements(client: Client) -> dict[str, int]:
    counts = {}
    for path in PAGES:
        with CaptureQueriesContext(connection) as queries:
            answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        counts[path] = len(queries)
    return counts


@pytest.mark.django_db
def test_pages_and_apis_run_the_same_statements_at_5_and_40_flows(users, settings):
    settings.METRICS_BEARER_TOKEN = ""  # /metrics open to the test client, as without a token
    client = Client()
    client.force_login(users["viewer"])
    _add_flows(users["admin"], first=0, count=5)
    few = _statements(client)
    _add_flows(users["admin"], first=5, count=35)
    many = _statements(client)
    assert many == few
