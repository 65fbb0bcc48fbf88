"""The partition rows' write: a slice's status of a task's partitions, as the workers store it.

`partition_statuses_save` stores the task's roll-up (`FlowTaskStatus`, one row every slice) and the
partition rows (`FlowPartitionStatus`, one row per flow partition) that are due, in one statement.
`StatusWrites` (kept by the worker per cached task) decides which rows are due: a row is written when it
is new or changed promptly (a state, an error), its other figures once its stored copy is
MIRRORPLANE_STATUS_REFRESH_S old, spread over that period; never while unchanged (DESIGN.md section 6:
status writes grow with changes, not with partitions x slices). Part of the workers' one door to the
database (`controlplane.status.runtime`).
"""

from __future__ import annotations

import functools
import heapq
import json
import re
from collections import Counter
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

from django.conf import settings
from django.db import connection, transaction

from controlplane.status import partitions, rollup, topic_rollups
from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus, PartitionState
from controlplane.status.runtime import TopicPartition, flow_recover_from_data_loss_stop
from replication.metrics import LATENCY_BUCKETS_MS, PartitionMetrics


def partition_state(*, stopped: bool, failing: bool, stalled: bool) -> str:
    """Burrow's vocabulary for a partition (a `PartitionState`): STOP when data loss stopped it, ERR while its
    task fails, STALL while its records wait and its task's source passes it over (replication.fetch_stall)."""
    if stopped:
        return PartitionState.STOP
    if failing:
        return PartitionState.ERR
    return PartitionState.STALL if stalled else PartitionState.OK


def _whole(value: float | None) -> int | None:
    return None if value is None else round(value)


class StatusFigures(NamedTuple):
    """One partition's figures as its status row stores them (all but `observed_at`): cheap to build and
    compare every slice, a row built only when it is written."""

    topic: str  # the source topic
    partition: int
    remote_topic: str
    task_index: int
    source_end_offset: int | None
    replicated_offset: int | None
    records_behind: int | None  # None while the source end offset is not known (docs/lag.md)
    seconds_behind: float | None
    record_age_ms: int | None
    replication_latency_ms: int | None
    latency_counts: tuple[int, ...]
    latency_sum_ms: float
    record_rate: float
    byte_rate: float
    record_count: int
    byte_count: int
    records_aborted: int
    last_error: str
    state: str

    @classmethod
    def of(cls, p: PartitionMetrics, *, task_index: int, task_error: str | None) -> StatusFigures:
        """`task_error` is the slice's error (the task is failing) or None; a partition's own wins."""
        known = p.source_end_offset is not None
        return cls(
            p.source_topic,
            p.partition,
            p.topic,
            task_index,
            p.source_end_offset,
            p.next_offset,
            p.records_behind if known else None,
            p.seconds_behind if known else None,
            _whole(p.record_age_ms),
            _whole(p.replication_latency_ms),
            tuple(p.latency_counts),
            p.latency_sum_ms,
            p.record_rate,
            p.byte_rate,
            p.record_count,
            p.byte_count,
            p.aborted_count,
            p.last_error or task_error or "",
            partition_state(stopped=p.stopped, failing=task_error is not None, stalled=p.stalled),
        )

    @classmethod
    def of_row(cls, row: FlowPartitionStatus) -> StatusFigures:
        figures = {name: getattr(row, name) for name in cls._fields}
        return cls(**{**figures, "latency_counts": tuple(figures["latency_counts"] or ())})

    def row(self, *, flow_id: int, at: datetime) -> FlowPartitionStatus:
        return FlowPartitionStatus(
            flow_id=flow_id, observed_at=at, **{**self._asdict(), "latency_counts": list(self.latency_counts)}
        )

    def prompt_change(self, stored: StatusFigures) -> bool:
        """A change written in the slice it happens: a state, an error, the remote topic, the task, or a
        lag that becomes known or unknown. Other figures (positions, counts, lag, rates) wait."""
        return (
            (self.state, self.last_error, self.remote_topic, self.task_index)
            != (stored.state, stored.last_error, stored.remote_topic, stored.task_index)
        ) or ((self.records_behind is None) != (stored.records_behind is None))


STATUS_FIELDS = (*StatusFigures._fields[2:], "observed_at")  # what an upsert of a row writes
SPREAD_MIN_ROWS = 50  # `StatusWrites.due`: the smallest share of a slice's refresh writes spread early


def _written_at(waiting: tuple[float, StatusFigures]) -> float:
    return waiting[0]


@dataclass
class PartitionWrite:
    """One partition's status as its task last made and stored it.

    `metrics` and `task_error` are what `figures` were made of: an idle partition's metrics are the same
    object slice after slice (`MirrorMetrics.snapshot`), so are its figures, compared by identity.
    `written` is the figures last stored of it (None: none yet by this task) and `written_at` when."""

    metrics: PartitionMetrics
    task_error: str | None
    figures: StatusFigures
    written: StatusFigures | None = None
    written_at: float = 0.0


