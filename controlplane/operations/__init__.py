"""Operations: durable failover, failback, drill, cutover and takeover jobs.

The requests' checks, creation and lease (`requests`), the drain's names (`drain`, a module: its
function `drain.drain` is not re-exported, so the module keeps its name) and the runner (`runner`, which
dispatches by kind: `dispatch`) are this package's names; each kind has its own module
(`failover`, `failback`, `drills`, `cutover`, `takeover`) with its request and its phases.

Its tables are in `controlplane.operations.models` (import a model from there)."""

from controlplane.operations.drain import (
    DRAIN_POLL_S,
    DrainTimeout,
    drain_rows,
)
from controlplane.operations.requests import (
    DEFAULT_DRAIN_TIMEOUT_S,
    MAX_DRAIN_TIMEOUT_S,
    STOPPING,
    ChecksFailed,
    HandedOver,
    LeaseLost,
    OperationActive,
    audit,
    check_allowed,
    check_confirmation,
    check_drain_timeout,
    clean_groups,
    last_failover,
    lease_stale,
    moved_groups,
    operation_active,
    operation_claim,
    operation_create,
    operation_dispatched,
    operation_finish,
    operation_latest,
    operation_list,
    operation_release,
    operation_renew,
    operation_request,
    operation_store_group,
    operations_to_dispatch,
    require_operator,
)
from controlplane.operations.runner import (
    AUDIT_OUTCOMES,
    Echo,
    operation_summary,
    run_operation,
)

__all__ = [
    "DRAIN_POLL_S",
    "DrainTimeout",
    "drain_rows",
    "DEFAULT_DRAIN_TIMEOUT_S",
    "MAX_DRAIN_TIMEOUT_S",
    "STOPPING",
    "ChecksFailed",
    "HandedOver",
    "LeaseLost",
    "OperationActive",
    "audit",
    "check_allowed",
    "check_confirmation",
    "check_drain_timeout",
    "clean_groups",
    "last_failover",
    "lease_stale",
    "moved_groups",
    "operation_active",
    "operation_claim",
    "operation_create",
    "operation_dispatched",
    "operation_finish",
    "operation_latest",
    "operation_list",
    "operation_release",
    "operation_renew",
    "operation_request",
    "operation_store_group",
    "operations_to_dispatch",
    "require_operator",
    "AUDIT_OUTCOMES",
    "Echo",
    "operation_summary",
    "run_operation",
]
