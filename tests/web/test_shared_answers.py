"""Issue 38 item 4: the flows list, as a page and in the API, is built once for every client asking for it
within MIRRORPLANE_SHARED_ANSWER_S seconds (controlplane/core/microcache.py), through Redis as the web's
processes share it; a change of configuration is seen on the next request, what the workers report is at
most those seconds old and says so, each viewer keeps their own role and CSRF token, and without Redis every
request is still answered. Transactional tests: a write starts the new generation when it commits."""

from __future__ import annotations

import re
import time

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane import core
from controlplane.core.roles import Role
from controlplane.core.tokens import api_token_issue
from controlplane.flows import services
from controlplane.flows.models import Flow
from tests.status_reports import stored_report

pytestmark = pytest.mark.django_db(transaction=True)
FLOW_TABLE = '"controlplane_flow"'
CSRF = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


@pytest.fixture
def shared(settings):
    settings.MIRRORPLANE_SHARED_ANSWER_S = 60  # longer than any test: only a new generation rebuilds
    settings.MIRRORPLANE_STALE_AFTER_S = 3600


def _flows(admin, count: int = 3) -> list[Flow]:
    flows = []
    for index in range(count):
        source = services.cluster_create(
            actor=admin, alias=f"S{index}", bootstrap_servers=f"s{index}.invalid:9092"
        )
        target = services.cluster_create(
            actor=admin, alias=f"T{index}", bootstrap_servers=f"t{index}.invalid:9092"
        )
        flows.append(services.flow_create(actor=admin, source=source, target=target, enabled=True))
    return flows


def _api(user) -> Client:
    key, _ = api_token_issue(user=user)
    return Client(headers={"authorization": f"Token {key}"})


def _browser(user) -> Client:
    client = Client(enforce_csrf_checks=True)
    client.force_login(user)
    return client


def _get(client: Client, path: str):
    """The answer and how many statements read the flows' table for it."""
    with CaptureQueriesContext(connection) as queries:
        answer = client.get(path)
    assert answer.status_code == 200, (path, answer.status_code)
    return answer, sum(FLOW_TABLE in query["sql"] for query in queries)


def test_the_flows_api_is_built_once_for_its_askers_until_the_configuration_changes(users, shared):
    flows = _flows(users["admin"])
    first, first_reads = _get(_api(users["viewer"]), "/api/v1/flows/")
    assert first_reads and first["Age"] == "0"
    other_viewer, _ = core.user_create_with_role(username="viewer2", role=Role.VIEWER)
    again, reads = _get(_api(other_viewer), "/api/v1/flows/")
    assert reads == 0 and again.json() == first.json() and int(again["Age"]) >= 0
    # A pause (an update statement, no signal) and a rename are seen by the next request, whoever asks.
    services.flow_pause(actor=users["operator"], flow=flows[0])
    paused, reads = _get(_api(other_viewer), "/api/v1/flows/")
    assert reads and {row["id"]: row["state"] for row in paused.json()["results"]}[flows[0].pk] == "paused"
    services.cluster_update(actor=users["admin"], cluster=flows[1].source, changes={"alias": "S1-renamed"})
    renamed, reads = _get(_api(users["viewer"]), "/api/v1/flows/")
    assert (
        reads and {row["id"]: row["source"] for row in renamed.json()["results"]}[flows[1].pk] == "S1-renamed"
    )
    services.flow_delete(actor=users["admin"], flow=flows[2])
    deleted, reads = _get(_api(users["viewer"]), "/api/v1/flows/")
    assert reads and flows[2].pk not in {row["id"] for row in deleted.json()["results"]}
    # JSON is shared as its bytes; the browsable API (another representation) as its data.
    assert deleted["Content-Type"] == "application/json"
    browsable = _api(users["viewer"]).get("/api/v1/flows/", headers={"accept": "text/html"})
    assert browsable.status_code == 200 and browsable["Content-Type"].startswith("text/html")
    assert "S1-renamed" in browsable.content.decode() and "Age" in browsable
    # Each page and query string is its own answer.
    filtered, reads = _get(_api(users["viewer"]), "/api/v1/flows/?state=paused")
    assert reads and [row["id"] for row in filtered.json()["results"]] == [flows[0].pk]


