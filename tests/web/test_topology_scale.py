"""The overview's topology at fleet size: its label placement tested each spot against every point of
every other arrow (21 spots x arrows x ~100 points per label): at 60 flows 1.5 s of CPU per overview, at
500 about two minutes, for a page every viewer's browser asks again every 5 s. The count of an arrow's
points in a box is now clipped first (the same count), and past LABELLED_ARROWS the arrows go unlabelled,
each with its tooltip, and the page says so."""

from __future__ import annotations

import math
import random

import pytest
from django.utils import timezone
from django.utils.html import escape

from controlplane import assurance
from controlplane.flows import services
from controlplane.status import rollup
from controlplane.web import summaries


def _points_inside(box, segments) -> int:
    """Every point (every 6 px) of every arrow tested: the rule `_crossings` keeps."""
    hits = 0
    for x1, y1, x2, y2 in segments:
        steps = max(int(math.hypot(x2 - x1, y2 - y1) / 6), 1)
        for i in range(steps + 1):
            x, y = x1 + (x2 - x1) * i / steps, y1 + (y2 - y1) * i / steps
            hits += box[0] <= x <= box[2] and box[1] <= y <= box[3]
    return hits


def test_an_arrows_points_in_a_box_are_counted_as_one_by_one():
    """Random arrows (slanted, vertical and horizontal on box edges, zero length) and boxes (some of no
    width, some with edges on round coordinates): the clipped count equals the point-by-point one."""
    rng = random.Random(38)

    def segment():
        kind = rng.random()
        if kind < 0.1:  # vertical, often on a box's edge
            x = rng.choice([100.0, 200.0, rng.uniform(0, 720)])
            return (x, rng.uniform(0, 460), x, rng.uniform(0, 460))
        if kind < 0.2:  # horizontal
            y = rng.choice([50.0, 100.0, rng.uniform(0, 460)])
            return (rng.uniform(0, 720), y, rng.uniform(0, 720), y)
        if kind < 0.25:  # a point
            x, y = rng.uniform(0, 720), rng.uniform(0, 460)
            return (x, y, x, y)
        return (rng.uniform(0, 720), rng.uniform(0, 460), rng.uniform(0, 720), rng.uniform(0, 460))

    arrows = [segment() for _ in range(2000)]
    hits = 0
    for _ in range(3000):
        x, y = rng.choice([100.0, 200.0, rng.uniform(0, 700)]), rng.choice([50.0, 100.0, rng.uniform(0, 440)])
        box = (x, y, x + rng.choice([0.0, rng.uniform(0, 150)]), y + rng.uniform(0, 40))
        some = rng.sample(arrows, 20)
        expected = _points_inside(box, some)
        assert summaries._crossings(box, some) == expected, (box, some)
        hits += expected
    assert hits > 10_000  # boxes that arrows cross, not only empty ones


@pytest.mark.django_db
def test_past_the_labelled_arrows_the_overview_draws_every_arrow_without_labels_and_says_so(client_as):
    """7 clusters, every flow both ways: 42 arrows, over LABELLED_ARROWS (40). Every flow keeps its arrow
    and its tooltip; no arrow is labelled; the page says where the flows are listed."""
    clusters = [
        services.cluster_create(actor=None, alias=f"dc{i}", bootstrap_servers=f"dc{i}.invalid:9092")
        for i in range(7)
    ]
    flows = [
        services.flow_create(actor=None, source=s, target=t) for s in clusters for t in clusters if s != t
    ]
    assert len(flows) > summaries.LABELLED_ARROWS
    rows = [
        rollup.summarize(f, [], now=timezone.now(), stale_after=10.0, budget=assurance.DEFAULT_BUDGET)
        for f in flows
    ]
    picture = summaries.topology(clusters=clusters, summaries=rows)
    assert picture.labels_hidden and len(picture.edges) == len(flows)
    assert all(edge.lines == () for edge in picture.edges)
    page = client_as("viewer").get("/").content.decode()
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count('<g class="edge') == len(flows) and "<tspan" not in svg
    assert all(f"<title>{escape(flow.name)}: " in svg for flow in flows)
    assert 'id="topology-labels-hidden"' in page and f"{len(flows)} flows" in page
    # At the limit, every arrow is labelled as before.
    labelled = summaries.topology(
        clusters=clusters[:6],
        summaries=[r for r in rows if r.flow.source in clusters[:6] and r.flow.target in clusters[:6]],
    )
    assert not labelled.labels_hidden and all(edge.lines for edge in labelled.edges)


@pytest.mark.django_db
def test_the_overview_lists_a_page_of_flows_firing_first_and_the_lowest_readiness(client_as, monkeypatch):
    """Past OVERVIEW_ROWS flows the overview's table shows that many, firing alerts first, with a link to
    every flow (the flows page: search, filters, pages), and its readiness list the lowest scores; the
    topology still draws every flow."""
    from controlplane.web import overview

    monkeypatch.setattr(overview, "OVERVIEW_ROWS", 5)
    clusters = [
        services.cluster_create(actor=None, alias=f"dc{i}", bootstrap_servers=f"dc{i}.invalid:9092")
        for i in range(3)
    ]
    flows = [
        services.flow_create(actor=None, source=s, target=t) for s in clusters for t in clusters if s != t
    ]
    page = client_as("viewer").get("/").content.decode()
    table = page[page.index('<table class="flows">') : page.index("</table>")]
    assert table.count("<tr") == 1 + 5  # the header and five flows
    assert 'id="overview-more-flows"' in page and f"The first 5 of {len(flows)} flows" in page
    readiness = page[page.index('id="readiness-overview"') :]
    assert readiness.count("<li>") == 5 and f"The 5 lowest of {len(flows)} flows" in readiness
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert svg.count('<g class="edge') == len(flows)
    monkeypatch.setattr(overview, "OVERVIEW_ROWS", 50)
    page = client_as("viewer").get("/").content.decode()
    assert 'id="overview-more-flows"' not in page and "lowest of" not in page
