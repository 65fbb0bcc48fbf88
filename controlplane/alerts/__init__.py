"""Alerts: the rules (`controlplane.alerts.rules`), their evaluation, silences, the reads of the alert
page, and notifications (`controlplane.alerts.notifications`).

Its tables are in `controlplane.alerts.models` (import a model from there)."""

from controlplane.alerts.evaluation import (
    EVALUATED_AT_KEY,
    Evaluation,
    TaskLeases,
    alerts_evaluate,
    evaluated_at,
    limits,
)
from controlplane.alerts.selectors import (
    alert_list,
    alerts_firing,
    alerts_firing_of,
    alerts_resolved,
    firing_by_flow,
    firing_first,
    silence_list,
)
from controlplane.alerts.silences import (
    MAX_SILENCE_S,
    active_silences,
    silence_create,
    silence_description,
    silence_expire,
)

__all__ = [
    "EVALUATED_AT_KEY",
    "Evaluation",
    "TaskLeases",
    "alerts_evaluate",
    "evaluated_at",
    "limits",
    "alert_list",
    "alerts_firing",
    "alerts_firing_of",
    "alerts_resolved",
    "firing_by_flow",
    "firing_first",
    "silence_list",
    "MAX_SILENCE_S",
    "active_silences",
    "silence_create",
    "silence_description",
    "silence_expire",
]
