"""Failover and failback decisions, pure: the plan, the checklist, the drain, the offsets to write.

An on-call engineer fails a flow `A->B` over when cluster A is lost (or must be left): consumers move to
B and resume exactly where they stopped on A. Everything here is a function of observations made by
`replication.kafka.failover_io` (time passed in), so every rule is tested without a broker.

Observed per source partition of the flow:

* the source end offset, sampled twice a moment apart (records still arriving means producers still
  write to A: what they write after the failover stays behind);
* the replicated position: one past the upstream offset of the newest offset sync. Syncs follow the
  target's acknowledgements, so every record before it is on B and translates exactly
  (`replication.offset_sync_store`);
* the first record at or after the replicated position (read the way the mirror reads, so transaction
  markers and aborted records are not counted as records to copy): the records at risk start there and
  its timestamp says how far behind the mirror is;
* when A does not answer, none of this is known: the last checkpoints on B give the groups' offsets and
  the last status the control plane stored gives the records at risk it knew of.

A group's committed offset on A translates to B with the offset syncs (exact); without A, its newest
checkpoint is used. Offsets are written only for groups with no active member on B, never backwards
(a group that already consumed on B keeps its position), so running a failover twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum

from replication import metrics
from replication.checkpoint import CommittedOffset, checkpoints_for_group, may_sync_group_offsets
from replication.formats import Checkpoint
from replication.offset_sync_store import OffsetSyncStore
from replication.topic_partition import partition_label

TopicPartition = tuple[str, int]


class CheckStatus(StrEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"


class Check(StrEnum):
    """The runbook's checks, in the order an on-call engineer reads them."""

    SOURCE_REACHABLE = "source_reachable"
    LAG_ZERO = "lag_zero"
    GROUPS_INACTIVE_ON_TARGET = "groups_inactive_on_target"
    PRODUCERS_STOPPED = "producers_stopped"
    TARGET_HEALTHY = "target_healthy"


class OffsetOrigin(StrEnum):
    COMMITTED = "committed"  # read from the source cluster now
    CHECKPOINT = "checkpoint"  # the newest checkpoint on the target (the source did not answer)


@dataclass(frozen=True)
class CheckItem:
    check: Check
    status: CheckStatus
    explanation: str


@dataclass(frozen=True)
class UnreplicatedRecord:
    """The first record of a source partition not yet proven replicated."""

    offset: int
    timestamp_ms: int | None


@dataclass(frozen=True)
class PartitionObservation:
    """What was read about one source partition (None: not known, e.g. the source did not answer)."""

    topic: str
    partition: int
    remote_topic: str
    source_end: int | None = None
    source_end_later: int | None = None
    replicated_offset: int | None = None
    first_unreplicated: UnreplicatedRecord | None = None
    target_end: int | None = None
    last_known_lag: int | None = None  # source unreachable: the lag the control plane last stored

    @property
    def key(self) -> TopicPartition:
        return (self.topic, self.partition)


@dataclass(frozen=True)
class PartitionPlan:
    topic: str
    partition: int
    remote_topic: str
    source_end: int | None
    replicated_offset: int | None
    target_end: int | None
    records_at_risk: int | None  # records on the source not yet on the target (None: unknown)
    seconds_behind: float | None
    records_arriving: int | None  # records appended between the two samples of the source end


@dataclass(frozen=True)
class LastKnownLag:
    """`records_behind` per source partition as the workers last measured it, and how old that is: all
    the plan knows of the lag when the source does not answer (the live status's staleness rule)."""

    records_behind: Mapping[TopicPartition, int]
    age_s: float | None  # of the oldest measurement used; None when none was ever made
    stale: bool

    def note(self) -> str:
        if self.age_s is None:
            return "no worker has measured this flow's lag: the records at risk are unknown"
        note = f"records at risk are the workers' last measurement, {self.age_s:.0f} s old"
        if self.stale:
            note += "; STALE: no worker has reported since, so records produced meanwhile are not counted"
        return note


