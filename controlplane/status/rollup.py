"""Live status roll-ups: the latest partition status the workers stored, judged OK / WARN / STALE / ERR
and rolled up per flow (`flow_summaries`, `flow_status`), the runtime's activity, and the lag last known
(what a failover plan reads when the source is gone). Every page, the API, /metrics and the alert
evaluation read lag here: one definition of `records_behind` and `seconds_behind`.
"""

from __future__ import annotations

import datetime
from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from django.conf import settings
from django.utils import timezone

from controlplane.core.statements import statement
from controlplane.flows import lifecycle, pools
from controlplane.flows.models import Flow, FlowState
from controlplane.flows.pools import PoolCheck
from controlplane.flows.selectors import flow_list, of_flows
from controlplane.status.budgets import DEFAULT_BUDGET, RpoBudget, over_budget, rpo_budget_of, rpo_budgets
from controlplane.status.models import (
    FlowEvent,
    FlowPartitionStatus,
    FlowSignals,
    FlowTaskStatus,
    PartitionState,
)
from replication.config import SchemaIdMode
from replication.failover import LastKnownLag
from replication.fetch_stall import FETCH_STALL_S
from replication.metrics import LATENCY_BUCKETS_MS

# -- live status ------------------------------------------------------------------------------------------
# One rule for every page and API answer (docs/lag.md): a figure observed more than
# MIRRORPLANE_STALE_AFTER_S ago is STALE, shown with its age; a partition never observed is UNKNOWN.
STALE = "STALE"
UNKNOWN = "UNKNOWN"
# A fresh partition whose lag is not known yet (its task's first fetch has not answered): shown as such on
# the pages, the API and /metrics (`mirrorplane_partition_state`), never as OK.
WAITING = "WAITING"
# Burrow: a group is as bad as its worst partition; STOP, STALL and REWIND report as ERR. A partition
# nobody reports on is worse than one that is behind, better than one that reports an error.
_SEVERITY = {PartitionState.OK: 0, PartitionState.WARN: 1, STALE: 2}
_STATUS_BY_SEVERITY = (PartitionState.OK, PartitionState.WARN, STALE, PartitionState.ERR)
HEALTHS = ("ok", "lagging", "stale", "error", "paused", "disabled", "waiting")
# What a badge of each health says (its colour is its class, static/css/mirrorplane.css).
HEALTH_LABELS = {
    "ok": "within budget",
    "lagging": "behind",
    "stale": "stale",
    "error": "error",
    "paused": "paused",
    "disabled": "disabled",
    "waiting": "no report yet",  # or, once reported: WAITING_FOR_FETCH
}
WAITING_FOR_FETCH = "waiting for the first fetch"  # reported, with a lag not known yet
# What a STALL row says where an error would be (replication.fetch_stall: the worker writes no error for it)
STALL_EXPLAINED = (
    f"records wait on the source and the task's consumer has given none of them for {FETCH_STALL_S:.0f} s or "
    "more while it fetches the others: the task fetches it again (its worker's log names it)"
)
RECENT_EVENTS = 100


def stale_after_s() -> float:
    return settings.MIRRORPLANE_STALE_AFTER_S


def age_s(observed_at: datetime.datetime, *, now: datetime.datetime) -> float:
    """Seconds since `observed_at` (0 for a clock slightly ahead of ours)."""
    return max((now - observed_at).total_seconds(), 0.0)


def health(
    *,
    state: str,
    status: str,
    budget: RpoBudget,
    records_behind: int | None,
    seconds_behind: float | None,
    seconds_behind_at_least: float | None = None,
) -> str:
    """The one rule of a flow's or a partition's health colour (docs/lag.md, "Health"), in order:
    `error` (faulted), `disabled`/`paused` (not replicating by design, whatever the age of its figures),
    `waiting` (no report yet), `stale` (no report within the limit: never judged healthy), `error` (a
    fresh ERR/STOP/STALL/REWIND), `lagging` (over the RPO budget in seconds or records, or records
    behind whose age is not known yet), `waiting` (a lag not known yet: a task's first fetch has not
    answered), else `ok`: records in flight within the budget are healthy.
    `status` is the worst partition's (Burrow's state, STALE or UNKNOWN); the lower bound of a flow's
    seconds behind is judged while its exact figure is unknown."""
    if state == FlowState.FAULTED:
        return "error"
    if not lifecycle.is_runnable(state):
        return "disabled" if state == FlowState.DISABLED else "paused"
    if status == UNKNOWN:
        return "waiting"
    if status == STALE:
        return "stale"
    if status not in (PartitionState.OK, PartitionState.WARN):
        return "error"
    known = seconds_behind if seconds_behind is not None else seconds_behind_at_least
    if over_budget(budget=budget, records_behind=records_behind, seconds_behind=known):
        return "lagging"
    if seconds_behind is None:  # the age of some lag is not known yet: behind, or waiting; never ok
        return "lagging" if records_behind else "waiting"
    return "ok"


