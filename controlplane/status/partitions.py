"""One flow's partition status rows, a page at a time, and per-topic aggregates: what a page, an API answer
or a scrape of a flow of 20,000 partitions reads instead of every row.

`partition_page`: the rows of one flow searched by topic (a substring), filtered by the state they show
(Burrow's, or STALE once older than the stale limit), worst first (an error, then STALE, then WARN; within
each, a partition behind for a time not known yet, then seconds behind, then records behind, descending;
then topic and partition), counted and cut to a page in SQL (COUNT, LIMIT/OFFSET): two statements and
one page of rows, whatever the flow's size. Each row shown is judged by `rollup.partition_live`.

`TopicStatus`: one topic of a flow rolled up (partitions, records and bytes behind, the worst seconds
behind, record age and latency, replicated counts, partitions per shown state, the age of the oldest
figures), merged from per-task groups by `topic_status_of`. What pages, the API and /metrics read comes
from the tasks' roll-ups (`controlplane.status.topic_rollups.topic_statuses`); `grouped_topic_statuses`,
a GROUP BY in SQL over the partition rows (one statement for any number of flows), answers for the flows
whose task rows carry no per-topic figures (a worker of an earlier version, a task of too many topics).

The state a row shows, its age and the order follow `rollup.partition_live` (a task's report vouches for
its rows, which the workers rewrite only when they change), written in SQL once here (`TaskReports`: the
flows' task reports read first, a row per task, so the rule is a plain CASE, no subquery per row).

`partition_values`: the per-partition figures /metrics exports, as tuples (no model instances), one
statement for the flows asked.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import reduce
from operator import or_

from django.core.paginator import Paginator
from django.db.models import (
    Case,
    CharField,
    Count,
    Expression,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    Q,
    QuerySet,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Round
from django.utils import timezone

from controlplane.core.statements import statement
from controlplane.flows.models import Flow
from controlplane.status import rollup
from controlplane.status.budgets import RpoBudget
from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus, PartitionState

PAGE_SIZE = 50
ERROR_STATES = (PartitionState.STOP, PartitionState.STALL, PartitionState.REWIND, PartitionState.ERR)
# What a row may be filtered by: the state it shows (PartitionLive.state).
STATES = (*PartitionState.values, rollup.STALE, rollup.WAITING)
# Worst first: an error, then STALE, then WARN or waiting for the first fetch (a shown state's rank).
SEVERITY = {
    **dict.fromkeys(ERROR_STATES, 3),
    rollup.STALE: 2,
    PartitionState.WARN: 1,
    rollup.WAITING: 1,
}


@dataclass(frozen=True)
class TaskReports:
    """The task roll-ups of some flows as the stale rule reads them (one query, a row per task)."""

    tasks: dict[
        tuple[int, int], tuple[datetime.datetime, datetime.datetime | None]
    ]  # observed_at, rows_current_at
    stale_before: datetime.datetime

    @classmethod
    def of(
        cls,
        flow_ids: Collection[int],
        *,
        now: datetime.datetime,
        tasks: Collection[FlowTaskStatus] | None = None,
    ) -> TaskReports:
        """The flows' task roll-ups: read, or `tasks` when read already (`rollup.FlowStatus.tasks`)."""
        rows = (
            FlowTaskStatus.objects.filter(flow_id__in=flow_ids).values_list(
                "flow_id", "task_index", "observed_at", "rows_current_at"
            )
            if tasks is None
            else [(task.flow_id, task.task_index, task.observed_at, task.rows_current_at) for task in tasks]
        )
        return cls(
            tasks={
                (flow_id, index): (observed_at, current_at)
                for flow_id, index, observed_at, current_at in rows
            },
            stale_before=now - datetime.timedelta(seconds=rollup.stale_after_s()),
        )

    def shown_state(self, *, rank: Mapping[str, int] | None = None) -> Expression:
        """`rollup.shown_state` in SQL, built from it: a CASE over the facts it decides on, `stale` (the newer
        of the row's write and its task's report older than the limit: the row's write is old and its task,
        if it has one, did not report within the limit either, `rollup.partition_live`) and `lag_known`
        (`rollup.lag_known`), whose branches are the function's answers for every state. With `rank`, the
        shown state's rank instead (0 for a state it does not name): the same CASE with ranks at its leaves,
        not a CASE over this one (which wrote it once per rank)."""
        return shown_state_sql(self.fresh(), stale_before=self.stale_before, rank=rank)

    def statement_values(self) -> tuple[tuple[tuple[int, int], ...], list[int]]:
        """`fresh()` as a statement takes it (`_fresh` gives it back): (task index, how many flows) in
        turn, the shape, and the flows in that order, the values."""
        fresh = self.fresh()
        return (
            tuple((index, len(flows)) for index, flows in fresh.items()),
            [flow_id for flows in fresh.values() for flow_id in flows],
        )

    def fresh(self) -> dict[int, list[int]]:
        """Task index: the flows whose task of that index reported in time (by index, then flow)."""
        fresh: dict[int, list[int]] = {}
        for (flow_id, index), (observed_at, _) in sorted(self.tasks.items()):
            if observed_at >= self.stale_before:
                fresh.setdefault(index, []).append(flow_id)
        return fresh

    def figures_at(self, flow_id: int, task_index: int, oldest: datetime.datetime) -> datetime.datetime:
        """When the figures of the task's rows, the oldest written at `oldest`, were last current: that
        write, or, while the task's report vouches for it (is newer), the time its rows were all current."""
        observed_at, current_at = self.tasks.get((flow_id, task_index), (None, None))
        _, figures_at = rollup.report_times(
            written_at=oldest, task_observed_at=observed_at, task_rows_current_at=current_at
        )
        return figures_at


