"""Reads of the alert page and API: alerts firing and resolved, silences, and the firing-first order of
lists."""

from __future__ import annotations

from collections.abc import Mapping

from django.db.models import QuerySet

from controlplane.alerts.models import Alert, AlertSilence, AlertState
from controlplane.core.statements import statement
from controlplane.flows.models import Flow


# -- reads ------------------------------------------------------------------------------------------------
def alert_list() -> QuerySet[Alert]:
    """Firing first (newest first), then resolved history (newest first): "firing" sorts before "resolved"."""
    return Alert.objects.select_related("flow__source", "flow__target").order_by("state", "-fired_at", "-id")


def alerts_firing(*, flow: Flow | None = None) -> QuerySet[Alert]:
    """Firing alerts, newest first; of `flow` only when given: its rows, not joined with the flow the
    caller holds (the joins took most of the flow page's statement to compile)."""
    if flow is None:
        return alert_list().filter(state=AlertState.FIRING)
    return Alert.objects.filter(state=AlertState.FIRING, flow=flow).order_by("-fired_at", "-id")


def alerts_resolved() -> QuerySet[Alert]:
    return (
        Alert.objects.select_related("flow__source", "flow__target")
        .filter(state=AlertState.RESOLVED)
        .order_by("-resolved_at", "-id")
    )


def firing_by_flow() -> dict[int, list[Alert]]:
    """Flow id -> its firing alerts no silence covers, for the flow list and overview (firing first, with a
    marker): a silenced alert is not counted there (the alert page and the flow page show it, marked)."""
    found: dict[int, list[Alert]] = {}
    for alert in _firing_unsilenced():
        found.setdefault(alert.flow_id, []).append(alert)
    return found


@statement
def _firing_unsilenced():
    return Alert.objects.filter(state=AlertState.FIRING, silenced=False).order_by("fired_at")


@statement
def _firing_of(flow_id: int):
    return Alert.objects.filter(state=AlertState.FIRING, flow_id=flow_id).order_by("-fired_at", "-id")


def alerts_firing_of(flow: Flow) -> list[Alert]:
    """`alerts_firing(flow=flow)` as a list, its statement compiled once per process (the flow page's)."""
    return _firing_of(flow_id=flow.pk)


def silence_list() -> QuerySet[AlertSilence]:
    """Latest expiry first: active silences, then expired ones."""
    return AlertSilence.objects.select_related("flow__source", "flow__target", "created_by").order_by(
        "-expires_at", "-id"
    )


def firing_first(items: list, *, flow_of, firing: Mapping[int, list[Alert]]) -> list:
    """`items` with those whose flow has firing alerts first, each group in its original order."""
    return sorted(items, key=lambda item: 0 if flow_of(item).pk in firing else 1)
