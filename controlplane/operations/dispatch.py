"""Dispatch by kind: which module runs an operation of each kind (`run(operation, step)`)."""

from __future__ import annotations

from collections.abc import Callable

from controlplane.operations import cutover, drills, failback, failover, takeover
from controlplane.operations.models import Operation, OperationKind

Step = Callable[..., None]

RUNNERS: dict[str, Callable[[Operation, Step], None]] = {
    OperationKind.FAILOVER: failover.run,
    OperationKind.FAILBACK: failback.run,
    OperationKind.DRILL: drills.run,
    OperationKind.CUTOVER: cutover.run,
    OperationKind.TAKEOVER: takeover.run,
}


def runner_of(kind: str) -> Callable[[Operation, Step], None]:
    return RUNNERS[kind]
