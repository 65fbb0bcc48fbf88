"""A flow's periodic tasks on real clusters: `MirrorHeartbeatTask` and `MirrorCheckpointTask`.

The runner (dedicated mode or a worker) calls `tick(now=time.time())` often; each task does its work
when its intervals say so and is cheap otherwise. `close()` releases the clients. An `on_emit(kind, at)` callback hears each acknowledged write
("heartbeat" or "checkpoint", epoch seconds): the workers record it for the heartbeat and checkpoint age
alerts and metrics.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from replication.checkpoint import MirrorCheckpointTask
from replication.config import ClusterConfig, FlowConfig, offset_syncs_cluster
from replication.formats import OffsetSync
from replication.heartbeat import MirrorHeartbeatTask
from replication.kafka.admin import ADMIN_TIMEOUT_S
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopic, InternalTopicReader, InternalTopicWriter
from replication.policy import ReplicationPolicy, replication_policy_for
from replication.schemas.flow import schema_sync_task


class PeriodicTask(Protocol):
    def tick(self, *, now: float) -> None:
        """Do the work that is due at wall-clock time `now` (epoch seconds)."""

    def close(self) -> None: ...


class KeyedRecord(Protocol):
    def key(self) -> bytes: ...

    def value(self) -> bytes: ...


EmitListener = Callable[[str, float], None]


class InternalTopicSink:
    """`HeartbeatSink` / `CheckpointSink` / `OffsetSyncEmitter`: MM2 records written to an internal topic,
    acks awaited (`emit`), or looked at later (`send`, then `delivered`: offset syncs, so that the task's
    fetch loop does not wait a round trip to the cluster at every persist).

    `timestamp_ms(record)` gives a record's timestamp where MM2 sets one (a heartbeat carries its own, as
    MM2's `MirrorHeartbeatTask` writes it); otherwise the producer's clock stamps it."""

    def __init__(
        self,
        writer: InternalTopicWriter,
        *,
        kind: str = "",
        on_emit: EmitListener | None = None,
        timestamp_ms: Callable[[Any], int] | None = None,
    ) -> None:
        self._writer, self._kind, self._on_emit = writer, kind, on_emit
        self._timestamp_ms = timestamp_ms

    def emit(self, records: Sequence[KeyedRecord]) -> None:
        timestamps = None if self._timestamp_ms is None else [self._timestamp_ms(r) for r in records]
        self._writer.write([(record.key(), record.value()) for record in records], timestamps_ms=timestamps)
        if self._on_emit is not None and records:
            self._on_emit(self._kind, time.time())

    def send(self, records: Sequence[KeyedRecord]) -> None:
        """As `emit`, without waiting for the acknowledgement (`delivered`); no emit listener."""
        self._writer.send([(record.key(), record.value()) for record in records])

    def delivered(self, *, timeout_s: float) -> bool:
        return self._writer.delivered(timeout_s=timeout_s)

    def prepare(self) -> None:
        self._writer.prepare()

    def close(self) -> None:
        self._writer.close()


def reverse_flow(flow: FlowConfig) -> FlowConfig:
    """The flow target->source as `flow`'s checkpoint task assumes it is configured when it is not known
    (the workers run one flow at a time): `flow`'s settings with the aliases swapped."""
    return flow.replace(source=flow.target, target=flow.source)


def checkpoint_task_for_flow(
    *,
    flow: FlowConfig,
    source: ClusterConfig,
    target: ClusterConfig,
    policy: ReplicationPolicy,
    reverse: FlowConfig | None = None,
    timeout_s: float = ADMIN_TIMEOUT_S,
    on_emit: EmitListener | None = None,
) -> MirrorCheckpointTask:
    """`reverse`: the flow target->source, whose offset syncs translate the offsets of topics that came
    from the target (`reverse_flow(flow)` when not given)."""
    syncs_cluster = offset_syncs_cluster(flow, source=source, target=target)
    reverse = reverse if reverse is not None else reverse_flow(flow)
    return MirrorCheckpointTask(
        flow=flow,
        policy=policy,
        source_groups=GroupOffsetsAdmin(source, timeout_s=timeout_s),
        target_groups=GroupOffsetsAdmin(target, timeout_s=timeout_s),
        offset_syncs=InternalTopicReader(
            syncs_cluster,
            policy.flow_offset_syncs_topic(flow),
            decode=OffsetSync.decode,
            timeout_s=timeout_s,
        ),
        reverse_offset_syncs=InternalTopicReader(
            offset_syncs_cluster(reverse, source=target, target=source),
            replication_policy_for(reverse, known_aliases=policy.known_aliases).flow_offset_syncs_topic(
                reverse
            ),
            decode=OffsetSync.decode,
            timeout_s=timeout_s,
        ),
        checkpoint_sink=InternalTopicSink(
            InternalTopicWriter.of(
                checkpoints_internal_topic(flow, target=target, policy=policy), timeout_s=timeout_s
            ),
            kind="checkpoint",
            on_emit=on_emit,
        ),
    )


