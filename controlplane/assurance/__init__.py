"""Assurance: RPO budgets, live RPO, failover readiness, and continuous verification
(`controlplane.assurance.verification`).

Its tables are in `controlplane.assurance.models` (import a model from there)."""

from controlplane.assurance import verification
from controlplane.assurance.budgets import (
    DEFAULT_BUDGET,
    RpoBudget,
    rpo_budget_of,
    rpo_budget_set,
    rpo_budgets,
)
from controlplane.assurance.readiness import (
    FlowReadiness,
    ReadinessReads,
    flow_readiness,
    flow_readiness_all,
    readiness_facts,
    readiness_limits,
    readiness_reads,
    readiness_reads_of,
)
from controlplane.assurance.rpo import (
    FlowRpo,
    TopicRpo,
    flow_rpo,
)

__all__ = [
    "verification",
    "DEFAULT_BUDGET",
    "RpoBudget",
    "rpo_budget_of",
    "rpo_budget_set",
    "rpo_budgets",
    "FlowReadiness",
    "ReadinessReads",
    "flow_readiness",
    "flow_readiness_all",
    "readiness_facts",
    "readiness_limits",
    "readiness_reads",
    "readiness_reads_of",
    "FlowRpo",
    "TopicRpo",
    "flow_rpo",
]