def test_the_flows_page_is_shared_by_a_role_with_each_viewers_own_csrf_token(users, shared):
    flows = _flows(users["admin"], count=2)
    second_operator, _ = core.user_create_with_role(username="operator2", role=Role.OPERATOR)
    first, first_reads = _get(_browser(users["operator"]), "/flows/")
    browser = _browser(second_operator)
    page, reads = _get(browser, "/flows/")
    assert first_reads and reads == 0
    html = page.content.decode()
    assert 'id="pause-flow"' in html and "As of <time" in html
    # The dialogs' token is this viewer's: their pause goes through CSRF's check.
    (token,) = set(CSRF.findall(html))
    assert token not in CSRF.findall(first.content.decode())
    answer = browser.post(f"/flows/{flows[0].pk}/pause/", {"csrfmiddlewaretoken": token, "next": "/flows/"})
    assert answer.status_code == 302, answer.content[:300]
    after, reads = _get(browser, "/flows/")
    assert reads and f'data-action="/flows/{flows[0].pk}/resume/"' in after.content.decode()
    # A viewer gets the viewers' page (no actions), not the operators'.
    viewer_page, reads = _get(_browser(users["viewer"]), "/flows/")
    assert reads and "data-action=" not in viewer_page.content.decode()


def test_what_the_workers_report_is_at_most_the_set_seconds_old(users, settings):
    settings.MIRRORPLANE_SHARED_ANSWER_S = 1
    settings.MIRRORPLANE_STALE_AFTER_S = 3600
    (flow,) = _flows(users["admin"], count=1)
    report = {"flow": flow, "topic": "orders", "partition": 0, "remote_topic": "S0.orders"}
    stored_report(**report, records_behind=1234567, seconds_behind=1.0, observed_at=timezone.now())
    browser = _browser(users["viewer"])
    assert "1,234,567" in _get(browser, "/flows/")[0].content.decode()
    stored_report(**report, records_behind=7654321, seconds_behind=1.0, observed_at=timezone.now())
    deadline = time.monotonic() + 10
    while "7,654,321" not in (html := _get(browser, "/flows/")[0].content.decode()):
        assert time.monotonic() < deadline, "the new figure never showed"
        time.sleep(0.2)
    assert "As of <time" in html


def test_without_redis_every_request_is_answered(users, shared, settings):
    _flows(users["admin"], count=1)
    settings.REDIS_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    assert _get(_api(users["viewer"]), "/api/v1/flows/")[1]
    assert _get(_browser(users["viewer"]), "/flows/")[1]
    services.flow_pause(actor=users["operator"], flow=Flow.objects.get())  # the new generation is not stored
    assert _get(_api(users["viewer"]), "/api/v1/flows/")[0].json()["results"][0]["state"] == "paused"


def test_a_flows_status_api_and_live_part_are_shared_by_its_watchers(users, shared):
    """The on-call team watching one flow: its status API and its page's live refresh are built once for
    them (the roll-up's rows read once), and a pause is seen at the next refresh."""
    flow, other = _flows(users["admin"], count=2)
    report = {"flow": flow, "topic": "orders", "partition": 0, "remote_topic": "S0.orders"}
    stored_report(**report, records_behind=5, seconds_behind=1.0, observed_at=timezone.now())
    second_viewer, _ = core.user_create_with_role(username="viewer2", role=Role.VIEWER)
    status_path, live_path = f"/api/v1/flows/{flow.pk}/status/", f"/flows/{flow.pk}/live/"
    tasks = '"controlplane_flowtaskstatus"'
    for path, clients in (
        (status_path, (_api(users["viewer"]), _api(second_viewer))),
        (live_path, (_browser(users["viewer"]), _browser(second_viewer))),
    ):
        with CaptureQueriesContext(connection) as first_queries:
            first = clients[0].get(path)
        with CaptureQueriesContext(connection) as queries:
            again = clients[1].get(path)
        assert first.status_code == again.status_code == 200 and first.content == again.content
        assert any(tasks in q["sql"] for q in first_queries) and not any(tasks in q["sql"] for q in queries)
        # Another flow, another answer.
        other_answer = clients[1].get(path.replace(str(flow.pk), str(other.pk)))
        assert other_answer.status_code == 200 and other_answer.content != first.content
    services.flow_pause(actor=users["operator"], flow=flow)
    assert _api(second_viewer).get(status_path).json()["state"] == "paused"
    live = _browser(second_viewer).get(live_path)
    state = re.compile(r'<span class="label">State</span><span class="value">(.*?)</span></div>')
    assert live.status_code == 200 and state.search(live.content.decode()).group(1) != state.search(
        first.content.decode()
    ).group(1)


