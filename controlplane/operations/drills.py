"""Failover drills: a durable `Operation` (kind `drill`) that rehearses a failover without touching
production (the decisions in `replication.drill`).

Request (`drill_request`, operator, audited): the chosen groups of a flow whose state allows a failover;
beat requests scheduled ones (`request_scheduled_drills`). A worker runs it
(`controlplane.operations.runner.run_operation`), phase by phase:

1. planning: the failover plan for the groups, timed (its records and seconds at risk are the measured
   RPO; its duration, with the failover's arrival window, the planning part of the RTO);
2. draining: the failover's drain, without pausing anything, up to `drain_timeout_s` (then it goes on:
   the partitions still lagging fail, named);
3. shadowing: per group, the offsets a failover would write now (translated from the group's committed
   offsets on the source once the flow's offset syncs reach them, waited for up to `record_wait_s`: the
   flow is not stopped, and the sync of its newest records comes every few seconds), written for a
   *shadow* group on the target (`ShadowGroup` recorded first), timed (the groups-moving part of the
   RTO); the shadow's next record per partition read and compared by content with the group's next
   record on the source (waiting up to `record_wait_s` for a copy still on its way); one
   `DrillPartitionResult` per partition; the shadow group deleted.

Outcome `succeeded` when every partition passed, else `failed` with the partitions and reasons; the
result (RPO, RTO estimate, counts) is kept on the operation and audited. A worker killed mid-drill
leaves `ShadowGroup` rows not marked deleted: the worker that resumes the drill deletes those groups
first (and shadows under new names); a drill that cannot delete one fails, naming it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence

from django.conf import settings
from django.utils import timezone

from controlplane.core.errors import ServiceConflict, ServiceValidationError
from controlplane.flows import engine, lifecycle
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Flow
from controlplane.operations import drain, failover, requests
from controlplane.operations.models import (
    DrillOutcome,
    DrillPartitionResult,
    Operation,
    OperationKind,
    OperationPhase,
    ShadowGroup,
)
from controlplane.status import rollup, runtime
from replication import drill, failover_reads
from replication.checkpoint import CommittedOffset
from replication.cluster_ports import FlowClusters, GroupAdminError

log = logging.getLogger(__name__)

DEFAULT_DRILL_WAIT_S = 30.0
MAX_DRILL_WAIT_S = 600.0
# A rehearsal does not wait a failover's drain: past it the partitions still lagging fail, named.
DEFAULT_DRILL_DRAIN_TIMEOUT_S = 30.0
Phase = OperationPhase


# -- request ----------------------------------------------------------------------------------------------
def drill_request(
    *,
    actor,
    flow: Flow,
    groups: Sequence[str] | None,
    drain_timeout_s: float = DEFAULT_DRILL_DRAIN_TIMEOUT_S,
    record_wait_s: float = DEFAULT_DRILL_WAIT_S,
) -> Operation:
    """Queue a drill of `flow` for `groups` (operator; audited, refusals too). `drain_timeout_s`: how long
    the drain runs before the drill goes on; `record_wait_s`: how long the drill waits for the offset syncs
    to reach the groups' offsets, then for the copy of a group's next record still on its way."""
    kind = OperationKind.DRILL
    with requests.locked_request(actor=actor, kind=kind, flow=flow) as flow:
        chosen = requests.clean_groups(groups)
        if not chosen:
            raise ServiceValidationError.single("groups", "name at least one consumer group to rehearse")
        requests.check_drain_timeout(drain_timeout_s)
        if not 0 < record_wait_s <= MAX_DRILL_WAIT_S:
            raise ServiceValidationError.single(
                "record_wait_s",
                f"give the wait for records on their way between 0 and {MAX_DRILL_WAIT_S:g} seconds",
            )
        requests.refuse_if_active(flow)
        if "failover" not in lifecycle.allowed_actions(flow.state):
            raise ServiceConflict(
                f"flow {flow.name} is {flow.state}: a drill rehearses a failover, which is not possible now"
            )
        # The drain goes on after drain_timeout_s (forced): the partitions still lagging fail, named.
        waits = {"drain_timeout_s": drain_timeout_s, "record_wait_s": record_wait_s}
        return requests.queue(
            actor=actor,
            kind=kind,
            flow=flow,
            fields={"groups": chosen, "force": True, **waits},
            audited={"groups": chosen, **waits},
        )


def request_scheduled_drills(*, now=None) -> list[Operation]:
    """Beat's schedule (MIRRORPLANE_DRILL_INTERVAL_S, 0: off): a drill of every flow whose last drill is
    older than the interval, with that drill's groups, requested by the system; flows with an active
    operation or a state that forbids a failover wait for the next look."""
    interval = settings.MIRRORPLANE_DRILL_INTERVAL_S
    if interval <= 0:
        return []
    now = now or timezone.now()
    queued = []
    for flow in Flow.objects.filter(operations__kind=OperationKind.DRILL).distinct():
        last = Operation.objects.filter(flow=flow, kind=OperationKind.DRILL).first()
        if last is None or (now - last.requested_at).total_seconds() < interval:
            continue
        try:
            queued.append(
                drill_request(
                    actor=None,
                    flow=flow,
                    groups=last.groups,
                    drain_timeout_s=last.drain_timeout_s,
                    record_wait_s=last.record_wait_s,
                )
            )
        except ServiceConflict as exc:
            log.info("scheduled drill of %s waits: %s", flow.name, exc)
    return queued


# -- shadow groups: recorded before they exist, deleted even after a crash --------------------------------
def clean_shadow_groups(*, operation: Operation) -> int:
    """Delete the drill's shadow groups not yet known deleted; how many were. A cluster that refuses
    keeps the row for the next attempt (the drill then fails: it must not end with one left)."""
    rows = ShadowGroup.objects.filter(operation=operation, deleted_at__isnull=True).select_related("cluster")
    cleaned = 0
    for row in rows:
        try:
            clusters().group_admin(engine.cluster_to_config(row.cluster)).delete_group(row.name)
        except GroupAdminError as exc:
            log.warning("shadow group %s not deleted yet: %s", row.name, exc)
            continue
        ShadowGroup.objects.filter(pk=row.pk).update(deleted_at=timezone.now())
        cleaned += 1
    return cleaned


def _shadow(operation: Operation, group: str) -> ShadowGroup:
    name = drill.shadow_group_name(operation_id=operation.pk, attempt=operation.attempts, group=group)
    row, _ = ShadowGroup.objects.update_or_create(
        cluster=operation.flow.target,
        name=name,
        defaults={"operation": operation, "of_group": group, "deleted_at": None},
    )
    return row


# -- running a drill --------------------------------------------------------------------------------------
def run(operation: Operation, step: Callable[..., None]) -> None:
    """Planning then shadowing (see the module docstring); resumed runs clean up first and start the
    shadowing over (results are upserted per partition)."""
    clean_shadow_groups(operation=operation)
    reader = engine.flow_reader(operation.flow)
    try:
        if operation.phase in (Phase.QUEUED, Phase.PLANNING):
            _plan(operation, step, reader)
        if operation.phase == Phase.DRAINING:
            # Forced (drill_request): past the wait, the partitions still lagging fail with the reason.
            drain.drain(operation, step, reader, producers_stopped=False)
        _shadow_groups(operation, step, reader)
    finally:
        reader.close()
        clean_shadow_groups(operation=operation)
    left = list(ShadowGroup.objects.filter(operation=operation, deleted_at__isnull=True))
    if left:
        names = ", ".join(f"{row.name} on {row.cluster.alias}" for row in left)
        raise DrillFailed(
            f"shadow group(s) not deleted (the cluster refused; see the log): {names}; delete them"
        )
    _conclude(operation)


def _plan(operation: Operation, step: Callable[..., None], reader: FlowClusters) -> None:
    step(phase=Phase.PLANNING, message="reading the failover plan: lag, groups, checks (timed)")
    started = time.monotonic()
    plan, partitions = failover_reads.read_plan(
        reader,
        groups=operation.groups,
        last_known_lag=rollup.last_known_lag(flow=operation.flow),
        arrival_window_s=0,  # production keeps writing during a drill: nothing to learn from waiting
    )
    # A failover's planning also waits the arrival window (to see whether producers stopped).
    plan_s = time.monotonic() - started + failover_reads.ARRIVAL_WINDOW_S
    result = {
        "rpo": {
            "records": plan.records_at_risk,
            "seconds": plan.seconds_behind,
            "observed_at": plan.built_at,
        },
        "plan_s": round(plan_s, 3),
        "checks": {item.check.value: item.status.value for item in plan.checklist},
    }
    if not plan.source_reachable:
        raise ServiceConflict(
            f"{operation.flow.source.alias} does not answer: a drill compares with the source's records"
        )
    ends = {
        (p.topic, p.partition): max(p.source_end, p.replicated_offset or 0)
        for p in plan.partitions
        if p.source_end is not None
    }
    step(
        plan=failover.plan_summary(plan),
        records_at_risk=plan.records_at_risk,
        source_reachable=plan.source_reachable,
        result=result,
        drain_partitions=drain.drain_rows(partitions, ends),
        phase=Phase.DRAINING,
        message="waiting, as a failover would, for what the source holds now to be copied",
    )


def _shadow_groups(operation: Operation, step: Callable[..., None], reader: FlowClusters) -> None:
    step(phase=Phase.SHADOWING, message="shadow groups on the target")
    remote_topics = {topic: remote for (topic, _), remote in reader.replicated_partitions().items()}
    committed = _committed_within_syncs(operation, step, reader, remote_topics)
    started = time.monotonic()
    group_plans = failover_reads.group_plans_from_source(
        reader, groups=operation.groups, remote_topics=remote_topics, committed=committed
    )
    translate_s = time.monotonic() - started
    write_s = 0.0
    for index, group_plan in enumerate(group_plans):
        step(message=f"shadowing {group_plan.group}", progress=round(index / len(group_plans), 4))
        write_s += _drill_group(operation, step, reader, group_plan)
    result = dict(operation.result or {})
    drained_at = operation.drain_observed_at or operation.drain_started_at
    drain_s = (drained_at - operation.drain_started_at).total_seconds() if operation.drain_started_at else 0.0
    result["rto"] = drill.estimate_rto(
        plan_s=result.get("plan_s", 0.0), drain_s=drain_s, move_groups_s=translate_s + write_s
    )
    step(result=result, progress=1.0)


def _committed_within_syncs(
    operation: Operation, step: Callable[..., None], reader: FlowClusters, remote_topics: dict[str, str]
) -> dict[str, dict[tuple[str, int], CommittedOffset]]:
    """The groups' committed offsets on the source, once the flow's offset syncs place them exactly, waited
    for up to `record_wait_s`: the flow runs on during a drill, and writes the sync of its newest records
    every few seconds (`replication.drill`). Read once: a group that consumes meanwhile is not chased."""
    committed = reader.committed_offsets(reader.source, operation.groups)
    deadline = time.monotonic() + operation.record_wait_s
    while past := drill.offsets_past_syncs(reader.refresh_offset_syncs(), committed, remote_topics):
        if time.monotonic() >= deadline:
            break
        step(message=f"waiting for the offset syncs to reach the groups' offsets on {len(past)} partition(s)")
        if requests.STOPPING.wait(drain.DRAIN_POLL_S):
            raise requests.HandedOver()
    return committed


def _drill_group(operation: Operation, step, reader: FlowClusters, group_plan) -> float:
    """One group: shadow written, both next records read and compared, shadow deleted; the write's time."""
    rows = list(group_plan.partitions)
    if not rows:
        _store_verdict(
            operation,
            group_plan.group,
            None,
            drill.PartitionVerdict(
                False, "no committed offset on a topic the flow replicates: nothing to rehearse"
            ),
        )
        return 0.0
    offsets = {
        (row.remote_topic, row.partition): row.translated_offset
        for row in rows
        if row.translated_offset is not None
    }
    source_records = reader.next_records(
        reader.source,
        starts={
            (row.topic, row.partition): row.source_offset for row in rows if row.source_offset is not None
        },
        timeout_s=reader.timeout_s,
        tick=step,
    )
    write_s, target_records = 0.0, {}
    if offsets:
        waiting = {
            (row.remote_topic, row.partition)
            for row in rows
            if source_records.get((row.topic, row.partition))
        }
        write_s, target_records = _shadow_next_records(
            operation, step, reader, group_plan.group, offsets, waiting
        )
    flow = operation.flow
    schema_ids = runtime.rewritten_schema_ids(flow_id=flow.pk, mode=flow.schemas_sync_mode)
    for row in rows:
        source = source_records.get((row.topic, row.partition))
        target = target_records.get((row.remote_topic, row.partition))
        verdict = drill.judge_partition(
            translated=row.translated_offset,
            note=row.note,
            source=source,
            target=target,
            wait_s=operation.record_wait_s,
            schema_ids=schema_ids,
            past_syncs_from=drill.past_syncs_from(reader.store, row.topic, row.partition, row.source_offset),
        )
        sync = (
            None
            if row.source_offset is None
            else reader.store.sync_used(row.topic, row.partition, row.source_offset)
        )
        _store_verdict(operation, group_plan.group, row, verdict, sync=sync, source=source, target=target)
    step()
    return write_s


