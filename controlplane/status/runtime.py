"""What the Celery runtime reads and writes in the database (workers call these; nothing else does).

Reads: the flows to run, as engine configs with a `config_version` that changes whenever anything the
engine sees changes (flow settings, either cluster's connection, the set of cluster aliases), so a
worker knows when its cached clients are stale. Writes: the latest status of each source partition
(`FlowPartitionStatus`, one row per flow partition, upserted), `FlowEvent` rows for errors and
data-loss gaps, and the runtime signals (`FlowSignals`: when heartbeats, checkpoints, offset syncs and
records were last emitted) the alert rules judge.

Over 600 lines for one reason: it is the one door the workers go through to the database (DESIGN.md: the
workers call nothing else there). Its largest part, the partition rows' write (`StatusFigures`,
`StatusWrites`, the one-statement upsert), is the next piece to move into a module of its own.
"""

from __future__ import annotations

import functools
import hashlib
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

from controlplane.flows import engine, lifecycle, pools
from controlplane.flows.models import Cluster, Flow, FlowState
from controlplane.status import rollup
from controlplane.status.models import (
    FlowEvent,
    FlowEventKind,
    FlowPartitionStatus,
    FlowSignals,
    FlowTaskStatus,
    PartitionState,
)
from replication.config import ClusterConfig, FlowConfig, SchemaIdMode
from replication.metrics import LATENCY_BUCKETS_MS, GapEvent, PartitionMetrics

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class FlowSpec:
    """A stored flow as the engine runs it."""

    flow_id: int
    flow: FlowConfig
    source: ClusterConfig
    target: ClusterConfig
    known_aliases: tuple[str, ...]
    runnable: bool  # the lifecycle state is one the workers replicate in
    config_version: str
    queue: str  # its worker pool's queue (controlplane.flows.pools): where its chains' slices go
    # The flow target->source when one is stored: its offset syncs translate the checkpoints of topics
    # that came from the target (replication.checkpoint). Not part of config_version: editing the
    # reverse flow rebuilds only this flow's metadata tasks (workers.metadata), never its replication.
    reverse: FlowConfig | None = None


def _config_version(flow: FlowConfig, source: ClusterConfig, target: ClusterConfig, aliases: tuple) -> str:
    # Deterministic and covers every field, secrets included (hashed): a changed password rebuilds clients.
    # ClusterConfig's repr masks its secrets, so the clusters contribute their `identity()`.
    parts = (repr(flow), source.identity(), target.identity(), aliases)
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def _spec(flow: Flow, aliases: tuple[str, ...], *, reverse: Flow | None) -> FlowSpec:
    config = engine.flow_to_config(flow)
    source = engine.cluster_to_config(flow.source)
    target = engine.cluster_to_config(flow.target)
    return FlowSpec(
        flow_id=flow.pk,
        flow=config,
        source=source,
        target=target,
        known_aliases=aliases,
        runnable=lifecycle.is_runnable(flow.state),
        config_version=_config_version(config, source, target, aliases),
        queue=pools.pool_queue(flow.pool),
        reverse=None if reverse is None else engine.flow_to_config(reverse),
    )


def _aliases() -> tuple[str, ...]:
    return tuple(Cluster.objects.order_by("alias").values_list("alias", flat=True))


def runtime_flow_specs() -> list[FlowSpec]:
    """Every flow that should replicate now (its state is runnable: controlplane.flows.lifecycle)."""
    aliases = _aliases()
    stored = {(f.source_id, f.target_id): f for f in Flow.objects.select_related("source", "target")}
    return [
        _spec(flow, aliases, reverse=stored.get((flow.target_id, flow.source_id)))
        for flow in stored.values()
        if flow.state in lifecycle.RUNNABLE_STATES
    ]


def runtime_flow_spec(*, flow_id: int) -> FlowSpec | None:
    """The flow as it is now (runnable or not); None once it is deleted."""
    flow = Flow.objects.select_related("source", "target").filter(pk=flow_id).first()
    if flow is None:
        return None
    reverse = Flow.objects.select_related("source", "target")
    return _spec(flow, _aliases(), reverse=reverse.filter(source=flow.target, target=flow.source).first())


def runtime_flow_queue(*, flow_id: int) -> str:
    """The queue of the flow's worker pool (the default pool's once the flow is deleted)."""
    pool = Flow.objects.filter(pk=flow_id).values_list("pool", flat=True).first()
    return pools.pool_queue(pool or pools.DEFAULT_POOL)


def runtime_flow_configs_into(*, target: str) -> list[FlowConfig]:
    """Every flow into cluster `target`, whatever its state (a stopped one may have written offset syncs)."""
    flows = Flow.objects.filter(target__alias=target).select_related("source", "target")
    return [engine.flow_to_config(flow) for flow in flows]


