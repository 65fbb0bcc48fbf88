"""Per flow and topic, its partitions' figures rolled up from the tasks' roll-ups, not from the partition
rows: what the live RPO per topic (a flow's page, the assurance API) and /metrics (its per-topic families,
every flow's RPO) read, so none of them reads every partition row (DESIGN.md section 6, issue 34).

Written by the workers: `partition_writes.topic_figures` rolls a task's slice up per topic, in memory, from
the figures its status write holds anyway; the task row stores them (`FlowTaskStatus.topic_figures`, as
`TopicFigures`), in the statement that writes the row every slice. A task of more than `TOPICS_KEPT_MAX`
topics stores none (its row would grow with them).

Read side: `topic_statuses` reads the flows' task rows (one statement, none when the caller has them) and
merges each topic's entries of every task by the one rule (`partitions.topic_status_of`): sums of what adds
up, the worst of the rest. The figures are the task's slice's: their age is its report's, and a task that
has not reported within the stale limit shows its partitions STALE, as their rows would. A flow with a task
row without per-topic figures (a worker of an earlier version during an upgrade, a task of too many
topics), or with no task row at all, is grouped from its partition rows in SQL as before
(`partitions.grouped_topic_statuses`, one statement for all such flows).
"""

from __future__ import annotations

import datetime
from collections.abc import Collection, Sequence
from typing import NamedTuple

from django.utils import timezone

from controlplane.core.statements import statement
from controlplane.status import partitions, rollup
from controlplane.status.models import FlowTaskStatus

TOPICS_KEPT_MAX = 1000  # a task of more topics stores no per-topic figures (its flow is grouped in SQL)


class TopicFigures(NamedTuple):
    """One topic of one task's slice, as the task row stores it (a JSON list in this order)."""

    topic: str
    partitions: int
    records_behind: int | None  # sum of the known; None while none is known
    bytes_behind: int | None  # each partition's records behind x its average replicated value size, summed
    seconds_behind: float | None  # the worst known
    record_age_ms: int | None  # the oldest last-polled record
    replication_latency_ms: int | None  # the worst last-acknowledged record's
    record_count: int
    byte_count: int
    states: dict[str, int]  # partitions per state shown while the task's report is fresh


# -- read -----------------------------------------------------------------------------------------------------
class _TaskTopics(NamedTuple):
    flow_id: int
    task_index: int
    observed_at: datetime.datetime
    partitions: int
    topic_figures: list


@statement
def _task_topic_rows(*, flow_ids: list[int]):
    return FlowTaskStatus.objects.filter(flow_id__in=flow_ids).values_list(*_TaskTopics._fields)


def _covered(tasks: Sequence[_TaskTopics]) -> bool:
    """Whether the tasks' per-topic figures account for every partition they replicate."""
    return bool(tasks) and all(
        task.topic_figures and sum(entry[1] for entry in task.topic_figures) == task.partitions
        for task in tasks
    )


def topic_statuses(
    *,
    flow_ids: Collection[int],
    now: datetime.datetime | None = None,
    tasks: Collection[FlowTaskStatus] | None = None,
) -> dict[int, list[partitions.TopicStatus]]:
    """Per flow of `flow_ids`, its topics (by name) rolled up from its tasks' rows (read, unless given as
    `tasks`: `rollup.FlowStatus.tasks`); a flow whose tasks do not carry them, from its partition rows."""
    now = now or timezone.now()
    rows = (
        [_TaskTopics(*row) for row in _task_topic_rows(flow_ids=list(flow_ids))]
        if tasks is None
        else [
            _TaskTopics(task.flow_id, task.task_index, task.observed_at, task.partitions, task.topic_figures)
            for task in tasks
        ]
    )
    by_flow: dict[int, list[_TaskTopics]] = {}
    for row in rows:
        by_flow.setdefault(row.flow_id, []).append(row)
    stale_before = now - datetime.timedelta(seconds=rollup.stale_after_s())
    found: dict[int, list[partitions.TopicStatus]] = {}
    grouped = []
    for flow_id in flow_ids:
        flow_tasks = by_flow.get(flow_id, [])
        if not _covered(flow_tasks):
            grouped.append(flow_id)
            continue
        groups: dict[str, list[dict]] = {}
        for task in sorted(flow_tasks, key=lambda task: task.task_index):
            stale = task.observed_at < stale_before
            for entry in task.topic_figures:
                figures = TopicFigures(*entry)
                groups.setdefault(figures.topic, []).append(
                    {
                        "partitions": figures.partitions,
                        "sum_records_behind": figures.records_behind,
                        "sum_bytes_behind": figures.bytes_behind,
                        "max_seconds_behind": figures.seconds_behind,
                        "max_record_age_ms": figures.record_age_ms,
                        "max_latency_ms": figures.replication_latency_ms,
                        "sum_record_count": figures.record_count,
                        "sum_byte_count": figures.byte_count,
                        "states": {rollup.STALE: figures.partitions} if stale else figures.states,
                        "figures_at": task.observed_at,  # the slice's figures: as old as its report
                    }
                )
        found[flow_id] = [
            partitions.topic_status_of(flow_id, topic, groups[topic], now=now) for topic in sorted(groups)
        ]
    if grouped:
        wanted = set(grouped)
        given = None if tasks is None else [task for task in tasks if task.flow_id in wanted]
        found.update(partitions.grouped_topic_statuses(flow_ids=grouped, now=now, tasks=given))
    return found
