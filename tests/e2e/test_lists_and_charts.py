"""Lists and charts in a real Chromium: a list searched and sorted through its query string, the report
time-range picker (presets, custom, zoom), and the flow page's live chart gaining a point per worker
report; screenshots at desktop and phone width, light and dark."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from controlplane import reports
from controlplane.flows import services
from controlplane.flows.models import Cluster
from controlplane.reports.models import ReportTrigger
from controlplane.status import partition_writes
from dashboards.spark.jobs import REPORT_KEYS
from replication.metrics import PartitionMetrics
from tests.e2e.conftest import ARTIFACTS, WIDER_THAN_SCREEN

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}


def _fits_a_phone(page: Page, name: str) -> None:
    page.set_viewport_size(PHONE)
    page.wait_for_timeout(150)
    wide = page.evaluate(WIDER_THAN_SCREEN)
    assert not wide, (name, wide)
    page.set_viewport_size({"width": 1360, "height": 900})


def _shots(page: Page, name: str) -> None:
    """The page's first screen at desktop and phone width, light and dark (charts re-theme on the change),
    under tests/e2e/artifacts/ for a person to look at."""
    ARTIFACTS.mkdir(exist_ok=True)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width, viewport in (("desktop", {"width": 1360, "height": 900}), ("phone", PHONE)):
            page.set_viewport_size(viewport)
            page.wait_for_timeout(150)
            page.screenshot(path=ARTIFACTS / f"lists-{name}-{width}-{scheme}.png")
            # Usable at phone width: nothing wider than the screen but what scrolls in its own box.
            wide = page.evaluate(WIDER_THAN_SCREEN)
            assert not wide, (name, width, wide)
    page.emulate_media(color_scheme="light")
    page.set_viewport_size({"width": 1360, "height": 900})


def _column(page: Page, index: int) -> list[str]:
    return page.locator(f"table tbody tr:not(.check-row) > :nth-child({index})").all_inner_texts()


def test_a_list_is_searched_and_sorted_through_its_query_string(page: Page, signed_in):
    for alias, servers in (("dc-east", "east:9092"), ("dc-west", "west:9092"), ("lab", "lab:9092")):
        services.cluster_create(actor=None, alias=alias, bootstrap_servers=servers)
    page.goto(f"{signed_in}/clusters/")
    expect(page.get_by_text("3 clusters")).to_be_visible()

    page.get_by_label("Search alias or bootstrap servers").fill("dc-")
    page.get_by_label("Search alias or bootstrap servers").press("Enter")
    expect(page).to_have_url(re.compile(r"\?q=dc-$"))
    expect(page.get_by_text("2 of 3 clusters")).to_be_visible()
    assert _column(page, 1) == ["dc-east", "dc-west"]

    page.get_by_role("link", name="Alias").click()  # sorted by alias already: now descending
    expect(page).to_have_url(re.compile(r"q=dc-&sort=-alias"))
    expect(page.locator("th[aria-sort=descending]")).to_have_text(re.compile("Alias"))
    assert _column(page, 1) == ["dc-west", "dc-east"]
    _shots(page, "clusters")

    east, west, lab = (Cluster.objects.get(alias=a) for a in ("dc-east", "dc-west", "lab"))
    services.flow_create(actor=None, source=east, target=west, topics=["orders"], enabled=False)
    services.flow_create(actor=None, source=lab, target=west, topics=["payments"], enabled=False)
    page.goto(f"{signed_in}/flows/")
    page.get_by_label("Cluster").select_option("lab")  # a filter submits on change
    expect(page).to_have_url(re.compile(r"/flows/\?cluster=lab$"))
    expect(page.get_by_text("1 of 2 flows")).to_be_visible()
    assert _column(page, 1) == ["lab->dc-west"]
    _shots(page, "flows")
    for path in ("/audit/?q=dc-", "/alerts/"):
        page.goto(f"{signed_in}{path}")
        _fits_a_phone(page, path)

    page.goto(f"{signed_in}/clusters/?sort=size")  # a bad parameter is named with its fix
    expect(page.get_by_role("alert")).to_contain_text("sort: no column 'size'; sort by one of alias")
    assert _column(page, 1) == ["dc-east", "dc-west", "lab"]


def _store_lag(flow_id: int, newest: datetime, windows: int) -> None:
    """`windows` 5-minute partition_lag windows of one partition ending at `newest` (behind grows)."""
    rows = [
        {
            "flow_id": flow_id,
            "flow_name": "dc1->dc2",
            "source_topic": "orders",
            "remote_topic": "dc1.orders",
            "partition": 0,
            "window_start": newest - timedelta(minutes=5 * i),
            "window_end": newest - timedelta(minutes=5 * (i - 1)),
            "records_behind_max": windows - i,
            "seconds_behind_max": 1.0,
        }
        for i in range(windows)
    ]
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    reports.report_rows_store(run=run, datasets={"partition_lag": rows}, keys=REPORT_KEYS)
    reports.report_run_finish(run=run)


def _store_capacity() -> None:
    """A plan as the job writes it: the fleet sized from a saturated flow, a barely loaded one not."""
    day = datetime(2026, 1, 14).date()
    usage = [
        {"flow_id": f, "flow_name": n, "date": day - timedelta(days=d), "p95_mb_per_s": p - g * d}
        for f, n, p, g in ((1, "dc1->dc2", 4.75, 0.25), (2, "dc2->dc1", 0.086, 0.0))
        for d in range(14)
    ]
    base = {"newest_date": day, "threshold": 0.8, "workers": 1, "plan_months": 6, "fit_confidence": "high"}
    plan = [
        base
        | {"scope": scope, "pool": pool, "flow_id": f, "flow_name": n, "horizon_days": h, "verdict": v}
        | {"projected_mb_per_s": p + g * h, "capacity_mb_per_s": c, "tasks_needed": tn, "workers_needed": 1}
        | {"days_to_capacity": dtc, "runs_out_on": ro, "current_mb_per_s": p, "network_utilization": 0.0001}
        | {"tasks_to_add": 0, "workers_to_add": 0, "network_to_add_mbps": 0.0, "partitions": 6, "tasks": 2}
        | {"record_bytes": 512.0, "input_mb_per_s": p, "network_latency_ms": 3.5}
        for scope, pool, f, n, p, g, c, v, tn, dtc, ro in (
            (
                "overall",
                None,
                None,
                "overall",
                4.836,
                0.25,
                10.0,
                "RIGHT_SIZED",
                2,
                13.0,
                day + timedelta(days=13),
            ),
            ("pool", "", None, "pool default", 0.086, 0.0, None, "NOT_ENOUGH_DATA", None, None, None),
            ("flow", "", 2, "dc2->dc1", 0.086, 0.0, None, "NOT_ENOUGH_DATA", None, None, None),
        )
        for h in (0, 7, 30, 90, 180)
    ]
    run = reports.report_run_request(actor=None, trigger=ReportTrigger.SCHEDULE)
    reports.report_rows_store(
        run=run, datasets={"daily_flow_usage": usage, "capacity_plan": plan}, keys=REPORT_KEYS
    )
    reports.report_run_finish(run=run)


def _points(page: Page) -> int:
    chart = page.locator("#report-chart-1")
    expect(chart.locator(".main-svg").first).to_be_attached()
    return int(chart.get_attribute("data-points"))


def test_the_time_range_picker_and_zoom_choose_the_windows_shown(page: Page, signed_in):
    newest = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)
    _store_lag(1, newest, windows=2 * 288)  # two days of 5-minute windows
    page.goto(f"{signed_in}/reports/lag/")
    assert _points(page) == 288  # the default: the last 24 h
    page.get_by_role("link", name="15m", exact=True).click()
    expect(page).to_have_url(re.compile(r"range=15m"))
    assert _points(page) == 3
    page.get_by_role("link", name="7d", exact=True).click()
    assert _points(page) == 2 * 288

    page.get_by_label("From (UTC)").fill("2026-01-05T10:00")
    page.get_by_label("To (UTC)").fill("2026-01-05T11:00")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#range-shown")).to_contain_text(
        "Custom range from 2026-01-05 10:00 to 2026-01-05 11:00"
    )
    assert _points(page) == 12

    # Zoom: drag across the chart; the zoomed range becomes a custom range the whole page follows.
    page.get_by_role("link", name="24h", exact=True).click()
    box = page.locator("#report-chart-1 .nsewdrag").first.bounding_box()
    y = box["y"] + box["height"] / 2
    page.mouse.move(box["x"] + box["width"] * 0.5, y)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.75, y, steps=5)
    page.mouse.up()
    apply = page.get_by_role("link", name="show the zoomed range")
    expect(apply).to_be_visible()
    apply.click()
    expect(page).to_have_url(re.compile(r"from=2026-01-0[45]T\d\d%3A\d\d&to=2026-01-05T\d\d%3A\d\d"))
    assert 50 < _points(page) < 100  # a quarter of the day's 288
    _fits_a_phone(page, "report-lag")

    _store_capacity()
    page.goto(f"{signed_in}/reports/capacity/")
    expect(page.locator("#report-chart-1")).to_contain_text("RIGHT_SIZED")
    expect(page.locator("#report-chart-2")).to_contain_text("Capacity plan: pool default")
    expect(page.locator("#report-chart-3")).to_contain_text("not enough data")
    _shots(page, "report-capacity")
    page.goto(f"{signed_in}/reports/")
    expect(page.get_by_text("in 13 days (2026-01-27, high confidence)")).to_be_visible()
    expect(page.locator("tr.plan-group").filter(has_text="pool default")).to_be_visible()

    page.goto(f"{signed_in}/reports/lag/?range=1y")
    expect(page.get_by_role("alert")).to_contain_text("range: no range '1y'; choose one of 15m, 1h")


def _report(flow, position: int) -> None:
    """What a worker's slice stores for the flow's one partition."""
    metrics = PartitionMetrics(
        topic="dc1.orders",
        partition=0,
        source_topic="orders",
        record_count=position,
        record_rate=0.0,
        byte_count=position * 100,
        byte_rate=0.0,
        record_age_ms=5.0,
        replication_latency_ms=9.0,
        records_behind=3,
        seconds_behind=0.5,
        source_end_offset=position + 3,
        next_offset=position,
        skipped_count=0,
        gap_count=0,
        lost_records=0,
        stopped=False,
        last_error=None,
    )
    partition_writes.partition_statuses_save(
        flow_id=flow.pk, task_index=0, partitions=[metrics], task_error=None, at=timezone.now()
    )


def test_the_live_throughput_chart_gains_a_point_per_worker_report(page: Page, signed_in):
    dc1 = services.cluster_create(actor=None, alias="dc1", bootstrap_servers="127.0.0.1:1")
    dc2 = services.cluster_create(actor=None, alias="dc2", bootstrap_servers="127.0.0.1:2")
    flow = services.flow_create(actor=None, source=dc1, target=dc2, topics=["orders"], enabled=False)
    page.goto(f"{signed_in}/flows/{flow.pk}/")
    throughput = page.locator("#chart-throughput")
    expect(throughput).to_contain_text("Waiting for two worker reports")
    assert "2000" not in throughput.inner_text()  # an empty chart on today's minutes, not 2000-2001

    refresh = f"htmx.ajax('GET', '/flows/{flow.pk}/live/', {{target: '#flow-live', swap: 'outerHTML'}})"
    for step in range(1, 5):
        _report(flow, 1000 * step)
        page.evaluate(refresh)
        expect(throughput).to_have_attribute("data-points", str(step - 1))
    expect(throughput.locator(".scatterlayer .point")).to_have_count(3)
    _shots(page, "flow-live")
