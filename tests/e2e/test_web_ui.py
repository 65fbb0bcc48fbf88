"""The on-call path through the web UI in a real Chromium: log in, add two clusters, create a flow
with the live topic preview, watch a real worker bring records-behind to zero, pause and resume,
read the failover plan, fail a consumer group over and fail back, import an MM2 file (dry run, then apply), and find all of it in the audit log."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import Locator, Page, expect

from controlplane import core
from controlplane.core.roles import Role
from controlplane.flows import services
from harness.runtime import create_topic, produce
from replication.kafka.groups import GroupOffsetsAdmin

pytestmark = [pytest.mark.e2e, pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

PASSWORD = "correct horse battery staple"
RECORDS = 300
PARTITIONS = 2


def _log_in(page: Page, base: str, screenshot) -> None:
    page.goto(f"{base}/")
    expect(page).to_have_url(re.compile(r"/login/\?next=/$"))
    screenshot("01-login")
    page.get_by_label("Username").fill("oncall")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="No clusters yet")).to_be_visible()


def _add_cluster(page: Page, base: str, alias: str, bootstrap: str) -> None:
    page.goto(f"{base}/clusters/new/")
    page.get_by_label("Alias").fill(alias)
    page.get_by_label("Bootstrap servers").fill(bootstrap)
    page.get_by_label("sasl.password").fill("")
    page.get_by_role("button", name="Add cluster").click()
    expect(page.get_by_text(f"Cluster {alias} created.")).to_be_visible()


def _confirm(page: Page, row: Locator, opener: str, action: str) -> None:
    """`opener` in `row` opens the confirmation the rows share, filled for that row's flow: `action` in it."""
    row.get_by_role("button", name=opener).click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_be_visible()
    dialog.get_by_role("button", name=action).click()


