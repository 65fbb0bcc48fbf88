"""One flow's partition status rows, a page at a time, and per-topic aggregates: what a page, an API answer
or a scrape of a flow of 20,000 partitions reads instead of every row.

`partition_page`: the rows of one flow searched by topic (a substring), filtered by the state they show
(Burrow's, or STALE once older than the stale limit), worst first (an error, then STALE, then WARN; within
each, a partition behind for a time not known yet, then seconds behind, then records behind, descending;
then topic and partition), counted and cut to a page in SQL (COUNT, LIMIT/OFFSET): two statements and
one page of rows, whatever the flow's size. Each row shown is judged by `rollup.partition_live`.

`topic_statuses`: per flow and topic, GROUP BY in SQL: partitions, records and bytes behind, the worst
seconds behind, record age and latency, replicated counts, partitions per shown state and the age of the
oldest figures: one statement for any number of flows, one row per topic.

The state a row shows, its age and the order follow `rollup.partition_live` (a task's report vouches for
its rows, which the workers rewrite only when they change), written in SQL once here (`with_shown_state`).

`partition_values`: the per-partition figures /metrics exports, as tuples (no model instances), one
statement for the flows asked.
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Iterator
from dataclasses import dataclass

from django.core.paginator import Paginator
from django.db.models import (
    Case,
    CharField,
    Count,
    DateTimeField,
    F,
    FloatField,
    IntegerField,
    Max,
    Min,
    OuterRef,
    Q,
    QuerySet,
    Subquery,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Cast, Coalesce, Greatest, Round
from django.utils import timezone

from controlplane.models import Flow, FlowPartitionStatus, FlowTaskStatus, PartitionState
from controlplane.status import rollup
from controlplane.status.budgets import RpoBudget

PAGE_SIZE = 50
ERROR_STATES = (PartitionState.STOP, PartitionState.STALL, PartitionState.REWIND, PartitionState.ERR)
# What a row may be filtered by: the state it shows (PartitionLive.state).
STATES = (*PartitionState.values, rollup.STALE)


def _task_field(name: str) -> Subquery:
    """The row's task roll-up's `name` (None while its task has none)."""
    tasks = FlowTaskStatus.objects.filter(flow_id=OuterRef("flow_id"), task_index=OuterRef("task_index"))
    return Subquery(tasks.values(name)[:1])


def with_shown_state(rows: QuerySet, *, now: datetime.datetime, stale_after: float) -> QuerySet:
    """`rows` with `shown`, `PartitionLive.state` in SQL by `rollup.partition_live`'s rule: the worker's
    state while the newer of the row's write and its task's report is within the limit, else STALE; and
    `figures_at`, when its figures were last current: the row's write, or, while its task's report
    vouches for it (is newer), the time the task's rows were all current if later."""
    task_at = Coalesce(_task_field("observed_at"), "observed_at")
    return rows.alias(
        reported_at=Greatest("observed_at", task_at),
        figures_at=Case(
            When(
                Q(reported_at__gt=F("observed_at")),
                then=Greatest("observed_at", Coalesce(_task_field("rows_current_at"), "observed_at")),
            ),
            default=F("observed_at"),
            output_field=DateTimeField(),
        ),
    ).alias(
        shown=Case(
            When(reported_at__lt=now - datetime.timedelta(seconds=stale_after), then=Value(rollup.STALE)),
            default=F("state"),
            output_field=CharField(),
        )
    )


def partition_rows(
    *, flow: Flow, search: str = "", state: str = "", now: datetime.datetime, stale_after: float
) -> QuerySet[FlowPartitionStatus]:
    """The flow's status rows whose topic contains `search` and whose shown state is `state` (any when
    empty), worst first."""
    rows = with_shown_state(
        FlowPartitionStatus.objects.filter(flow=flow), now=now, stale_after=stale_after
    ).alias(
        severity=Case(
            When(shown__in=ERROR_STATES, then=Value(3)),
            When(shown=rollup.STALE, then=Value(2)),
            When(shown=PartitionState.WARN, then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        ),
        undated=Case(
            When(seconds_behind__isnull=True, records_behind__gt=0, then=Value(1)),
            default=Value(0),
            output_field=IntegerField(),
        ),
    )
    if search:
        rows = rows.filter(topic__icontains=search)
    if state:
        rows = rows.filter(shown=state)
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
    """A page of a flow's partitions, worst first, each with its age and health."""

    partitions: list[rollup.PartitionLive]
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
) -> PartitionPage:
    """Page `page` (past the last: the last) of the flow's partitions matching `search` and `state`."""
    now = now or timezone.now()
    stale_after = rollup.stale_after_s()
    rows = partition_rows(flow=flow, search=search, state=state, now=now, stale_after=stale_after)
    found = Paginator(rows, page_size).get_page(page)
    return PartitionPage(
        partitions=rollup.partitions_live(list(found.object_list), flow=flow, budget=budget, now=now),
        count=found.paginator.count,
        number=found.number,
        page_size=page_size,
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


def topic_statuses(
    *, flow_ids: Collection[int], now: datetime.datetime | None = None
) -> dict[int, list[TopicStatus]]:
    """Per flow of `flow_ids`, its topics (by name) rolled up in SQL: one statement, one row per topic."""
    now = now or timezone.now()
    states = {f"state_{s}": Count("id", filter=Q(shown=s)) for s in STATES}
    rows = (
        with_shown_state(
            FlowPartitionStatus.objects.filter(flow_id__in=flow_ids),
            now=now,
            stale_after=rollup.stale_after_s(),
        )
        .values("flow_id", "topic")
        .annotate(
            partitions=Count("id"),
            sum_records_behind=Sum("records_behind"),
            sum_bytes_behind=Sum(_bytes_behind()),
            max_seconds_behind=Max("seconds_behind"),
            max_record_age_ms=Max("record_age_ms"),
            max_latency_ms=Max("replication_latency_ms"),
            sum_record_count=Sum("record_count"),
            sum_byte_count=Sum("byte_count"),
            oldest=Min("figures_at"),
            **states,
        )
        .order_by("flow_id", "topic")
    )
    found: dict[int, list[TopicStatus]] = {}
    for row in rows:
        found.setdefault(row["flow_id"], []).append(
            TopicStatus(
                flow_id=row["flow_id"],
                topic=row["topic"],
                partitions=row["partitions"],
                records_behind=row["sum_records_behind"],
                bytes_behind=None if row["sum_bytes_behind"] is None else round(row["sum_bytes_behind"]),
                seconds_behind=row["max_seconds_behind"],
                record_age_ms=row["max_record_age_ms"],
                replication_latency_ms=row["max_latency_ms"],
                record_count=row["sum_record_count"] or 0,
                byte_count=row["sum_byte_count"] or 0,
                states={s: row[f"state_{s}"] for s in STATES if row[f"state_{s}"]},
                observed_at=row["oldest"],
                age_s=rollup.age_s(row["oldest"], now=now),
            )
        )
    return found


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
    partition: one statement, no model instances."""
    rows = (
        with_shown_state(
            FlowPartitionStatus.objects.filter(flow_id__in=flow_ids),
            now=now or timezone.now(),
            stale_after=rollup.stale_after_s(),
        )
        .annotate(shown_state=F("shown"))
        .order_by("flow_id", "topic", "partition")
        .values_list(*PARTITION_VALUES)
    )
    return rows.iterator(chunk_size=5000)
