"""Failover and failback of a flow: the plan, and the phases of the `Operation` a worker runs.

A request queues an operation (`controlplane.operations`: role, confirmation, state, one per flow, all
audited); `run_operation` claims it and runs its phases, recording each on the row before it starts, so
a worker that takes over a dead one's operation resumes there. Every phase is idempotent: offsets are
written only forward and only where they differ, the lifecycle transitions accept the state they lead
to, and the drain waits for the end offsets recorded when the operation planned. The decisions live in
`replication.failover`; the Kafka reads and writes in `replication.kafka.failover_io`.

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

Failback:
1. planning: `lifecycle.begin_failback`; the reverse flow (target->source) is created or updated to
   replicate every topic the failover moved consumers to (added to its topics, never narrowing them;
   the topics mirrored from the source excluded), enabled and resumed; each of those topics' end offsets
   on the target now;
2. draining: the reverse flow copies every record written on the target up to then to the source;
   on timeout the flow stays FAILED_OVER (outcome `failed`), unless `force`;
3. moving_groups: each group's positions on the mirrored topics of the target translated back to the
   source and written there; `lifecycle.complete_failback` (PAUSED: resume it once the consumers run on
   the source again).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from controlplane import engine, lifecycle, operations, ratelimit, selectors, services
from controlplane.errors import ClusterUnavailable, ServiceConflict
from controlplane.models import (
    AuditOutcome,
    Cluster,
    Flow,
    FlowState,
    Operation,
    OperationKind,
    OperationOutcome,
    OperationPhase,
)
from replication import failover
from replication.checkpoint import may_sync_group_offsets
from replication.config import DEFAULT_TOPICS_EXCLUDE
from replication.filters import TopicFilter
from replication.kafka import failover_io
from replication.policy import is_identity_policy_class

log = logging.getLogger(__name__)

DRAIN_POLL_S = 0.5
Phase = OperationPhase
Echo = Callable[[Operation], None]


class ChecksFailed(ServiceConflict):
    """The plan's checks failed and the operation was not forced: nothing changed."""


class HandedOver(Exception):
    """This process is stopping (a warm shutdown, a rolling upgrade): leave the operation to another."""


# Set when the worker process shuts down warm (workers.operations): a drain hands its operation over at
# its next look instead of holding the shutdown for up to its timeout.
STOPPING = threading.Event()


class DrainTimeout(ServiceConflict):
    """Records there when the operation started were still not copied when the timeout came."""


@dataclass
class GroupResult:
    group: str
    outcome: str  # written | unchanged | refused (models.GroupOutcome)
    written: dict[str, int] = field(default_factory=dict)  # "topic[partition]" -> offset
    detail: str = ""


# -- helpers ----------------------------------------------------------------------------------------------
def flow_reader(flow: Flow) -> failover_io.FailoverReader:
    return failover_io.FailoverReader(
        flow=engine.flow_to_config(flow),
        source=engine.cluster_to_config(flow.source),
        target=engine.cluster_to_config(flow.target),
        known_aliases=list(Cluster.objects.values_list("alias", flat=True)),
    )


def _last_known_lag(flow: Flow) -> failover.LastKnownLag:
    """The lag the workers last stored per source partition (what is known when the source is lost)."""
    return selectors.last_known_lag(flow=flow)


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


