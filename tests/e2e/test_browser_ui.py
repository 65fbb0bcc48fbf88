"""The message browser and the consumer group pages in a real Chromium: a mirrored topic's records beside
their copies on the target, and a group's offsets with an offset reset dry run."""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import Page, expect

from controlplane import core
from controlplane.core.roles import Role
from controlplane.flows import cluster_reads
from replication.config import FlowConfig
from replication.kafka.flow_tasks import periodic_tasks_for_flow
from replication.kafka.groups import GroupOffsetsAdmin
from tests.web.mirroring import create_topic, mirror_topic, mirrored_flow, produce_keyed, stored_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
RECORDS = 8


def test_records_beside_their_copies_and_a_group_reset_dry_run(
    page: Page, live_server, cluster_a, cluster_b, unique_name, screenshot
):
    cluster_reads.reset_breakers()
    topic, group = f"e2e-orders-{unique_name}", f"e2e-billing-{unique_name}"
    create_topic(cluster_a, topic, 1)
    produce_keyed(cluster_a, topic, count=RECORDS)
    remote_topic = mirror_topic(cluster_a, cluster_b, topic, partitions=1, records=RECORDS)
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(topic, 0): 5}) == {}
    flow_config = FlowConfig(source="A", target="B", enabled=True, topics=(topic,), groups=(group,))
    for job in periodic_tasks_for_flow(
        flow=flow_config, source=cluster_a, target=cluster_b, known_aliases=["A", "B"]
    ):
        job.tick(now=time.time())
        job.close()
    user, _ = core.user_create_with_role(username="oncall", role=Role.OPERATOR, password=PASSWORD)
    a, b = stored_cluster(actor=user, config=cluster_a), stored_cluster(actor=user, config=cluster_b)
    mirrored_flow(actor=user, source=a, target=b, topic=topic, group=group)
    base = live_server.url

    # Straight to the topics (the overview, with its charts' script, is not what this test is about).
    page.goto(f"{base}/login/?next=/topics/")
    page.get_by_label("Username").fill("oncall")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()

    # Topics of A; the topic; its records from offset 2.
    expect(page.locator("#read-at")).to_contain_text("Read from A at")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Topics")).to_have_attribute(
        "aria-current", "page"
    )
    screenshot("browser-01-topics")
    page.get_by_role("link", name=topic, exact=True).click()
    expect(page.locator("table.partition-offsets tbody tr")).to_have_count(1)
    page.get_by_label("Offset").fill("2")
    page.get_by_label("Max records").fill("4")
    page.get_by_role("button", name="Read").click()
    rows = page.locator("table.records tbody tr")
    expect(rows).to_have_count(4)
    expect(rows.first).to_contain_text("k2")
    expect(rows.first).to_contain_text('"amount": 20')
    expect(rows.first).to_contain_text("trace")
    screenshot("browser-02-topic-records")

    # Side by side: each source record beside its copy at the translated offset on B.
    page.get_by_role("link", name="compare these records with their copies").click()
    expect(page.get_by_role("heading", name=re.compile(f"A beside B: {topic}"))).to_be_visible()
    copies = page.locator("table.copies tbody tr")
    expect(copies).to_have_count(4)
    for index in range(4):
        expect(copies.nth(index).locator(".verdict")).to_have_text("= equal")
    expect(copies.first).to_have_attribute("data-target-offset", "2")
    expect(page.locator("#copy-counts")).to_have_text("4 equal")
    expect(page.locator("table.copies thead")).to_contain_text(remote_topic)
    screenshot("browser-03-side-by-side")

    # Consumer groups, from the navigation; the group, its lag and what a failover of A->B would write.
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Consumer groups").click()
    expect(page.locator("#groups-A")).to_contain_text("Read from A at")
    expect(page.locator("table.groups")).to_contain_text(group)
    screenshot("browser-04-groups")
    page.locator("table.groups").get_by_role("link", name=group).click()
    expect(page.locator("#group-state")).to_have_text("EMPTY")
    expect(page.locator("table.group-offsets tbody tr")).to_contain_text("5")
    expect(page.locator("table.checkpoints tbody tr")).to_contain_text(remote_topic)
    expect(page.locator(".flow-checkpoints")).to_contain_text("would write 1 offset")

    # The reset's dry run: the plan, and nothing written.
    page.get_by_label("Reset to").select_option("earliest")
    page.locator("#reset").get_by_role("button", name="Dry run").click()
    plan = page.locator("#reset-plan")
    expect(plan).to_have_attribute("data-dry-run", "true")
    expect(plan.get_by_role("heading")).to_have_text("Dry run: nothing changed")
    expect(plan.locator("tbody tr")).to_contain_text("5")
    expect(plan.locator("tbody tr strong")).to_have_text("0")
    screenshot("browser-05-group-reset-dry-run")
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(group)[(topic, 0)].offset == 5