def records_at_risk(observation: PartitionObservation) -> int | None:
    """Offsets from the first unreplicated record to the source end (markers inside count: an upper
    bound); the last known lag when the source does not answer."""
    if observation.source_end is None:
        return observation.last_known_lag
    record = observation.first_unreplicated
    if record is None:
        return 0
    # The end a broker lists can lag the records it serves (the embedded one does): at least this one.
    return max(observation.source_end, record.offset + 1) - record.offset


def seconds_behind(observation: PartitionObservation, *, now: float) -> float | None:
    """`seconds_behind` (docs/lag.md), exact: the age of the first unreplicated record, read from the source."""
    if observation.source_end is None:
        return None
    record = observation.first_unreplicated
    return metrics.seconds_behind(
        records_behind=records_at_risk(observation) or 0,
        now=now,
        oldest_unreplicated_timestamp_ms=None if record is None else record.timestamp_ms,
    )


def partition_plan(observation: PartitionObservation, *, now: float) -> PartitionPlan:
    arriving = None
    if observation.source_end is not None and observation.source_end_later is not None:
        arriving = max(observation.source_end_later - observation.source_end, 0)
    return PartitionPlan(
        topic=observation.topic,
        partition=observation.partition,
        remote_topic=observation.remote_topic,
        source_end=observation.source_end,
        replicated_offset=observation.replicated_offset,
        target_end=observation.target_end,
        records_at_risk=records_at_risk(observation),
        seconds_behind=seconds_behind(observation, now=now),
        records_arriving=arriving,
    )


# -- groups -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class GroupPartitionPlan:
    topic: str
    partition: int
    remote_topic: str
    source_offset: int | None  # committed on the source, or the checkpoint's upstream offset
    origin: OffsetOrigin
    translated_offset: int | None  # where the group resumes on the target (None: cannot be proven)
    target_offset: int | None  # committed on the target now
    write: bool  # the failover writes translated_offset
    note: str = ""


@dataclass(frozen=True)
class GroupPlan:
    group: str
    target_state: str
    active_on_target: bool
    partitions: tuple[GroupPartitionPlan, ...]

    def offsets_to_write(self) -> dict[TopicPartition, int]:
        """(remote topic, partition) -> translated offset, for the partitions the failover writes."""
        return {
            (row.remote_topic, row.partition): row.translated_offset
            for row in self.partitions
            if row.write and row.translated_offset is not None
        }

    @property
    def untranslatable(self) -> tuple[TopicPartition, ...]:
        return tuple((row.topic, row.partition) for row in self.partitions if row.translated_offset is None)


def _write_decision(*, translated: int | None, target: int | None, active: bool) -> tuple[bool, str]:
    if translated is None:
        return False, "older than the oldest offset sync: no exact translation exists; not written"
    if active:
        return False, "group is active on the target: not written"
    if target is not None and target >= translated:
        if target == translated:
            return False, "already at the translated offset"
        return False, f"target offset {target} is ahead (the group consumed there already): kept"
    return True, ""


def _partition_plan(
    where: tuple[str, int, str],
    *,
    source_offset: int,
    origin: OffsetOrigin,
    translated: int | None,
    target_committed: Mapping[TopicPartition, CommittedOffset],
    active: bool,
    fallback_note: str = "",
) -> GroupPartitionPlan:
    """One plan row for (source topic, partition, remote topic): what to write and why (or why not)."""
    topic, partition, remote_topic = where
    current = target_committed.get((remote_topic, partition))
    target_offset = None if current is None else current.offset
    write, note = _write_decision(translated=translated, target=target_offset, active=active)
    return GroupPartitionPlan(
        topic=topic,
        partition=partition,
        remote_topic=remote_topic,
        source_offset=source_offset,
        origin=origin,
        translated_offset=translated,
        target_offset=target_offset,
        write=write,
        note=note or fallback_note,
    )


