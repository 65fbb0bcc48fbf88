"""RPO budgets: how much a flow may be behind (seconds, and optionally records) before its RPO is
breached. Read by the live RPO, the readiness score, /metrics and the `rpo_breach` alert rule; set by an
admin (audited).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controlplane.core import audit_record, audited_attempt
from controlplane.core.errors import ServiceValidationError
from controlplane.models import (
    DEFAULT_RPO_SECONDS,
    AuditAction,
    Flow,
    FlowRpoBudget,
)


# -- RPO budgets ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RpoBudget:
    seconds_behind: float
    records_behind: int | None


DEFAULT_BUDGET = RpoBudget(DEFAULT_RPO_SECONDS, None)


def rpo_budget_of(*, flow: Flow) -> RpoBudget:
    """The flow's budget; the defaults (60 s, no records budget) when it has none stored."""
    row = FlowRpoBudget.objects.filter(flow=flow).first()
    return DEFAULT_BUDGET if row is None else RpoBudget(row.seconds_behind, row.records_behind)


def _budget_errors(seconds_behind: Any, records_behind: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not isinstance(seconds_behind, int | float) or isinstance(seconds_behind, bool) or seconds_behind <= 0:
        errors["seconds_behind"] = ["must be a number of seconds above 0, e.g. 60"]
    if records_behind is not None and (
        not isinstance(records_behind, int) or isinstance(records_behind, bool) or records_behind < 0
    ):
        errors["records_behind"] = ["must be a whole number of records, 0 or more, or empty for no budget"]
    return errors


def rpo_budget_set(*, actor, flow: Flow, seconds_behind: float, records_behind: int | None) -> RpoBudget:
    """Store the flow's budget (admin; audited). Bad values raise with the field, nothing changes."""
    with audited_attempt(
        actor=actor,
        action=AuditAction.UPDATE,
        object_type="rpo_budget",
        object_id=flow.pk,
        object_repr=flow.name,
    ):
        errors = _budget_errors(seconds_behind, records_behind)
        if errors:
            raise ServiceValidationError(errors)
        before = rpo_budget_of(flow=flow)
        FlowRpoBudget.objects.update_or_create(
            flow=flow, defaults={"seconds_behind": float(seconds_behind), "records_behind": records_behind}
        )
        after = RpoBudget(float(seconds_behind), records_behind)
        audit_record(
            actor=actor,
            action=AuditAction.UPDATE,
            object_type="rpo_budget",
            object_id=flow.pk,
            object_repr=flow.name,
            before=vars(before),
            after=vars(after),
        )
    return after


def rpo_budgets() -> dict[int, RpoBudget]:
    return {
        row.flow_id: RpoBudget(row.seconds_behind, row.records_behind) for row in FlowRpoBudget.objects.all()
    }
