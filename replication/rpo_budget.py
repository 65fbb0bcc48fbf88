"""The RPO budget rule, one home: how much a flow may be behind (seconds, and optionally records) and
whether figures exceed it. The health colour (controlplane.status), the alert rules (controlplane.alerts)
and the failover readiness score (replication.readiness) all judge lag by these functions and say it in
these words. Unknown figures exceed nothing: each caller decides what unknown means (waiting, unknown,
a failed readiness check)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RpoBudget:
    seconds_behind: float
    records_behind: int | None  # None: no records budget


def seconds_over(*, seconds_behind: float | None, budget_s: float) -> bool:
    return seconds_behind is not None and seconds_behind > budget_s


def records_over(*, records_behind: int | None, budget_records: int | None) -> bool:
    return budget_records is not None and records_behind is not None and records_behind > budget_records


def over_budget(*, budget: RpoBudget, records_behind: int | None, seconds_behind: float | None) -> bool:
    """Known figures above the budget: seconds above its seconds, or records above its records budget
    when it has one."""
    return seconds_over(seconds_behind=seconds_behind, budget_s=budget.seconds_behind) or records_over(
        records_behind=records_behind, budget_records=budget.records_behind
    )


def seconds_over_text(*, seconds_behind: float, budget_s: float, at_least: bool = False) -> str:
    return f"{'at least ' if at_least else ''}{seconds_behind:.1f} s behind, over the RPO budget of {budget_s:g} s"


def records_over_text(*, records_behind: int | None, budget_records: int | None) -> str:
    """What `records_over` found (its figures, known when it said so)."""
    return f"{records_behind} records behind, over the RPO budget of {budget_records} records"
