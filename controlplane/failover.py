"""Failover and failback of a flow: the on-call engineer's services (plan, execute, failback).

`failover_plan` reads (any role). `failover_execute` and `failback_execute` need the operator role (the
command line runs as the system) and every attempt is audited, refused ones included. The decisions
live in `replication.failover`; the Kafka reads and writes in `replication.kafka.failover_io`.

Execute, in the order of the runbook:
1. build the plan; refuse without the exact confirmation (the flow's name) or with failed checks
   unless `force`;
2. state FAILING_OVER (controlplane.lifecycle; a runnable state). When the source answers, replication
   keeps running (the drain; a paused flow replicates for it) until every record that was on the source
   when the failover started is on the target with its offset sync, so translation is exact. Progress is a FlowEvent row updated in place,
   which the flow status API shows. On timeout the flow goes back to its previous state, unless `force`;
3. (replication keeps running while the groups move: whatever it still copies only adds to the target);
4. translate the chosen groups' offsets again (they may have committed during the drain) and write them
   on the target: never for a group active there, never backwards;
5. state FAILED_OVER, audit event with the plan and the per-group outcome.
A second run finds FAILED_OVER: it skips the drain and writes nothing that is already there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from controlplane import engine, lifecycle, ratelimit, services
from controlplane.errors import ClusterUnavailable, ServiceConflict, ServiceValidationError
from controlplane.models import (
    AuditAction,
    AuditEvent,
    AuditOutcome,
    Cluster,
    Flow,
    FlowEvent,
    FlowEventKind,
    FlowPartitionStatus,
    FlowState,
)
from controlplane.roles import Role, role_of
from replication import failover
from replication.checkpoint import may_sync_group_offsets
from replication.config import DEFAULT_TOPICS_EXCLUDE
from replication.kafka import failover_io
from replication.kafka.internal_topics import InternalTopicError
from replication.policy import is_identity_policy_class

DEFAULT_DRAIN_TIMEOUT_S = 300.0
DRAIN_POLL_S = 0.5


class DrainTimeout(ServiceConflict):
    """Records produced before the failover were still not on the target when the timeout came."""


@dataclass
class GroupResult:
    group: str
    outcome: str  # written | unchanged | refused
    written: dict[str, int] = field(default_factory=dict)  # "topic[partition]" -> offset
    detail: str = ""


@dataclass
class FailoverResult:
    flow: str
    state: str
    already_failed_over: bool
    records_at_risk: int | None
    drain: dict | None
    groups: list[GroupResult]
    plan: dict

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class FailbackResult:
    flow: str
    reverse_flow: str
    reverse_flow_id: int
    reverse_flow_created: bool
    topics_exclude: list[str]
    groups: list[GroupResult]

    def to_dict(self) -> dict:
        return asdict(self)


# -- helpers ----------------------------------------------------------------------------------------------
def _reader(flow: Flow) -> failover_io.FailoverReader:
    return failover_io.FailoverReader(
        flow=engine.flow_to_config(flow),
        source=engine.cluster_to_config(flow.source),
        target=engine.cluster_to_config(flow.target),
        known_aliases=list(Cluster.objects.values_list("alias", flat=True)),
    )


def _last_known_lag(flow: Flow) -> dict[tuple[str, int], int]:
    """The lag the workers last stored per source partition (what is known when the source is lost)."""
    rows = FlowPartitionStatus.objects.filter(flow=flow, lag_records__isnull=False)
    return {(row.topic, row.partition): row.lag_records for row in rows}


def _audit(*, actor, action: str, flow: Flow, outcome: str, detail: str = "", after: Any = None) -> None:
    services.audit_record(
        actor=actor,
        action=action,
        object_type="flow",
        object_id=flow.pk,
        object_repr=flow.name,
        outcome=outcome,
        detail=detail,
        after=after,
    )


def _require_operator(*, actor, action: str, flow: Flow) -> None:
    """Operators and admins only; the command line (no actor) runs as the system."""
    if actor is None:
        return
    role = role_of(actor)
    if role is None or role < Role.OPERATOR:
        message = (
            f"{action} needs the operator role; you have "
            f"{'no role' if role is None else 'the ' + role.group_name + ' role'}"
        )
        _audit(actor=actor, action=action, flow=flow, outcome=AuditOutcome.REFUSED, detail=message)
        raise PermissionDenied(message)


def _check_confirmation(*, flow: Flow, confirm: str) -> None:
    if confirm != flow.name:
        raise ServiceValidationError.single(
            "confirm", f"type the flow's name exactly ({flow.name}) to confirm; got {confirm!r}"
        )


def _check_groups(groups: Sequence[str]) -> list[str]:
    chosen = sorted({group.strip() for group in groups if group.strip()})
    if not chosen:
        raise ServiceValidationError.single("groups", "name at least one consumer group to move")
    return chosen


def _plan_summary(plan: failover.FailoverPlan) -> dict:
    """The plan as audited: every check and group, and only the partitions with records at risk."""
    summary = plan.to_dict()
    summary["partitions"] = [p for p in summary["partitions"] if p["records_at_risk"] != 0]
    return summary


def _key(topic: str, partition: int) -> str:
    return f"{topic}[{partition}]"


def _attempt(*, actor, action: str, flow: Flow, run: Callable[[], Any]) -> Any:
    """Run an execute; a refusal or failure is audited with its reason and re-raised."""
    try:
        return run()
    except DrainTimeout as exc:
        _audit(actor=actor, action=action, flow=flow, outcome=AuditOutcome.FAILURE, detail=str(exc))
        raise
    except (ServiceValidationError, ServiceConflict) as exc:
        _audit(actor=actor, action=action, flow=flow, outcome=AuditOutcome.REFUSED, detail=str(exc))
        raise
    except (ClusterUnavailable, failover_io.FailoverIOError, InternalTopicError) as exc:
        _audit(actor=actor, action=action, flow=flow, outcome=AuditOutcome.FAILURE, detail=str(exc))
        if isinstance(exc, ClusterUnavailable):
            raise
        raise ClusterUnavailable(str(exc)) from exc


# -- plan -------------------------------------------------------------------------------------------------
def failover_plan(
    *,
    flow: Flow,
    groups: Sequence[str] | None = None,
    arrival_window_s: float = failover_io.ARRIVAL_WINDOW_S,
    actor=None,
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
    reader = _reader(flow)
    try:
        plan, _ = failover_io.read_plan(
            reader, groups=groups, arrival_window_s=arrival_window_s, last_known_lag=_last_known_lag(flow)
        )
    except failover_io.FailoverIOError as exc:
        raise ClusterUnavailable(str(exc)) from exc
    finally:
        reader.close()
    return plan


# -- execute ----------------------------------------------------------------------------------------------
def failover_execute(
    *,
    actor,
    flow: Flow,
    groups: Sequence[str],
    confirm: str,
    force: bool = False,
    timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S,
    arrival_window_s: float = failover_io.ARRIVAL_WINDOW_S,
) -> FailoverResult:
    """Fail `flow` over to its target for `groups` (see the module docstring for the steps)."""
    _require_operator(actor=actor, action=AuditAction.FAILOVER, flow=flow)
    return _attempt(
        actor=actor,
        action=AuditAction.FAILOVER,
        flow=flow,
        run=lambda: _failover(
            actor=actor,
            flow=flow,
            groups=groups,
            confirm=confirm,
            force=force,
            timeout_s=timeout_s,
            arrival_window_s=arrival_window_s,
        ),
    )


def _failover(
    *,
    actor,
    flow: Flow,
    groups: Sequence[str],
    confirm: str,
    force: bool,
    timeout_s: float,
    arrival_window_s: float,
) -> FailoverResult:
    _check_confirmation(flow=flow, confirm=confirm)
    chosen = _check_groups(groups)
    reader = _reader(flow)
    try:
        plan, partitions = failover_io.read_plan(
            reader, groups=chosen, arrival_window_s=arrival_window_s, last_known_lag=_last_known_lag(flow)
        )
        failed = plan.failed_checks
        if failed and not force:
            raise ServiceValidationError(
                {"force": [f"{len(failed)} check(s) failed; fix them or confirm with force"]},
                details=[asdict(item) for item in plan.checklist],
            )
        already = Flow.objects.get(pk=flow.pk).state == FlowState.FAILED_OVER
        drain = None
        if not already:
            previous = lifecycle.begin_failover(flow=flow)
            if plan.source_reachable:
                drain = _drain(
                    reader,
                    flow=flow,
                    plan=plan,
                    partitions=partitions,
                    timeout_s=timeout_s,
                    force=force,
                    previous=previous,
                )
        results = _move_groups(reader, plan=plan, groups=chosen, partitions=partitions)
    finally:
        reader.close()
    lifecycle.complete_failover(flow=flow)
    result = FailoverResult(
        flow=flow.name,
        state=FlowState.FAILED_OVER,
        already_failed_over=already,
        records_at_risk=plan.records_at_risk,
        drain=drain,
        groups=results,
        plan=_plan_summary(plan),
    )
    refused = [r.group for r in results if r.outcome == "refused"]
    detail = f"groups refused: {', '.join(refused)}" if refused else ""
    if force and plan.failed_checks:
        forced = ", ".join(item.check.value for item in plan.failed_checks)
        detail = f"forced past failed checks: {forced}. {detail}".strip()
    _audit(
        actor=actor,
        action=AuditAction.FAILOVER,
        flow=flow,
        outcome=AuditOutcome.SUCCESS,
        detail=detail,
        after=result.to_dict(),
    )
    return result


def _drain(
    reader: failover_io.FailoverReader,
    *,
    flow: Flow,
    plan: failover.FailoverPlan,
    partitions: dict[tuple[str, int], str],
    timeout_s: float,
    force: bool,
    previous: str,
) -> dict:
    """Wait until every record on the source at the start is replicated; progress in a FlowEvent."""
    ends = {
        (p.topic, p.partition): max(p.source_end, (p.replicated_offset or 0))
        for p in plan.partitions
        if p.source_end is not None
    }
    producers_stopped = plan.check(failover.Check.PRODUCERS_STOPPED).status == failover.CheckStatus.PASS
    event = FlowEvent.objects.create(
        flow=flow,
        kind=FlowEventKind.INFO,
        at=timezone.now(),
        message="failover: draining",
        detail={"failover": {"phase": "draining", "timeout_s": timeout_s}},
    )
    started = time.monotonic()
    while True:
        progress = failover_io.observe_drain(
            reader, partitions=partitions, ends_at_start=ends, producers_stopped=producers_stopped
        )
        elapsed = time.monotonic() - started
        phase = "drained" if progress.done else "draining"
        if not progress.done and elapsed >= timeout_s:
            phase = "timed out"
        event.message = (
            f"failover: {phase}: {progress.records_remaining} record(s) on "
            f"{len(progress.partitions_remaining)} partition(s) still to replicate ({elapsed:.0f}s)"
        )
        event.detail = {"failover": {"phase": phase, "elapsed_s": round(elapsed, 1), **progress.to_dict()}}
        event.save(update_fields=["message", "detail"])
        if progress.done:
            return event.detail["failover"]
        if elapsed >= timeout_s:
            if force:
                return event.detail["failover"]
            lifecycle.abort_failover(flow=flow, previous=previous)
            raise DrainTimeout(
                f"{progress.records_remaining} record(s) produced before the failover were not replicated "
                f"within {timeout_s:g}s; the flow is back to {previous}. Run the failover again, or "
                "use force to fail over without them"
            )
        time.sleep(DRAIN_POLL_S)


def _move_groups(
    reader: failover_io.FailoverReader,
    *,
    plan: failover.FailoverPlan,
    groups: list[str],
    partitions: dict[tuple[str, int], str],
) -> list[GroupResult]:
    """Translate again (after the drain and pause) and write the offsets on the target."""
    if plan.source_reachable:
        remote_topics = {topic: remote_topic for (topic, _), remote_topic in partitions.items()}
        group_plans = failover_io.group_plans_from_source(reader, groups=groups, remote_topics=remote_topics)
    else:
        group_plans = failover_io.group_plans_from_checkpoints(
            reader, groups=groups, checkpoints=reader.latest_checkpoints(groups)
        )
    return [_write_group(reader, reader.target, group_plan) for group_plan in group_plans]


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
def _failed_over_groups(flow: Flow) -> list[str]:
    """The groups the latest successful failover of `flow` moved."""
    event = (
        AuditEvent.objects.filter(
            action=AuditAction.FAILOVER,
            object_type="flow",
            object_id=str(flow.pk),
            outcome=AuditOutcome.SUCCESS,
        )
        .order_by("-at", "-id")
        .first()
    )
    return [row["group"] for row in (event.after or {}).get("groups", [])] if event else []


def failback_execute(
    *,
    actor,
    flow: Flow,
    confirm: str,
    groups: Sequence[str] | None = None,
    force: bool = False,
) -> FailbackResult:
    """Replicate what was written on the target back to the source (the reverse flow, created or
    enabled, excluding the topics mirrored from the source) and move the groups' offsets back."""
    _require_operator(actor=actor, action=AuditAction.FAILBACK, flow=flow)
    return _attempt(
        actor=actor,
        action=AuditAction.FAILBACK,
        flow=flow,
        run=lambda: _failback(actor=actor, flow=flow, confirm=confirm, groups=groups, force=force),
    )