def _shadow_next_records(operation: Operation, step, reader, group: str, offsets: dict, waiting: set):
    """The shadow group written at `offsets` on the target (recorded first), its next records read as a
    consumer of it reads them, the shadow deleted; (the write's time, the records)."""
    shadow = _shadow(operation, group)
    started = time.monotonic()
    refused = reader.alter_offsets(reader.target, shadow.name, offsets)
    write_s = time.monotonic() - started
    if refused:
        raise ServiceConflict(f"{reader.target.alias} refused the shadow group {shadow.name}: {refused}")
    records = reader.next_records(
        reader.target,
        group=shadow.name,
        partitions=sorted(offsets),
        wait_for=waiting,
        timeout_s=max(operation.record_wait_s, reader.timeout_s),
        tick=step,
    )
    clean_shadow_groups(operation=operation)
    return write_s, records


def _store_verdict(
    operation: Operation, group: str, row, verdict, *, sync=None, source=None, target=None
) -> None:
    """Record (or, on a resumed drill, replace) the verdict on one partition of `group` (`row` None: the
    group as a whole)."""
    DrillPartitionResult.objects.update_or_create(
        operation=operation,
        group=group,
        topic=row.topic if row else "",
        partition=row.partition if row else -1,
        defaults={
            "remote_topic": row.remote_topic if row else "",
            "source_offset": row.source_offset if row else None,
            "target_offset": row.translated_offset if row else None,
            "offset_sync": None
            if sync is None
            else {"upstream_offset": sync.upstream_offset, "downstream_offset": sync.downstream_offset},
            "outcome": DrillOutcome.PASSED if verdict.passed else DrillOutcome.FAILED,
            "reason": verdict.reason,
            "source_record": drill.record_evidence(source),
            "target_record": drill.record_evidence(target),
        },
    )


def _conclude(operation: Operation) -> None:
    """The result's figures (RPO, RTO estimate, counts); raises DrillFailed when a partition failed."""
    results = list(operation.drill_results.all())
    failed = [r for r in results if r.outcome == DrillOutcome.FAILED]
    result = dict(operation.result or {})
    result["partitions"] = {"passed": len(results) - len(failed), "failed": len(failed)}
    requests.operation_renew(operation=operation, result=result)
    if failed:
        shown = "; ".join(f"{r.group} {r.topic}[{r.partition}]: {r.reason}" for r in failed[:5])
        more = f" (and {len(failed) - 5} more)" if len(failed) > 5 else ""
        raise DrillFailed(f"{len(failed)} of {len(results)} partition(s) failed: {shown}{more}")


class DrillFailed(ServiceConflict):
    """The drill ran: some partitions would not fail over exactly (the reasons are in the message)."""