@dataclass
class StatusWrites:
    """What a task made and wrote of each partition's row, by source partition (kept by the worker per
    cached task). A new one (a worker that just took the task) writes every row in its first slice."""

    partitions: dict[TopicPartition, PartitionWrite] = field(default_factory=dict)
    reported_at: float | None = None  # the last `due` (the slice before this one)
    # per topic, the figures its roll-up was made of last and that roll-up (`topic_figures`)
    topics: dict[str, tuple[list[StatusFigures], topic_rollups.TopicFigures]] = field(default_factory=dict)

    def figures(
        self, partitions: Iterable[PartitionMetrics], *, task_index: int, task_error: str | None
    ) -> list[StatusFigures]:
        """`StatusFigures.of` each partition, made anew only from metrics that are not last slice's."""
        known, result = self.partitions, []
        for p in partitions:
            key = (p.source_topic, p.partition)
            entry = known.get(key)
            if entry is None:
                figure = StatusFigures.of(p, task_index=task_index, task_error=task_error)
                known[key] = PartitionWrite(p, task_error, figure)
            elif entry.metrics is not p or entry.task_error != task_error:
                figure = StatusFigures.of(p, task_index=task_index, task_error=task_error)
                entry.metrics, entry.task_error, entry.figures = p, task_error, figure
            result.append(known[key].figures)
        return result

    def due(self, figures: Sequence[StatusFigures], *, now: float, refresh_s: float):
        """(the partitions' figures to write now, the time as of which every row of the task is current).

        A row is written when new to this task or on a prompt change (`StatusFigures.prompt_change`); when
        only its other figures changed, once its stored copy is `refresh_s` old; never while unchanged.
        Rows that moved together (a task's first slice writes them all) would come due together, one
        slice in every `refresh_s` writing thousands of rows (its report late, every figure older): a
        slice also writes the oldest waiting rows up to its share of the rows under refresh (those rows
        times the slice's part of `refresh_s`), so their writes spread over the period and stay spread,
        at the same rate. Below SPREAD_MIN_ROWS a share is not worth a write before it is due.
        The rows not written although they changed are current as of their own write: the oldest of those
        bounds the task's (`FlowTaskStatus.rows_current_at`)."""
        interval = 0.0 if self.reported_at is None else min(max(now - self.reported_at, 0.0), refresh_s)
        self.reported_at = now
        due: list[StatusFigures] = []
        waiting: list[tuple[float, StatusFigures]] = []
        refreshed = 0
        for figure in figures:
            entry = self.partitions.get((figure.topic, figure.partition))
            stored = None if entry is None else entry.written
            if entry is not None and stored is not None:
                if stored is figure or stored == figure:
                    continue
                if not figure.prompt_change(stored):
                    if now - entry.written_at < refresh_s:
                        waiting.append((entry.written_at, figure))
                        continue
                    refreshed += 1
            due.append(figure)
        share = int((len(waiting) + refreshed) * interval / refresh_s)
        early = share - refreshed if share >= SPREAD_MIN_ROWS else 0
        if early > 0:
            waiting.sort(key=_written_at)
            due.extend(figure for _, figure in waiting[:early])
            waiting = waiting[early:]
        return due, min((written_at for written_at, _ in waiting), default=now)

    def wrote(self, due: Iterable[StatusFigures], *, now: float) -> None:
        for figure in due:
            entry = self.partitions.get((figure.topic, figure.partition))
            if entry is not None:
                entry.written, entry.written_at = figure, now

    def keep_only(self, partitions: Collection[TopicPartition]) -> None:
        if len(self.partitions) == len(partitions):
            return  # the same partitions (a task's assignment rarely changes)
        keep = set(partitions)
        for key in [key for key in self.partitions if key not in keep]:
            del self.partitions[key]


def _badness(figure: StatusFigures) -> tuple:
    return rollup.badness(
        state=figure.state, records_behind=figure.records_behind, seconds_behind=figure.seconds_behind
    )


_OK = rollup.badness(state=PartitionState.OK, records_behind=0, seconds_behind=0.0)


