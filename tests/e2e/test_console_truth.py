"""The console tells the truth, in a real Chromium (issue 28): one health rule colours every page, and
"behind" and "stale" look different; a screenshot of each page is kept under tests/e2e/artifacts/, and
of the page at the moment an assertion fails."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from controlplane import alerts
from controlplane.flows import lifecycle, services
from tests.e2e.conftest import kept, partition_report

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]


BADGE_LOOK = "(e) => { const s = getComputedStyle(e); return [s.color, s.borderTopStyle]; }"


def test_one_health_rule_colours_every_page_and_behind_is_not_stale(page: Page, signed_in):
    clusters = {
        alias: services.cluster_create(actor=None, alias=alias, bootstrap_servers=f"{alias}.invalid:9092")
        for alias in ("east", "west", "lab", "dr")
    }
    # 3 minutes behind a 60 s budget at 0 rec/s: Burrow says OK, the budget says behind.
    behind = services.flow_create(actor=None, source=clusters["east"], target=clusters["west"], enabled=True)
    partition_report(behind, age_s=1, behind=1, seconds=180.0)
    # 7 records in flight, 0 s: within the budget.
    in_flight = services.flow_create(
        actor=None, source=clusters["west"], target=clusters["east"], enabled=True
    )
    partition_report(in_flight, age_s=1, behind=7, seconds=0.0)
    silent = services.flow_create(actor=None, source=clusters["lab"], target=clusters["west"], enabled=True)
    partition_report(silent, age_s=600, behind=0, seconds=0.0)
    paused = services.flow_create(actor=None, source=clusters["dr"], target=clusters["east"], enabled=True)
    partition_report(paused, age_s=600, behind=4, seconds=2.0)
    lifecycle.transition(flow=paused, name="pause")

    page.goto(f"{signed_in}/")
    with kept(page, "truth-overview"):
        rows = page.locator("table.flows tbody tr")
        expect(rows).to_have_count(4)
        expect(rows.filter(has_text="east->west").locator(".badge.lagging")).to_have_text(
            ["active", "behind"]
        )
        expect(rows.filter(has_text="west->east").locator(".badge.ok")).to_have_text("active")
        expect(rows.filter(has_text="west->east").locator(".badge.lagging")).to_have_count(0)
        expect(rows.filter(has_text="lab->west").locator(".badge.stale").first).to_have_text("active")
        expect(rows.filter(has_text="dr->east")).not_to_contain_text("stale")
        expect(rows.filter(has_text="dr->east").locator(".badge.paused")).to_have_text("paused")
        expect(page.locator(".topology .edge.lagging")).to_have_count(1)
        expect(page.locator(".topology .edge.stale")).to_have_count(1)
        expect(page.locator(".topology .edge.paused")).to_contain_text("seen 10 min")
        behind_look = rows.filter(has_text="east->west").locator(".badge.lagging").last.evaluate(BADGE_LOOK)
        stale_look = rows.filter(has_text="lab->west").locator(".badge.stale").first.evaluate(BADGE_LOOK)
        assert behind_look[0] != stale_look[0] and behind_look[1] != stale_look[1], (behind_look, stale_look)

    page.goto(f"{signed_in}/flows/{behind.pk}/")
    with kept(page, "truth-flow-behind"):
        expect(page.locator("table.partitions tbody tr .badge.lagging")).to_have_text("behind")
        expect(page.locator("#flow-live .stats .badge.lagging").first).to_have_text("active")

    page.goto(f"{signed_in}/flows/{paused.pk}/")
    with kept(page, "truth-flow-paused"):
        expect(page.locator("table.partitions tbody tr .badge.paused")).to_have_text("paused")
        expect(page.locator("#flow-live")).not_to_contain_text("STALE")
        expect(page.locator("#observed")).to_contain_text("last seen 10 min")


def test_the_alert_rows_silence_action_marks_it_and_the_overview_stops_counting_it(page: Page, signed_in):
    west = services.cluster_create(actor=None, alias="west", bootstrap_servers="west.invalid:9092")
    east = services.cluster_create(actor=None, alias="east", bootstrap_servers="east.invalid:9092")
    flow = services.flow_create(actor=None, source=east, target=west, enabled=True)
    partition_report(flow, age_s=1, behind=1, seconds=999.0)
    alerts.alerts_evaluate()

    page.goto(f"{signed_in}/")
    with kept(page, "truth-overview-alert"):
        expect(page.locator("table.flows .alert-marker")).to_have_text("🔔 1 alert firing")
    page.goto(f"{signed_in}/alerts/")
    with kept(page, "truth-alert-silenced"):
        row = page.locator("tr.alert-firing")
        row.get_by_role("spinbutton").fill("0.5")
        row.get_by_role("button", name="Silence").click()
        expect(page.get_by_text("Silence created.")).to_be_visible()
        expect(page.locator("tr.alert-firing .badge.paused")).to_have_text("silenced")
        expect(page.locator("#firing-title")).to_have_text("Firing (1, 1 silenced)")
        expect(page.locator("table.silences")).to_contain_text("silenced from its alert row")
    page.goto(f"{signed_in}/")
    with kept(page, "truth-overview-silenced"):
        expect(page.locator("table.flows")).to_be_visible()
        expect(page.locator("table.flows .alert-marker")).to_have_count(0)
