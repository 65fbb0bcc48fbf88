"""`MirrorCheckpointTask`: consumer-group checkpoints and group offset sync, MM2 semantics, exact offsets.

Every `emit.checkpoints.interval.seconds` it reads the committed offsets of the source groups matching
`groups` / `groups.exclude` (listed every `refresh.groups.interval.seconds`), keeps the partitions of
topics the flow replicates, translates each offset exactly with the `OffsetSyncStore`, and writes MM2
checkpoints (group, REMOTE topic, partition, upstream offset, downstream offset, metadata) to
`<source>.checkpoints.internal` on the target. With `sync.group.offsets.enabled` it also commits the
translated offsets on the target, every `sync.group.offsets.interval.seconds`, for groups that are empty
or absent there, and never moves a committed offset backwards. Unlike MM2, a group skipped because it is
active on the target is logged and counted, not silently ignored.

Topics that came from the target (`B.orders` on A, for flow A->B) are checkpointed under their name on
the target (`orders`), as MM2's `renameTopicPartition` does, instead of being dropped as cycles. MM2
translates them with the flow's own offset syncs, which never cover them (the flow does not replicate
cycles), so MM2 emits none in practice; here they are translated back with the reverse flow's syncs
(B->A, `OffsetSyncStore.translate_upstream`), exact as forward translation, so a group that failed over
to A gets its position on B's `orders` for failback. Without the reverse flow's syncs they are counted
as untranslatable.

Committed offsets are read before the offset syncs, so the syncs cover at least as much of the mirror
as existed when the group committed (what translation can prove: `replication.offset_sync_store`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from replication.config import FlowConfig
from replication.connector import TopicSelection
from replication.filters import GroupFilter, TopicFilter
from replication.formats import Checkpoint, OffsetSync
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import ReplicationPolicy, classify_topic
from replication.scheduler import PeriodicJob, Scheduler

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]

REFRESH_GROUPS = "refresh-groups"
EMIT_CHECKPOINTS = "emit-checkpoints"
SYNC_GROUP_OFFSETS = "sync-group-offsets"

ABSENT = "ABSENT"
# Kafka's consumer group states in which nobody consumes, so offsets can be written (DEAD: deleted).
SYNCABLE_TARGET_GROUP_STATES = frozenset({ABSENT, "EMPTY", "DEAD"})


@dataclass(frozen=True)
class CommittedOffset:
    offset: int
    metadata: str = ""


class SourceGroups(Protocol):
    def list_groups(self) -> list[str]: ...

    def committed_offsets(self, group: str) -> dict[TopicPartition, CommittedOffset]: ...


class TargetGroups(Protocol):
    def group_state(self, group: str) -> str:
        """Kafka's state name (EMPTY, STABLE, ...) or ABSENT when the target does not know the group."""

    def committed_offsets(self, group: str) -> dict[TopicPartition, CommittedOffset]: ...

    def alter_offsets(self, group: str, offsets: Mapping[TopicPartition, int]) -> dict[TopicPartition, str]:
        """Commit `offsets` for `group`; returns the partitions the broker refused, with its reason."""


class OffsetSyncFeed(Protocol):
    def read_new(self) -> list[OffsetSync]:
        """Offset syncs written since the last call (from the topic's beginning on the first call)."""

    def close(self) -> None: ...


class CheckpointSink(Protocol):
    def emit(self, checkpoints: Sequence[Checkpoint]) -> None:
        """Write the checkpoints and wait for the target's acknowledgement (raise on failure)."""

    def close(self) -> None: ...


# -- pure decisions ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class CheckpointTopic:
    """The name a source topic's checkpoints carry on the target; `from_target` when the source topic is
    a replica of that topic (translated back with the reverse flow's offset syncs)."""

    name: str
    from_target: bool = False


