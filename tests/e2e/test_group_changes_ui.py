"""A consumer group's offset reset and deletion in a real Chromium, as an operator does them: the dry run
(per partition the committed offset, the new one and the lag change, nothing written), then the apply
after the confirmation; the same for deleting the group. A screenshot of each step is kept under
tests/e2e/artifacts/, and of the page at the moment an assertion fails."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition
from playwright.sync_api import Page, expect

from controlplane import core
from controlplane.core.roles import Role
from controlplane.flows import cluster_reads
from replication.kafka.clients import make_consumer
from replication.kafka.groups import GroupOffsetsAdmin
from tests.e2e.conftest import PASSWORD, kept
from tests.web.mirroring import create_topic, produce_keyed, stored_cluster

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]


def test_reset_by_shift_and_delete_dry_run_then_apply(page: Page, live_server, cluster_a, unique_name):
    cluster_reads.reset_breakers()
    topic, group = f"e2e-shift-{unique_name}", f"e2e-shifted-{unique_name}"
    create_topic(cluster_a, topic, 2)
    for partition in (0, 1):
        produce_keyed(cluster_a, topic, count=10, partition=partition)
    consumer = make_consumer(cluster_a, group_id=group)
    consumer.commit(offsets=[TopicPartition(topic, 0, 6), TopicPartition(topic, 1, 8)], asynchronous=False)
    consumer.close()
    user, _ = core.user_create_with_role(username="oncall", role=Role.OPERATOR, password=PASSWORD)
    stored_cluster(actor=user, config=cluster_a)
    page.on("dialog", lambda dialog: dialog.accept())  # the apply buttons' confirmations

    page.goto(f"{live_server.url}/login/?next=/groups/A/{group}")
    page.get_by_label("Username").fill("oncall")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.locator("#group-state")).to_have_text("EMPTY")

    reset = page.locator("#reset")
    with kept(page, "group-reset-01-dry-run"):
        reset.get_by_label("Reset to").select_option("shift")
        reset.get_by_label("Shift by (for shift)").fill("-3")
        reset.get_by_label("Topic (optional)").fill(topic)
        reset.get_by_label("Partitions (optional)").fill("1")
        reset.get_by_role("button", name="Dry run").click()
        plan = page.locator("#reset-plan")
        expect(plan).to_have_attribute("data-dry-run", "true")
        expect(plan.locator("tbody tr")).to_have_count(1)
        row = plan.locator("tbody tr")
        expect(row.locator("td").nth(2)).to_have_text("8")  # committed now
        expect(row.locator("td").nth(3)).to_have_text("5")  # would write
        expect(row.locator("td").nth(5)).to_have_text("2 → 5 (+3)")  # lag before → after
        expect(page.locator("#reset-lag-change")).to_have_text("+3")
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(group)[(topic, 1)].offset == 8

    with kept(page, "group-reset-02-applied"):
        reset.get_by_role("button", name="Reset offsets").click()
        expect(page.locator("#reset-plan")).to_have_attribute("data-dry-run", "false")
        expect(page.locator("#reset-plan h3")).to_have_text("Offsets reset")
    committed = GroupOffsetsAdmin(cluster_a).committed_offsets(group)
    assert (committed[(topic, 0)].offset, committed[(topic, 1)].offset) == (6, 5)

    delete = page.locator("#delete")
    with kept(page, "group-delete-01-dry-run"):
        delete.get_by_role("button", name="Dry run").click()
        expect(page.locator("#delete-plan")).to_have_attribute("data-dry-run", "true")
        expect(page.locator("#delete-plan tbody tr")).to_have_count(2)
    assert group in GroupOffsetsAdmin(cluster_a).list_groups()
    with kept(page, "group-delete-02-deleted"):
        delete.get_by_role("button", name="Delete group").click()
        expect(page.locator("#delete-plan h3")).to_have_text("Group deleted")
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(group) == {}