def _fresh(fresh_tasks: tuple[tuple[int, int], ...], fresh_flows: Sequence[int]) -> dict[int, list[int]]:
    """`TaskReports.fresh` from its `statement_values`."""
    flows = iter(fresh_flows)
    return {index: [next(flows) for _ in range(count)] for index, count in fresh_tasks}


def shown_state_sql(
    fresh: Mapping[int, Sequence[int]],
    *,
    stale_before: datetime.datetime,
    rank: Mapping[str, int] | None = None,
) -> Expression:
    """`TaskReports.shown_state` of the tasks `fresh` (task index: the flows whose task of that index
    reported since `stale_before`)."""
    # A clause per task index, not per task: the SQL stays small with the number of flows.
    vouched = reduce(
        or_, (Q(task_index=index, flow_id__in=flows) for index, flows in fresh.items()), Q(pk__in=[])
    )
    lag_known = Q(seconds_behind__isnull=False) | (Q(records_behind__isnull=False) & ~Q(records_behind=0))
    return _decided(
        (("stale", Q(observed_at__lt=stale_before) & ~vouched), ("lag_known", lag_known)),
        known={},
        rank=rank,
    )


def _answers(facts: tuple[str, ...], known: dict[str, bool]) -> tuple[str, ...]:
    """`rollup.shown_state` for every state and every value of the `facts` not in `known`."""
    if facts:
        return tuple(
            answer for value in (True, False) for answer in _answers(facts[1:], known | {facts[0]: value})
        )
    return tuple(rollup.shown_state(state=state, **known) for state in PartitionState.values)


def _decided(
    facts: tuple[tuple[str, Q], ...], *, known: dict[str, bool], rank: Mapping[str, int] | None = None
) -> Expression:
    """The SQL of `rollup.shown_state` once the facts in `known` are decided: a CASE on the next fact its
    answer depends on, then, per state, what the function answers (its `rank` when given)."""
    names = tuple(name for name, _ in facts)
    for index, (name, condition) in enumerate(facts):
        rest = names[index + 1 :]
        if _answers(rest, known | {name: True}) != _answers(rest, known | {name: False}):
            return Case(
                When(condition, then=_decided(facts[index + 1 :], known=known | {name: True}, rank=rank)),
                default=_decided(facts[index + 1 :], known=known | {name: False}, rank=rank),
                output_field=CharField() if rank is None else IntegerField(),
            )
        known = known | {name: True}  # either value answers the same
    answers = {state: rollup.shown_state(state=state, **known) for state in PartitionState.values}
    if rank is not None:
        return _ranked({state: rank.get(answer, 0) for state, answer in answers.items()})
    if len(set(answers.values())) == 1:
        return Value(next(iter(answers.values())))
    shown: dict[str, list[str]] = {}
    for state, answer in answers.items():
        if answer != state:
            shown.setdefault(answer, []).append(state)
    if not shown:
        return F("state")
    return Case(
        *(When(state__in=states, then=Value(answer)) for answer, states in shown.items()),
        default=F("state"),
        output_field=CharField(),
    )