@dataclass(frozen=True)
class PartitionLive:
    """A status row as of `now`: the worker's figures with their age, and its health by the flow's rule."""

    row: FlowPartitionStatus
    age_s: float
    stale: bool
    health: str
    state: str  # the state it shows (`shown_state`)

    def __getattr__(self, name: str):
        if name == "row":  # not set yet (copy, unpickle): no recursion
            raise AttributeError(name)
        return getattr(self.row, name)  # the row's figures: topic, records_behind, observed_at, ...

    @property
    def health_label(self) -> str:
        """What its badge says: the worker's own word for an error (ERR, STOP, STALL, REWIND)."""
        errored = self.health == "error" and self.state not in (
            PartitionState.OK,
            PartitionState.WARN,
            STALE,
            WAITING,
        )
        if self.health == "waiting":
            return WAITING_FOR_FETCH
        return self.state if errored else HEALTH_LABELS[self.health]


def lag_known(*, records_behind: int | None, seconds_behind: float | None) -> bool:
    """A partition's lag is known once its age is, or once records are known behind (`health`)."""
    return seconds_behind is not None or bool(records_behind)


def shown_state(*, state: str, stale: bool, lag_known: bool) -> str:
    """The state a partition's row shows on the pages, the API and /metrics, whatever its flow's state: STALE
    when no report vouches for it within the limit (`partition_live`), WAITING while it is fresh, not in
    error and its lag is not known (its task's first fetch has not answered: `health`'s "waiting"), else
    the worker's Burrow state. The one home of the rule: `partitions.TaskReports.shown_state` is the SQL
    built from this function."""
    if stale:
        return STALE
    if state in (PartitionState.OK, PartitionState.WARN) and not lag_known:
        return WAITING
    return state


def report_times(
    *,
    written_at: datetime.datetime,
    task_observed_at: datetime.datetime | None,
    task_rows_current_at: datetime.datetime | None,
) -> tuple[datetime.datetime, datetime.datetime]:
    """(when a row written at `written_at` was last reported, when its figures were last current): its
    write, or, while its task's report vouches for it (is newer), that report and the newer of the write
    and the time the task's rows were all current (`partition_live`; `partitions.TaskReports` per task)."""
    if task_observed_at is None or task_observed_at < written_at:
        return written_at, written_at
    return task_observed_at, max(written_at, task_rows_current_at or written_at)


def partition_live(
    row: FlowPartitionStatus,
    *,
    flow: Flow,
    budget: RpoBudget,
    now: datetime.datetime,
    stale_after: float,
    task: FlowTaskStatus | None = None,
) -> PartitionLive:
    """`task`: the roll-up of the task the row names, when it has one. Its workers rewrite a row only when
    it changes (controlplane.status.runtime), so the task's report vouches for the row: the row is STALE
    when its task stopped reporting, and its figures are as old as the newer of its own write and the
    time the task's rows were all current."""
    reported_at, figures_at = report_times(
        written_at=row.observed_at,
        task_observed_at=task.observed_at if task else None,
        task_rows_current_at=task.rows_current_at if task else None,
    )
    stale = age_s(reported_at, now=now) > stale_after
    verdict = health(
        state=flow.state,
        status=STALE if stale else row.state,
        budget=budget,
        records_behind=row.records_behind,
        seconds_behind=row.seconds_behind,
    )
    shown = shown_state(
        state=row.state,
        stale=stale,
        lag_known=lag_known(records_behind=row.records_behind, seconds_behind=row.seconds_behind),
    )
    return PartitionLive(row=row, age_s=age_s(figures_at, now=now), stale=stale, health=verdict, state=shown)


def partitions_live(
    rows: Sequence[FlowPartitionStatus],
    *,
    flow: Flow,
    budget: RpoBudget,
    now: datetime.datetime,
    tasks: Collection[FlowTaskStatus] | None = None,
) -> list[PartitionLive]:
    """The given rows of one flow as of `now` (one query for the flow's task roll-ups, none when `tasks`
    are given: `FlowStatus.tasks`)."""
    by_index = {task.task_index: task for task in (flow.task_statuses.all() if tasks is None else tasks)}
    stale_after = stale_after_s()
    return [
        partition_live(
            row, flow=flow, budget=budget, now=now, stale_after=stale_after, task=by_index.get(row.task_index)
        )
        for row in rows
    ]


