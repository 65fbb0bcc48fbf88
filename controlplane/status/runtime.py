"""What the Celery runtime reads and writes in the database (workers call these; nothing else does).

Reads: the flows to run, as engine configs with a `config_version` that changes whenever anything the
engine sees changes (flow settings, either cluster's connection, the set of cluster aliases), so a
worker knows when its cached clients are stale. Writes: the latest status of each source partition
(`FlowPartitionStatus`, one row per flow partition, upserted), `FlowEvent` rows for errors and
data-loss gaps, and the runtime signals (`FlowSignals`: when heartbeats, checkpoints, offset syncs and
records were last emitted) the alert rules judge.

The partition rows' write (`partition_statuses_save`, `StatusWrites`) is in
`controlplane.status.partition_writes`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction

from controlplane.flows import engine, lifecycle, pools
from controlplane.flows.models import Cluster, Flow, FlowState
from controlplane.status.models import (
    FlowEvent,
    FlowEventKind,
    FlowPartitionStatus,
    FlowSignals,
    FlowTaskStatus,
    PartitionState,
)
from replication.config import ClusterConfig, FlowConfig, SchemaIdMode
from replication.metrics import GapEvent

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


def flow_recover_from_data_loss_stop(*, flow_id: int, at: datetime) -> None:
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
    no partition of it is stopped any more (`partition_writes.partition_statuses_save`).
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
        "acl_sync_unsupported",
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