def checkpoint_topic(
    *, topic: str, flow: FlowConfig, policy: ReplicationPolicy, topic_filter: TopicFilter
) -> CheckpointTopic | None:
    """Where a group's offsets on source topic `topic` are checkpointed, or None when they are not.

    MM2's `renameTopicPartition`: a topic whose source is the target (`B.orders` for A->B) is checkpointed
    under its upstream name (`orders`); any other topic under its remote name, when the flow replicates it.
    MM2 uses the original name (the first hop's); the upstream one is the name on the target, which differs
    only for a topic that came to the target from a third cluster (`B.C.orders` is `C.orders` on B).
    """
    if policy.topic_source(topic) == flow.target:
        upstream = policy.upstream_topic(topic)
        excluded = policy.is_internal_topic(topic) or topic_filter.exclusion_reason(topic) is not None
        if upstream is None or upstream == topic or excluded:
            return None
        return CheckpointTopic(upstream, from_target=True)
    decision = classify_topic(topic=topic, flow=flow, policy=policy, topic_filter=topic_filter)
    return CheckpointTopic(decision.remote_topic) if decision.replicate and decision.remote_topic else None


@dataclass(frozen=True)
class GroupTranslation:
    group: str
    checkpoints: tuple[Checkpoint, ...]
    untranslatable: tuple[TopicPartition, ...]  # source partitions below the oldest known offset sync


def checkpoints_for_group(
    *,
    group: str,
    committed: Mapping[TopicPartition, CommittedOffset],
    remote_topics: Mapping[str, str],
    store: OffsetSyncStore,
    from_target_topics: Mapping[str, str] | None = None,
    reverse_store: OffsetSyncStore | None = None,
) -> GroupTranslation:
    """The group's checkpoints for the source topics in `remote_topics` (source topic -> remote topic),
    translated with `store`, and for those in `from_target_topics` (a replica of a target topic -> that
    topic), translated back with `reverse_store`, the reverse flow's syncs (untranslatable without)."""
    from_target_topics = from_target_topics or {}
    checkpoints: list[Checkpoint] = []
    untranslatable: list[TopicPartition] = []
    for (topic, partition), position in sorted(committed.items()):
        if position.offset < 0:
            continue
        if topic in remote_topics:
            target_topic = remote_topics[topic]
            downstream = store.translate_downstream(topic, partition, position.offset)
        elif topic in from_target_topics:
            target_topic = from_target_topics[topic]
            downstream = (
                None
                if reverse_store is None
                else reverse_store.translate_upstream(target_topic, partition, position.offset)
            )
        else:
            continue
        if downstream is None:
            untranslatable.append((topic, partition))
            continue
        checkpoints.append(
            Checkpoint(group, target_topic, partition, position.offset, downstream, position.metadata)
        )
    return GroupTranslation(group, tuple(checkpoints), tuple(untranslatable))


def may_sync_group_offsets(target_state: str) -> bool:
    """Offsets are written only where no consumer of the group runs on the target (MM2's rule)."""
    return target_state in SYNCABLE_TARGET_GROUP_STATES


def offsets_to_sync(
    *, checkpoints: Iterable[Checkpoint], target_committed: Mapping[TopicPartition, CommittedOffset]
) -> dict[TopicPartition, int]:
    """Translated offsets that move the target group forward; an offset is never moved backwards."""
    offsets: dict[TopicPartition, int] = {}
    for checkpoint in checkpoints:
        key = (checkpoint.topic, checkpoint.partition)
        current = target_committed.get(key)
        if current is None or current.offset < checkpoint.downstream_offset:
            offsets[key] = checkpoint.downstream_offset
    return offsets


# -- the task ----------------------------------------------------------------------------------------------
@dataclass
class GroupCheckpointMetrics:
    """Per consumer group; `checkpoint_latency_ms` is from reading the source offsets to the target's ack."""

    checkpoints_emitted: int = 0
    checkpoint_latency_ms: float | None = None
    untranslatable_partitions: int = 0
    offsets_synced: int = 0
    sync_skipped_active: int = 0
    sync_failed_partitions: int = 0
    last_skip_reason: str | None = None


@dataclass
class _Translations:
    read_at: float
    groups: dict[str, GroupTranslation] = field(default_factory=dict)


