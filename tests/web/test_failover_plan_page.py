"""The failover page's plan is read by the operations workers, never in the web request: the page shows
the last plan with its age, asks for a fresh one when it is old and polls until it is in, and says when no
worker answers (controlplane.operations.plans)."""

from __future__ import annotations

import re
import time

import pytest
from django.urls import reverse

from controlplane.operations import plans
from workers.operations import dispatch_operations


@pytest.fixture(autouse=True)
def _no_plans(flow):
    from django.core.cache import cache

    cache.delete_many([plans.REQUESTS_KEY, plans.PLAN_KEY.format(flow.pk)])


def _fragment(client, flow, **params) -> str:
    response = client.get(reverse("web:failover-plan", args=[flow.pk]), params)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_asks_the_workers_and_polls_instead_of_reading_the_clusters(flow, client_as):
    operator = client_as("operator")
    page = _fragment(operator, flow)  # its clusters do not even resolve: a read would report that
    assert 'data-plan-state="computing"' in page and "could not be read" not in page
    assert 'hx-trigger="load delay:1s"' in page and "Fail over A-&gt;B" not in page

    sent: list[int] = []
    dispatch_operations(send=lambda _: None, send_plan=sent.append)  # what beat does
    assert sent == [flow.pk]
    assert plans.plans_requested() == []  # sent once

    plans.plan_compute(sent[0])  # what the operations worker does
    page = _fragment(operator, flow)
    assert 'data-plan-state="fresh"' in page and re.search(r"Plan read [\d.]+ s ago", page)
    assert "The plan could not be read" in page and ".invalid" in page  # the read's own finding
    assert "hx-trigger" not in page  # no polling once fresh
    assert plans.plans_requested() == []  # a fresh plan is not read again


def test_an_old_plan_is_shown_stale_while_a_fresh_one_is_read_and_missing_workers_are_named(flow, client_as):
    from django.core.cache import cache

    old = plans.StoredPlan(None, "an old finding", time.time() - 3 * plans.PLAN_FRESH_S)
    cache.set(plans.PLAN_KEY.format(flow.pk), old)
    operator = client_as("operator")
    page = _fragment(operator, flow)
    assert 'data-plan-state="computing"' in page and "stale" in page and "an old finding" in page
    assert plans.plans_requested() == [flow.pk]

    waited = _fragment(operator, flow, since=f"{time.time() - plans.WORKERS_LATE_S - 5:.3f}")
    assert "are the operations workers running" in waited
    assert "are the operations workers running" not in _fragment(operator, flow, since="not a number")


def test_only_operators_see_the_plan(flow, client_as):
    assert client_as("viewer").get(reverse("web:failover-plan", args=[flow.pk])).status_code == 403
    assert plans.plans_requested() == []
