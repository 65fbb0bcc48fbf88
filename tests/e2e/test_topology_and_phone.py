"""The overview's topology stays readable with 3 and 4 clusters and flows both ways (issue 28 item 9): no
two labels overlap, none covers a cluster, none is clipped by the picture; and at a 390 px phone viewport
no page is wider than the screen. In a real Chromium; a screenshot of each is kept under
tests/e2e/artifacts/, and of the page at a failure."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from controlplane.flows import services
from tests.e2e.conftest import WIDER_THAN_SCREEN, kept, partition_report

pytestmark = [pytest.mark.e2e, pytest.mark.django_db(transaction=True)]

PHONE = {"width": 390, "height": 844}

# Every flow label's and cluster's box in screen pixels, and the picture's.
BOXES = """() => {
  const svg = document.querySelector('.topology svg');
  const box = (e) => { const r = e.getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]; };
  return {
    svg: box(svg),
    labels: [...svg.querySelectorAll('.edge text')].map((e) => [e.textContent.trim(), box(e)]),
    nodes: [...svg.querySelectorAll('.node circle')].map(box),
  };
}"""


# Absolutely placed elements past the screen's right edge: a scroller that is not their containing block
# does not clip them, so they widen the page (tag#id.class@right).
PLACED_PAST_THE_SCREEN = """() => [...document.body.querySelectorAll('*')].filter((e) =>
  getComputedStyle(e).position === 'absolute' && e.getBoundingClientRect().right > innerWidth + 1).slice(0, 5)
  .map((e) => e.tagName + (e.id ? '#' + e.id : '') + '.' + (e.getAttribute('class') || '') + '@'
    + Math.round(e.getBoundingClientRect().right) + ' in ' + (e.parentElement.closest('[id]') || {}).id)"""


def _overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def _assert_readable(page: Page, flows: int) -> None:
    boxes = page.evaluate(BOXES)
    labels = boxes["labels"]
    assert len(labels) == flows, labels
    left, top, right, bottom = boxes["svg"]
    for text, (x1, y1, x2, y2) in labels:
        assert left <= x1 and x2 <= right and top <= y1 and y2 <= bottom, (
            "clipped",
            text,
            boxes["svg"],
            (x1, y1, x2, y2),
        )
        for node in boxes["nodes"]:
            assert not _overlap((x1, y1, x2, y2), node), ("covers a cluster", text, node)
    for i, (text, one) in enumerate(labels):
        for other_text, other in labels[i + 1 :]:
            assert not _overlap(one, other), ("overlap", text, one, other_text, other)


def _flow(source, target, *, behind: int, age_s: float = 1.0):
    flow = services.flow_create(actor=None, source=source, target=target, enabled=True)
    partition_report(flow, age_s=age_s, behind=behind, seconds=2.0 if behind else 0.0)
    return flow


def test_the_topology_of_three_and_four_clusters_both_ways_is_readable(page: Page, signed_in):
    clusters = [
        services.cluster_create(actor=None, alias=alias, bootstrap_servers=f"{alias}.invalid:9092")
        for alias in ("dc-east", "dc-west", "lab")
    ]
    pairs = [(a, b) for a in clusters for b in clusters if a != b]
    for index, (source, target) in enumerate(pairs):
        _flow(source, target, behind=123_456 * index, age_s=600 if index == 2 else 1)
    page.goto(f"{signed_in}/")
    with kept(page, "topology-3-clusters"):
        expect(page.locator(".topology .edge")).to_have_count(6)
        _assert_readable(page, 6)

    dr = services.cluster_create(actor=None, alias="dr-site", bootstrap_servers="dr.invalid:9092")
    _flow(clusters[0], dr, behind=7)
    _flow(dr, clusters[0], behind=1_000_000, age_s=900)
    _flow(clusters[2], dr, behind=0)
    page.goto(f"{signed_in}/")
    with kept(page, "topology-4-clusters"):
        expect(page.locator(".topology .edge")).to_have_count(9)
        _assert_readable(page, 9)
    page.set_viewport_size(PHONE)
    page.goto(f"{signed_in}/")
    with kept(page, "topology-4-clusters-phone"):
        expect(page.locator(".topology .edge")).to_have_count(9)
        _assert_readable(page, 9)


def test_no_page_is_wider_than_a_390_px_phone(page: Page, signed_in):
    east = services.cluster_create(actor=None, alias="dc-east", bootstrap_servers="east.invalid:9092")
    west = services.cluster_create(actor=None, alias="dc-west", bootstrap_servers="west.invalid:9092")
    flow = _flow(east, west, behind=1_234_567)
    _flow(west, east, behind=0)
    page.set_viewport_size(PHONE)
    pages = [
        "/",
        "/clusters/",
        "/clusters/new/",
        f"/clusters/{east.pk}/",
        f"/clusters/{east.pk}/edit/",
        "/flows/",
        "/flows/new/",
        f"/flows/{flow.pk}/",
        f"/flows/{flow.pk}/edit/",
        f"/flows/{flow.pk}/failover/",
        f"/flows/{flow.pk}/drills/",
        f"/flows/{flow.pk}/cutover/",
        "/topics/",
        "/topics/dc-east/orders/",
        "/topic-search/dc-east/orders?tail=1&key=k1",
        f"/flows/{flow.pk}/compare/?topic=orders",
        "/groups/",
        "/groups/dc-east/billing",
        "/mm2/import/",
        "/mm2/takeover/",
        "/pools/",
        "/alerts/",
        "/audit/",
        "/reports/",
    ]
    wide = {}
    for path in pages:
        page.goto(f"{signed_in}{path}")  # loaded, then the fragments htmx requests on load swapped in
        page.wait_for_function("() => !document.querySelector('.htmx-request')")
        width = page.evaluate("document.documentElement.scrollWidth")
        if width > PHONE["width"]:
            wide[path] = (width, page.evaluate(WIDER_THAN_SCREEN), page.evaluate(PLACED_PAST_THE_SCREEN))
            with kept(page, f"phone-too-wide{path.replace('/', '-')}"):
                pass
    assert not wide, wide