def _key(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


# -- plan -------------------------------------------------------------------------------------------------
def failover_plan(
    *,
    flow: Flow,
    actor=None,
    groups: list[str] | None = None,
    arrival_window_s: float = failover_io.ARRIVAL_WINDOW_S,
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
    reader = flow_reader(flow)
    try:
        plan, _ = failover_io.read_plan(
            reader, groups=groups, arrival_window_s=arrival_window_s, last_known_lag=_last_known_lag(flow)
        )
    except failover_io.FailoverIOError as exc:
        raise ClusterUnavailable(str(exc)) from exc
    finally:
        reader.close()
    return plan


# -- running an operation ---------------------------------------------------------------------------------
def run_operation(*, operation_id: int, worker: str, echo: Echo = lambda operation: None) -> Operation | None:
    """Claim operation `operation_id` for `worker` and run it from its recorded phase to its end.

    None when it is finished or another worker holds it. Failures end the operation (`failed`, the flow
    back where it was) with the error, audited; they are not raised.
    """
    if STOPPING.is_set():  # a message that reached a stopping worker: beat sends it again
        return None
    operation = operations.operation_claim(operation_id=operation_id, worker=worker)
    if operation is None:
        return None

    def step(**fields: Any) -> None:
        operations.operation_renew(operation=operation, **fields)
        echo(operation)

    run = _runner(operation.kind)
    try:
        step(message=f"{operation.phase}: taken by {worker}")
        run(operation, step)
    except operations.LeaseLost:
        log.warning("operation %s: another worker took it over; this one stops", operation.pk)
        return None
    except HandedOver:
        operations.operation_release(operation=operation)
        log.info("operation %s: this worker stops; another resumes it at %s", operation.pk, operation.phase)
        return None
    except ChecksFailed as exc:
        _abort(operation)  # a resumed planning may find failed checks after begin_failover
        _end(operation, OperationOutcome.REFUSED, error=str(exc))
    except Exception as exc:
        if not isinstance(exc, ServiceConflict | ClusterUnavailable | failover_io.FailoverIOError):
            log.exception("operation %s failed", operation.pk)
        close_old_connections()  # the database may be why it failed
        _abort(operation)
        _end(operation, OperationOutcome.FAILED, error=f"{exc}" or type(exc).__name__)
    else:
        _end(operation, OperationOutcome.SUCCEEDED)
    echo(operation)
    return operation


def _runner(kind: str) -> Callable[[Operation, Callable[..., None]], None]:
    from controlplane import cutover, drills, takeover  # they build on this module

    return {
        OperationKind.FAILOVER: _failover,
        OperationKind.FAILBACK: _failback,
        OperationKind.DRILL: drills.run,
        OperationKind.CUTOVER: cutover.run,
        OperationKind.TAKEOVER: takeover.run,
    }[kind]


def _abort(operation: Operation) -> None:
    """Return the flow from FAILING_OVER or MIGRATING (to its previous state) or FAILING_BACK (to
    FAILED_OVER)."""
    flow = operation.flow
    flow.refresh_from_db(fields=["state"])
    if operation.kind == OperationKind.FAILOVER and flow.state == FlowState.FAILING_OVER:
        lifecycle.abort_failover(flow=flow, previous=operation.previous_state)
    elif operation.kind == OperationKind.FAILBACK and flow.state == FlowState.FAILING_BACK:
        lifecycle.abort_failback(flow=flow)
    elif operation.kind == OperationKind.CUTOVER and flow.state == FlowState.MIGRATING:
        lifecycle.abort_cutover(flow=flow, previous=operation.previous_state)


AUDIT_OUTCOMES = {
    OperationOutcome.SUCCEEDED: AuditOutcome.SUCCESS,
    OperationOutcome.FAILED: AuditOutcome.FAILURE,
    OperationOutcome.REFUSED: AuditOutcome.REFUSED,
}


def _end(operation: Operation, outcome: str, *, error: str = "") -> None:
    flow = operation.flow
    flow.refresh_from_db(fields=["state"])
    message = f"{flow.name} is {flow.state}"
    if not operations.operation_finish(operation=operation, outcome=outcome, error=error, message=message):
        return  # another worker holds it now and will end it
    refused = [r.group for r in operation.group_results.all() if r.outcome == "refused"]
    detail = error or (f"groups refused: {', '.join(refused)}" if refused else "")
    if operation.force and outcome == OperationOutcome.SUCCEEDED:
        failed = [i["check"] for i in (operation.plan or {}).get("checklist", []) if i["status"] == "fail"]
        if failed:
            detail = f"forced past failed checks: {', '.join(failed)}. {detail}".strip()
    operations.audit(
        actor=operation.requested_by,
        kind=operation.kind,
        flow=flow,
        outcome=AUDIT_OUTCOMES[outcome],
        detail=detail,
        after=operation_summary(operation),
    )


def operation_summary(operation: Operation) -> dict:
    """What the audit log keeps of an operation: request, plan, drain, per-group results, outcome."""
    return {
        "operation": operation.pk,
        "kind": operation.kind,
        "outcome": operation.outcome,
        "phase": operation.phase,
        "groups": [
            {
                "group": r.group,
                "outcome": r.outcome,
                "written": r.written,
                "topics": r.topics,
                "detail": r.detail,
            }
            for r in operation.group_results.all()
        ],
        "force": operation.force,
        "records_at_risk": operation.records_at_risk,
        "drain": {
            "done": operation.drain_done,
            "records_remaining": operation.drain_records_remaining,
            "partitions": len(operation.drain_partitions),
        },
        "topics_back": operation.topics_back,
        "reverse_flow": operation.reverse_flow.name if operation.reverse_flow_id else None,
        "plan": operation.plan,
        "result": operation.result,
    }


# -- the drain (both kinds) -------------------------------------------------------------------------------
def drain_rows(partitions: dict[tuple[str, int], str], ends: dict[tuple[str, int], int | None]) -> list:
    return [
        {"topic": topic, "partition": p, "remote_topic": remote, "end": ends.get((topic, p))}
        for (topic, p), remote in sorted(partitions.items())
    ]


def drain(
    operation: Operation,
    step: Callable[..., None],
    reader: failover_io.FailoverReader,
    *,
    producers_stopped: bool,
) -> None:
    """Wait until every record below the recorded end offsets is copied, with its offset sync; progress
    on the operation at every look. Raises DrainTimeout after `timeout_s` unless forced."""
    rows = operation.drain_partitions
    partitions = {(row["topic"], row["partition"]): row["remote_topic"] for row in rows}
    ends = {(row["topic"], row["partition"]): row["end"] for row in rows if row["end"] is not None}
    if operation.drain_started_at is None:
        step(drain_started_at=timezone.now())
    while True:
        if partitions:
            progress = failover_io.observe_drain(
                reader, partitions=partitions, ends_at_start=ends, producers_stopped=producers_stopped
            )
        else:
            progress = failover.DrainProgress(True, 0, ())
        now = timezone.now()
        elapsed = (now - operation.drain_started_at).total_seconds()
        at_start = max(operation.drain_records_at_start or 0, progress.records_remaining)
        fields: dict[str, Any] = {
            "drain_records_at_start": at_start,
            "drain_records_remaining": progress.records_remaining,
            "drain_partitions_remaining": [_key(*key) for key in progress.partitions_remaining[:20]],
            "drain_partition_count_remaining": len(progress.partitions_remaining),
            "drain_observed_at": now,
            "drain_done": progress.done,
            "progress": 1.0 if progress.done else round(1 - progress.records_remaining / at_start, 4),
        }
        remaining = (
            f"{progress.records_remaining} record(s) on {len(progress.partitions_remaining)} partition(s) "
            f"still to copy to {reader.target.alias}"
        )
        if progress.done:
            step(**fields, phase=Phase.MOVING_GROUPS, message=f"drained in {elapsed:.0f} s")
            return
        if elapsed >= operation.timeout_s:
            if not operation.force:
                step(**fields, message=f"drain timed out after {elapsed:.0f} s: {remaining}")
                raise DrainTimeout(
                    f"{remaining} after {operation.timeout_s:g} s (the drain timeout). "
                    "Start the replication workers (or check the flow's errors) and run it again, "
                    "or force it to go on without them"
                )
            step(**fields, phase=Phase.MOVING_GROUPS, message=f"forced on after {elapsed:.0f} s: {remaining}")
            return
        step(**fields, message=f"draining for {elapsed:.0f} s: {remaining}")
        if STOPPING.wait(DRAIN_POLL_S):
            raise HandedOver()


# -- failover ---------------------------------------------------------------------------------------------
def _failover(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    reader = flow_reader(flow)
    try:
        if operation.phase in (Phase.QUEUED, Phase.PLANNING):
            _plan_failover(operation, step, reader)
        if operation.phase == Phase.DRAINING:
            producers_stopped = _check_passed(operation.plan, failover.Check.PRODUCERS_STOPPED)
            drain(operation, step, reader, producers_stopped=producers_stopped)
        move_groups_to_target(operation, step, reader)
    finally:
        reader.close()
    lifecycle.complete_failover(flow=flow)


def _plan_failover(
    operation: Operation, step: Callable[..., None], reader: failover_io.FailoverReader
) -> None:
    flow = operation.flow
    step(phase=Phase.PLANNING, message="reading both clusters: lag, consumer groups, checkpoints")
    plan, partitions = failover_io.read_plan(
        reader, groups=operation.groups, last_known_lag=_last_known_lag(flow)
    )
    summary = plan_summary(plan)
    step(plan=summary, records_at_risk=plan.records_at_risk, source_reachable=plan.source_reachable)
    failed = plan.failed_checks
    if failed and not operation.force:
        reasons = "; ".join(f"{item.check.value}: {item.explanation}" for item in failed)
        raise ChecksFailed(f"{len(failed)} check(s) failed ({reasons}); fix them, or fail over with force")
    if not operation.previous_state:
        flow.refresh_from_db(fields=["state"])
        step(previous_state=flow.state)
    lifecycle.begin_failover(flow=flow)
    ends = {
        (p.topic, p.partition): max(p.source_end, p.replicated_offset or 0)
        for p in plan.partitions
        if p.source_end is not None
    }
    drain = plan.source_reachable
    step(
        drain_partitions=drain_rows(partitions, ends) if drain else [],
        phase=Phase.DRAINING if drain else Phase.MOVING_GROUPS,
        message="draining" if drain else f"{flow.source.alias} does not answer: no drain",
    )


def move_groups_to_target(
    operation: Operation, step: Callable[..., None], reader: failover_io.FailoverReader
) -> None:
    """Translate again (after the drain) and write the offsets on the target."""
    step(phase=Phase.MOVING_GROUPS, message=f"writing the groups' offsets on {reader.target.alias}")
    groups = operation.groups
    if operation.source_reachable:
        remote_topics = {topic: remote for (topic, _), remote in reader.replicated_partitions().items()}
        group_plans = failover_io.group_plans_from_source(reader, groups=groups, remote_topics=remote_topics)
    else:
        group_plans = failover_io.group_plans_from_checkpoints(
            reader, groups=groups, checkpoints=reader.latest_checkpoints(groups)
        )
    for group_plan in group_plans:
        result = _write_group(reader, reader.target, group_plan)
        topics = sorted({row.topic for row in group_plan.partitions})
        _store(operation, result, topics=topics)
        step()


def _store(operation: Operation, result: GroupResult, *, topics: list[str]) -> None:
    operations.operation_store_group(
        operation=operation,
        group=result.group,
        outcome=result.outcome,
        written=result.written,
        topics=topics,
        detail=result.detail,
    )


def _write_group(reader: failover_io.FailoverReader, cluster, group_plan: failover.GroupPlan) -> GroupResult:
    if group_plan.active_on_target:
        return GroupResult(
            group_plan.group,
            "refused",
            detail=f"active on {cluster.alias} ({group_plan.target_state}): stop its consumers there first",
        )
    notes = sorted({row.note for row in group_plan.partitions if row.note and not row.write})
    return _write_offsets(
        reader, cluster, group=group_plan.group, offsets=group_plan.offsets_to_write(), note="; ".join(notes)
    )


def _write_offsets(
    reader: failover_io.FailoverReader, cluster, *, group: str, offsets: dict[tuple[str, int], int], note: str
) -> GroupResult:
    if not offsets:
        return GroupResult(group, "unchanged", detail=note)
    refused = reader.alter_offsets(cluster, group, offsets)
    written = {_key(*key): offset for key, offset in sorted(offsets.items()) if key not in refused}
    if refused:
        reasons = "; ".join(f"{_key(*key)}: {reason}" for key, reason in sorted(refused.items()))
        return GroupResult(group, "refused", written, detail=f"{cluster.alias} refused {reasons}")
    return GroupResult(group, "written", written, detail=note)


# -- failback ---------------------------------------------------------------------------------------------
def topics_back(operation: Operation) -> list[str]:
    """The topics a failback replicates back: every topic the failover moved its groups' consumers to."""
    chosen = set(operation.groups)
    return sorted(
        {
            topic
            for result in operations.moved_groups(operation.failover)
            if result.group in chosen
            for topic in result.topics
        }
    )


def reverse_flow_of(flow: Flow) -> Flow | None:
    return (
        Flow.objects.filter(source=flow.target, target=flow.source).select_related("source", "target").first()
    )


def reverse_flow_settings(flow: Flow, existing: Flow | None, *, topics: list[str]) -> dict[str, Any]:
    """The reverse flow's settings for a failback: `topics` added to what it replicates (never
    narrowed), the topics mirrored from the source excluded (they are there already), enabled."""
    exclude = failover.remote_topics_exclude(
        source_alias=flow.source.alias, separator=flow.replication_policy_separator
    )
    current_exclude = list(existing.topics_exclude) if existing else list(DEFAULT_TOPICS_EXCLUDE)
    current_topics = list(existing.topics) if existing else []
    selected = TopicFilter(current_topics, current_exclude)
    added = [re.escape(topic) for topic in topics if not selected.should_replicate_topic(topic)]
    settings: dict[str, Any] = {
        "enabled": True,
        "topics": current_topics + [pattern for pattern in added if pattern not in current_topics],
        "topics_exclude": current_exclude if exclude in current_exclude else [*current_exclude, exclude],
        # Groups consuming the target's own topics follow the reverse flow's checkpoints to the source.
        "sync_group_offsets_enabled": True,
    }
    if existing is None:
        settings |= {
            "replication_policy_class": flow.replication_policy_class,
            "replication_policy_separator": flow.replication_policy_separator,
            "pool": flow.pool,  # the same family of topics, on the same workers
        }
    if is_identity_policy_class(flow.replication_policy_class):
        # Identity names cannot tell a mirrored record from a new one: the provenance header does.
        settings["provenance_header_enabled"] = True
    return settings


def _set_up_reverse_flow(operation: Operation, *, topics: list[str]) -> tuple[Flow, bool]:
    flow = operation.flow
    actor = operation.requested_by
    existing = reverse_flow_of(flow)
    settings = reverse_flow_settings(flow, existing, topics=topics)
    if existing is None:
        reverse = services.flow_create(actor=actor, source=flow.target, target=flow.source, **settings)
    else:
        changes = {name: value for name, value in settings.items() if getattr(existing, name) != value}
        reverse = services.flow_update(actor=actor, flow=existing, **changes) if changes else existing
        if "resume" in lifecycle.allowed_actions(reverse.state):
            reverse = services.flow_resume(actor=actor, flow=reverse)
    selected = TopicFilter(reverse.topics, reverse.topics_exclude)
    excluded = [topic for topic in topics if not selected.should_replicate_topic(topic)]
    if excluded:
        raise ServiceConflict(
            f"{reverse.name} excludes {', '.join(excluded)} (topics.exclude {reverse.topics_exclude}): "
            "take them out of its topics.exclude so they can flow back, then fail back again"
        )
    return reverse, existing is None


def _failback(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    if operation.phase in (Phase.QUEUED, Phase.PLANNING):
        _plan_failback(operation, step)
    if operation.phase == Phase.DRAINING:
        reader = flow_reader(operation.reverse_flow)
        try:
            # Only what was written before the failback started is waited for: producers may still run.
            drain(operation, step, reader, producers_stopped=False)
        finally:
            reader.close()
    _move_groups_to_source(operation, step)
    lifecycle.complete_failback(flow=flow)


def _plan_failback(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    step(phase=Phase.PLANNING, message="setting up the reverse flow")
    lifecycle.begin_failback(flow=flow)
    topics = topics_back(operation)
    reverse, created = _set_up_reverse_flow(operation, topics=topics)
    step(
        reverse_flow=reverse,
        reverse_flow_created=operation.reverse_flow_created or created,
        topics_back=topics,
        message=f"reading the end offsets of {len(topics)} topic(s) on {flow.target.alias}",
    )
    reader = flow_reader(reverse)
    try:
        partitions = {
            key: remote for key, remote in reader.replicated_partitions().items() if key[0] in topics
        }
        ends = reader.end_offsets(reader.source, partitions)
    finally:
        reader.close()
    step(drain_partitions=drain_rows(partitions, ends), phase=Phase.DRAINING, message="draining")


def _move_groups_to_source(operation: Operation, step: Callable[..., None]) -> None:
    flow = operation.flow
    step(phase=Phase.MOVING_GROUPS, message=f"writing the groups' offsets on {flow.source.alias}")
    reader = flow_reader(flow)
    try:
        source_topics = {remote: topic for (topic, _), remote in reader.replicated_partitions().items()}
        for group in operation.groups:
            result = _fail_group_back(reader, group, source_topics=source_topics)
            _store(operation, result, topics=sorted({key.rpartition("[")[0] for key in result.written}))
            step()
    finally:
        reader.close()


def _fail_group_back(
    reader: failover_io.FailoverReader, group: str, *, source_topics: dict[str, str]
) -> GroupResult:
    """The group's positions on the mirrored topics of the target, translated back to the source."""
    state = reader.group_states(reader.source, [group])[group]
    if not may_sync_group_offsets(state):
        return GroupResult(group, "refused", detail=f"active on {reader.source.alias} ({state})")
    offsets, untranslatable = failover.failback_offsets(
        target_committed=reader.committed_offsets(reader.target, [group])[group],
        source_topics=source_topics,
        store=reader.refresh_offset_syncs(),
        source_committed=reader.committed_offsets(reader.source, [group])[group],
    )
    note = (
        f"not translatable (older than the oldest offset sync): {', '.join(_key(*k) for k in untranslatable)}"
        if untranslatable
        else ""
    )
    return _write_offsets(reader, reader.source, group=group, offsets=offsets, note=note)
