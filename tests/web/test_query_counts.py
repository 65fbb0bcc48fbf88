"""Issue 38 item 4: the pages and APIs a fleet of flows is watched through run a number of SQL statements
that does not grow with the flows (no N+1): the same count at 5 and at 40 flows (each with its status
rows), through the web's own request path. One flow's page and APIs also read the same rows at both sizes
(that flow's, not every flow's), and the flows list reads the live roll-ups of the flows its page shows."""

from __future__ import annotations

import dataclasses

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.core.tokens import api_token_issue
from controlplane.flows import services
from controlplane.flows.models import Flow
from controlplane.status.models import FlowRpoBudget, FlowSignals, FlowTaskStatus
from controlplane.web import flows as flow_pages
from tests.status_reports import status_rows_read, stored_report

PAGES = (
    "/",
    "/overview/live/",
    "/flows/",
    # Searched (a flow's name and topics), filtered and sorted: every flow's roll-up, with the fields read.
    "/flows/?q=orders&state=active&health=stale&sort=-state",
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
# One flow's (the first one's): its page, its live part, its status and readiness APIs.
FLOW_PAGES = (
    "/flows/{flow}/",
    "/flows/{flow}/live/",
    "/api/v1/flows/{flow}/status/",
    "/api/v1/flows/{flow}/readiness/",
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
        FlowRpoBudget.objects.create(flow=flow, records_behind=100)
        FlowSignals.objects.create(flow=flow, heartbeat_emitted_at=timezone.now(), tasks_planned=1)
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


def _paths() -> list[str]:
    first = Flow.objects.order_by("pk").first()
    return [*PAGES, *(path.format(flow=first.pk) for path in FLOW_PAGES)]


def _statements(client: Client) -> dict[str, int]:
    counts = {}
    for path in _paths():
        with CaptureQueriesContext(connection) as queries:
            answer = client.get(path)
        assert answer.status_code == 200, (path, answer.status_code)
        counts[path] = len(queries)
    return counts


def _rows(client: Client) -> dict[str, int]:
    """Rows each of one flow's pages read from the control plane's tables."""
    counts = {}
    first = Flow.objects.order_by("pk").first()
    for path in FLOW_PAGES:
        with status_rows_read("controlplane_") as read:
            assert client.get(path.format(flow=first.pk)).status_code == 200
        counts[path] = read["rows"]
    return counts


@pytest.mark.django_db
def test_pages_and_apis_run_the_same_statements_at_5_and_40_flows(users, settings):
    settings.METRICS_BEARER_TOKEN = ""  # /metrics open to the test client, as without a token
    # The first flow's figures stay fresh while 35 more flows are added on a slow machine (a stale flow's
    # page reads one more row: 27 instead of 26).
    settings.MIRRORPLANE_STALE_AFTER_S = 3600
    client = Client()
    client.force_login(users["viewer"])
    _add_flows(users["admin"], first=0, count=5)
    few, few_rows = _statements(client), _rows(client)
    _add_flows(users["admin"], first=5, count=35)
    assert _statements(client) == few
    # Before, a flow's page and readiness API read every flow's budget, signals and verification summary.
    assert _rows(client) == few_rows


@pytest.mark.django_db
def test_the_flows_list_reads_the_roll_ups_of_its_page_only(users, monkeypatch):
    """The flows list is in its own order (firing first, then by name) unless sorted, searched or
    filtered: it builds the live roll-up of the flows on the page shown, not of every flow."""
    spec = flow_pages.flow_list_spec
    monkeypatch.setattr(
        flow_pages, "flow_list_spec", lambda **given: dataclasses.replace(spec(**given), page_size=10)
    )
    client = Client()
    client.force_login(users["viewer"])
    _add_flows(users["admin"], first=0, count=25)
    flows = sorted(Flow.objects.select_related("source", "target"), key=lambda flow: flow.name)

    def task_rows(shown) -> int:  # their task roll-ups, and the newest roll-up's age (one row)
        return FlowTaskStatus.objects.filter(flow__in=shown).count() + 1

    for page, shown in (("1", flows[:10]), ("3", flows[20:])):
        with status_rows_read("controlplane_flowtaskstatus") as read:
            answer = client.get("/flows/", {"page": page})
        assert [summary.flow for summary in answer.context["summaries"]] == shown
        assert read["rows"] == task_rows(shown)  # every flow's before: 76 rows
    # Sorted by a live figure, every flow's roll-up is read to order them.
    with status_rows_read("controlplane_flowtaskstatus") as read:
        answer = client.get("/flows/", {"sort": "-records_behind"})
    assert read["rows"] == task_rows(flows) and len(answer.context["summaries"]) == 10


@pytest.mark.django_db
def test_a_request_runs_no_statement_twice(users, settings):
    """The flows list and API and one flow's pages and APIs read each row set of the control plane's tables
    once per request: a flow's page read its task roll-ups three times and its verification summary twice
    before (28 statements, now 23; its status API 12, now 10)."""
    settings.METRICS_BEARER_TOKEN = ""
    client = Client()
    client.force_login(users["viewer"])
    _add_flows(users["admin"], first=0, count=3)
    first = Flow.objects.order_by("pk").first()
    paths = ["/flows/", "/api/v1/flows/", *(path.format(flow=first.pk) for path in FLOW_PAGES)]
    repeated = {}
    for path in paths:
        with CaptureQueriesContext(connection) as queries:
            assert client.get(path).status_code == 200
        statements = [q["sql"] for q in queries.captured_queries if 'FROM "controlplane_' in q["sql"]]
        repeated[path] = sorted({sql for sql in statements if statements.count(sql) > 1})
    assert repeated == {path: [] for path in paths}


# Statements per request of what `python -m bench api` asks (docs/performance.md): each one costs the web
# its compilation and a round trip, PostgreSQL its parse and plan.
STATEMENT_BUDGET = {
    # 5 before the token's statement told whether its user signs in through SSO, 4 before it read their role.
    "/api/v1/flows/": 3,
    # 13 before the clusters were read once for the filter and the "Create a flow" button, and whether
    # flows should replicate (the workers' banner) in one statement, not two.
    "/flows/": 11,
    # 22 before: its verification card's rows counted by its summary, not again; the banner's read; 20
    # before ACL parity was judged by the flow's signals, not by its warning events; 19 before its live RPO
    # per topic came from the task rows it reads anyway, not a GROUP BY over its partition rows.
    "/flows/{flow}/": 18,
    # 10 before: that, and the role read once per request, not twice; 8 before it came with the token.
    "/api/v1/flows/{flow}/status/": 7,
}


@pytest.mark.django_db
def test_the_benchmarked_pages_and_apis_stay_within_their_statements(users, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 3600
    _add_flows(users["admin"], first=0, count=3)
    first = Flow.objects.order_by("pk").first()
    browser = Client()
    browser.force_login(users["viewer"])
    key, _ = api_token_issue(user=users["viewer"])
    api = Client(headers={"authorization": f"Token {key}"})  # as the bench asks: a session, a token
    counts = {}
    for path in STATEMENT_BUDGET:
        client = api if path.startswith("/api/") else browser
        with CaptureQueriesContext(connection) as queries:
            assert client.get(path.format(flow=first.pk)).status_code == 200
        counts[path] = len(queries)
    assert counts == STATEMENT_BUDGET
