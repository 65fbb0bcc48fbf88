"""Alert evaluation: the rules (controlplane.alerts.rules) asked over every flow's facts, verdicts turned
into alert instances and notifications.

`alerts_evaluate` is what the beat-driven task runs every ALERTS_EVALUATE_INTERVAL_S: it gathers each
flow's facts from the same live status roll-up as the pages (one lag definition), its RPO budget
(controlplane.assurance), the runtime signals the workers record (`FlowSignals`) and the task leases the
caller read from Redis, asks every rule, and turns verdicts into alert instances: a rule that starts
firing opens an `Alert` (one per flow and rule), one that stops resolves it. Each opening and resolution
queues one notification per enabled channel, unless a silence covers the alert (a firing alert is marked
`silenced` exactly while one does: `silences.silence_marks_refresh`); delivery
is a separate task (`controlplane.alerts.notifications`), so a channel that does not answer never delays
evaluation.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import connection, transaction
from django.db.models import Case, Count, F, IntegerField, Max, Sum, Value, When
from django.utils import timezone

from controlplane.alerts.models import Alert, AlertState, NotificationChannel
from controlplane.alerts.notifications import notifications_queue
from controlplane.alerts.rules import FlowFacts, Limits, Verdict, evaluate
from controlplane.alerts.silences import active_silences, covered, silence_marks_refresh
from controlplane.assurance import DEFAULT_BUDGET, RpoBudget, flow_readiness_all, readiness_reads_of
from controlplane.flows import lifecycle
from controlplane.flows.models import Flow
from controlplane.status import rollup
from controlplane.status.models import FlowEvent, FlowEventKind, FlowSignals

EVALUATED_AT_KEY = "alerts:evaluated_at"
# Beat's evaluation and one asked for by hand (a page, a test) can overlap: without one lock both would see no
# firing instance of a rule and both open one, and the second would break the one-firing-instance rule.
EVALUATION_LOCK = 0x4D50_414C  # "MPAL": a PostgreSQL advisory lock key of its own


@dataclass(frozen=True)
class TaskLeases:
    planned: int  # tasks of the flow's current plan
    leased: int  # of them, tasks whose lease someone holds


# -- evaluation -------------------------------------------------------------------------------------------
def limits() -> Limits:
    return Limits(
        stale_after_s=rollup.stale_after_s(),
        heartbeat_min_age_s=settings.ALERTS_HEARTBEAT_MIN_AGE_S,
        offset_sync_max_lag_s=settings.ALERTS_OFFSET_SYNC_MAX_LAG_S,
        data_loss_window_s=settings.ALERTS_DATA_LOSS_WINDOW_S,
        readiness_below=settings.READINESS_ALERT_BELOW,
        readiness_grace_s=max(settings.READINESS_GRACE_S, 3 * settings.VERIFY_INTERVAL_S),
    )


def _epoch(value: datetime.datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def _facts(
    summary: rollup.FlowSummary,
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
    if flow.pool:  # a pinned flow is replicated by its pool's workers only (controlplane.flows.pools)
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
    """One UPDATE of the flows' signal rows when they all have one (every evaluation after a flow's
    first); a flow's first observation makes its row (a flow deleted since its lease was read is left out)."""
    if not tasks:
        return
    updated = FlowSignals.objects.filter(flow_id__in=list(tasks)).update(
        tasks_planned=_by_flow({flow_id: t.planned for flow_id, t in tasks.items()}),
        tasks_leased=_by_flow({flow_id: t.leased for flow_id, t in tasks.items()}),
        tasks_observed_at=now,
    )
    if updated == len(tasks):
        return
    existing = set(FlowSignals.objects.filter(flow_id__in=list(tasks)).values_list("flow_id", flat=True))
    flows = set(Flow.objects.filter(pk__in=list(tasks)).values_list("pk", flat=True))
    FlowSignals.objects.bulk_create(
        FlowSignals(flow_id=flow_id, tasks_planned=t.planned, tasks_leased=t.leased, tasks_observed_at=now)
        for flow_id, t in tasks.items()
        if flow_id in flows and flow_id not in existing
    )


def _by_flow(values: Mapping[int, int]) -> Case:
    return Case(
        *(When(flow_id=flow_id, then=Value(value)) for flow_id, value in values.items()),
        output_field=IntegerField(),
    )


@dataclass(frozen=True)
class Evaluation:
    fired: list[Alert]
    resolved: list[Alert]
    notifications: list[int]  # AlertNotification ids to deliver


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
    summaries = rollup.flow_summaries(now=now)
    reads = readiness_reads_of(summaries)
    readiness = flow_readiness_all(summaries, now=now, reads=reads, every_flow=True)
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
        _one_evaluation_at_a_time()
        open_alerts = {
            (alert.flow_id, alert.rule): alert
            for alert in Alert.objects.select_for_update().filter(state=AlertState.FIRING)
        }
        silences = list(active_silences(now=now))
        channels = NotificationChannel.objects.filter(enabled=True)  # read once, when first notified
        fired, resolved, notifications, updated, unknown = [], [], [], [], []
        for summary in summaries:
            flow_id = summary.flow.pk
            facts = _facts(
                summary,
                budget=reads.budgets.get(flow_id, DEFAULT_BUDGET),
                signals=reads.signals.get(flow_id),
                gaps=gaps.get(flow_id),
                replication_workers=replication_workers,
                verification=reads.verifications.get(flow_id),
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
                        silenced=covered(silences, flow_id=flow_id, rule=rule),
                    )
                    fired.append(alert)
                    if not alert.silenced:
                        notifications += notifications_queue(
                            alert=alert, event=AlertState.FIRING, channels=channels
                        )
                elif verdict.firing:
                    _refresh(alert, verdict)
                    updated.append(alert)
                elif alert is not None and verdict.unknown:  # not known now is not back within budget
                    unknown.append(alert)
                elif alert is not None:
                    _resolve(alert, now=now)
                    resolved.append(alert)
                    if not alert.silenced and not covered(silences, flow_id=flow_id, rule=rule):
                        notifications += notifications_queue(
                            alert=alert, event=AlertState.RESOLVED, channels=channels
                        )
        for alert in open_alerts.values():  # its flow is gone or the rule no longer exists
            _resolve(alert, now=now)
            resolved.append(alert)
        Alert.objects.bulk_update(updated, ["figure", "threshold", "observed_at", "message"])
        # silences made or ended since, or expired
        # (the alerts still firing are those held since the start of the transaction, and those opened
        # now, marked as their silences said)
        notifications += silence_marks_refresh(
            now=now, silences=silences, channels=channels, firing=[*updated, *unknown]
        )
    cache.set(EVALUATED_AT_KEY, now.timestamp(), timeout=None)
    return Evaluation(fired, resolved, notifications)


def _one_evaluation_at_a_time() -> None:
    """Hold the evaluation lock until the transaction ends (SQLite serialises writers by itself)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [EVALUATION_LOCK])


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