class MirrorCheckpointTask:
    def __init__(
        self,
        *,
        flow: FlowConfig,
        policy: ReplicationPolicy,
        source_groups: SourceGroups,
        target_groups: TargetGroups,
        offset_syncs: OffsetSyncFeed,
        checkpoint_sink: CheckpointSink,
        reverse_offset_syncs: OffsetSyncFeed | None = None,
        store: OffsetSyncStore | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`reverse_offset_syncs`: the offset syncs of the reverse flow (target->source), which translate
        the offsets of topics that came from the target (see the module docstring)."""
        self.flow = flow
        self.policy = policy
        self.store = store if store is not None else OffsetSyncStore()
        self.reverse_store = OffsetSyncStore()
        self._reverse_offset_syncs = reverse_offset_syncs
        self._topics = TopicSelection.of(flow, policy)
        self._group_filter = GroupFilter.for_flow(flow)
        self._source_groups = source_groups
        self._target_groups = target_groups
        self._offset_syncs = offset_syncs
        self._checkpoint_sink = checkpoint_sink
        self._clock = clock
        self._scheduler = Scheduler(
            [
                PeriodicJob(
                    REFRESH_GROUPS, flow.refresh_groups_interval_seconds, flow.refresh_groups_enabled
                ),
                PeriodicJob(
                    EMIT_CHECKPOINTS, flow.emit_checkpoints_interval_seconds, flow.emit_checkpoints_enabled
                ),
                PeriodicJob(
                    SYNC_GROUP_OFFSETS,
                    flow.sync_group_offsets_interval_seconds,
                    flow.sync_group_offsets_enabled,
                ),
            ]
        )
        self._groups: tuple[str, ...] | None = None
        self._checkpoint_topics: dict[str, CheckpointTopic | None] = {}
        self._emitted: dict[tuple[str, str, int], Checkpoint] = {}
        self._metrics: dict[str, GroupCheckpointMetrics] = {}

    # The scheduler decides; each step below is also callable on its own (tests, failover tooling).
    def tick(self, *, now: float) -> None:
        due = set(self._scheduler.due(now=now))
        if REFRESH_GROUPS in due or self._groups is None:
            self.refresh_groups()
        if not due & {EMIT_CHECKPOINTS, SYNC_GROUP_OFFSETS}:
            return
        translations = self.translate_groups()
        if EMIT_CHECKPOINTS in due:
            self.emit_checkpoints(translations)
        if SYNC_GROUP_OFFSETS in due:
            self.sync_group_offsets(translations)

    def refresh_groups(self) -> tuple[str, ...]:
        """The source groups `groups` / `groups.exclude` select (MM2 lists them at start, then each
        `refresh.groups.interval.seconds`)."""
        listed = self._source_groups.list_groups()
        self._groups = tuple(sorted(g for g in listed if self._group_filter.should_replicate_group(g)))
        return self._groups

    def _checkpoint_topic(self, topic: str) -> CheckpointTopic | None:
        if topic not in self._checkpoint_topics:
            self._checkpoint_topics[topic] = checkpoint_topic(
                topic=topic, flow=self.flow, policy=self.policy, topic_filter=self._topics.topic_filter
            )
        return self._checkpoint_topics[topic]

    def translate_groups(self) -> _Translations:
        """Every selected group's committed offsets, translated (reads in the order the docstring says)."""
        groups = self._groups if self._groups is not None else self.refresh_groups()
        read_at = self._clock()
        committed = {group: self._source_groups.committed_offsets(group) for group in groups}
        checkpoint_topics = {
            topic: target_topic
            for offsets in committed.values()
            for topic, _ in offsets
            if (target_topic := self._checkpoint_topic(topic)) is not None
        }
        remote_topics = {t: c.name for t, c in checkpoint_topics.items() if not c.from_target}
        from_target_topics = {t: c.name for t, c in checkpoint_topics.items() if c.from_target}
        self.store.update_all(self._offset_syncs.read_new())
        if self._reverse_offset_syncs is not None:
            self.reverse_store.update_all(self._reverse_offset_syncs.read_new())
        translations = _Translations(read_at=read_at)
        for group, offsets in committed.items():
            translation = checkpoints_for_group(
                group=group,
                committed=offsets,
                remote_topics=remote_topics,
                store=self.store,
                from_target_topics=from_target_topics,
                reverse_store=self.reverse_store,
            )
            if translation.checkpoints or translation.untranslatable:
                translations.groups[group] = translation
                self._group_metrics(group).untranslatable_partitions = len(translation.untranslatable)
            if translation.untranslatable:
                log.info(
                    "flow %s: group %s: no offset sync covers the offsets of %s (older than the oldest "
                    "sync, or, for a topic from %s, the reverse flow wrote none); no checkpoint",
                    self.flow.name,
                    group,
                    ", ".join(f"{topic}-{partition}" for topic, partition in translation.untranslatable),
                    self.flow.target,
                )
        return translations

    def emit_checkpoints(self, translations: _Translations) -> list[Checkpoint]:
        """Write the checkpoints that changed since last emitted (all of them after a restart)."""
        changed = [
            checkpoint
            for translation in translations.groups.values()
            for checkpoint in translation.checkpoints
            if self._emitted.get(_checkpoint_key(checkpoint)) != checkpoint
        ]
        if changed:
            self._checkpoint_sink.emit(changed)
        acked_at = self._clock()
        for checkpoint in changed:
            self._emitted[_checkpoint_key(checkpoint)] = checkpoint
            metrics = self._group_metrics(checkpoint.group)
            metrics.checkpoints_emitted += 1
            metrics.checkpoint_latency_ms = (acked_at - translations.read_at) * 1000
        return changed

    def sync_group_offsets(self, translations: _Translations) -> dict[str, dict[TopicPartition, int]]:
        """Commit translated offsets on the target for groups empty or absent there; never backwards."""
        written: dict[str, dict[TopicPartition, int]] = {}
        for group, translation in sorted(translations.groups.items()):
            if not translation.checkpoints:
                continue
            metrics = self._group_metrics(group)
            state = self._target_groups.group_state(group)
            if not may_sync_group_offsets(state):
                metrics.sync_skipped_active += 1
                metrics.last_skip_reason = f"group is {state} on {self.flow.target}"
                log.warning(
                    "flow %s: not syncing offsets of group %s: it is %s on %s (offsets are only written "
                    "for groups with no active consumer on the target)",
                    self.flow.name,
                    group,
                    state,
                    self.flow.target,
                )
                continue
            offsets = offsets_to_sync(
                checkpoints=translation.checkpoints,
                target_committed=self._target_groups.committed_offsets(group),
            )
            if not offsets:
                continue
            refused = self._target_groups.alter_offsets(group, offsets)
            for (topic, partition), reason in sorted(refused.items()):
                log.warning(
                    "flow %s: group %s: %s refused offset %d for %s-%d: %s",
                    self.flow.name,
                    group,
                    self.flow.target,
                    offsets[(topic, partition)],
                    topic,
                    partition,
                    reason,
                )
                metrics.last_skip_reason = reason
            metrics.sync_failed_partitions += len(refused)
            accepted = {key: offset for key, offset in offsets.items() if key not in refused}
            metrics.offsets_synced += len(accepted)
            if accepted:
                written[group] = accepted
        return written

    def metrics(self) -> dict[str, GroupCheckpointMetrics]:
        """A snapshot per consumer group (copies: safe to keep)."""
        return {group: GroupCheckpointMetrics(**vars(m)) for group, m in sorted(self._metrics.items())}

    def _group_metrics(self, group: str) -> GroupCheckpointMetrics:
        return self._metrics.setdefault(group, GroupCheckpointMetrics())

    def close(self) -> None:
        self._offset_syncs.close()
        if self._reverse_offset_syncs is not None:
            self._reverse_offset_syncs.close()
        self._checkpoint_sink.close()


def _checkpoint_key(checkpoint: Checkpoint) -> tuple[str, str, int]:
    return (checkpoint.group, checkpoint.topic, checkpoint.partition)