def partition_state(*, stopped: bool, failing: bool) -> str:
    """Burrow's vocabulary for a partition (a `PartitionState`): STOP when data loss stopped it, ERR while its task fails."""
    if stopped:
        return PartitionState.STOP
    return PartitionState.ERR if failing else PartitionState.OK


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
            partition_state(stopped=p.stopped, failing=task_error is not None),
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
) -> FlowTaskStatus:
    """The task's roll-up of all its partitions' figures (docs/lag.md: one definition of each figure)."""
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
        last_error=task_error or "",
        observed_at=at,
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
    task = task_status(figures, flow_id=flow_id, task_index=task_index, task_error=task_error, at=at)
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
        _recover_from_data_loss_stop(flow_id=flow_id, at=at)
    return len(due)


def _upsert_rows(*, flow_id: int, at: datetime, due: Sequence[StatusFigures]) -> None:
    """The partition rows `due`, upserted in one statement. On PostgreSQL as one array per column
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
    return (
        f"INSERT INTO {quote(meta.db_table)} ({quote('flow_id')}, {quote('observed_at')}, {names}) "
        f"SELECT %s, %s, * FROM unnest({arrays}) "
        f"ON CONFLICT ({quote('flow_id')}, {quote('topic')}, {quote('partition')}) DO UPDATE SET {updates}"
    )


def _recover_from_data_loss_stop(*, flow_id: int, at: datetime) -> None:
    """A flow FAULTED by a data-loss stop is ACTIVE again once none of its partitions is stopped."""
    faulted = Flow.objects.filter(
        pk=flow_id, state=FlowState.FAULTED, state_reason__startswith=DATA_LOSS_REASON_PREFIX
    )
    if not faulted.exists():
        return
    if FlowPartitionStatus.objects.filter(flow_id=flow_id, state=PartitionState.STOP).exists():
        return
    with transaction.atomic():  # the state and its event together
        if lifecycle.recover(flow_id=flow_id):
            flow_event_record(
                flow_id=flow_id,
                kind=FlowEventKind.INFO,
                message="no partition is stopped any more: replicating",
                at=at,
            )


def task_status_retire(*, flow_id: int, task_index: int) -> None:
    """A task that no longer runs (fewer partitions or a lower tasks.max) drops its roll-up: a silent row
    would read as a STALE flow. The new owners of its partitions rewrite their rows in their first slice."""
    FlowTaskStatus.objects.filter(flow_id=flow_id, task_index=task_index).delete()


def partition_statuses_prune(*, flow_id: int, replicated: Sequence[TopicPartition]) -> int:
    """Drop status rows of partitions the flow no longer replicates (topic excluded or deleted), and the
    roll-ups of tasks that no longer run (fewer partitions or a lower tasks.max)."""
    keep = set(replicated)
    stale = [
        pk
        for pk, topic, partition in FlowPartitionStatus.objects.filter(flow_id=flow_id).values_list(
            "pk", "topic", "partition"
        )
        if (topic, partition) not in keep
    ]
    if stale:
        FlowPartitionStatus.objects.filter(pk__in=stale).delete()
    tasks_max = Flow.objects.filter(pk=flow_id).values_list("tasks_max", flat=True).first() or 0
    # tasks = min(tasks.max, partitions), as MM2 assigns them: a task index beyond that reports no more
    FlowTaskStatus.objects.filter(flow_id=flow_id, task_index__gte=min(tasks_max, len(keep))).delete()
    return len(stale)


def flow_event_record(
    *,
    flow_id: int,
    kind: str,  # a FlowEventKind
    message: str,
    at: datetime,
    topic: str = "",
    partition: int | None = None,
    detail: dict | None = None,
) -> None:
    FlowEvent.objects.create(
        flow_id=flow_id,
        kind=kind,
        message=message,
        at=at,
        topic=topic,
        partition=partition,
        detail=detail or {},
    )


def flow_event_record_once(*, flow_id: int, kind: str, message: str, at: datetime) -> bool:
    """Record the event unless the flow already has one of that kind with that message; True if recorded.

    For conditions reported once per flow (such as "ACL sync unsupported by cluster X"), whichever
    worker process or restart notices them again.
    """
    if FlowEvent.objects.filter(flow_id=flow_id, kind=kind, message=message).exists():
        return False
    flow_event_record(flow_id=flow_id, kind=kind, message=message, at=at)
    return True


_UNREACHABLE_REASON = re.compile(r"^(source|target) cluster \S+ unreachable: ")


def cluster_unreachable_reason(*, role: str, alias: str, error: str) -> str:
    """The fault reason and error event of a flow whose `role` ("source"/"target") cluster does not answer."""
    return f"{role} cluster {alias} unreachable: {error}"


def flow_fault_cluster_unreachable(*, flow_id: int, reason: str, at: datetime) -> bool:
    """A cluster of the flow does not answer: ACTIVE -> FAULTED with `reason` (a FAULTED flow takes the
    newer reason), and an error event saying so. Other states (failing over) keep their state and get
    the event only, in one transaction: nobody reads the state without its event. True when the flow is
    FAULTED now."""
    with transaction.atomic():
        lifecycle.fault(flow_id=flow_id, reason=reason)
        flow_event_record(flow_id=flow_id, kind=FlowEventKind.ERROR, message=reason, at=at)
    return Flow.objects.filter(pk=flow_id, state=FlowState.FAULTED).exists()


def flow_recover_clusters_reachable(*, flow_id: int, at: datetime) -> bool:
    """Both clusters answer again: a flow FAULTED because one did not is ACTIVE again (with an info
    event, in the same transaction: a reader that sees it ACTIVE sees the event). A flow faulted for
    another reason stays faulted. True when it recovered."""
    current = Flow.objects.filter(pk=flow_id).values_list("state", "state_reason").first()
    if current is None or current[0] != FlowState.FAULTED or not _UNREACHABLE_REASON.match(current[1]):
        return False
    with transaction.atomic():
        if not lifecycle.recover(flow_id=flow_id):
            return False
        flow_event_record(
            flow_id=flow_id,
            kind=FlowEventKind.INFO,
            message=f"recovered: its clusters answer again, replicating (was: {current[1]})",
            at=at,
        )
    return True


DATA_LOSS_REASON_PREFIX = "data loss stopped "


def flow_gap_record(*, flow_id: int, gap: GapEvent, remote_topic: str, stopped: bool, at: datetime) -> None:
    """A data-loss gap: source offsets that were gone before they were replicated.

    When it stopped the partition (`data.loss.policy = stop`) the flow is FAULTED with the reason, until
    no partition of it is stopped any more (`partition_statuses_save`).
    """
    known = gap.lost_records is not None
    lost = f"{gap.lost_records} records" if known else "an unknown number of records"
    action = "partition stopped" if stopped else f"replication resumed at offset {gap.resumed_offset}"
    if stopped:
        lifecycle.fault(
            flow_id=flow_id,
            reason=f"{DATA_LOSS_REASON_PREFIX}{gap.topic}[{gap.partition}]: {lost} gone from the source "
            f"before they were replicated ({gap.reason}); data.loss.policy = stop. Decide what to do with the "
            "gap (restore the records, or accept the loss by setting data.loss.policy to skip), then the "
            "partition resumes",
        )
    FlowEvent.objects.create(
        flow_id=flow_id,
        kind=FlowEventKind.DATA_LOSS_GAP,
        at=at,
        topic=gap.topic,
        partition=gap.partition,
        first_offset=gap.expected_offset,
        last_offset=gap.expected_offset + gap.lost_records - 1 if known and gap.lost_records else None,
        message=f"data loss on {gap.topic}[{gap.partition}]: {lost} never replicated; {gap.reason}; {action}",
        detail={
            "remote_topic": remote_topic,
            "lost_records": gap.lost_records,
            "resumed_offset": gap.resumed_offset,
            "stopped": stopped,
        },
    )


# -- runtime signals (written by the workers) ------------------------------------------------------------
SIGNAL_FIELDS = frozenset(
    {
        "heartbeat_emitted_at",
        "checkpoint_emitted_at",
        "checkpoint_latency_ms",
        "offset_sync_emitted_at",
        "records_replicated_at",
        "schemas_synced_at",
        "schemas_subjects",
        "schemas_versions_behind",
        "schemas_errors",
        "schemas_id_map",
        "schemas_refused",
    }
)


def schema_sync_refused(*, flow_id: int) -> dict[str, str]:
    """The source subjects the flow's schema sync refuses, as its latest pass (in the metadata worker)
    recorded them: what a replication worker's held record names (`SchemaIdRewriter`)."""
    refused = FlowSignals.objects.filter(flow_id=flow_id).values_list("schemas_refused", flat=True).first()
    return dict(refused or {})


