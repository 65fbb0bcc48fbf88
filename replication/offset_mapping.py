"""Offset mapping for applications that keep their offsets outside Kafka (Spark, Flink, Iceberg sinks).

Such an application stores (topic, partition, offset) in its own checkpoint, so MM2's checkpoints and
group-offset sync never see it. After a failover it needs the position on the target that holds the
copy of its next source record; after a failback, the way back. `map_offsets` answers both for a batch,
with the `OffsetSyncStore`'s exact translation and the offset sync each answer rests on, and a per-item
error (with what to do) for what cannot be translated: a topic the flow does not replicate, a partition
the remote topic does not have, a partition with no offset sync yet, an offset older than the oldest
sync held. Pure: the caller reads the syncs and the topics.

An answer is `exact` when the offset lies within what the syncs prove (at most one past the newest
sync); past it, the answer is the copy of the first record after the newest sync: the application
re-reads the records since then, never skips one (`replication.offset_sync_store`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from replication.formats import OffsetSync
from replication.offset_sync_store import OffsetSyncStore


class Direction(StrEnum):
    SOURCE_TO_TARGET = "source_to_target"  # failover: a source position -> the target's
    TARGET_TO_SOURCE = "target_to_source"  # failback: a position on the remote topic -> the source's


class MappingError(StrEnum):
    UNKNOWN_TOPIC = "unknown_topic"
    UNKNOWN_PARTITION = "unknown_partition"
    NO_OFFSET_SYNC = "no_offset_sync"
    BEFORE_FIRST_SYNC = "before_first_sync"


@dataclass(frozen=True)
class OffsetQuery:
    topic: str
    partition: int
    offset: int


@dataclass(frozen=True)
class MappedTopic:
    """A topic the flow replicates: its name on each side and the remote topic's partition count."""

    source_topic: str
    remote_topic: str
    partitions: int


@dataclass(frozen=True)
class OffsetMapping:
    query: OffsetQuery
    topic: str | None = None  # the translated topic (the other side's name)
    offset: int | None = None
    exact: bool = False
    sync: OffsetSync | None = None  # the sync the answer rests on, in the source's topic names
    error: MappingError | None = None
    message: str = ""

    def to_dict(self) -> dict:
        body: dict = {
            "topic": self.query.topic,
            "partition": self.query.partition,
            "offset": self.query.offset,
        }
        if self.error is not None:
            return body | {"error": self.error.value, "message": self.message}
        assert self.sync is not None
        return body | {
            "translated": {"topic": self.topic, "partition": self.query.partition, "offset": self.offset},
            "exact": self.exact,
            "offset_sync": {
                "topic": self.sync.topic,
                "partition": self.sync.partition,
                "upstream_offset": self.sync.upstream_offset,
                "downstream_offset": self.sync.downstream_offset,
            },
            "message": self.message,
        }


def _failed(query: OffsetQuery, error: MappingError, message: str) -> OffsetMapping:
    return OffsetMapping(query, error=error, message=message)


def map_offset(
    query: OffsetQuery, *, direction: Direction, topics: Mapping[str, MappedTopic], store: OffsetSyncStore
) -> OffsetMapping:
    """One query: `topics` holds the replicated topics by the name the query uses (the source topic
    from the source, the remote topic from the target)."""
    mapped = topics.get(query.topic)
    if mapped is None:
        side = "source" if direction == Direction.SOURCE_TO_TARGET else "target (its remote name)"
        return _failed(
            query,
            MappingError.UNKNOWN_TOPIC,
            f"{query.topic} is not a topic this flow replicates: give its name on the {side}",
        )
    if not 0 <= query.partition < mapped.partitions:
        return _failed(
            query,
            MappingError.UNKNOWN_PARTITION,
            f"{query.topic} has partitions 0..{mapped.partitions - 1} on the target",
        )
    source, partition = mapped.source_topic, query.partition
    newest = store.newest_sync(source, partition)
    if newest is None:
        return _failed(
            query,
            MappingError.NO_OFFSET_SYNC,
            f"no offset sync of {source}[{partition}] yet: nothing of it is replicated (or the syncs "
            "were deleted); translate again once the flow has copied a record of it",
        )
    forward = direction == Direction.SOURCE_TO_TARGET
    if forward:
        translated = store.translate_downstream(source, partition, query.offset)
    else:
        translated = store.translate_upstream(source, partition, query.offset)
    sync = store.sync_used(source, partition, query.offset, downstream=not forward)
    if translated is None or sync is None:
        oldest = store.oldest_upstream_offset(source, partition)
        first = oldest if forward else store.translate_downstream(source, partition, oldest or 0)
        return _failed(
            query,
            MappingError.BEFORE_FIRST_SYNC,
            f"offset {query.offset} is older than the oldest offset sync held for {source}[{partition}]: "
            f"offsets from {first} on translate exactly; nothing proves where older records went",
        )
    newest_here = newest.upstream_offset if forward else newest.downstream_offset
    exact = query.offset <= newest_here + 1
    message = (
        ""
        if exact
        else f"past the newest offset sync ({newest_here}): the answer re-reads the records since it, "
        "never skips one; it is exact once the flow has caught up"
    )
    return OffsetMapping(
        query,
        topic=mapped.remote_topic if forward else mapped.source_topic,
        offset=translated,
        exact=exact,
        sync=sync,
        message=message,
    )


def map_offsets(
    queries: Iterable[OffsetQuery],
    *,
    direction: Direction,
    topics: Iterable[MappedTopic],
    store: OffsetSyncStore,
) -> list[OffsetMapping]:
    """Every query translated (or its error), in the order given."""
    forward = direction == Direction.SOURCE_TO_TARGET
    by_name = {(t.source_topic if forward else t.remote_topic): t for t in topics}
    return [map_offset(query, direction=direction, topics=by_name, store=store) for query in queries]