def _reverse_flow_settings(flow: Flow, existing: Flow | None) -> dict[str, Any]:
    exclude = failover.remote_topics_exclude(
        source_alias=flow.source.alias, separator=flow.replication_policy_separator
    )
    current = list(existing.topics_exclude) if existing else list(DEFAULT_TOPICS_EXCLUDE)
    settings: dict[str, Any] = {
        "enabled": True,
        "topics_exclude": current if exclude in current else [*current, exclude],
        # Groups consuming the target's own topics follow the reverse flow's checkpoints to the source.
        "sync_group_offsets_enabled": True,
    }
    if existing is None:
        settings |= {
            "replication_policy_class": flow.replication_policy_class,
            "replication_policy_separator": flow.replication_policy_separator,
            "topics": list(flow.topics),
        }
    if is_identity_policy_class(flow.replication_policy_class):
        # Identity names cannot tell a mirrored record from a new one: the provenance header does.
        settings["provenance_header_enabled"] = True
    return settings


def _failback(
    *, actor, flow: Flow, confirm: str, groups: Sequence[str] | None, force: bool
) -> FailbackResult:
    _check_confirmation(flow=flow, confirm=confirm)
    flow = Flow.objects.select_related("source", "target").get(pk=flow.pk)
    if flow.state != FlowState.FAILED_OVER and not force:
        raise ServiceConflict(
            f"flow {flow.name} is {flow.state}, not failed_over: failback reverses a failover "
            "(use force to set up the reverse flow anyway)"
        )
    if (
        is_identity_policy_class(flow.replication_policy_class)
        and not flow.provenance_header_enabled
        and not force
    ):
        raise ServiceConflict(
            f"{flow.name} uses IdentityReplicationPolicy without provenance.header.enabled: the records it "
            f"mirrored to {flow.target.alias} carry no mark, so the reverse flow would copy them back as "
            "duplicates. Use force to accept that"
        )
    reversing = flow.state == FlowState.FAILED_OVER
    if reversing:
        lifecycle.begin_failback(flow=flow)
    try:
        reverse, existing, results = _reverse_and_move_groups(actor=actor, flow=flow, groups=groups)
    except Exception:
        if reversing:
            lifecycle.abort_failback(flow=flow)
        raise
    if reversing:
        lifecycle.complete_failback(flow=flow)
    result = FailbackResult(
        flow=flow.name,
        reverse_flow=reverse.name,
        reverse_flow_id=reverse.pk,
        reverse_flow_created=existing is None,
        topics_exclude=list(reverse.topics_exclude),
        groups=results,
    )
    _audit(
        actor=actor,
        action=AuditAction.FAILBACK,
        flow=flow,
        outcome=AuditOutcome.SUCCESS,
        after=result.to_dict(),
    )
    return result


def _reverse_and_move_groups(
    *, actor, flow: Flow, groups: Sequence[str] | None
) -> tuple[Flow, Flow | None, list[GroupResult]]:
    existing = (
        Flow.objects.filter(source=flow.target, target=flow.source).select_related("source", "target").first()
    )
    settings = _reverse_flow_settings(flow, existing)
    if existing is None:
        reverse = services.flow_create(actor=actor, source=flow.target, target=flow.source, **settings)
    else:
        reverse = services.flow_update(actor=actor, flow=existing, **settings)
        if "resume" in lifecycle.allowed_actions(reverse.state):
            reverse = services.flow_resume(actor=actor, flow=reverse)
    chosen = list(groups) if groups else _failed_over_groups(flow)
    reader = _reader(flow)
    try:
        source_topics = {remote: topic for (topic, _), remote in reader.replicated_partitions().items()}
        results = [_fail_group_back(reader, group, source_topics=source_topics) for group in chosen]
    finally:
        reader.close()
    return reverse, existing, results


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