def task_status(
    figures: Sequence[StatusFigures],
    *,
    flow_id: int,
    task_index: int,
    task_error: str | None,
    at: datetime,
    writes: StatusWrites | None = None,
) -> FlowTaskStatus:
    """The task's roll-up of all its partitions' figures (docs/lag.md: one definition of each figure);
    `writes`: the task's, whose per-topic roll-ups of idle topics are kept."""
    behind = [f.records_behind for f in figures if f.records_behind is not None]
    seconds = [f.seconds_behind for f in figures if f.seconds_behind is not None]
    width = len(LATENCY_BUCKETS_MS) + 1
    histograms = [f.latency_counts for f in figures if len(f.latency_counts) == width]
    latency = [sum(bucket) for bucket in zip(*histograms, strict=True)] if histograms else [0] * width
    worst = [f for f in heapq.nlargest(rollup.WORST_KEPT, figures, key=_badness) if _badness(f) > _OK]
    return FlowTaskStatus(
        flow_id=flow_id,
        task_index=task_index,
        partitions=len(figures),
        state_counts=dict(Counter(f.state for f in figures)),
        records_behind=sum(behind) if behind else None,
        seconds_behind=max(seconds) if seconds else None,
        # a partition behind with no known age, or whose lag is not known at all (no fetch answer yet)
        undated=any(
            f.seconds_behind is None and (f.records_behind is None or f.records_behind > 0) for f in figures
        ),
        position=sum(f.replicated_offset or 0 for f in figures),
        record_rate=sum(f.record_rate for f in figures),
        byte_rate=sum(f.byte_rate for f in figures),
        record_count=sum(f.record_count for f in figures),
        records_aborted=sum(f.records_aborted for f in figures),
        byte_count=sum(f.byte_count for f in figures),
        latency_counts=latency,
        latency_sum_ms=sum(f.latency_sum_ms for f in figures if len(f.latency_counts) == width),
        worst=[
            {
                "topic": f.topic,
                "partition": f.partition,
                "state": f.state,
                "records_behind": f.records_behind,
                "seconds_behind": f.seconds_behind,
            }
            for f in worst
        ],
        topics=sorted({f.topic for f in figures}),
        topic_figures=topic_figures(figures, kept=None if writes is None else writes.topics),
        last_error=task_error or "",
        observed_at=at,
    )


_COLUMN = {name: index for index, name in enumerate(StatusFigures._fields)}


def topic_figures(
    figures: Sequence[StatusFigures],
    *,
    kept: dict[str, tuple[list[StatusFigures], topic_rollups.TopicFigures]] | None = None,
) -> list[topic_rollups.TopicFigures]:
    """A task's slice rolled up per topic (by name; `topic_rollups` reads it): [] over
    `topic_rollups.TOPICS_KEPT_MAX` topics. With `kept` (`StatusWrites.topics`), a topic whose figures are
    last slice's (an idle one: the same objects, `StatusWrites.figures`) keeps last slice's roll-up."""
    by_topic: dict[str, list[StatusFigures]] = {}
    for f in figures:
        by_topic.setdefault(f.topic, []).append(f)
    if kept is not None:
        for gone in kept.keys() - by_topic.keys():
            del kept[gone]
    if len(by_topic) > topic_rollups.TOPICS_KEPT_MAX:
        return []
    found = []
    for topic in sorted(by_topic):
        group = by_topic[topic]
        last = None if kept is None else kept.get(topic)
        if last is not None and last[0] == group:  # compared by identity first: idle partitions' are
            found.append(last[1])
            continue
        entry = _topic_entry(topic, group)
        if kept is not None:
            kept[topic] = (group, entry)
        found.append(entry)
    return found


def _topic_entry(topic: str, group: list[StatusFigures]) -> topic_rollups.TopicFigures:
    """One topic's partitions rolled up, their figures taken as columns (about 4 ms of CPU for 5,000
    partitions, where a loop over them with a call per figure took 17)."""
    columns = list(zip(*group, strict=True))
    behind, seconds, counts, sizes, states = (
        columns[_COLUMN[name]]
        for name in ("records_behind", "seconds_behind", "record_count", "byte_count", "state")
    )
    # value bytes behind: records behind x the partition's average replicated value size; 0 when caught
    # up, unknown before a record was replicated (`partitions._bytes_behind`, its twin in SQL)
    known_bytes = [
        round(b * y / c) if b else 0
        for b, c, y in zip(behind, counts, sizes, strict=True)
        if b is not None and (b == 0 or c > 0)
    ]
    shown: dict[str, int] = {}
    # the rule decided once per kind of partition, not once per partition
    for (state, dated, any_behind), n in Counter(
        zip(states, [s is not None for s in seconds], map(bool, behind), strict=True)
    ).items():
        key = rollup.shown_state(state=state, stale=False, lag_known=dated or any_behind)
        shown[key] = shown.get(key, 0) + n
    return topic_rollups.TopicFigures(
        topic,
        len(behind),
        partitions.known(behind, sum),
        sum(known_bytes) if known_bytes else None,
        partitions.known(seconds, max),
        partitions.known(columns[_COLUMN["record_age_ms"]], max),
        partitions.known(columns[_COLUMN["replication_latency_ms"]], max),
        sum(counts),
        sum(sizes),
        shown,
    )