def partition_rows(
    *, flow: Flow, search: str = "", state: str = "", reports: TaskReports
) -> QuerySet[FlowPartitionStatus]:
    """The flow's status rows whose topic contains `search` and whose shown state is `state` (any when
    empty), worst first."""
    rows = FlowPartitionStatus.objects.filter(flow=flow)
    if search:
        rows = rows.filter(topic__icontains=search)
    if state:
        rows = rows.alias(shown=reports.shown_state()).filter(shown=state)
    return _worst_first(rows, severity=reports.shown_state(rank=SEVERITY))


@statement
def _worst_first_page(
    fresh_tasks: tuple[tuple[int, int], ...],
    offset: int,
    size: int,
    *,
    flow_id: int,
    fresh_flows: list[int],
    stale_before: datetime.datetime,
) -> QuerySet[FlowPartitionStatus]:
    """`partition_rows` of a flow with no search and no filter, rows `offset` to `offset + size`
    (`TaskReports.statement_values` gives the tasks)."""
    severity = shown_state_sql(_fresh(fresh_tasks, fresh_flows), stale_before=stale_before, rank=SEVERITY)
    return _worst_first(FlowPartitionStatus.objects.filter(flow_id=flow_id), severity=severity)[
        offset : offset + size
    ]


def _worst_first(
    rows: QuerySet[FlowPartitionStatus], *, severity: Expression
) -> QuerySet[FlowPartitionStatus]:
    """`rows` worst first: by the shown state's `severity`, then lag."""
    rows = rows.alias(
        severity=severity,
        undated=Case(
            When(seconds_behind__isnull=True, records_behind__gt=0, then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        ),
    )
    return rows.order_by(
        F("severity").desc(),
        F("undated").desc(),
        F("seconds_behind").desc(nulls_last=True),
        F("records_behind").desc(nulls_last=True),
        "topic",
        "partition",
    )


@dataclass(frozen=True)
class PartitionPage:
    """A page of a flow's partitions, worst first: each with its age and health (`partition_page`), or their
    verification rows (`assurance.verification.verification_page`)."""

    partitions: list
    count: int  # rows matching the search and the filter
    number: int  # this page, from 1
    page_size: int

    @property
    def num_pages(self) -> int:
        return max(1, -(-self.count // self.page_size))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def has_next(self) -> bool:
        return self.number < self.num_pages


def partition_page(
    *,
    flow: Flow,
    budget: RpoBudget,
    search: str = "",
    state: str = "",
    page: int = 1,
    page_size: int = PAGE_SIZE,
    now: datetime.datetime | None = None,
    tasks: Collection[FlowTaskStatus] | None = None,
) -> PartitionPage:
    """Page `page` (past the last: the last) of the flow's partitions matching `search` and `state`; its
    task roll-ups are read unless given (`tasks`: `rollup.FlowStatus.tasks`)."""
    now = now or timezone.now()
    reports = TaskReports.of([flow.pk], now=now, tasks=tasks)
    if search or state:
        found = rows_page(
            partition_rows(flow=flow, search=search, state=state, reports=reports),
            page=page,
            page_size=page_size,
        )
    else:  # the page as it opens: its statement compiled once per process
        paginator = Paginator((), page_size)
        paginator.count = FlowPartitionStatus.objects.filter(flow_id=flow.pk).count()
        number = paginator.get_page(page).number
        fresh_tasks, fresh_flows = reports.statement_values()
        found = PartitionPage(
            partitions=_worst_first_page(
                fresh_tasks,
                (number - 1) * page_size,
                page_size,
                flow_id=flow.pk,
                fresh_flows=fresh_flows,
                stale_before=reports.stale_before,
            )
            if paginator.count
            else [],
            count=paginator.count,
            number=number,
            page_size=page_size,
        )
    shown = rollup.partitions_live(found.partitions, flow=flow, budget=budget, now=now, tasks=tasks)
    return dataclasses.replace(found, partitions=shown)


def rows_page(rows: QuerySet, *, page: int, page_size: int, count: int | None = None) -> PartitionPage:
    """Page `page` (past the last: the last) of `rows`, a flow's rows of some kind per partition in the order
    they are shown: a COUNT and one page of rows, whatever the flow's size; no COUNT when the caller
    counted them already (`count`), and no read at all when there are none."""
    paginator = Paginator(rows, page_size)
    if count is not None:
        paginator.count = count  # a cached property: given, not counted
    found = paginator.get_page(page)
    return PartitionPage(
        partitions=list(found.object_list),
        count=found.paginator.count,
        number=found.number,
        page_size=page_size,
    )


def _ranked(ranks: dict[str, int]) -> Expression:
    """A row's rank by its stored state (`ranks`; 0 for a state not named there)."""
    states: dict[int, list[str]] = {}
    for state, value in ranks.items():
        if value:
            states.setdefault(value, []).append(state)
    if not states:
        return Value(0)
    return Case(
        *(When(state__in=named, then=Value(value)) for value, named in states.items()),
        default=Value(0),
        output_field=IntegerField(),
    )


# -- per topic ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicStatus:
    """One topic of a flow, its partitions' figures rolled up (sums of what adds up, the worst of the rest)."""

    flow_id: int
    topic: str
    partitions: int
    records_behind: int | None  # sum of the known; None while none is measured
    bytes_behind: int | None  # records behind x each partition's average replicated value size, summed
    seconds_behind: float | None  # the worst known
    record_age_ms: int | None  # the oldest last-polled record
    replication_latency_ms: int | None  # the worst last-acknowledged record's
    record_count: int
    byte_count: int
    states: dict[str, int]  # partitions per shown state (Burrow's, or STALE)
    observed_at: datetime.datetime  # its oldest figures': the topic is as old as its oldest figure
    age_s: float

    @property
    def stale(self) -> bool:
        return self.states.get(rollup.STALE, 0) > 0


def _bytes_behind() -> Case:
    """Value bytes behind per row: records behind x the partition's average replicated value size; 0 when
    caught up, unknown before a record was replicated."""
    return Case(
        When(records_behind=0, then=Value(0.0)),
        When(
            records_behind__isnull=False,
            record_count__gt=0,
            then=Round(Cast("records_behind", FloatField()) * F("byte_count") / F("record_count")),
        ),
        default=None,
        output_field=FloatField(),
    )


@statement
def _topic_groups(
    fresh_tasks: tuple[tuple[int, int], ...],
    *,
    flow_ids: list[int],
    fresh_flows: list[int],
    stale_before: datetime.datetime,
) -> QuerySet:
    """The flows' rows grouped by topic, task and shown state, for `grouped_topic_statuses` (the tasks that reported
    since `stale_before`: `TaskReports.statement_values`)."""
    fresh = _fresh(fresh_tasks, fresh_flows)
    # Grouped by the state shown too (the CASE written once, not once per state in a COUNT's FILTER: that
    # statement took about 2 ms to compile), and the states' groups of a topic and task merged there.
    return (
        FlowPartitionStatus.objects.filter(flow_id__in=flow_ids)
        .annotate(shown=shown_state_sql(fresh, stale_before=stale_before))
        .values("flow_id", "topic", "task_index", "shown")
        .annotate(
            partitions=Count("id"),
            sum_records_behind=Sum("records_behind"),
            sum_bytes_behind=Sum(_bytes_behind()),
            max_seconds_behind=Max("seconds_behind"),
            max_record_age_ms=Max("record_age_ms"),
            max_latency_ms=Max("replication_latency_ms"),
            sum_record_count=Sum("record_count"),
            sum_byte_count=Sum("byte_count"),
            oldest=Min("observed_at"),
        )
        .order_by()
    )


def grouped_topic_statuses(
    *,
    flow_ids: Collection[int],
    now: datetime.datetime | None = None,
    tasks: Collection[FlowTaskStatus] | None = None,
) -> dict[int, list[TopicStatus]]:
    """Per flow of `flow_ids`, its topics (by name) rolled up from its partition rows: one statement, GROUP
    BY flow, topic and task (the age of a task's rows is its report's: their task roll-ups read, unless
    given as `tasks`), then per topic here. What `topic_rollups.topic_statuses` falls back to."""
    now = now or timezone.now()
    reports = TaskReports.of(flow_ids, now=now, tasks=tasks)
    fresh_tasks, fresh_flows = reports.statement_values()
    groups = _topic_groups(
        fresh_tasks, flow_ids=list(flow_ids), fresh_flows=fresh_flows, stale_before=reports.stale_before
    )
    by_task: dict[tuple[int, str, int], list[dict]] = {}
    for group in groups:
        by_task.setdefault((group["flow_id"], group["topic"], group["task_index"]), []).append(group)
    by_topic: dict[tuple[int, str], list[dict]] = {}
    for (flow_id, topic, task_index), parts in sorted(by_task.items()):
        oldest = min(part["oldest"] for part in parts)
        by_topic.setdefault((flow_id, topic), []).append(
            {
                "partitions": sum(part["partitions"] for part in parts),
                "sum_records_behind": known((part["sum_records_behind"] for part in parts), sum),
                "sum_bytes_behind": known((part["sum_bytes_behind"] for part in parts), sum),
                "max_seconds_behind": known((part["max_seconds_behind"] for part in parts), max),
                "max_record_age_ms": known((part["max_record_age_ms"] for part in parts), max),
                "max_latency_ms": known((part["max_latency_ms"] for part in parts), max),
                "sum_record_count": sum(part["sum_record_count"] or 0 for part in parts),
                "sum_byte_count": sum(part["sum_byte_count"] or 0 for part in parts),
                "states": {part["shown"]: part["partitions"] for part in parts},
                "figures_at": reports.figures_at(flow_id, task_index, oldest),
            }
        )
    found: dict[int, list[TopicStatus]] = {}
    for (flow_id, topic), parts in by_topic.items():
        found.setdefault(flow_id, []).append(topic_status_of(flow_id, topic, parts, now=now))
    return found


def known(values, combine):
    """`combine` (sum, max) of the values that are known; None when none is."""
    found = [value for value in values if value is not None]
    return combine(found) if found else None


def topic_status_of(flow_id: int, topic: str, groups: list[dict], *, now: datetime.datetime) -> TopicStatus:
    """A topic rolled up from its groups of partitions (a task's, with the keys `grouped_topic_statuses`
    gives them: sums, maxima, `states` shown and `figures_at`): the one rule for both sources."""
    oldest = min(group["figures_at"] for group in groups)
    size = known((group["sum_bytes_behind"] for group in groups), sum)
    return TopicStatus(
        flow_id=flow_id,
        topic=topic,
        partitions=sum(group["partitions"] for group in groups),
        records_behind=known((group["sum_records_behind"] for group in groups), sum),
        bytes_behind=None if size is None else round(size),
        seconds_behind=known((group["max_seconds_behind"] for group in groups), max),
        record_age_ms=known((group["max_record_age_ms"] for group in groups), max),
        replication_latency_ms=known((group["max_latency_ms"] for group in groups), max),
        record_count=sum(group["sum_record_count"] or 0 for group in groups),
        byte_count=sum(group["sum_byte_count"] or 0 for group in groups),
        states={s: n for s in STATES if (n := sum(group["states"].get(s, 0) for group in groups))},
        observed_at=oldest,
        age_s=rollup.age_s(oldest, now=now),
    )


# -- per partition, for /metrics ------------------------------------------------------------------------------
PARTITION_VALUES = (
    "flow_id",
    "topic",
    "partition",
    "records_behind",
    "seconds_behind",
    "record_age_ms",
    "replication_latency_ms",
    "record_count",
    "byte_count",
    "shown_state",
)


def partition_values(*, flow_ids: Collection[int], now: datetime.datetime | None = None) -> Iterator[tuple]:
    """The flows' partitions as tuples of PARTITION_VALUES (`shown_state`: the state shown), by flow, topic and
    partition: one statement (and one for their tasks' reports), no model instances."""
    reports = TaskReports.of(flow_ids, now=now or timezone.now())
    rows = (
        FlowPartitionStatus.objects.filter(flow_id__in=flow_ids)
        .annotate(shown_state=reports.shown_state())
        .order_by("flow_id", "topic", "partition")
        .values_list(*PARTITION_VALUES)
    )
    return rows.iterator(chunk_size=5000)
