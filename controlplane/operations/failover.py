"""Failover of a flow: the plan, and the phases of the `Operation` a worker runs.

A request queues an operation (`controlplane.operations.requests`: role, confirmation, state, one per
flow, all audited); `run_operation` (controlplane.operations.runner) claims it and runs its phases, recording each on the row before it starts, so
a worker that takes over a dead one's operation resumes there. Every phase is idempotent: offsets are
written only forward and only where they differ, the lifecycle transitions accept the state they lead
to, and the drain waits for the end offsets recorded when the operation planned. The decisions live in
`replication.failover`; the clusters' reads and writes through the `FlowClusters` port
(`replication.failover_reads`).

Failover, in the order of the runbook:
1. planning: read the plan for the chosen groups; refuse (outcome `refused`) with failed checks unless
   `force`; record the plan, each replicated partition's end offset now, and the flow's state; then
   `lifecycle.begin_failover` (FAILING_OVER, a runnable state: the workers keep replicating);
2. draining (when the source answers): until every record that was on the source at planning is on the
   target with its offset sync, so translation is exact; progress on the operation. On timeout the flow
   returns to its previous state (outcome `failed`), unless `force`;
3. moving_groups: translate the groups' offsets again (they may have committed during the drain) and
   write them on the target, never for a group active there, never backwards;
   `lifecycle.complete_failover` (FAILED_OVER: the workers stop).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.conf import settings

from controlplane.core import ratelimit
from controlplane.flows import engine, lifecycle
from controlplane.flows.cluster_reads import clusters_read
from controlplane.flows.models import Flow
from controlplane.operations import drain, requests
from controlplane.operations.models import Operation, OperationPhase
from controlplane.status import rollup
from replication import failover, failover_reads
from replication.cluster_ports import FlowClusters

log = logging.getLogger(__name__)


@dataclass
class GroupResult:
    group: str
    outcome: str  # written | unchanged | refused (models.GroupOutcome)
    written: dict[str, int] = field(default_factory=dict)  # "topic[partition]" -> offset
    detail: str = ""


def _last_known_lag(flow: Flow) -> failover.LastKnownLag:
    """The lag the workers last stored per source partition (what is known when the source is lost)."""
    return rollup.last_known_lag(flow=flow)


def plan_summary(plan: failover.FailoverPlan) -> dict:
    """The plan as recorded and audited: every check and group, only the partitions with records at risk."""
    summary = plan.to_dict()
    summary["partitions"] = [p for p in summary["partitions"] if p["records_at_risk"] != 0]
    return summary


def _check_passed(plan: dict | None, check: failover.Check) -> bool:
    return any(
        item["check"] == check and item["status"] == failover.CheckStatus.PASS
        for item in (plan or {}).get("checklist", [])
    )


# -- plan -------------------------------------------------------------------------------------------------
def failover_plan(
    *,
    flow: Flow,
    actor=None,
    groups: list[str] | None = None,
    arrival_window_s: float = failover_reads.ARRIVAL_WINDOW_S,
) -> failover.FailoverPlan:
    """The read-only plan (every group the flow selects when `groups` is None).

    Rate-limited per `actor` (it opens clients on both clusters); the command line (None) is not.
    """
    ratelimit.hit(
        scope="failover_plan",
        user_id=getattr(actor, "pk", None),
        limit=settings.FAILOVER_PLAN_RATE_PER_MINUTE,
        window_s=60,
    )
    last_known_lag = _last_known_lag(flow)

    def read(configs, timeout_s: float) -> failover.FailoverPlan:
        reader = engine.flow_reader(flow, timeout_s=timeout_s)
        try:
            plan, _ = failover_reads.read_plan(
                reader, groups=groups, arrival_window_s=arrival_window_s, last_known_lag=last_known_lag
            )
        finally:
            reader.close()
        return plan

    # Behind the target's breaker only: the plan is made without the source when it does not answer.
    return clusters_read([flow.target], read)


# -- failover ---------------------------------------------------------------------------------------------
def run(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    reader = engine.flow_reader(flow)
    try:
        if operation.phase in (OperationPhase.QUEUED, OperationPhase.PLANNING):
            _plan_failover(operation, step, reader)
        if operation.phase == OperationPhase.DRAINING:
            producers_stopped = _check_passed(operation.plan, failover.Check.PRODUCERS_STOPPED)
            drain.drain(operation, step, reader, producers_stopped=producers_stopped)
        move_groups_to_target(operation, step, reader)
    finally:
        reader.close()
    lifecycle.complete_failover(flow=flow)


def _plan_failover(operation: Operation, step: Callable[..., None], reader: FlowClusters) -> None:
    flow = operation.flow
    step(phase=OperationPhase.PLANNING, message="reading both clusters: lag, consumer groups, checkpoints")
    plan, partitions = failover_reads.read_plan(
        reader, groups=operation.groups, last_known_lag=_last_known_lag(flow)
    )
    summary = plan_summary(plan)
    step(plan=summary, records_at_risk=plan.records_at_risk, source_reachable=plan.source_reachable)
    failed = plan.failed_checks
    if failed and not operation.force:
        reasons = "; ".join(f"{item.check.value}: {item.explanation}" for item in failed)
        raise requests.ChecksFailed(
            f"{len(failed)} check(s) failed ({reasons}); fix them, or fail over with force"
        )
    if not operation.previous_state:
        flow.refresh_from_db(fields=["state"])
        step(previous_state=flow.state)
    lifecycle.begin_failover(flow=flow)
    ends = {
        (p.topic, p.partition): max(p.source_end, p.replicated_offset or 0)
        for p in plan.partitions
        if p.source_end is not None
    }
    drains = plan.source_reachable
    step(
        drain_partitions=drain.drain_rows(partitions, ends) if drains else [],
        phase=OperationPhase.DRAINING if drains else OperationPhase.MOVING_GROUPS,
        message="draining" if drains else f"{flow.source.alias} does not answer: no drain",
    )


def move_groups_to_target(operation: Operation, step: Callable[..., None], reader: FlowClusters) -> None:
    """Translate again (after the drain) and write the offsets on the target."""
    step(phase=OperationPhase.MOVING_GROUPS, message=f"writing the groups' offsets on {reader.target.alias}")
    groups = operation.groups
    if operation.source_reachable:
        remote_topics = {topic: remote for (topic, _), remote in reader.replicated_partitions().items()}
        group_plans = failover_reads.group_plans_from_source(
            reader, groups=groups, remote_topics=remote_topics
        )
    else:
        group_plans = failover_reads.group_plans_from_checkpoints(
            reader, groups=groups, checkpoints=reader.latest_checkpoints(groups)
        )
    for group_plan in group_plans:
        result = _write_group(reader, reader.target, group_plan)
        topics = sorted({row.topic for row in group_plan.partitions})
        store_group_result(operation, result, topics=topics)
        step()


def store_group_result(operation: Operation, result: GroupResult, *, topics: list[str]) -> None:
    requests.operation_store_group(
        operation=operation,
        group=result.group,
        outcome=result.outcome,
        written=result.written,
        topics=topics,
        detail=result.detail,
    )


def _write_group(reader: FlowClusters, cluster, group_plan: failover.GroupPlan) -> GroupResult:
    if group_plan.active_on_target:
        return GroupResult(
            group_plan.group,
            "refused",
            detail=f"active on {cluster.alias} ({group_plan.target_state}): stop its consumers there first",
        )
    notes = sorted({row.note for row in group_plan.partitions if row.note and not row.write})
    return write_offsets(
        reader, cluster, group=group_plan.group, offsets=group_plan.offsets_to_write(), note="; ".join(notes)
    )


def write_offsets(
    reader: FlowClusters, cluster, *, group: str, offsets: dict[tuple[str, int], int], note: str
) -> GroupResult:
    if not offsets:
        return GroupResult(group, "unchanged", detail=note)
    refused = reader.alter_offsets(cluster, group, offsets)
    written = {
        drain.partition_label(*key): offset for key, offset in sorted(offsets.items()) if key not in refused
    }
    if refused:
        reasons = "; ".join(
            f"{drain.partition_label(*key)}: {reason}" for key, reason in sorted(refused.items())
        )
        return GroupResult(group, "refused", written, detail=f"{cluster.alias} refused {reasons}")
    return GroupResult(group, "written", written, detail=note)
