"""RPO budgets as the health rule reads them: how much a flow may be behind (seconds, and optionally
records) before its RPO is breached, and whether figures exceed it. Set by an admin through
`controlplane.assurance.rpo_budget_set` (audited); read here, below the pages, the API, /metrics and the
alert rules, so that every one of them judges lag against the same budget by the same rule.
"""

from __future__ import annotations

from dataclasses import dataclass

from controlplane.models import DEFAULT_RPO_SECONDS, Flow, FlowRpoBudget


@dataclass(frozen=True)
class RpoBudget:
    seconds_behind: float
    records_behind: int | None


DEFAULT_BUDGET = RpoBudget(DEFAULT_RPO_SECONDS, None)


def rpo_budget_of(*, flow: Flow) -> RpoBudget:
    """The flow's budget; the defaults (60 s, no records budget) when it has none stored."""
    row = FlowRpoBudget.objects.filter(flow=flow).first()
    return DEFAULT_BUDGET if row is None else RpoBudget(row.seconds_behind, row.records_behind)


def rpo_budgets() -> dict[int, RpoBudget]:
    return {
        row.flow_id: RpoBudget(row.seconds_behind, row.records_behind) for row in FlowRpoBudget.objects.all()
    }


def over_budget(*, budget: RpoBudget, records_behind: int | None, seconds_behind: float | None) -> bool:
    """Known figures above the budget: seconds above its seconds, or records above its records budget
    when it has one. Unknown figures exceed nothing (the caller decides what unknown means)."""
    over_seconds = seconds_behind is not None and seconds_behind > budget.seconds_behind
    over_records = (
        budget.records_behind is not None
        and records_behind is not None
        and records_behind > budget.records_behind
    )
    return over_seconds or over_records
