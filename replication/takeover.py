"""Taking over from a running MirrorMaker 2: where each source partition resumes (pure).

MM2 keeps three kinds of state, all in Kafka:

* its source positions, in Kafka Connect's offsets topic: in dedicated mode `mm2-offsets.<source>.internal`
  on the target (`offset.storage.topic` in the MM2 file changes it), several partitions (25 by default),
  JSON records written by the Connect worker. Key `["MirrorSourceConnector",{"cluster":"<source alias>",
  "partition":p,"topic":"<source topic>"}]`, value `{"offset":o}`: o is the source offset of the last
  record the worker committed, and MirrorSourceTask resumes at o + 1 (`loadOffset`). A null value (a
  tombstone, KIP-875's offset reset) removes the position: MM2 would start that partition anew. Records
  of MM2's other connectors (checkpoint, heartbeat) share the topic with other keys and are not positions.
* its offset syncs (`OffsetSync`, byte-for-byte ours), in the topic Mirrorplane reads for the flow too;
* its checkpoints (`<source>.checkpoints.internal` on the target), the same topic Mirrorplane writes:
  consumer groups keep their translated offsets across the move without any copy.

Connect commits positions only every `offset.flush.interval.ms` (60 s by default), after the target
acknowledged the records, so a stopped MM2 usually left records on the target past its committed offset;
resuming at o + 1 would copy them twice. The newest offset sync `(u, d)` of the partition says more: MM2
copies each source partition in order into one target partition and syncs at every rewind and upstream
skip it sees, so the k = L - d records after d on the target (L: the remote partition's last offset) are
copies of k distinct source records after u, the last of them at offset u + k or later; every source
record at or below u + k is therefore on the target. Resuming at the larger of o + 1 and u + k + 1 skips
nothing; it copies again only records after an upstream offset gap MM2 had not synced yet.

Guarantee, when MM2 is stopped and only MM2 wrote the remote partitions: no source record is skipped, and
none is copied twice unless offsets were skipped (compaction, transaction markers) after MM2's newest sync.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from replication.formats import OffsetSync, RecordFormatError

TopicPartition = tuple[str, int]

MM2_SOURCE_CONNECTOR = "MirrorSourceConnector"


def mm2_offsets_topic(source_alias: str) -> str:
    """MM2 dedicated mode's default `offset.storage.topic` of flow source->target (on the target)."""
    return f"mm2-offsets.{source_alias}.internal"


@dataclass(frozen=True)
class ConnectSourceOffset:
    """One record of a Connect offsets topic: `offset` None for a tombstone (the position was reset)."""

    connector: str
    partition: Mapping[str, object]
    offset: int | None


def parse_connect_offset(key: bytes, value: bytes | None) -> ConnectSourceOffset:
    """A Connect offsets record (`[connector, {partition}]` -> `{offset}` or null); RecordFormatError
    when it is not one."""
    try:
        connector, partition = json.loads(key)
        if not isinstance(connector, str) or not isinstance(partition, dict):
            raise ValueError("key is not [connector, {partition}]")
        if value is None:
            return ConnectSourceOffset(connector, partition, None)
        offset = json.loads(value)["offset"]
        if isinstance(offset, bool) or not isinstance(offset, int):
            raise ValueError(f"offset {offset!r} is not an integer")
        return ConnectSourceOffset(connector, partition, offset)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"not a Connect source offset: {key!r} = {value!r}: {exc}") from exc


def mm2_committed_offsets(
    records: Iterable[ConnectSourceOffset], *, source_alias: str, connector: str = MM2_SOURCE_CONNECTOR
) -> dict[TopicPartition, int]:
    """The last committed source offset of each partition MirrorSourceConnector `connector` copied from
    cluster `source_alias` (records in the order of their topic partition: the later wins)."""
    committed: dict[TopicPartition, int] = {}
    for record in records:
        where = record.partition
        if record.connector != connector or where.get("cluster") != source_alias:
            continue
        topic, partition = where.get("topic"), where.get("partition")
        if not isinstance(topic, str) or isinstance(partition, bool) or not isinstance(partition, int):
            continue
        if record.offset is None:
            committed.pop((topic, partition), None)
        else:
            committed[(topic, partition)] = record.offset
    return committed


def newest_syncs(syncs: Iterable[OffsetSync]) -> dict[TopicPartition, OffsetSync]:
    """The last sync written for each source partition (syncs in the order of the topic)."""
    return {(sync.topic, sync.partition): sync for sync in syncs}