def heartbeats_internal_topic(
    flow: FlowConfig, *, target: ClusterConfig, policy: ReplicationPolicy
) -> InternalTopic:
    """The heartbeats topic the flow's heartbeat task writes on the target (MM2's `heartbeats`)."""
    return InternalTopic(
        target, policy.heartbeats_topic(), replication_factor=flow.heartbeats_topic_replication_factor
    )


def checkpoints_internal_topic(
    flow: FlowConfig, *, target: ClusterConfig, policy: ReplicationPolicy
) -> InternalTopic:
    """The checkpoints topic the flow's checkpoint task writes on the target (`<source>.checkpoints.internal`)."""
    return InternalTopic(
        target,
        policy.checkpoints_topic(flow.source),
        replication_factor=flow.checkpoints_topic_replication_factor,
    )


def periodic_internal_topics(
    flow: FlowConfig, *, target: ClusterConfig, policy: ReplicationPolicy
) -> tuple[InternalTopic, ...]:
    """The internal topics the flow's enabled periodic tasks write: created with the task's before the
    flow's first remote topic (`replication.kafka.source_io.task_internal_topics` says why). Created behind
    10,000 new remote partitions, a heartbeats write timed out for two minutes."""
    topics = []
    if flow.emit_heartbeats_enabled:
        topics.append(heartbeats_internal_topic(flow, target=target, policy=policy))
    if flow.emit_checkpoints_enabled:
        topics.append(checkpoints_internal_topic(flow, target=target, policy=policy))
    return tuple(topics)


def heartbeat_task_for_flow(
    *,
    flow: FlowConfig,
    target: ClusterConfig,
    policy: ReplicationPolicy,
    timeout_s: float = ADMIN_TIMEOUT_S,
    on_emit: EmitListener | None = None,
) -> MirrorHeartbeatTask:
    writer = InternalTopicWriter.of(
        heartbeats_internal_topic(flow, target=target, policy=policy), timeout_s=timeout_s
    )
    sink = InternalTopicSink(
        writer, kind="heartbeat", on_emit=on_emit, timestamp_ms=lambda heartbeat: heartbeat.timestamp_ms
    )
    return MirrorHeartbeatTask(flow=flow, sink=sink)


def periodic_tasks_for_flow(
    *,
    flow: FlowConfig,
    source: ClusterConfig,
    target: ClusterConfig,
    known_aliases: Sequence[str],
    reverse: FlowConfig | None = None,
    timeout_s: float = ADMIN_TIMEOUT_S,
    on_emit: EmitListener | None = None,
) -> list[PeriodicTask]:
    """The enabled periodic tasks of `flow` (heartbeats, checkpoints and group sync, the schema sync);
    `timeout_s` bounds each of their requests to a cluster; `reverse` is the flow target->source when
    known (see `checkpoint_task_for_flow`)."""
    policy = replication_policy_for(flow, known_aliases=known_aliases)
    tasks: list[PeriodicTask] = []
    if flow.emit_heartbeats_enabled:
        tasks.append(
            heartbeat_task_for_flow(
                flow=flow, target=target, policy=policy, timeout_s=timeout_s, on_emit=on_emit
            )
        )
    if flow.emit_checkpoints_enabled or flow.sync_group_offsets_enabled:
        tasks.append(
            checkpoint_task_for_flow(
                flow=flow,
                source=source,
                target=target,
                policy=policy,
                reverse=reverse,
                timeout_s=timeout_s,
                on_emit=on_emit,
            )
        )
    schemas = schema_sync_task(flow=flow, source=source, target=target, policy=policy)
    if schemas is not None:
        tasks.append(schemas)
    return tasks
