"""The message browser's search, export and live tail in a real Chromium: records found in every
partition, the count read shown, the result downloaded as CSV, and a record produced while the tail
runs appearing at its top. A screenshot of each step is kept under tests/e2e/artifacts/, and of the page
at the moment an assertion fails."""

from __future__ import annotations

import csv
import io

import pytest
from playwright.sync_api import Page, expect

from controlplane import core
from controlplane.core.roles import Role
from controlplane.flows import cluster_reads
from tests.e2e.conftest import PASSWORD, kept
from tests.web.mirroring import keyed_around_a_moment, produce_keyed, stored_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def test_search_every_partition_export_and_tail(page: Page, live_server, cluster_a, unique_name):
    cluster_reads.reset_breakers()
    topic = f"e2e-search-{unique_name}"
    keyed_around_a_moment(cluster_a, topic, partitions=2, before=4, after=1)
    user, _ = core.user_create_with_role(username="reader", role=Role.VIEWER, password=PASSWORD)
    stored_cluster(actor=user, config=cluster_a)

    page.goto(f"{live_server.url}/login/?next=/topics/A/{topic}/")
    page.get_by_label("Username").fill("reader")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    page.get_by_role("link", name="Search all partitions").click()

    with kept(page, "search-01-json-path"):
        page.get_by_label("JSON path").fill("$.amount")
        page.get_by_label("equals").fill("20")
        page.get_by_role("button", name="Search", exact=True).click()
        rows = page.locator("#search-result table.search-records tbody tr")
        expect(rows).to_have_count(2)
        expect(rows.nth(0)).to_contain_text("k2")
        expect(page.locator("#search-scanned")).to_have_text("10")

    with page.expect_download() as download:
        page.locator("#export-csv").click()
    exported = list(csv.reader(io.StringIO(download.value.path().read_text())))
    assert sorted((row[0], row[3]) for row in exported[1:]) == [("0", "k2"), ("1", "k2")]

    with kept(page, "search-02-tail"):
        page.get_by_label("Key contains").fill("k")
        page.get_by_label("JSON path").fill("")
        page.get_by_label("equals").fill("")
        page.get_by_role("button", name="Live tail").click()
        expect(page.locator("#tail-status")).to_contain_text("new records read")
        page.locator("#tail-rows").evaluate("rows => rows.setAttribute('data-keep', '1')")  # the newest only
        produce_keyed(cluster_a, topic, count=3, partition=1, first=5)  # k5, k6, k7 in one read or more
        tail_rows = page.locator("#tail-rows tr")
        expect(tail_rows.first).to_contain_text("k7", timeout=15_000)
        expect(tail_rows).to_have_count(1)  # k5 and k6 came too: the tail keeps its newest rows
        expect(tail_rows.first).to_have_attribute("data-partition", "1")
    page.locator("#stop-tail").click()
    expect(page.locator("#tail")).to_have_count(0)