def group_status(states: Sequence[str]) -> str:
    """The worst of the partitions' states; UNKNOWN when there are none."""
    if not states:
        return UNKNOWN
    return _STATUS_BY_SEVERITY[max(_SEVERITY.get(state, 3) for state in states)]


def task_worst_state(task: FlowTaskStatus) -> str:
    """The worst Burrow state among a task's partitions."""
    return group_status([state for state, count in task.state_counts.items() if count])


@dataclass(frozen=True)
class FlowSummary:
    """A flow's live roll-up, the same for the overview, the flow page and the API: read from its tasks'
    roll-up rows (`FlowTaskStatus`), never from every partition row."""

    flow: Flow
    partition_count: int  # partitions its tasks report
    state_counts: dict[str, int]  # partitions by Burrow state; a silent task's as STALE
    worst: tuple[dict, ...]  # the worst partitions, worst first (topic, partition, state, figures)
    records_behind: int | None  # sum over the partitions; None until a worker has measured it
    seconds_behind: float | None  # the worst partition's; None while a partition behind has no known age
    seconds_behind_at_least: float | None  # the worst known partition's: a lower bound while undated
    position: int  # sum of replicated offsets: its change between refreshes is the throughput
    status: str  # the worst partition: OK, WARN, STALE or ERR; UNKNOWN when none reported
    observed_at: datetime.datetime | None  # the newest observation
    age_s: float | None  # of the newest observation
    pool: PoolCheck | None  # its worker pool and the live workers consuming it (None: not looked up)
    budget: RpoBudget
    record_rate: float = 0.0
    byte_rate: float = 0.0
    record_count: int = 0  # MM2's record-count and byte-count, summed over the tasks since they started
    byte_count: int = 0
    records_aborted: int = 0  # transactional: acknowledged in an aborted transaction, never replicated
    latency_counts: tuple[int, ...] = ()  # records by replication latency (replication.metrics buckets)
    latency_sum_ms: float = 0.0
    topics: tuple[str, ...] = ()  # the source topics its tasks report, sorted

    @property
    def pool_without_workers(self) -> bool:
        """Pinned to a pool no live worker consumes, while it should replicate: nothing runs it."""
        return (
            self.pool is not None
            and self.pool.without_workers
            and bool(self.pool.pool)
            and lifecycle.is_runnable(self.flow.state)
        )

    @property
    def stale(self) -> bool:
        return self.status == STALE

    @property
    def health(self) -> str:
        """One word for colour, by the one rule (`health`). Stale figures are never ok."""
        return health(
            state=self.flow.state,
            status=self.status,
            budget=self.budget,
            records_behind=self.records_behind,
            seconds_behind=self.seconds_behind,
            seconds_behind_at_least=self.seconds_behind_at_least,
        )

    @property
    def health_label(self) -> str:
        if self.health == "waiting" and self.status != UNKNOWN:
            return WAITING_FOR_FETCH
        return HEALTH_LABELS[self.health]


WORST_KEPT = 10  # partitions a task's and a flow's roll-up name, worst first


def badness(*, state: str, records_behind: int | None, seconds_behind: float | None) -> tuple:
    """How bad a partition is, for "worst first" (larger is worse): an error state, then STALE, WARN,
    then lag of unknown age, then seconds and records behind."""
    undated = seconds_behind is None and (records_behind or 0) > 0
    return (_SEVERITY.get(state, 3), undated, seconds_behind or 0.0, records_behind or 0)


def _figures(entry: dict) -> dict:
    return {name: entry[name] for name in ("state", "records_behind", "seconds_behind")}


