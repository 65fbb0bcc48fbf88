"""A flow's range verification, and its failover readiness observations, on any clusters: the rounds
that read one range of each partition of a batch from the source, then its copy from the target over the
offset syncs' translation, and let `replication.verification.compare_range` judge; the run's turns
verified a batch at a time within its budgets; the groups active on the target and the remote topics'
parity (`groups_active`, `topic_parity`) from what the clusters list. Pure: the reads are a `RangeReads`
per cluster (`replication.kafka.verification_io.RangeReader`, or the in-memory one), the offset syncs the
`store` its subclass fills.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from replication.cluster_ports import Key, RangeNotReadable
from replication.config import FlowConfig
from replication.connector import TopicDescription, TopicSelection, plan_topic_sync
from replication.filters import ConfigPropertyFilter, GroupFilter
from replication.offset_sync_store import OffsetSyncStore
from replication.verification import (
    ByteBudget,
    MirroredRecord,
    OffsetRange,
    PartitionEnds,
    PartitionOutcome,
    PartitionProgress,
    PartitionTurn,
    RangeVerdict,
    RunClock,
    VerificationLimits,
    compare_range,
    partition_turn,
)

log = logging.getLogger(__name__)

ReadRequest = tuple[int, int, int | None]  # [start, end), at most that many records (None: the whole range)
# Group states in which a group has members: failover cannot write its offsets.
ACTIVE_GROUP_STATES = frozenset({"STABLE", "PREPARING_REBALANCE", "COMPLETING_REBALANCE"})
MAX_GROUPS_DESCRIBED = 100


class RangeReads(Protocol):
    """Ranges of partitions of one cluster, records only (gaps hold none), read as the mirror reads
    (read_committed)."""

    def read_ranges(self, requests: Mapping[Key, ReadRequest]) -> dict[Key, list[MirroredRecord] | Exception]:
        """Each partition's records of [start, end): with a limit at most that many (fewer when the
        partition ends first); without, the whole range, or `RangeNotReadable` when the partition's
        readable end is before it; a partition not read in time gets a TimeoutError."""

    def close(self) -> None: ...


class RangeVerifier:
    """Verification of one flow's ranges, its source and target read through `RangeReads`; `store` holds
    the offset syncs read so far; `schema_ids`: the flow's source -> target schema IDs as its schema sync
    found them, None when its copies keep the source's IDs (read at each comparison; the control plane's
    `rewritten_schema_ids` decides)."""

    def __init__(
        self,
        *,
        source: RangeReads,
        target: RangeReads,
        schema_ids: Callable[[], Mapping[int, int] | None] | None = None,
    ) -> None:
        self.store = OffsetSyncStore()
        self._source, self._target, self._schema_ids = source, target, schema_ids

    def partition_turn(
        self,
        *,
        topic: str,
        partition: int,
        remote_topic: str,
        progress: PartitionProgress,
        replicated_position: int | None,
        ends: PartitionEnds,
        limits: VerificationLimits,
        seed: int,
    ) -> PartitionTurn | PartitionOutcome:
        newest = self.store.newest_sync(topic, partition)
        return partition_turn(
            topic=topic,
            partition=partition,
            remote_topic=remote_topic,
            progress=progress,
            replicated_position=replicated_position,
            newest_sync=None if newest is None else (newest.upstream_offset, newest.downstream_offset),
            oldest_sync_upstream=self.store.oldest_upstream_offset(topic, partition),
            ends=ends,
            limits=limits,
            seed=seed,
        )

    def verify(
        self,
        turns: Sequence[PartitionTurn],
        *,
        limits: VerificationLimits,
        budget: ByteBudget,
        clock: RunClock,
        batch_partitions: int,
    ) -> None:
        """Verify the turns in order, `batch_partitions` at a time: each round reads one range of every
        partition of the batch on one assignment per cluster. A batch or a round starts only while the
        byte budget and the clock allow."""
        for first in range(0, len(turns), batch_partitions):
            batch = turns[first : first + batch_partitions]
            while not budget.exhausted and clock.may_start(time.monotonic()):
                clock.start()
                round_ = self._next_round(batch)
                if not round_:
                    break
                round_ = round_[: budget.admit([offsets for _, offsets, _ in round_])]
                items = [(t.topic, t.partition, t.remote_topic, o, start) for t, o, start in round_]
                for (turn, offsets, _), result in zip(round_, self._verify_round(items, limits), strict=True):
                    if isinstance(result, Exception):
                        log.log(
                            logging.DEBUG if isinstance(result, RangeNotReadable) else logging.WARNING,
                            "%s; verified next run",
                            result,
                        )
                        turn.put_off()
                        continue
                    budget.spend(result.bytes_read, offsets=offsets.end - offsets.start)
                    turn.record(result)
            if budget.exhausted or not clock.may_start(time.monotonic()):
                return

    def _next_round(
        self, batch: Sequence[PartitionTurn]
    ) -> list[tuple[PartitionTurn, OffsetRange, int | None]]:
        """The next range of each turn of the batch still going; a range past either side's readable end
        is put off without a read."""
        round_ = []
        for turn in batch:
            while (step := turn.next_range()) is not None:
                offsets, target_start = step
                end = self.store.translate_downstream(turn.topic, turn.partition, offsets.end)
                if turn.readable(offsets, end):
                    round_.append((turn, offsets, target_start))
                    break
                turn.put_off()
        return round_

    def verify_range(
        self,
        topic: str,
        partition: int,
        remote_topic: str,
        offsets: OffsetRange,
        *,
        limits: VerificationLimits,
        target_start: int | None = None,
    ) -> RangeVerdict:
        (result,) = self._verify_round([(topic, partition, remote_topic, offsets, target_start)], limits)
        if isinstance(result, Exception):
            raise result
        return result

    def _verify_round(
        self, items: Sequence[tuple[str, int, str, OffsetRange, int | None]], limits: VerificationLimits
    ) -> list[RangeVerdict | Exception]:
        """Each (topic, partition, remote topic, range, target start)'s verdict, or why it could not be
        read: the source ranges read together, then their copies, then (rarely) the source records just
        after the ranges whose targets hold unmapped records. One item per partition."""
        read = self._source.read_ranges({(t, p): (r.start, r.end, None) for t, p, _, r, _ in items})
        sources: dict[Key, list[MirroredRecord]] = {}
        spans: dict[Key, tuple[int, int]] = {}  # source key -> the target offsets read
        failed: dict[Key, Exception] = {}
        for topic, partition, _, offsets, target_start in items:
            key = (topic, partition)
            start = self.store.translate_downstream(topic, partition, offsets.start)
            end = self.store.translate_downstream(topic, partition, offsets.end)
            records = read[key]
            if isinstance(records, Exception):
                failed[key] = records
            elif start is None or end is None:  # planned within the syncs: only a rewind since can do this
                failed[key] = ValueError(
                    f"{topic}[{partition}] {offsets} no longer translates (offset syncs rewound)"
                )
            else:
                sources[key] = records
                spans[key] = (start if target_start is None else min(start, target_start), end)
        remote = {(t, p): r for t, p, r, _, _ in items}
        targets = self._target.read_ranges(
            {(remote[key], key[1]): (start, end, None) for key, (start, end) in spans.items() if end > start}
        )
        copies: dict[Key, list[MirroredRecord]] = {}
        unmapped: dict[Key, int] = {}
        for key in spans:
            found = targets.get((remote[key], key[1]), [])
            if isinstance(found, Exception):
                failed[key] = found
                continue
            mapped = {self.store.translate_downstream(*key, r.offset) for r in sources[key]}
            copies[key] = found
            unmapped[key] = sum(1 for record in found if record.offset not in mapped)
        ranges = {(t, p): r for t, p, _, r, _ in items}
        lookaheads = (
            self._source.read_ranges(
                {
                    key: (ranges[key].end, ranges[key].end + 10 * limits.range_records, count)
                    for key, count in unmapped.items()
                    if count
                }
            )
            if any(unmapped.values())
            else {}
        )
        results: list[RangeVerdict | Exception] = []
        schema_ids = self._schema_ids() if self._schema_ids is not None else None
        for topic, partition, _, offsets, _ in items:
            key = (topic, partition)
            lookahead = lookaheads.get(key, [])
            if key in failed:
                results.append(failed[key])
                continue
            if isinstance(lookahead, Exception):
                results.append(lookahead)
                continue
            results.append(
                compare_range(
                    offsets=offsets,
                    source=sources[key],
                    target=copies[key],
                    translate=functools.partial(self.store.translate_downstream, topic, partition),
                    lookahead=lookahead,
                    target_end=spans[key][1],
                    schema_ids=schema_ids,
                )
            )
        return results


# -- readiness observations ---------------------------------------------------------------------------------
def groups_active(flow: FlowConfig, groups: Sequence[str], *, state: Callable[[str], str]) -> list[str]:
    """The groups the flow replicates that have members on the target (their offsets cannot be written):
    `groups` the target lists, `state(group)` its state there; the first MAX_GROUPS_DESCRIBED asked."""
    group_filter = GroupFilter.for_flow(flow)
    replicated = [g for g in groups if group_filter.should_replicate_group(g)]
    return [g for g in replicated[:MAX_GROUPS_DESCRIBED] if state(g) in ACTIVE_GROUP_STATES]


@dataclass(frozen=True)
class TopicsRead:
    """A cluster's topics as the topic sync reads them: every topic's partition count, and descriptions
    (partitions, the configs set on the topic) of the topics asked for."""

    partition_counts: Callable[[], dict[str, int]]
    describe: Callable[[Mapping[str, int]], dict[str, TopicDescription]]


def topic_parity(
    flow: FlowConfig,
    topics: TopicSelection,
    *,
    target_alias: str,
    source: TopicsRead,
    target: TopicsRead,
    target_brokers: Callable[[], int],
) -> tuple[list[str], list[str]]:
    """(partition problems, config problems) of the flow's remote topics, as the topic sync would fix them.

    A topic either cluster lists but could not describe this time (a topic just created, not yet known
    to the broker that answered; one being deleted) is left out of this observation: it is neither
    missing nor right, and the next observation reads it again."""
    source_counts = source.partition_counts()
    mirrored = tuple(
        d for d in topics.mirrored(source_counts) if not topics.policy.is_heartbeats_topic(d.topic)
    )
    target_counts = target.partition_counts()
    source_topics = source.describe({d.topic: source_counts[d.topic] for d in mirrored})
    listed = {
        d.remote_topic: target_counts[d.remote_topic] for d in mirrored if d.remote_topic in target_counts
    }
    target_topics = target.describe(listed)
    plan = plan_topic_sync(
        mirrored=tuple(
            d
            for d in mirrored
            if d.topic in source_topics and (d.remote_topic not in listed or d.remote_topic in target_topics)
        ),
        source_topics=source_topics,
        target_topics=target_topics,
        flow=flow,
        config_filter=ConfigPropertyFilter.for_flow(flow),
        target_broker_count=target_brokers(),
    )
    partitions = [f"{t.name} missing on {target_alias}" for t in plan.create] + [
        f"{g.topic}: {g.current} partitions, {g.desired} on the source" for g in plan.grow
    ]
    configs = [f"{u.topic}: {', '.join(sorted(u.changes))}" for u in plan.update_configs if u.changes]
    return partitions, configs