def test_on_call_path(
    page: Page, live_server, celery_runtime, kafka_brokers, cluster_a, cluster_b, unique_name, screenshot
):
    core.user_create_with_role(username="oncall", role=Role.ADMIN, password=PASSWORD)
    console_errors: list[str] = []  # htmx logs a failed request or swap here
    page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
    topic, skipped = f"orders-{unique_name}", f"tmp-{unique_name}"
    create_topic(cluster_a, topic, PARTITIONS)
    create_topic(cluster_a, skipped, 1)
    produce(cluster_a, topic, RECORDS, partitions=PARTITIONS)
    group = f"billing-{unique_name}"
    committed = {(topic, 0): 100, (topic, 1): 40}
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, committed) == {}
    celery_runtime.start_worker("w1")
    celery_runtime.start_worker("ops", queues="operations", pool="threads", concurrency=2)
    celery_runtime.start_beat()
    base = live_server.url

    _log_in(page, base, screenshot)
    _add_cluster(page, base, "A", kafka_brokers["A"].bootstrap_servers)
    _add_cluster(page, base, "B", kafka_brokers["B"].bootstrap_servers)
    page.get_by_role("button", name="Test connection").first.click()
    expect(page.get_by_text("A answered")).to_be_visible()
    screenshot("02-clusters")

    # A flow, watching the preview follow the patterns as they are typed.
    page.goto(f"{base}/flows/new/")
    page.get_by_label("Source").select_option(label="A")
    page.get_by_label("Target").select_option(label="B")
    page.get_by_label("enabled", exact=True).check()
    page.get_by_label("topics", exact=True).fill(f"orders-{unique_name}, (")
    expect(page.locator("#error-topics")).to_contain_text("is not a valid regular expression")
    page.get_by_label("topics", exact=True).fill(f"(orders|tmp)-{unique_name}")
    page.get_by_label("topics.exclude", exact=True).fill("tmp-.*, __.*")
    preview = page.locator("#preview")
    expect(preview.locator("table.replicated")).to_contain_text(f"A.{topic}")
    expect(preview.locator("table.excluded")).to_contain_text(f"{skipped}")
    expect(preview.locator("table.excluded")).to_contain_text("matches topics.exclude pattern 'tmp-.*'")
    expect(page.locator("#error-topics")).to_be_empty()
    screenshot("03-flow-form-preview")
    page.get_by_role("button", name="Create flow").click()
    expect(page.get_by_role("heading", name="Flow A->B")).to_be_visible()

    # The worker replicates; the page refreshes itself until nothing is behind.
    # Its topic's rows: MM2 replicates every heartbeats topic whatever the filter, and the session's
    # clusters hold one when an earlier test emitted heartbeats to A.
    rows = page.locator("table.partitions tbody tr", has_text=topic)
    expect(rows).to_have_count(PARTITIONS, timeout=60_000)
    expect(page.locator("#records-behind")).to_have_text("0", timeout=60_000)
    # The one health rule (status.rollup.health). A row whose lag only moved is rewritten within
    # MIRRORPLANE_STATUS_REFRESH_S (docs/scale.md), so the row may follow the roll-up by that much.
    expect(rows.first).to_contain_text("within budget", timeout=30_000)
    page.wait_for_function("document.querySelector('#chart-lag .main-svg') !== null")
    screenshot("04-flow-detail")

    page.goto(f"{base}/")
    expect(page.locator("svg .edge")).to_have_count(1)
    expect(page.locator("table.flows")).to_contain_text("A->B")
    screenshot("05-overview")

    # Pause and resume, each confirmed in the one dialog per action the rows share, filled by the row's
    # button: beside A->B, a paused flow C->D (clusters that answer nobody) opens it for C->D, and after its
    # Cancel, A->B's buttons fill it for A->B (the form's action included: C->D stays paused).
    other = services.flow_create(
        actor=None,
        source=services.cluster_create(actor=None, alias="C", bootstrap_servers="c.invalid:9092"),
        target=services.cluster_create(actor=None, alias="D", bootstrap_servers="d.invalid:9092"),
        enabled=True,
    )
    services.flow_pause(actor=None, flow=other)
    page.goto(f"{base}/flows/")
    flows = page.locator("table.flows tbody tr")
    flows.filter(has_text="C->D").get_by_role("button", name="Resume…").click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_role("heading")).to_have_text("Resume C->D?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_have_count(0)
    _confirm(page, flows.filter(has_text="A->B"), "Pause…", "Pause A->B")
    expect(page.get_by_text("Flow A->B paused")).to_be_visible()
    expect(flows.filter(has_text="A->B").locator(".badge.paused")).to_have_text("paused")
    screenshot("06-flows-paused")
    _confirm(page, flows.filter(has_text="A->B"), "Resume…", "Resume A->B")
    expect(page.get_by_text("Flow A->B resumed.")).to_be_visible()
    expect(flows.filter(has_text="C->D").locator(".badge.paused")).to_have_text("paused")

    # The failover dry run: the plan and its checklist, read from both clusters by a worker; nothing changes.
    page.goto(f"{base}/flows/")
    page.get_by_role("link", name="A->B").click()
    page.get_by_role("link", name="Failover…").click()
    checklist = page.locator("ul.checklist")
    # The operations worker reads the plan (beat sends the page's request): the page polls until it is in.
    expect(checklist).to_contain_text("source_reachable", timeout=60_000)
    expect(page.locator("[data-plan-state=fresh]")).to_contain_text("by the operations workers")
    expect(checklist).to_contain_text("lag_zero")
    expect(page.get_by_label("Type A->B to confirm")).to_be_visible()
    screenshot("07-failover-plan")

    # The failover itself, for one group: type the name, fail over; the request returns at once and the
    # page follows the operation on the operations worker until it ends, then shows the flow's new state.
    groups = page.locator("input[name=groups]")
    for index in range(groups.count()):
        groups.nth(index).uncheck()
    page.get_by_label(group).check()
    page.get_by_label("Type A->B to confirm").fill("A->B")
    page.get_by_role("button", name="Fail over A->B").click()
    card = page.locator("#operation")
    expect(card).to_be_visible()
    expect(page.get_by_role("button", name="Fail over A->B")).to_have_count(0)  # no second failover
    screenshot("08-failover-running")
    expect(card).to_have_attribute("data-outcome", "succeeded", timeout=90_000)
    expect(page.locator("#failover-state")).to_have_text("failed_over")
    expect(card.locator("#drain")).to_contain_text("Done")
    expect(card.locator("table")).to_contain_text(group)
    expect(card.locator("table")).to_contain_text("written")
    expect(page.get_by_role("alert")).to_have_count(0)  # no leftover error
    screenshot("08-failover-result")
    # The clients to move, as the cutover lists them; no readiness score for a flow stopped on purpose.
    switch = page.locator("#switch-clients")
    expect(switch).to_contain_text(group)
    expect(switch).to_contain_text(f"A.{topic}")
    expect(switch).to_contain_text(kafka_brokers["B"].bootstrap_servers)
    expect(page.locator("#readiness")).to_contain_text("n/a")
    expect(page.locator("#readiness")).to_contain_text("has failed over")
    screenshot("08-switch-clients")
    on_b = GroupOffsetsAdmin(cluster_b).committed_offsets(group)
    assert {tp: c.offset for tp, c in on_b.items()} == {
        (f"A.{topic}", p): o for (_, p), o in committed.items()
    }

    # Failback: the page says which topics flow back and through which flow, then follows the operation
    # (the drain back, the groups moved) and offers to resume A->B with a warning.
    failback = page.locator("#failback-section")
    expect(failback.locator("#topics-back")).to_have_text(topic)
    expect(failback).to_contain_text("a new flow B->A")
    failback.get_by_label("Type A->B to confirm").fill("A->B")
    failback.get_by_role("button", name="Fail back to A").click()
    expect(page.locator("#next-step")).to_be_visible(timeout=90_000)
    card = page.locator("#operation")
    expect(card).to_have_attribute("data-outcome", "succeeded")
    expect(card).to_contain_text(f"through B->A (created): {topic}")
    expect(page.locator("#failover-state")).to_have_text("paused")
    expect(page.locator("#next-step")).to_contain_text("stop them on B")
    screenshot("09-failback")
    page.get_by_role("button", name="Resume A->B").click()
    expect(page.get_by_text("Flow A->B resumed.")).to_be_visible()

    # The cutover and the drills have pages of their own, one tab away.
    # (Resume came back to the failover page.)
    page.get_by_role("navigation", name="on-call pages of A->B").get_by_role("link", name="Drills").click()
    expect(page.locator("#drill-section")).to_contain_text("Run a drill")
    page.get_by_role("navigation", name="on-call pages of A->B").get_by_role(
        "link", name="Migration cutover"
    ).click()
    expect(page.locator("#cutover-section")).to_contain_text("Cut over A->B")
    screenshot("09-cutover-page")

    # MM2 import: a dry run first, then apply.
    page.goto(f"{base}/mm2/import/")
    page.get_by_label("mm2.properties").fill(
        "clusters = X, Y\nX.bootstrap.servers = x.invalid:9092\nY.bootstrap.servers = y.invalid:9092\n"
        "X->Y.enabled = true\nX->Y.topics = payments.*\n"
    )
    page.get_by_role("button", name="Dry run", exact=True).click()
    expect(page.get_by_role("heading", name="Dry run: nothing changed yet")).to_be_visible()
    expect(page.locator("table.diff")).to_contain_text("X->Y")
    screenshot("10-mm2-dry-run")
    page.get_by_role("button", name="Apply these changes").click()
    expect(page.get_by_role("heading", name="Applied", exact=True)).to_be_visible()

    page.goto(f"{base}/audit/")
    audit = page.locator("table.audit")
    for action in ("create", "pause", "resume", "failover", "failback", "import"):
        expect(audit).to_contain_text(action)
    screenshot("11-audit")
    page.get_by_label("Action").select_option("failover")
    page.get_by_role("button", name="Filter").click()
    expect(audit.locator("tbody tr")).to_have_count(2)  # the request (accepted) and its outcome
    expect(audit.locator("tbody tr").nth(0)).to_contain_text("success")
    expect(audit.locator("tbody tr").nth(1)).to_contain_text("accepted")
    expect(audit.locator("tbody tr").nth(1)).to_contain_text("A->B")

    page.goto(f"{base}/reports/")
    screenshot("12-reports")
    assert not [text for text in console_errors if "htmx" in text.lower()], console_errors
