"""RPO budgets: how much a flow may be behind (seconds, and optionally records) before its RPO is
breached. Set here by an admin (audited); read (`controlplane.status.budgets`) by the health rule, the live
RPO, the readiness score, /metrics and the `rpo_breach` alert rule.
"""

from __future__ import annotations

from typing import Any

from controlplane.core import audit_record, audited_attempt
from controlplane.core.bounds import INT64_MAX, MAX_SECONDS
from controlplane.core.errors import ServiceValidationError
from controlplane.core.models import AuditAction
from controlplane.flows.models import Flow
from controlplane.status.budgets import DEFAULT_BUDGET, RpoBudget, rpo_budget_of, rpo_budgets
from controlplane.status.models import FlowRpoBudget

__all__ = ["DEFAULT_BUDGET", "RpoBudget", "rpo_budget_of", "rpo_budget_set", "rpo_budgets"]


# -- RPO budgets ------------------------------------------------------------------------------------------
def _budget_errors(seconds_behind: Any, records_behind: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if (
        not isinstance(seconds_behind, int | float)
        or isinstance(seconds_behind, bool)
        or not 0 < seconds_behind <= MAX_SECONDS
    ):
        errors["seconds_behind"] = [f"must be a number of seconds above 0 and at most {MAX_SECONDS}, e.g. 60"]
    if records_behind is not None and (
        not isinstance(records_behind, int)
        or isinstance(records_behind, bool)
        or not 0 <= records_behind <= INT64_MAX
    ):
        errors["records_behind"] = [
            f"must be a whole number of records from 0 to {INT64_MAX}, or empty for no budget"
        ]
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