TASK_FIELDS = [
    f.name for f in FlowTaskStatus._meta.concrete_fields if f.name not in ("id", "flow", "task_index")
]


def partition_statuses_save(
    *,
    flow_id: int,
    task_index: int,
    partitions: Iterable[PartitionMetrics],
    task_error: str | None,
    at: datetime,
    writes: StatusWrites | None = None,
    refresh_s: float | None = None,
) -> int:
    """Store a slice's status of the task's partitions: the task's roll-up (every slice, one row) and the
    partition rows `writes` says are due (one statement; all of them without `writes`); the rows written.

    Rows carry `observed_at` = `at` when written; the task row's `observed_at` vouches that the rows of
    its partitions are current as of its `rows_current_at` (MIRRORPLANE_STATUS_REFRESH_S at most before).
    """
    refresh_s = settings.MIRRORPLANE_STATUS_REFRESH_S if refresh_s is None else refresh_s
    figures = (
        [StatusFigures.of(p, task_index=task_index, task_error=task_error) for p in partitions]
        if writes is None
        else writes.figures(partitions, task_index=task_index, task_error=task_error)
    )
    if not figures:
        return 0
    now = at.timestamp()
    if writes is None:
        due, current_at = figures, now
    else:
        writes.keep_only([(f.topic, f.partition) for f in figures])
        due, current_at = writes.due(figures, now=now, refresh_s=refresh_s)
    task = task_status(
        figures, flow_id=flow_id, task_index=task_index, task_error=task_error, at=at, writes=writes
    )
    task.rows_current_at = datetime.fromtimestamp(current_at, at.tzinfo)
    with transaction.atomic():
        if due:
            _upsert_rows(flow_id=flow_id, at=at, due=due)
        FlowTaskStatus.objects.bulk_create(
            [task], update_conflicts=True, unique_fields=["flow", "task_index"], update_fields=TASK_FIELDS
        )
    if writes is not None:  # only once stored: a failed write is tried again next slice
        writes.wrote(due, now=now)
    if not any(f.state == PartitionState.STOP for f in figures):
        flow_recover_from_data_loss_stop(flow_id=flow_id, at=at)
    return len(due)


def _upsert_rows(*, flow_id: int, at: datetime, due: Sequence[StatusFigures]) -> None:
    """The partition rows `due`, upserted in one statement (a row another task wrote later is kept, on
    PostgreSQL: `_upsert_sql`). On PostgreSQL as one array per column
    (`unnest`): the statement's text is the same for any number of rows, so neither the ORM nor the
    driver compiles and converts a placeholder per value (the ORM's bulk_create of a slice's share of
    5,000 moving partitions was 30% of a replication worker's CPU, py-spy in bench scale); elsewhere the
    ORM's upsert."""
    if connection.vendor != "postgresql":
        FlowPartitionStatus.objects.bulk_create(
            [figure.row(flow_id=flow_id, at=at) for figure in due],
            update_conflicts=True,
            unique_fields=["flow", "topic", "partition"],
            update_fields=list(STATUS_FIELDS),
        )
        return
    columns = list(zip(*due, strict=True))
    latency = StatusFigures._fields.index("latency_counts")
    columns[latency] = tuple(json.dumps(counts) for counts in columns[latency])
    with connection.cursor() as cursor:
        cursor.execute(_upsert_sql(), [flow_id, at, *(list(column) for column in columns)])


@functools.cache
def _upsert_sql() -> str:
    meta, quote = FlowPartitionStatus._meta, connection.ops.quote_name
    fields = [meta.get_field(name) for name in StatusFigures._fields]
    # varchar(n) as text: a cast to varchar(n) cuts a longer value, the column's own check refuses it
    arrays = ", ".join(
        f"%s::{re.sub(r'^varchar.*', 'text', field.db_type(connection))}[]" for field in fields
    )
    names = ", ".join(quote(field.column) for field in fields)
    updates = ", ".join(
        f"{quote(meta.get_field(n).column)} = EXCLUDED.{quote(meta.get_field(n).column)}"
        for n in STATUS_FIELDS
    )
    table, task, observed = quote(meta.db_table), quote("task_index"), quote("observed_at")
    return (
        f"INSERT INTO {table} ({quote('flow_id')}, {observed}, {names}) "
        f"SELECT %s, %s, * FROM unnest({arrays}) "
        f"ON CONFLICT ({quote('flow_id')}, {quote('topic')}, {quote('partition')}) DO UPDATE SET {updates} "
        # A task's own rows, always (its slices are sequential under its lease); another task's only when
        # newer: the late report of a task whose partitions were just assigned anew elsewhere
        # (workers.fencing) never overwrites what their new task wrote.
        f"WHERE {table}.{task} = EXCLUDED.{task} OR {table}.{observed} <= EXCLUDED.{observed}"
    )