def rewritten_schema_ids(*, flow_id: int, mode: str) -> dict[int, int] | None:
    """The source -> target schema IDs of a flow whose `schemas.sync.mode` is `mode`, as its schema sync's
    latest pass found them, when it is `rewrite-ids` (what a copy is compared with: `as_copied`); None,
    without a query, for a flow whose records keep their IDs. The one place that decides whether a flow's
    copies carry rewritten IDs: verification, the compare page and drills ask it."""
    if mode != SchemaIdMode.REWRITE_IDS:
        return None
    stored = FlowSignals.objects.filter(flow_id=flow_id).values_list("schemas_id_map", flat=True).first()
    return {int(source): int(target) for source, target in (stored or {}).items()}


def flow_signals_record(*, flow_id: int, **signals: datetime | float) -> None:
    """Record when the runtime last emitted heartbeats, checkpoints (and their latency), offset syncs or
    replicated records (one UPDATE in the usual case: the row exists after the flow's first one)."""
    unknown = set(signals) - SIGNAL_FIELDS
    if unknown:
        raise ValueError(f"unknown signals: {sorted(unknown)}")
    if not signals or FlowSignals.objects.filter(flow_id=flow_id).update(**signals):
        return
    if Flow.objects.filter(pk=flow_id).exists():
        FlowSignals.objects.update_or_create(flow_id=flow_id, defaults=signals)