def group_plan_from_source(
    *,
    group: str,
    committed: Mapping[TopicPartition, CommittedOffset],
    remote_topics: Mapping[str, str],
    store: OffsetSyncStore,
    target_state: str,
    target_committed: Mapping[TopicPartition, CommittedOffset],
) -> GroupPlan:
    """The group's offsets committed on the source, translated exactly with the offset syncs."""
    translation = checkpoints_for_group(
        group=group, committed=committed, remote_topics=remote_topics, store=store
    )
    translated = {(cp.topic, cp.partition): cp.downstream_offset for cp in translation.checkpoints}
    active = not may_sync_group_offsets(target_state)
    rows = []
    for (topic, partition), position in sorted(committed.items()):
        remote_topic = remote_topics.get(topic)
        if remote_topic is None or position.offset < 0:
            continue
        rows.append(
            _partition_plan(
                (topic, partition, remote_topic),
                source_offset=position.offset,
                origin=OffsetOrigin.COMMITTED,
                translated=translated.get((remote_topic, partition)),
                target_committed=target_committed,
                active=active,
            )
        )
    return GroupPlan(group, target_state, active, tuple(rows))


def group_plan_from_checkpoints(
    *,
    group: str,
    checkpoints: Mapping[TopicPartition, Checkpoint],
    source_topics: Mapping[str, str],
    store: OffsetSyncStore | None,
    target_state: str,
    target_committed: Mapping[TopicPartition, CommittedOffset],
) -> GroupPlan:
    """The source does not answer: the group resumes at its newest checkpoint (`source_topics` maps
    remote topic -> source topic). Offset syncs, when still readable (offset-syncs.topic.location =
    target), translate the checkpoint's upstream offset again with every sync known now."""
    active = not may_sync_group_offsets(target_state)
    rows = []
    for (remote_topic, partition), checkpoint in sorted(checkpoints.items()):
        topic = source_topics.get(remote_topic)
        if topic is None:
            continue
        downstream = checkpoint.downstream_offset
        if store is not None:
            retranslated = store.translate_downstream(topic, partition, checkpoint.upstream_offset)
            downstream = downstream if retranslated is None else max(downstream, retranslated)
        rows.append(
            _partition_plan(
                (topic, partition, remote_topic),
                source_offset=checkpoint.upstream_offset,
                origin=OffsetOrigin.CHECKPOINT,
                translated=downstream,
                target_committed=target_committed,
                active=active,
                fallback_note="from the newest checkpoint: records the group consumed after it are read again",
            )
        )
    return GroupPlan(group, target_state, active, tuple(rows))


# -- checklist --------------------------------------------------------------------------------------------
def _sum_known(values: Iterable[int | None]) -> tuple[int, bool]:
    """(sum of the known values, whether some were unknown)."""
    total, unknown = 0, False
    for value in values:
        if value is None:
            unknown = True
        else:
            total += value
    return total, unknown


def _partition_names(partitions: Iterable[PartitionPlan], *, limit: int = 5) -> str:
    names = [partition_label(p.topic, p.partition) for p in partitions]
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return ", ".join(names[:limit]) + more


def check_source_reachable(*, reachable: bool, detail: str) -> CheckItem:
    if reachable:
        return CheckItem(Check.SOURCE_REACHABLE, CheckStatus.PASS, f"the source answers ({detail})")
    return CheckItem(
        Check.SOURCE_REACHABLE,
        CheckStatus.WARN,
        f"the source does not answer ({detail}): the groups resume at their newest checkpoints on the "
        "target and records not replicated before the outage stay on the source",
    )


def check_lag_zero(*, source_reachable: bool, partitions: Sequence[PartitionPlan]) -> CheckItem:
    at_risk, unknown = _sum_known(p.records_at_risk for p in partitions)
    behind = [p for p in partitions if p.records_at_risk]
    if not source_reachable:
        known = f"{at_risk} record(s) were not replicated when last seen" if at_risk else "none known"
        return CheckItem(
            Check.LAG_ZERO,
            CheckStatus.FAIL,
            "cannot prove that every record reached the target while the source does not answer "
            f"({known}; records produced since are unknown). Failing over anyway accepts losing them.",
        )
    if unknown:
        return CheckItem(
            Check.LAG_ZERO, CheckStatus.FAIL, "the replicated position of some partitions is unknown"
        )
    if not behind:
        return CheckItem(Check.LAG_ZERO, CheckStatus.PASS, "every record on the source is on the target")
    oldest = max((p.seconds_behind or 0.0 for p in behind), default=0.0)
    return CheckItem(
        Check.LAG_ZERO,
        CheckStatus.WARN,
        f"{at_risk} record(s) on {len(behind)} partition(s) not replicated yet, up to {oldest:.1f}s behind "
        f"({_partition_names(behind)}); the failover keeps replicating until they are on the target, "
        "then pauses the flow",
    )