def summarize(
    flow: Flow,
    tasks: Sequence[FlowTaskStatus],
    *,
    now: datetime.datetime,
    stale_after: float,
    budget: RpoBudget,
    pool: PoolCheck | None = None,
) -> FlowSummary:
    """The flow's roll-up from its tasks' rows (a retired task drops its own: `task_status_retire`)."""
    stale = {task.task_index for task in tasks if age_s(task.observed_at, now=now) > stale_after}
    behind = [task.records_behind for task in tasks if task.records_behind is not None]
    seconds = [task.seconds_behind for task in tasks if task.seconds_behind is not None]
    # A partition behind whose age is not known yet (a task that took it over has not replicated from it
    # yet) makes the flow's unknown: never a 0 s that hides it. The known worst stays as a lower bound.
    undated = any(task.undated for task in tasks)
    counts: Counter[str] = Counter()
    worst: list[dict] = []
    latency, latency_sum = [0] * (len(LATENCY_BUCKETS_MS) + 1), 0.0
    for task in tasks:
        if task.task_index in stale:
            counts[STALE] += task.partitions
        else:
            counts.update({state: n for state, n in task.state_counts.items() if n})
        worst.extend({**entry, "state": STALE} if task.task_index in stale else entry for entry in task.worst)
        if len(task.latency_counts) == len(latency):  # another bucket layout (another version): left out
            latency = [a + b for a, b in zip(latency, task.latency_counts, strict=True)]
            latency_sum += task.latency_sum_ms
    newest = max((task.observed_at for task in tasks), default=None)
    return FlowSummary(
        flow=flow,
        partition_count=sum(task.partitions for task in tasks),
        state_counts=dict(counts),
        worst=tuple(sorted(worst, key=lambda entry: badness(**_figures(entry)), reverse=True)[:WORST_KEPT]),
        records_behind=sum(behind) if behind else None,
        seconds_behind=max(seconds) if seconds and not undated else None,
        seconds_behind_at_least=max(seconds) if seconds else None,
        position=sum(task.position for task in tasks),
        status=group_status(
            [
                STALE if task.task_index in stale else task_worst_state(task)
                for task in tasks
                if task.partitions
            ]
        ),
        observed_at=newest,
        age_s=None if newest is None else age_s(newest, now=now),
        pool=pool,
        budget=budget,
        record_rate=sum(task.record_rate for task in tasks),
        byte_rate=sum(task.byte_rate for task in tasks),
        record_count=sum(task.record_count for task in tasks),
        records_aborted=sum(task.records_aborted for task in tasks),
        byte_count=sum(task.byte_count for task in tasks),
        latency_counts=tuple(latency),
        latency_sum_ms=latency_sum,
        topics=tuple(sorted({topic for task in tasks for topic in task.topics})),
    )


# What a roll-up reads of its flow: its state (its health) and its pool (whether a worker consumes it).
SUMMARY_FLOW_FIELDS = ("state", "pool")


@statement
def _summarized_flows(fields: tuple[str, ...] | None, *, flow_ids: list[int] | None):
    return of_flows(flow_list(cluster_aliases_only=True, fields=fields), flow_ids, key="pk")


@statement
def _summarized_tasks(flow_ids: list[int] | None):
    # not their per-topic figures (kilobytes per task of a large flow): no roll-up reads them
    return of_flows(FlowTaskStatus.objects.order_by("task_index").defer("topic_figures"), flow_ids)


def flow_summaries(
    *,
    now: datetime.datetime | None = None,
    flow_ids: Sequence[int] | None = None,
    flow_fields: Sequence[str] | None = None,
) -> list[FlowSummary]:
    """Every flow's live roll-up as of `now` (default: now); only those of `flow_ids`, in that order, when
    given (a list's page: a flow deleted since its id was read is left out). `flow_fields`: the flow's
    fields its reader uses, and only those read with what a roll-up uses (`SUMMARY_FLOW_FIELDS`) and the
    clusters' aliases (the flow's name); every field when None."""
    now = now or timezone.now()
    stale_after = stale_after_s()
    fields = None if flow_fields is None else (*SUMMARY_FLOW_FIELDS, *flow_fields)
    wanted = None if flow_ids is None else list(flow_ids)
    flows = _summarized_flows(fields, flow_ids=wanted)
    if flow_ids is not None:
        by_id = {flow.pk: flow for flow in flows}
        flows = [by_id[flow_id] for flow_id in flow_ids if flow_id in by_id]
    # The task rows grouped here, not prefetched: a prefetch builds a queryset per flow (a few ms per page).
    tasks: dict[int, list[FlowTaskStatus]] = {}
    for task in _summarized_tasks(flow_ids=wanted):
        tasks.setdefault(task.flow_id, []).append(task)
    checks = pools.flow_pool_checks(flows)
    budgets = rpo_budgets(flow_ids=flow_ids)
    return [
        summarize(
            flow,
            tasks.get(flow.pk, []),
            now=now,
            stale_after=stale_after,
            budget=budgets.get(flow.pk, DEFAULT_BUDGET),
            pool=checks[flow.pk],
        )
        for flow in flows
    ]


