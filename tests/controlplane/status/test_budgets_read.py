"""A flow's RPO budget (`budgets.rpo_budget_of`) read with the flow (`select_related(WITH_BUDGET)`, a flow's
page and status API) is the budget read on its own, stored or not, and costs no statement."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from controlplane.flows import services
from controlplane.flows.models import Flow
from controlplane.status import budgets
from controlplane.status.models import FlowRpoBudget


@pytest.mark.django_db
def test_a_budget_read_with_its_flow_is_the_one_read_alone_stored_or_not(two_clusters, admin_user):
    a, b = two_clusters
    with_budget = services.flow_create(actor=admin_user, source=a, target=b)
    without = services.flow_create(actor=admin_user, source=b, target=a)
    FlowRpoBudget.objects.create(flow=with_budget, seconds_behind=12.5, records_behind=1_000)
    alone = {
        flow.pk: budgets.rpo_budget_of(flow=Flow.objects.get(pk=flow.pk)) for flow in (with_budget, without)
    }
    assert alone == {with_budget.pk: budgets.RpoBudget(12.5, 1_000), without.pk: budgets.DEFAULT_BUDGET}
    for flow in Flow.objects.select_related(budgets.WITH_BUDGET).filter(pk__in=alone):
        with CaptureQueriesContext(connection) as statements:
            assert budgets.rpo_budget_of(flow=flow) == alone[flow.pk]
        assert len(statements) == 0
