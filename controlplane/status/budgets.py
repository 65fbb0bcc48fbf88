"""RPO budgets as the health rule reads them: each flow's budget (seconds, and optionally records). Set
by an admin through `controlplane.assurance.rpo_budget_set` (audited); read here, below the pages, the
API, /metrics and the alert rules, so that every one of them judges lag against the same budget, by the
one rule of `replication.rpo_budget`.
"""

from __future__ import annotations

from collections.abc import Collection

from controlplane.core.statements import first_row, statement
from controlplane.flows.models import Flow
from controlplane.flows.selectors import of_flows
from controlplane.status.models import DEFAULT_RPO_SECONDS, FlowRpoBudget
from replication.rpo_budget import RpoBudget, over_budget

__all__ = ["DEFAULT_BUDGET", "RpoBudget", "over_budget", "rpo_budget_of", "rpo_budgets"]

DEFAULT_BUDGET = RpoBudget(DEFAULT_RPO_SECONDS, None)


def rpo_budget_of(*, flow: Flow) -> RpoBudget:
    """The flow's budget; the defaults (60 s, no records budget) when it has none stored."""
    rows = _budget_rows(flow_id=flow.pk)
    return DEFAULT_BUDGET if not rows else RpoBudget(rows[0].seconds_behind, rows[0].records_behind)


@statement
def _budget_rows(flow_id: int):
    return first_row(FlowRpoBudget.objects.filter(flow_id=flow_id))


def rpo_budgets(*, flow_ids: Collection[int] | None = None) -> dict[int, RpoBudget]:
    """The stored budgets by flow id, of `flow_ids` (every flow's when None); a flow without one has none."""
    rows = _budgets_of(flow_ids=None if flow_ids is None else list(flow_ids))
    return {flow_id: RpoBudget(seconds, records) for flow_id, seconds, records in rows}


@statement
def _budgets_of(flow_ids: list[int] | None):
    # tuples: a page of 50 rows as models cost 0.3 ms
    return of_flows(FlowRpoBudget.objects.all(), flow_ids).values_list(
        "flow_id", "seconds_behind", "records_behind"
    )
