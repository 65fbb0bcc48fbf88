"""The flow page, its live refresh and the flow status API show one page of a flow's partitions (issue 34):
worst first, searched by topic, filtered by state, paged in SQL; never the whole list in one answer. Counted
with 2,000 partitions stored: statements, rows shown, answer size."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from controlplane.assurance.models import PartitionVerification
from controlplane.status.models import FlowPartitionStatus, PartitionState
from tests.status_reports import status_rows_read, task_rollup_rebuild

pytestmark = pytest.mark.django_db

PARTITIONS = 2_000
TOPICS = 20  # t00 .. t19, 100 partitions each
ERRORS = {("t03", 7): PartitionState.ERR, ("t11", 2): PartitionState.STOP}
STALE = {("t05", 1), ("t05", 2), ("t15", 9)}
WARNS = {("t01", 4), ("t02", 4)}
MISMATCHES = {("t19", 99), ("t08", 50)}  # the verifier found these copies differ
MAX_BYTES = 200_000
MAX_STATEMENTS = 30  # the page's reads (21 today); a page of rows is two of them whatever the flow's size
MAX_API_STATEMENTS = 15  # 10 today


def _store(flow) -> None:
    now = timezone.now()
    rows = []
    for index in range(PARTITIONS):
        topic, partition = f"t{index % TOPICS:02d}", index // TOPICS
        key = (topic, partition)
        state = ERRORS.get(key) or (PartitionState.WARN if key in WARNS else PartitionState.OK)
        rows.append(
            FlowPartitionStatus(
                flow=flow,
                topic=topic,
                partition=partition,
                remote_topic=f"A.{topic}",
                replicated_offset=1000,
                source_end_offset=1000 + index % 7,
                records_behind=index % 7,
                seconds_behind=(index % 50) / 10,
                record_count=1000,
                byte_count=50_000,
                state=state,
                observed_at=now - timedelta(seconds=600 if key in STALE else 1),
                task_index=1 if key in STALE else 0,  # task 1 stopped reporting 10 minutes ago
            )  # fmt: skip
        )
    FlowPartitionStatus.objects.bulk_create(rows)
    _report_tasks(flow)
    PartitionVerification.objects.bulk_create(
        PartitionVerification(
            flow=flow,
            topic=row.topic,
            partition=row.partition,
            verified_from=0,
            verified_up_to=990,
            status="mismatch" if (row.topic, row.partition) in MISMATCHES else "ok",
            checked_at=now,
        )  # fmt: skip
        for row in rows
    )


def _report_tasks(flow) -> None:
    """Each task's roll-up of its stored rows, as its worker writes it."""
    for task_index in (0, 1):
        task_rollup_rebuild(flow_id=flow.pk, task_index=task_index)


def _all_fresh(flow) -> None:
    FlowPartitionStatus.objects.filter(flow=flow).update(observed_at=timezone.now())
    _report_tasks(flow)


def _shown(page: str) -> list[tuple[str, int]]:
    """The (topic, partition) of each partition row rendered, in order."""
    return [(t, int(p)) for t, p in re.findall(r'<tr data-rate-key="([^"/]+)/(\d+)"', page)]


def _worst_first(rows: list[FlowPartitionStatus]) -> list[tuple[str, int]]:
    """The expected order, from the rows (the page's rule, written out)."""
    stale_before = timezone.now() - timedelta(seconds=60)

    def key(row):
        shown = "STALE" if row.observed_at < stale_before else row.state
        severity = 2 if shown == "STALE" else 1 if shown == "WARN" else 0 if shown == "OK" else 3
        return (-severity, -row.seconds_behind, -row.records_behind, row.topic, row.partition)

    return [(row.topic, row.partition) for row in sorted(rows, key=key)]


