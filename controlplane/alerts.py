"""Alerts: RPO budgets, the evaluation of the rules (controlplane.alert_rules), silences, and the reads of
the alert page and API.

`alerts_evaluate` is what the beat-driven task runs every ALERTS_EVALUATE_INTERVAL_S: it gathers each
flow's facts from the same live status selectors as the pages (one lag definition), its budget, the
runtime signals the workers record (`FlowSignals`) and the task leases the caller read from Redis, asks
every rule, and turns verdicts into alert instances: a rule that starts firing opens an `Alert` (one per
flow and rule), one that stops resolves it. Each opening and resolution queues one notification per
enabled channel, unless a silence covered the alert when it fired; delivery is a separate task
(`controlplane.notifications`), so a channel that does not answer never delays evaluation.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, F, Max, QuerySet, Sum
from django.utils import timezone

from controlplane import lifecycle, selectors
from controlplane.alert_rules import FlowFacts, Limits, Verdict, evaluate
from controlplane.errors import ServiceValidationError
from controlplane.models import (
    DEFAULT_RPO_SECONDS,
    Alert,
    AlertNotification,
    AlertRule,
    AlertSilence,
    AlertState,
    AuditAction,
    Flow,
    FlowEvent,
    FlowEventKind,
    FlowRpoBudget,
    FlowSignals,
    NotificationChannel,
)
from controlplane.services import audit_record, audited_attempt

EVALUATED_AT_KEY = "alerts:evaluated_at"


# -- RPO budgets ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class RpoBudget:
    seconds_behind: float
    records_behind: int | None


DEFAULT_BUDGET = RpoBudget(DEFAULT_RPO_SECONDS, None)


def rpo_budget_of(*, flow: Flow) -> RpoBudget:
    """The flow's budget; the defaults (60 s, no records budget) when it has none stored."""
    row = FlowRpoBudget.objects.filter(flow=flow).first()
    return DEFAULT_BUDGET if row is None else RpoBudget(row.seconds_behind, row.records_behind)


def _budget_errors(seconds_behind: Any, records_behind: Any) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if not isinstance(seconds_behind, int | float) or isinstance(seconds_behind, bool) or seconds_behind <= 0:
        errors["seconds_behind"] = ["must be a number of seconds above 0, e.g. 60"]
    if records_behind is not None and (
        not isinstance(records_behind, int) or isinstance(records_behind, bool) or records_behind < 0
    ):
        errors["records_behind"] = ["must be a whole number of records, 0 or more, or empty for no budget"]
    return errors


def rpo_budget_set(*, actor, flow: Flow, seconds_behind: float, records_behind: int | None) -> RpoBudget:
    """Store the flow's budget (admin; audited). Bad values raise with the field, nothing changes."""
    with audited_attempt(
        actor=actor,
        action=AuditAction.UPDATE,
        object_type="rpo_budget",
        object_id=flow.pk,
        object_repr=flow.name,
    ):
        errors = _budget_errors(seconds_behind, records_behind)
        if errors:
            raise ServiceValidationError(errors)
        before = rpo_budget_of(flow=flow)
        FlowRpoBudget.objects.update_or_create(
            flow=flow, defaults={"seconds_behind": float(seconds_behind), "records_behind": records_behind}
        )
        after = RpoBudget(float(seconds_behind), records_behind)
        audit_record(
            actor=actor,
            action=AuditAction.UPDATE,
            object_type="rpo_budget",
            object_id=flow.pk,
            object_repr=flow.name,
            before=vars(before),
            after=vars(after),
        )
    return after


# -- runtime signals (written by the workers) ------------------------------------------------------------
SIGNAL_FIELDS = frozenset(
    {
        "heartbeat_emitted_at",
        "checkpoint_emitted_at",
        "checkpoint_latency_ms",
        "offset_sync_emitted_at",
        "records_replicated_at",
    }
)


def flow_signals_record(*, flow_id: int, **signals: datetime.datetime | float) -> None:
    """Record when the runtime last emitted heartbeats, checkpoints (and their latency), offset syncs or
    replicated records (one UPDATE in the usual case: the row exists after the flow's first one)."""
    unknown = set(signals) - SIGNAL_FIELDS
    if unknown:
        raise ValueError(f"unknown signals: {sorted(unknown)}")
    if not signals or FlowSignals.objects.filter(flow_id=flow_id).update(**signals):
        return
    if Flow.objects.filter(pk=flow_id).exists():
        FlowSignals.objects.update_or_create(flow_id=flow_id, defaults=signals)


@dataclass(frozen=True)
class TaskLeases:
    planned: int  # tasks of the flow's current plan
    leased: int  # of them, tasks whose lease someone holds