@dataclass(frozen=True)
class SchemaSyncStatus:
    """A flow's schema registry sync (docs/schemas.md) as its latest pass left it; `observed_at` None
    while no pass ran. Its errors are the flow's events."""

    mode: str
    observed_at: datetime.datetime | None
    age_s: float | None
    subjects_synced: int | None
    versions_behind: int | None
    errors: int | None = None  # subjects the latest pass could not sync
    id_map: tuple[tuple[int, int], ...] = ()  # (source ID, target ID), as the latest pass found them


def schema_sync_statuses(
    flows: Sequence[Flow], *, now: datetime.datetime, signals: dict[int, FlowSignals] | None = None
) -> dict[int, SchemaSyncStatus]:
    """The schema sync of each of `flows` that syncs schemas (absent: it syncs none), from the flows'
    `signals` (by flow id) when read already, else one query for all."""
    syncing = {flow.pk: flow for flow in flows if flow.schemas_sync_mode != SchemaIdMode.NONE}
    if signals is None:
        signals = {row.flow_id: row for row in FlowSignals.objects.filter(flow_id__in=list(syncing))}
    return {
        flow_id: _schema_sync_status(flow.schemas_sync_mode, signals.get(flow_id), now=now)
        for flow_id, flow in syncing.items()
    }


def _schema_sync_status(
    mode: str, signals: FlowSignals | None, *, now: datetime.datetime
) -> SchemaSyncStatus:
    observed_at = signals.schemas_synced_at if signals else None
    return SchemaSyncStatus(
        mode=mode,
        observed_at=observed_at,
        age_s=(now - observed_at).total_seconds() if observed_at else None,
        subjects_synced=signals.schemas_subjects if signals else None,
        versions_behind=signals.schemas_versions_behind if signals else None,
        errors=signals.schemas_errors if signals else None,
        id_map=tuple(
            sorted(
                (int(source), int(target))
                for source, target in ((signals and signals.schemas_id_map) or {}).items()
            )
        ),
    )


@dataclass(frozen=True, kw_only=True)
class FlowStatus(FlowSummary):
    """A flow's roll-up with its latest events, as the flow page and its API endpoint show it."""

    events: list[FlowEvent]
    stale_after_s: float
    schemas: SchemaSyncStatus | None = None
    tasks: tuple[FlowTaskStatus, ...] = ()  # its task roll-ups as read: its partitions' ages read them


@statement
def _task_rows(flow_id: int):
    """A flow's task roll-ups (`flow.task_statuses`)."""
    return FlowTaskStatus.objects.filter(flow_id=flow_id)


@statement
def _recent_events(flow_id: int):
    """A flow's newest events, newest first."""
    return FlowEvent.objects.filter(flow_id=flow_id)[:RECENT_EVENTS]


def flow_status(*, flow: Flow, now: datetime.datetime | None = None) -> FlowStatus:
    """The flow's roll-up, its latest events and its schema sync (a page of its partitions:
    `controlplane.status.partitions`)."""
    stale_after = stale_after_s()
    now = now or timezone.now()
    tasks = tuple(_task_rows(flow_id=flow.pk))
    for task in tasks:
        task.flow = flow  # as `flow.task_statuses` would have set it
    summary = summarize(
        flow,
        list(tasks),
        now=now,
        stale_after=stale_after,
        budget=rpo_budget_of(flow=flow),
        pool=pools.flow_pool_checks([flow])[flow.pk],
    )
    return FlowStatus(
        **vars(summary),
        events=_recent_events(flow_id=flow.pk),
        stale_after_s=stale_after,
        schemas=schema_sync_statuses([flow], now=now).get(flow.pk),
        tasks=tasks,
    )


def last_known_lag(*, flow: Flow, now: datetime.datetime | None = None) -> LastKnownLag:
    """`records_behind` per source partition as the workers last measured it, with the age of the oldest
    figure and the stale rule's verdict on it (what the failover plan knows when the source is lost)."""
    now = now or timezone.now()
    rows = list(flow.partition_statuses.filter(records_behind__isnull=False))
    live = partitions_live(rows, flow=flow, budget=DEFAULT_BUDGET, now=now)
    return LastKnownLag(
        records_behind={(row.topic, row.partition): row.records_behind for row in rows},
        age_s=max((p.age_s for p in live), default=None),
        stale=any(p.stale for p in live),
    )