@dataclass(frozen=True)
class ResumePoint:
    """Where one source partition resumes, and why (one row of the dry run)."""

    topic: str
    partition: int
    remote_topic: str
    next_offset: int | None  # None: no MM2 state, replication starts at the earliest source offset
    mm2_next_offset: int | None  # MM2's committed offset + 1 (None when it committed none)
    already_on_target: int  # records MM2 copied past its committed offset: not copied again
    source_start: int
    source_end: int
    target_end: int | None  # None when the remote partition does not exist yet
    basis: str
    current_next_offset: int | None = None  # Mirrorplane's stored position before the takeover

    @property
    def records_to_copy(self) -> int:
        start = self.source_start if self.next_offset is None else max(self.next_offset, self.source_start)
        return max(0, self.source_end - start)

    @property
    def records_lost(self) -> int:
        """Source records deleted (retention) before MM2 or Mirrorplane copied them."""
        return 0 if self.next_offset is None else max(0, self.source_start - self.next_offset)


@dataclass(frozen=True)
class PartitionFacts:
    """What the clusters say about one source partition and its remote partition."""

    topic: str
    partition: int
    remote_topic: str
    source_start: int
    source_end: int
    target_last_offset: int | None  # the remote partition's last record (None: empty or absent)
    target_end: int | None


def resume_point(
    facts: PartitionFacts, *, committed: int | None, sync: OffsetSync | None, current: int | None = None
) -> ResumePoint:
    """Where `facts`' partition resumes given MM2's committed offset and newest offset sync there."""
    mm2_next = None if committed is None else committed + 1
    from_sync: int | None = None
    basis = "no MM2 position: starts at the earliest source offset, as a new flow"
    last = facts.target_last_offset
    if sync is not None and last is not None and last >= sync.downstream_offset:
        from_sync = sync.upstream_offset + (last - sync.downstream_offset) + 1
        if from_sync > facts.source_end:  # the target holds more than the source has: not MM2's copy alone
            from_sync = None
    candidates = [offset for offset in (mm2_next, from_sync) if offset is not None]
    next_offset = max(candidates) if candidates else None
    if next_offset is not None:
        if sync is not None and from_sync is not None and (mm2_next is None or from_sync > mm2_next):
            basis = (
                f"MM2's newest offset sync ({sync.upstream_offset} at {sync.downstream_offset}) and the "
                f"remote partition's last offset {last}"
            )
        else:
            basis = f"MM2's committed offset {committed}"
    already = 0 if mm2_next is None or next_offset is None else next_offset - mm2_next
    return ResumePoint(
        topic=facts.topic,
        partition=facts.partition,
        remote_topic=facts.remote_topic,
        next_offset=next_offset,
        mm2_next_offset=mm2_next,
        already_on_target=already,
        source_start=facts.source_start,
        source_end=facts.source_end,
        target_end=facts.target_end,
        basis=basis,
        current_next_offset=current,
    )


@dataclass(frozen=True)
class TakeoverPlan:
    """The dry run: every partition's resume point, and MM2's state as found."""

    flow: str
    offsets_topic: str
    connector: str
    partitions: tuple[ResumePoint, ...]
    mm2_positions: int  # partitions with a committed MM2 offset for this flow's source
    offset_syncs_topic: str
    offset_syncs: int
    checkpoints_topic: str
    checkpoint_groups: int  # groups with checkpoints on this flow's remote topics
    skipped_records: int  # records of the offsets topic that were not Connect source offsets

    def positions(self) -> dict[TopicPartition, int]:
        """What applying the plan stores: the resume point of each partition MM2 left one for."""
        return {
            (point.topic, point.partition): point.next_offset
            for point in self.partitions
            if point.next_offset is not None
        }

    def problems(self) -> list[str]:
        """Why applying would be wrong (empty when it may be applied)."""
        if not self.positions():
            return [
                f"no MM2 position for {self.flow}'s partitions in {self.offsets_topic} (connector "
                f"{self.connector}): check offset.storage.topic in the MM2 file, the connector's name and "
                "the source alias MM2 used"
            ]
        return []


def plan_takeover(
    *,
    flow: str,
    facts: Sequence[PartitionFacts],
    committed: Mapping[TopicPartition, int],
    syncs: Mapping[TopicPartition, OffsetSync],
    current: Mapping[TopicPartition, int],
    offsets_topic: str,
    connector: str,
    offset_syncs_topic: str,
    checkpoints_topic: str,
    checkpoint_groups: int,
    skipped_records: int = 0,
) -> TakeoverPlan:
    points = tuple(
        resume_point(
            fact,
            committed=committed.get((fact.topic, fact.partition)),
            sync=syncs.get((fact.topic, fact.partition)),
            current=current.get((fact.topic, fact.partition)),
        )
        for fact in sorted(facts, key=lambda f: (f.topic, f.partition))
    )
    return TakeoverPlan(
        flow=flow,
        offsets_topic=offsets_topic,
        connector=connector,
        partitions=points,
        mm2_positions=sum(1 for fact in facts if (fact.topic, fact.partition) in committed),
        offset_syncs_topic=offset_syncs_topic,
        offset_syncs=len(syncs),
        checkpoints_topic=checkpoints_topic,
        checkpoint_groups=checkpoint_groups,
        skipped_records=skipped_records,
    )