def test_a_flows_page_shares_its_live_part_with_its_viewers_and_their_refreshes(users, shared):
    """The flow page's live part (roll-up, partitions, assurance) is built once for the viewers of a role
    opening it and for the refreshes of their open pages; the page's head (name, actions, CSRF token of the
    delete dialog) is each request's own, and a pause is seen on the next page."""
    (flow,) = _flows(users["admin"], count=1)
    report = {"flow": flow, "topic": "orders", "partition": 0, "remote_topic": "S0.orders"}
    stored_report(**report, records_behind=5, seconds_behind=1.0, observed_at=timezone.now())
    second_admin, _ = core.user_create_with_role(username="admin2", role=Role.ADMIN)
    page_path, live_path = f"/flows/{flow.pk}/", f"/flows/{flow.pk}/live/"
    tasks = '"controlplane_flowtaskstatus"'
    first_browser, second_browser = _browser(users["admin"]), _browser(second_admin)
    with CaptureQueriesContext(connection) as first_queries:
        first = first_browser.get(page_path)
    with CaptureQueriesContext(connection) as queries:
        again = second_browser.get(page_path)
        live = second_browser.get(live_path)
    assert first.status_code == again.status_code == live.status_code == 200
    assert any(tasks in q["sql"] for q in first_queries) and not any(tasks in q["sql"] for q in queries)
    live_part = live.content.decode()
    assert live_part in first.content.decode() and live_part in again.content.decode()
    tokens = {CSRF.search(page.content.decode()).group(1) for page in (first, again)}
    assert len(tokens) == 2  # each viewer's own token in the head's dialogs
    services.flow_pause(actor=users["operator"], flow=flow)
    paused = second_browser.get(page_path).content.decode()
    state = re.compile(r'<span class="label">State</span><span class="value">(.*?)</span></div>')
    assert state.search(paused).group(1) != state.search(live_part).group(1)


def test_the_overviews_live_part_is_shared_by_its_viewers_with_their_own_dialogs(users, shared):
    """Every open overview asks for its live part every 5 s: built once for the viewers of a role within a
    moment, saying when; the pause and resume dialogs, with each viewer's CSRF token, are the page's."""
    flow, _ = _flows(users["admin"], count=2)
    report = {"flow": flow, "topic": "orders", "partition": 0, "remote_topic": "S0.orders"}
    stored_report(**report, records_behind=5, seconds_behind=1.0, observed_at=timezone.now())
    second_operator, _ = core.user_create_with_role(username="operator2", role=Role.OPERATOR)
    first_browser, second_browser = _browser(users["operator"]), _browser(second_operator)
    tasks = '"controlplane_flowtaskstatus"'
    with CaptureQueriesContext(connection) as first_queries:
        first = first_browser.get("/")
    with CaptureQueriesContext(connection) as queries:
        again = second_browser.get("/")
        live = second_browser.get("/overview/live/")
    assert first.status_code == again.status_code == live.status_code == 200
    assert any(tasks in q["sql"] for q in first_queries) and not any(tasks in q["sql"] for q in queries)
    live_part = live.content.decode()
    assert 'id="overview-as-of"' in live_part and live_part in first.content.decode()
    assert "csrfmiddlewaretoken" not in live_part  # the dialogs are the page's, not the shared part's
    tokens = {CSRF.search(page.content.decode()).group(1) for page in (first, again)}
    assert len(tokens) == 2
    services.flow_pause(actor=users["operator"], flow=flow)
    assert "paused" in second_browser.get("/overview/live/").content.decode()
    assert "paused" not in live_part.split('id="readiness-overview"')[0].split("<table")[1]


def test_whether_replication_runs_is_read_once_for_the_pages_built_within_a_moment(users, shared):
    """Every flow's page shows the workers banner (`replication_activity`): two different flows' live
    parts, each built anew, read it once between them, and both show it."""
    first_flow, second_flow = _flows(users["admin"], count=2)
    newest = 'MAX("controlplane_flowtaskstatus"."observed_at")'
    browser = _browser(users["viewer"])
    with CaptureQueriesContext(connection) as first_queries:
        first = browser.get(f"/flows/{first_flow.pk}/live/")
    with CaptureQueriesContext(connection) as queries:
        second = browser.get(f"/flows/{second_flow.pk}/live/")
    assert first.status_code == second.status_code == 200 and first.content != second.content
    assert any(newest in q["sql"] for q in first_queries) and not any(newest in q["sql"] for q in queries)
    banner = "No replication worker is running"  # the flows are enabled and no worker announced itself
    assert banner in first.content.decode() and banner in second.content.decode()