def check_groups_inactive(*, groups: Sequence[GroupPlan], target: str) -> CheckItem:
    if not groups:
        return CheckItem(
            Check.GROUPS_INACTIVE_ON_TARGET, CheckStatus.WARN, "no consumer group chosen: no offsets to move"
        )
    active = [g for g in groups if g.active_on_target]
    if active:
        names = ", ".join(f"{g.group} ({g.target_state})" for g in active)
        return CheckItem(
            Check.GROUPS_INACTIVE_ON_TARGET,
            CheckStatus.FAIL,
            f"active on {target}: {names}. Offsets are only written for groups with no running consumer: "
            "stop their consumers on the target first (these groups are refused, even with force)",
        )
    return CheckItem(
        Check.GROUPS_INACTIVE_ON_TARGET,
        CheckStatus.PASS,
        f"no chosen group has a running consumer on {target}",
    )


def check_producers_stopped(
    *, source_reachable: bool, partitions: Sequence[PartitionPlan], window_s: float
) -> CheckItem:
    if not source_reachable:
        return CheckItem(
            Check.PRODUCERS_STOPPED,
            CheckStatus.WARN,
            "cannot be checked while the source does not answer; make sure producers are moved to the target",
        )
    arriving = [p for p in partitions if p.records_arriving]
    if arriving:
        count = sum(p.records_arriving or 0 for p in arriving)
        return CheckItem(
            Check.PRODUCERS_STOPPED,
            CheckStatus.FAIL,
            f"{count} record(s) arrived on {len(arriving)} partition(s) within {window_s:.1f}s "
            f"({_partition_names(arriving)}): producers still write to the source. Stop them first: what "
            "they write after the failover is not replicated",
        )
    return CheckItem(
        Check.PRODUCERS_STOPPED,
        CheckStatus.PASS,
        f"no record arrived on the source within {window_s:.1f}s",
    )


def check_target_healthy(*, reachable: bool, detail: str, missing_remote_topics: Sequence[str]) -> CheckItem:
    if not reachable:
        return CheckItem(
            Check.TARGET_HEALTHY, CheckStatus.FAIL, f"the target does not answer ({detail}): nothing can move"
        )
    if missing_remote_topics:
        names = ", ".join(sorted(missing_remote_topics)[:5])
        return CheckItem(
            Check.TARGET_HEALTHY,
            CheckStatus.FAIL,
            f"remote topic(s) missing on the target: {names}; consumers would have nothing to read",
        )
    return CheckItem(Check.TARGET_HEALTHY, CheckStatus.PASS, f"the target answers ({detail})")


# -- the plan ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class FailoverPlan:
    flow: str
    built_at: float  # epoch seconds
    source_reachable: bool
    heartbeat_age_s: float | None
    partitions: tuple[PartitionPlan, ...]
    groups: tuple[GroupPlan, ...]
    checklist: tuple[CheckItem, ...]
    records_at_risk: int | None
    seconds_behind: float | None
    build_seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())

    @property
    def failed_checks(self) -> tuple[CheckItem, ...]:
        return tuple(item for item in self.checklist if item.status == CheckStatus.FAIL)

    def check(self, check: Check) -> CheckItem:
        return next(item for item in self.checklist if item.check == check)

    def to_dict(self) -> dict:
        return asdict(self)