# -- evaluation -------------------------------------------------------------------------------------------
def limits() -> Limits:
    return Limits(
        stale_after_s=selectors.stale_after_s(),
        heartbeat_min_age_s=settings.ALERTS_HEARTBEAT_MIN_AGE_S,
        offset_sync_max_lag_s=settings.ALERTS_OFFSET_SYNC_MAX_LAG_S,
        data_loss_window_s=settings.ALERTS_DATA_LOSS_WINDOW_S,
        readiness_below=settings.READINESS_ALERT_BELOW,
        readiness_grace_s=max(settings.READINESS_GRACE_S, 3 * settings.VERIFY_INTERVAL_S),
    )


def _epoch(value: datetime.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _facts(
    summary: selectors.FlowSummary,
    *,
    budget: RpoBudget,
    signals: FlowSignals | None,
    gaps: Mapping[str, Any] | None,
    replication_workers: int | None,
    verification: Any = None,
    readiness: Any = None,
) -> FlowFacts:
    flow = summary.flow
    since = flow.state_changed_at or flow.created_at
    pool_workers = summary.pool.live_workers if summary.pool is not None else None
    if flow.pool:  # a pinned flow is replicated by its pool's workers only (controlplane.pools)
        replication_workers = pool_workers
    return FlowFacts(
        runnable=lifecycle.is_runnable(flow.state),
        runnable_since=since.timestamp(),
        state=flow.state,
        state_reason=flow.state_reason,
        status=summary.status,
        records_behind=summary.records_behind,
        seconds_behind=(
            summary.seconds_behind if summary.seconds_behind is not None else summary.seconds_behind_at_least
        ),
        seconds_behind_undated=summary.seconds_behind is None and summary.seconds_behind_at_least is not None,
        observed_at=_epoch(summary.observed_at),
        budget_seconds=budget.seconds_behind,
        budget_records=budget.records_behind,
        heartbeats_enabled=flow.emit_heartbeats_enabled,
        heartbeat_interval_s=float(flow.emit_heartbeats_interval_seconds),
        heartbeat_at=_epoch(signals and signals.heartbeat_emitted_at),
        offset_sync_at=_epoch(signals and signals.offset_sync_emitted_at),
        records_replicated_at=_epoch(signals and signals.records_replicated_at),
        tasks_planned=signals.tasks_planned if signals else None,
        tasks_leased=signals.tasks_leased if signals else None,
        tasks_observed_at=_epoch(signals and signals.tasks_observed_at),
        replication_workers=replication_workers,
        pool=flow.pool,
        pool_workers=pool_workers,
        gaps_recent=gaps["gaps"] if gaps else 0,
        lost_records_recent=(gaps["lost"] or 0) if gaps else 0,
        last_gap_at=_epoch(gaps["last"]) if gaps else None,
        mismatches=tuple(p.reason for p in verification.mismatches) if verification else (),
        mismatch_checked_at=_epoch(verification.checked_at) if verification else None,
        readiness_score=readiness.score if readiness else None,
        readiness_problems=tuple(r.message for r in readiness.readiness.problems) if readiness else (),
    )


def _store_task_leases(tasks: Mapping[int, TaskLeases], *, now: datetime.datetime) -> None:
    existing = set(FlowSignals.objects.filter(flow_id__in=list(tasks)).values_list("flow_id", flat=True))
    flows = set(Flow.objects.filter(pk__in=list(tasks)).values_list("pk", flat=True))
    rows = [
        FlowSignals(flow_id=flow_id, tasks_planned=t.planned, tasks_leased=t.leased, tasks_observed_at=now)
        for flow_id, t in tasks.items()
        if flow_id in flows
    ]
    FlowSignals.objects.bulk_update(
        [row for row in rows if row.flow_id in existing],
        ["tasks_planned", "tasks_leased", "tasks_observed_at"],
    )
    FlowSignals.objects.bulk_create([row for row in rows if row.flow_id not in existing])


def active_silences(*, now: datetime.datetime) -> QuerySet[AlertSilence]:
    return AlertSilence.objects.filter(expires_at__gt=now)


def _silenced(silences: list[AlertSilence], *, flow_id: int, rule: str) -> bool:
    return any(s.flow_id in (None, flow_id) and s.rule in ("", rule) for s in silences)


@dataclass(frozen=True)
class Evaluation:
    fired: list[Alert]
    resolved: list[Alert]
    notifications: list[int]  # AlertNotification ids to deliver


def _notify(alert: Alert, *, event: str, channels: list[NotificationChannel]) -> list[int]:
    made = AlertNotification.objects.bulk_create(
        [AlertNotification(channel=channel, alert=alert, event=event) for channel in channels]
    )
    return [notification.pk for notification in made]


def _at(epoch: float | None) -> datetime.datetime | None:
    return None if epoch is None else datetime.datetime.fromtimestamp(epoch, datetime.UTC)


def alerts_evaluate(
    *,
    now: datetime.datetime | None = None,
    tasks: Mapping[int, TaskLeases] | None = None,
    replication_workers: int | None = None,
) -> Evaluation:
    """Evaluate every rule for every flow at `now`; open, update and resolve alert instances.

    `tasks` (per runnable flow, read from Redis by the caller) and `replication_workers` (None when Redis
    did not answer) feed the lease rule; leaving them out keeps the last observation. Idempotent: a second
    run at the same moment changes nothing.
    """
    now = now or timezone.now()
    if tasks is not None:
        _store_task_leases(tasks, now=now)
    summaries = selectors.flow_summaries(now=now)
    # assurance reads the RPO budgets defined here: imported when evaluating, not at import time.
    from controlplane.assurance import flow_readiness_all
    from controlplane.verification import verification_statuses

    readiness = flow_readiness_all(summaries, now=now)
    verifications = verification_statuses()
    budgets = {
        row.flow_id: RpoBudget(row.seconds_behind, row.records_behind) for row in FlowRpoBudget.objects.all()
    }
    signals = {row.flow_id: row for row in FlowSignals.objects.all()}
    window_start = now - datetime.timedelta(seconds=settings.ALERTS_DATA_LOSS_WINDOW_S)
    gaps = {
        row["flow_id"]: row
        for row in FlowEvent.objects.filter(kind=FlowEventKind.DATA_LOSS_GAP, at__gte=window_start)
        .values("flow_id")
        .annotate(gaps=Count("id"), lost=Sum(F("last_offset") - F("first_offset") + 1), last=Max("at"))
        .order_by()
    }
    rule_limits = limits()
    epoch = now.timestamp()
    with transaction.atomic():
        open_alerts = {
            (alert.flow_id, alert.rule): alert
            for alert in Alert.objects.select_for_update().filter(state=AlertState.FIRING)
        }
        silences = list(active_silences(now=now))
        channels = list(NotificationChannel.objects.filter(enabled=True))
        fired, resolved, notifications, updated = [], [], [], []
        for summary in summaries:
            flow_id = summary.flow.pk
            facts = _facts(
                summary,
                budget=budgets.get(flow_id, DEFAULT_BUDGET),
                signals=signals.get(flow_id),
                gaps=gaps.get(flow_id),
                replication_workers=replication_workers,
                verification=verifications.get(flow_id),
                readiness=readiness.get(flow_id),
            )
            for rule, verdict in evaluate(facts, rule_limits, now=epoch).items():
                alert = open_alerts.pop((flow_id, rule), None)
                if verdict.firing and alert is None:
                    alert = _open(
                        flow_id,
                        rule,
                        verdict,
                        now=now,
                        silenced=_silenced(silences, flow_id=flow_id, rule=rule),
                    )
                    fired.append(alert)
                    if not alert.silenced:
                        notifications += _notify(alert, event=AlertState.FIRING, channels=channels)
                elif verdict.firing:
                    _refresh(alert, verdict)
                    updated.append(alert)
                elif alert is not None:
                    _resolve(alert, now=now)
                    resolved.append(alert)
                    if not alert.silenced and not _silenced(silences, flow_id=flow_id, rule=rule):
                        notifications += _notify(alert, event=AlertState.RESOLVED, channels=channels)
        for alert in open_alerts.values():  # its flow is gone or the rule no longer exists
            _resolve(alert, now=now)
            resolved.append(alert)
        Alert.objects.bulk_update(updated, ["figure", "threshold", "observed_at", "message"])
    cache.set(EVALUATED_AT_KEY, now.timestamp(), timeout=None)
    return Evaluation(fired, resolved, notifications)


def _open(flow_id: int, rule: str, verdict: Verdict, *, now: datetime.datetime, silenced: bool) -> Alert:
    return Alert.objects.create(
        flow_id=flow_id,
        rule=rule,
        fired_at=now,
        figure=verdict.figure,
        fired_figure=verdict.figure,
        threshold=verdict.threshold,
        unit=verdict.unit,
        observed_at=_at(verdict.observed_at),
        message=verdict.message,
        silenced=silenced,
    )


def _refresh(alert: Alert, verdict: Verdict) -> None:
    alert.figure, alert.threshold = verdict.figure, verdict.threshold
    alert.observed_at, alert.message = _at(verdict.observed_at), verdict.message


def _resolve(alert: Alert, *, now: datetime.datetime) -> None:
    alert.state, alert.resolved_at = AlertState.RESOLVED, now
    alert.save(update_fields=["state", "resolved_at"])


def evaluated_at() -> float | None:
    """When the rules were last evaluated (epoch seconds), None when never or the cache is away."""
    try:
        return cache.get(EVALUATED_AT_KEY)
    except Exception:
        return None


# -- silences ---------------------------------------------------------------------------------------------
MAX_SILENCE_S = 30 * 24 * 3600


def silence_create(
    *,
    actor,
    expires_at: datetime.datetime | None = None,
    duration_s: float | None = None,
    flow: Flow | None = None,
    rule: str = "",
    reason: str = "",
) -> AlertSilence:
    """Silence notifications of `rule` (empty: every rule) of `flow` (None: every flow) until it expires
    (operator; audited). Firing alerts it covers are not re-notified; new ones are marked silenced."""
    now = timezone.now()
    with audited_attempt(
        actor=actor, action=AuditAction.SILENCE, object_type="silence", object_repr=reason[:100]
    ):
        errors: dict[str, list[str]] = {}
        if rule and rule not in AlertRule.values:
            errors["rule"] = [f"unknown rule {rule!r}; rules: {', '.join(AlertRule.values)}"]
        if expires_at is None and duration_s is not None:
            if not isinstance(duration_s, int | float) or duration_s <= 0 or duration_s > MAX_SILENCE_S:
                errors["duration_s"] = [f"must be a number of seconds between 1 and {MAX_SILENCE_S}"]
            else:
                expires_at = now + datetime.timedelta(seconds=duration_s)
        if expires_at is None and "duration_s" not in errors:
            errors["expires_at"] = ["give expires_at (a future time) or duration_s (seconds)"]
        elif expires_at is not None and not (
            now < expires_at <= now + datetime.timedelta(seconds=MAX_SILENCE_S)
        ):
            errors["expires_at"] = ["must be in the future, at most 30 days ahead"]
        if errors:
            raise ServiceValidationError(errors)
        silence = AlertSilence.objects.create(
            flow=flow,
            rule=rule,
            expires_at=expires_at,
            reason=reason,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        audit_record(
            actor=actor,
            action=AuditAction.SILENCE,
            object_type="silence",
            object_id=silence.pk,
            object_repr=silence_description(silence),
            after={
                "flow": flow.name if flow else None,
                "rule": rule or None,
                "expires_at": expires_at.isoformat(),
                "reason": reason,
            },
        )
    return silence


def silence_expire(*, actor, silence: AlertSilence) -> AlertSilence:
    """End a silence now (operator; audited)."""
    with transaction.atomic():
        before = silence.expires_at
        silence.expires_at = min(before, timezone.now())
        silence.save(update_fields=["expires_at"])
        audit_record(
            actor=actor,
            action=AuditAction.UNSILENCE,
            object_type="silence",
            object_id=silence.pk,
            object_repr=silence_description(silence),
            before={"expires_at": before.isoformat()},
            after={"expires_at": silence.expires_at.isoformat()},
        )
    return silence


def silence_description(silence: AlertSilence) -> str:
    flow = silence.flow.name if silence.flow_id else "every flow"
    rule = silence.get_rule_display() if silence.rule else "every rule"
    return f"{rule} of {flow}"


# -- reads ------------------------------------------------------------------------------------------------
def alert_list() -> QuerySet[Alert]:
    """Firing first (newest first), then resolved history (newest first): "firing" sorts before "resolved"."""
    return Alert.objects.select_related("flow__source", "flow__target").order_by("state", "-fired_at", "-id")


def alerts_firing() -> QuerySet[Alert]:
    return alert_list().filter(state=AlertState.FIRING)


def alerts_resolved() -> QuerySet[Alert]:
    return (
        Alert.objects.select_related("flow__source", "flow__target")
        .filter(state=AlertState.RESOLVED)
        .order_by("-resolved_at", "-id")
    )


def firing_by_flow() -> dict[int, list[Alert]]:
    """Flow id -> its firing alerts, for the flow list and overview (firing first, with a marker)."""
    found: dict[int, list[Alert]] = {}
    for alert in Alert.objects.filter(state=AlertState.FIRING).order_by("fired_at"):
        found.setdefault(alert.flow_id, []).append(alert)
    return found


def silence_list() -> QuerySet[AlertSilence]:
    """Latest expiry first: active silences, then expired ones."""
    return AlertSilence.objects.select_related("flow__source", "flow__target", "created_by").order_by(
        "-expires_at", "-id"
    )


def firing_first(items: list, *, flow_of, firing: Mapping[int, list[Alert]]) -> list:
    """`items` with those whose flow has firing alerts first, each group in its original order."""
    return sorted(items, key=lambda item: 0 if flow_of(item).pk in firing else 1)
