"""An MM2 import's dry run in a real Chromium (issue 28 item 2): the seeds' file naming the demo's clusters
under other aliases is refused, and forced, its dry run lists what each flow would mirror with the copy
that would come back flagged as a loop. Screenshots under tests/e2e/artifacts/, and at a failure."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from controlplane.flows import cluster_reads, services
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from tests.conftest import ensure_heartbeats_topic
from tests.e2e.conftest import kept

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def test_a_forced_dry_run_shows_the_topics_and_flags_the_loop(
    page: Page, signed_in, cluster_a, cluster_b, unique_name
):
    cluster_reads.reset_breakers()
    stem = unique_name[-8:]
    local, copy = f"e{stem}-orders", f"b.e{stem}-inventory"
    assert TopicAdmin(cluster_a).create_topics([NewRemoteTopic(t, t, 1, 1, {}) for t in (local, copy)]) == {
        local: None,
        copy: None,
    }
    ensure_heartbeats_topic(cluster_a)  # mirrored whatever the filter: always there, always counted
    for alias, config in (("a", cluster_a), ("b", cluster_b)):
        services.cluster_create(actor=None, alias=alias, bootstrap_servers=config.bootstrap_servers)
    text = f"""clusters = DC1, DC2
DC1.bootstrap.servers = {cluster_a.bootstrap_servers}
DC2.bootstrap.servers = {cluster_b.bootstrap_servers}
DC1->DC2.enabled = true
DC1->DC2.topics = e{stem}-.*, b\\.e{stem}-.*
"""
    page.goto(f"{signed_in}/mm2/import/")
    page.locator("form.form textarea[name=text]").fill(text)
    page.get_by_role("button", name="Dry run", exact=True).click()
    with kept(page, "import-01-refused"):
        expect(page.get_by_role("alert").first).to_contain_text("DC1 is cluster a under another alias")
    page.locator("form.form input[name=force]").check()
    expect(page.locator("form.form textarea[name=text]")).to_have_value(text)
    page.get_by_role("button", name="Dry run", exact=True).click()
    with kept(page, "import-02-preview"):
        preview = page.locator('.flow-preview[data-flow="DC1->DC2"]')
        expect(preview).to_have_attribute("data-loops", "1")
        expect(preview.locator("tbody tr")).to_have_count(3)  # the two topics and heartbeats
        expect(preview.locator("tr.loop")).to_have_attribute("data-topic", copy)
        expect(preview.locator("tr.loop")).to_contain_text(f"DC1.{copy}")
        expect(preview).to_contain_text("Read at")
        expect(page.locator(".result")).to_contain_text(
            "replication loop: DC1->DC2 would copy 1 topic(s) back"
        )