@pytest.fixture
def big_flow(flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    _store(flow)
    return flow


def test_the_flow_page_shows_one_page_worst_first_in_a_bounded_number_of_statements(client_as, big_flow):
    viewer = client_as("viewer")
    with CaptureQueriesContext(connection) as queries:
        response = viewer.get(reverse("web:flow", args=[big_flow.pk]))
    page = response.content.decode()
    assert response.status_code == 200 and len(response.content) < MAX_BYTES
    assert len(queries) <= MAX_STATEMENTS, [q["sql"][:120] for q in queries]
    expected = _worst_first(list(FlowPartitionStatus.objects.filter(flow=big_flow)))
    assert _shown(page) == expected[:50]
    assert set(_shown(page)[:2]) == set(ERRORS) and set(_shown(page)[2:5]) == STALE  # then WARN, then lag
    assert set(_shown(page)[5:7]) == WARNS
    assert "1-50 of 2,000 partitions, worst first" in page and "page 1 of 40" in page
    # Every partition verified: the card counts them and lists a few, the mismatches first.
    assert '2,000 of 2,000 partitions verified, <span class="error-text">2 differ</span>' in page
    verified = re.findall(r"<tr><td><code>(t\d\d)</code></td><td>(\d+)</td><td><span class=\"check-", page)
    assert len(verified) == 20 and {(t, int(p)) for t, p in verified[:2]} == MISMATCHES
    assert 'rel="next"' in page and f"{reverse('web:flow', args=[big_flow.pk])}?page=2" in page


def test_search_state_filter_and_pages_give_the_right_rows(client_as, big_flow):
    viewer = client_as("viewer")
    url = reverse("web:flow", args=[big_flow.pk])
    rows = list(FlowPartitionStatus.objects.filter(flow=big_flow))
    expected = _worst_first(rows)

    second = viewer.get(url, {"page": 2}).content.decode()
    assert _shown(second) == expected[50:100] and "51-100 of 2,000" in second

    t07 = viewer.get(url, {"q": "t07"}).content.decode()
    assert _shown(t07) == [key for key in expected if key[0] == "t07"][:50]
    assert "1-50 of 100 matching topic “t07” (of 2,000) partitions" in t07

    stale = viewer.get(url, {"state": "STALE"}).content.decode()
    assert _shown(stale) == [key for key in expected if key in STALE]
    assert viewer.get(url, {"state": "STOP", "q": "t11"}).content.decode().count("<tr data-rate-key") == 1
    last = viewer.get(url, {"q": "t1", "state": "OK", "page": 99}).content.decode()  # past the end: the last
    ok_t1 = [key for key in expected if key[0].startswith("t1") and key not in STALE and key not in ERRORS]
    assert _shown(last) == ok_t1[950:] and "page 20 of 20" in last
    nothing = viewer.get(url, {"q": "no-such-topic"})
    assert nothing.status_code == 200 and "No partition of this flow matches" in nothing.content.decode()

    assert viewer.get(url, {"q": "t\x00"}).status_code == 400
    bad = viewer.get(url, {"state": "BROKEN"})
    assert (
        bad.status_code == 400
        and "state: no state &#x27;BROKEN&#x27;; choose one of OK" in bad.content.decode()
    )


def test_the_live_refresh_answers_204_until_something_shown_changes_and_keeps_the_query(client_as, big_flow):
    # The ages of stale figures grow each second, and the page shows them: with stale ones, every refresh
    # is a change. Here every partition has reported within the limit.
    _all_fresh(big_flow)
    viewer = client_as("viewer")
    live = reverse("web:flow-live", args=[big_flow.pk])
    with CaptureQueriesContext(connection) as queries:
        first = viewer.get(live, {"q": "t0", "state": "OK", "page": 3})
    assert first.status_code == 200 and len(first.content) < MAX_BYTES and len(queries) <= MAX_STATEMENTS
    assert len(_shown(first.content.decode())) == 50
    polled = re.search(r'hx-get="([^"]+)"', first.content.decode()).group(1).replace("&amp;", "&")
    assert polled.startswith(f"{live}?q=t0&state=OK&page=3&v=")  # the user's search, filter and page

    unchanged = viewer.get(polled)
    assert unchanged.status_code == 204 and unchanged.content == b""

    shown = _shown(first.content.decode())[0]
    FlowPartitionStatus.objects.filter(flow=big_flow, topic=shown[0], partition=shown[1]).update(
        records_behind=6, seconds_behind=4.9, observed_at=timezone.now()
    )
    changed = viewer.get(polled)
    assert changed.status_code == 200 and changed.content != first.content
    assert (
        viewer.get(
            re.search(r'hx-get="([^"]+)"', changed.content.decode()).group(1).replace("&amp;", "&")
        ).status_code
        == 204
    )


def test_a_figure_going_stale_is_a_change_the_live_refresh_sends(client_as, big_flow, settings):
    _all_fresh(big_flow)
    viewer = client_as("viewer")
    live = reverse("web:flow-live", args=[big_flow.pk])
    first = viewer.get(live, {"q": "t04"})
    polled = re.search(r'hx-get="([^"]+)"', first.content.decode()).group(1).replace("&amp;", "&")
    assert viewer.get(polled).status_code == 204
    settings.MIRRORPLANE_STALE_AFTER_S = 0.01  # nobody reported since: every figure is now stale
    stale = viewer.get(polled)
    assert stale.status_code == 200 and "last seen" in stale.content.decode()


def test_the_status_api_answers_a_page_of_partitions_with_the_flows_roll_up(client_as, big_flow):
    viewer = client_as("viewer")
    url = f"/api/v1/flows/{big_flow.pk}/status/"
    with CaptureQueriesContext(connection) as queries:
        response = viewer.get(url)
    body = response.json()
    assert response.status_code == 200 and len(response.content) < MAX_BYTES
    assert len(queries) <= MAX_API_STATEMENTS, [q["sql"][:120] for q in queries]
    assert body["partition_count"] == PARTITIONS and body["records_behind"] == sum(
        i % 7 for i in range(PARTITIONS)
    )
    assert body["health"] == "error" and body["status"] == "ERR"
    page = body["partitions"]
    assert (page["count"], page["page"], page["page_size"], page["pages"]) == (PARTITIONS, 1, 50, 40)
    assert page["previous"] is None and page["next"].endswith(f"{url}?page=2")
    expected = _worst_first(list(FlowPartitionStatus.objects.filter(flow=big_flow)))
    assert [(p["topic"], p["partition"]) for p in page["results"]] == expected[:50]
    assert page["results"][2]["state"] == "STALE" and page["results"][2]["reported_state"] == "OK"

    found = viewer.get(url, {"search": "t05", "state": "STALE", "page_size": 2}).json()["partitions"]
    assert [(p["topic"], p["partition"]) for p in found["results"]] == [
        ("t05", 2),
        ("t05", 1),
    ]  # 4.5 s, 2.5 s
    assert found["count"] == 2 and found["next"] is None
    third = viewer.get(url, {"page": 3, "page_size": 500}).json()["partitions"]
    assert [(p["topic"], p["partition"]) for p in third["results"]] == expected[1000:1500]
    assert "page=2" in third["previous"] and "page=4" in third["next"]

    assert viewer.get(url, {"state": "BROKEN"}).json().keys() >= {"state"}
    assert viewer.get(url, {"page_size": 501}).status_code == 400
    assert viewer.get(url, {"page": "x"}).status_code == 400


def test_the_page_its_refresh_and_the_api_read_a_page_of_rows_not_every_row(client_as, big_flow):
    viewer = client_as("viewer")
    for url in (
        reverse("web:flow", args=[big_flow.pk]),
        reverse("web:flow-live", args=[big_flow.pk]),
        f"/api/v1/flows/{big_flow.pk}/status/",
    ):
        with status_rows_read() as read:
            assert viewer.get(url).status_code == 200
        # A page, its count, and the live RPO's roll-up: a row per topic and task (two tasks here).
        assert read["rows"] <= 50 + 1 + TOPICS * 2, url