def build_plan(
    *,
    flow: str,
    target_alias: str,
    now: float,
    source_reachable: bool,
    source_detail: str,
    target_reachable: bool,
    target_detail: str,
    observations: Sequence[PartitionObservation],
    groups: Sequence[GroupPlan],
    missing_remote_topics: Sequence[str],
    arrival_window_s: float,
    heartbeat_ms: int | None,
    build_seconds: float = 0.0,
    notes: Sequence[str] = (),
) -> FailoverPlan:
    partitions = tuple(partition_plan(o, now=now) for o in sorted(observations, key=lambda o: o.key))
    at_risk, unknown = _sum_known(p.records_at_risk for p in partitions)
    behind = [seconds for p in partitions if (seconds := p.seconds_behind) is not None]
    checklist = (
        check_source_reachable(reachable=source_reachable, detail=source_detail),
        check_lag_zero(source_reachable=source_reachable, partitions=partitions),
        check_groups_inactive(groups=groups, target=target_alias),
        check_producers_stopped(
            source_reachable=source_reachable, partitions=partitions, window_s=arrival_window_s
        ),
        check_target_healthy(
            reachable=target_reachable, detail=target_detail, missing_remote_topics=missing_remote_topics
        ),
    )
    return FailoverPlan(
        flow=flow,
        built_at=now,
        source_reachable=source_reachable,
        heartbeat_age_s=None if heartbeat_ms is None else max(now - heartbeat_ms / 1000, 0.0),
        partitions=partitions,
        groups=tuple(sorted(groups, key=lambda g: g.group)),
        checklist=checklist,
        records_at_risk=None if unknown and not at_risk else at_risk,
        seconds_behind=max(behind) if behind and len(behind) == len(partitions) else None,
        build_seconds=build_seconds,
        notes=tuple(notes),
    )


# -- the drain --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class DrainProgress:
    done: bool
    records_remaining: int
    partitions_remaining: tuple[TopicPartition, ...]

    def to_dict(self) -> dict:
        return {
            "done": self.done,
            "records_remaining": self.records_remaining,
            "partitions_remaining": [f"{t}[{p}]" for t, p in self.partitions_remaining[:20]],
            "partition_count_remaining": len(self.partitions_remaining),
        }


def drain_progress(
    *,
    observations: Iterable[PartitionObservation],
    ends_at_start: Mapping[TopicPartition, int],
    producers_stopped: bool,
) -> DrainProgress:
    """Whether everything produced before the failover started is on the target, provably.

    A partition is drained when no record waits at or after its replicated position. If producers
    were still writing when the failover started (forced), records at or past the end offset recorded
    then are the producers' newer ones and are not waited for.
    """
    remaining: list[TopicPartition] = []
    records = 0
    for observation in observations:
        record = observation.first_unreplicated
        if record is None:
            continue
        end = ends_at_start.get(observation.key)
        if not producers_stopped and end is not None and record.offset >= end:
            continue
        remaining.append(observation.key)
        records += (records_at_risk(observation) or 1) if end is None else max(end - record.offset, 1)
    return DrainProgress(not remaining, records, tuple(sorted(remaining)))


# -- failback ---------------------------------------------------------------------------------------------
def remote_topics_exclude(*, source_alias: str, separator: str) -> str:
    """The reverse flow's topics.exclude pattern for the topics mirrored from `source_alias`
    (`A\\..*`): they are on the source already, copying them back would duplicate them."""
    return re.escape(source_alias + separator) + ".*"


def failback_offsets(
    *,
    target_committed: Mapping[TopicPartition, CommittedOffset],
    source_topics: Mapping[str, str],
    store: OffsetSyncStore,
    source_committed: Mapping[TopicPartition, CommittedOffset],
) -> tuple[dict[TopicPartition, int], list[TopicPartition]]:
    """A group's positions on the remote topics of the target, translated back to the source topics
    (`source_topics`: remote topic -> source topic). Returns (offsets to write on the source, never
    backwards; remote partitions that cannot be translated)."""
    offsets: dict[TopicPartition, int] = {}
    untranslatable: list[TopicPartition] = []
    for (remote_topic, partition), position in sorted(target_committed.items()):
        topic = source_topics.get(remote_topic)
        if topic is None or position.offset < 0:
            continue
        upstream = store.translate_upstream(topic, partition, position.offset)
        if upstream is None:
            untranslatable.append((remote_topic, partition))
            continue
        current = source_committed.get((topic, partition))
        if current is None or current.offset < upstream:
            offsets[(topic, partition)] = upstream
    return offsets, untranslatable
