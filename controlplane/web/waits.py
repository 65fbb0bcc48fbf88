"""The waits each operation form asks for (`controlplane.operations.models.WAITS_OF_KIND`): one field per
wait, its label, default and bounds. The forms render them (`{% wait_fields kind %}`) and the views read
them (`form_waits`); the services check the ranges again."""

from __future__ import annotations

from dataclasses import dataclass

from controlplane import operations
from controlplane.core import bounds
from controlplane.operations import cutover, drills
from controlplane.operations.models import OperationKind


@dataclass(frozen=True)
class Wait:
    name: str
    label: str
    default: float
    minimum: float
    maximum: float


def _drain(default: float) -> Wait:
    return Wait("drain_timeout_s", "Longest drain (seconds)", default, 0, operations.MAX_DRAIN_TIMEOUT_S)


FORM_WAITS: dict[str, tuple[Wait, ...]] = {
    OperationKind.FAILOVER: (_drain(operations.DEFAULT_DRAIN_TIMEOUT_S),),
    OperationKind.FAILBACK: (_drain(operations.DEFAULT_DRAIN_TIMEOUT_S),),
    OperationKind.DRILL: (
        _drain(drills.DEFAULT_DRILL_DRAIN_TIMEOUT_S),
        Wait(
            "record_wait_s",
            "Wait for records on their way (seconds)",
            drills.DEFAULT_DRILL_WAIT_S,
            1,
            drills.MAX_DRILL_WAIT_S,
        ),
    ),
    OperationKind.CUTOVER: (
        Wait(
            "fence_timeout_s",
            "Longest wait for the source to stay still (seconds)",
            cutover.DEFAULT_FENCE_TIMEOUT_S,
            1,
            cutover.MAX_FENCE_TIMEOUT_S,
        ),
        _drain(operations.DEFAULT_DRAIN_TIMEOUT_S),
    ),
}


def form_seconds(post, name: str, default: float) -> float:
    """A form's number of seconds (its default when empty), finite (the service checks its own range):
    ServiceValidationError naming the field otherwise."""
    raw = post.get(name) or ""
    if not raw.strip():
        return default
    fix = f"give seconds, e.g. {default:g}"
    return bounds.seconds(raw, field=name, minimum=0, maximum=bounds.MAX_SECONDS, fix=fix)


def form_waits(post, kind: str) -> dict[str, float]:
    """The waits of a `kind` form, by name."""
    return {wait.name: form_seconds(post, wait.name, wait.default) for wait in FORM_WAITS[kind]}
