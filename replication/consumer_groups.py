"""Consumer groups as an operator sees them: state, members, lag per partition, and offset resets.

Pure: no I/O (`replication.kafka.groups` reads and writes). Lag follows the project's one rule (clamped
at zero: some brokers report an end offset below records they already served). A reset is planned for an
inactive group only, the same rule as MM2's group offset sync (`checkpoint.may_sync_group_offsets`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from replication.checkpoint import may_sync_group_offsets

TopicPartition = tuple[str, int]


@dataclass(frozen=True)
class GroupListing:
    group: str
    state: str  # Kafka's state name: EMPTY, STABLE, PREPARING_REBALANCE, DEAD, ... (UNKNOWN if not said)
    simple: bool = False  # offsets committed without group membership (assign()-style consumers)


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True)
class GroupDescription:
    group: str
    state: str
    members: tuple[GroupMember, ...]
    partition_assignor: str = ""

    @property
    def active(self) -> bool:
        return is_active(self.state)


def is_active(state: str) -> bool:
    """Consumers of the group may be running: its offsets must not be changed under them."""
    return not may_sync_group_offsets(state)


def lag(committed: int | None, end: int | None) -> int | None:
    """Records the group has still to read in a partition (None when either figure is unknown)."""
    if committed is None or end is None:
        return None
    return max(end - committed, 0)


class ResetStrategy(StrEnum):
    EARLIEST = "earliest"  # the log start: read everything still kept
    LATEST = "latest"  # the end: skip everything there now
    TIMESTAMP = "timestamp"  # the first record at or after a moment
    TRANSLATED = "translated"  # where the group's source offsets translate to (a flow's offset syncs)
    SHIFT = "shift"  # the committed offset moved by N records (kafka-consumer-groups --shift-by)
    OFFSET = "offset"  # one given offset (kafka-consumer-groups --to-offset)


# Strategies whose offset is asked for, not read from the log: kept within [log start, end], as
# kafka-consumer-groups.sh does. Time-found and translated offsets name a record that exists; some brokers
# report an end too low, so those are only kept at or above the log start.
CLAMPED_TO_THE_END = frozenset({ResetStrategy.SHIFT, ResetStrategy.OFFSET})


@dataclass(frozen=True)
class OffsetReset:
    topic: str
    partition: int
    current: int | None  # committed now (None: nothing committed)
    new: int | None  # the offset the reset writes (None: not written, `note` says why)
    note: str = ""
    end: int | None = None  # the partition's end offset when planned

    @property
    def changes(self) -> bool:
        return self.new is not None and self.new != self.current

    @property
    def lag_before(self) -> int | None:
        return lag(self.current, self.end)

    @property
    def lag_after(self) -> int | None:
        """The group's lag once the reset is written (unchanged where nothing is written)."""
        return lag(self.new if self.new is not None else self.current, self.end)

    @property
    def lag_change(self) -> int | None:
        """Records more (positive: read again) or fewer (negative: skipped) the group has to read."""
        if self.lag_before is None or self.lag_after is None:
            return None
        return self.lag_after - self.lag_before

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "current": self.current,
            "new": self.new,
            "changes": self.changes,
            "end": self.end,
            "lag_before": self.lag_before,
            "lag_after": self.lag_after,
            "lag_change": self.lag_change,
            "note": self.note,
        }


def plan_reset(
    *,
    strategy: ResetStrategy,
    partitions: Iterable[TopicPartition],
    current: Mapping[TopicPartition, int],
    earliest: Mapping[TopicPartition, int],
    end: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int] | None = None,
    translated: Mapping[TopicPartition, int | None] | None = None,
    shift_by: int = 0,
    to_offset: int | None = None,
) -> list[OffsetReset]:
    """The offset each partition gets; never below the log start (a consumer would apply its
    auto.offset.reset there, possibly skipping to the end). A shifted or given offset past the end is the
    end (`CLAMPED_TO_THE_END`); a shift needs a committed offset to move from, as in Kafka's tool."""
    rows = []
    for key in sorted(set(partitions)):
        low, high = earliest.get(key), end.get(key)
        note = ""
        if strategy is ResetStrategy.SHIFT:
            committed = current.get(key)
            new = None if committed is None else committed + shift_by
            if committed is None:
                note = "nothing committed to shift from: not written (reset it to an offset or a time)"
        elif strategy is ResetStrategy.OFFSET:
            new = to_offset
        elif strategy is ResetStrategy.EARLIEST:
            new = low
        elif strategy is ResetStrategy.LATEST:
            new = high
        elif strategy is ResetStrategy.TIMESTAMP:
            found = (by_time or {}).get(key)
            new = high if found is None or found < 0 else found
            if found is None or found < 0:
                note = "no record at or after that time: the end"
        else:
            new = (translated or {}).get(key)
            if new is None:
                note = "no exact translation (no offset sync covers the source offset): not written"
        if new is not None and low is not None and new < low:
            note = f"{new} is before the log start {low} (deleted by retention): the log start"
            new = low
        if strategy in CLAMPED_TO_THE_END and new is not None and high is not None and new > high:
            note = f"{new} is past the end {high}: the end"
            new = high
        if low is None or high is None:
            new, note = None, "the partition's offsets could not be read: not written"
        rows.append(OffsetReset(key[0], key[1], current.get(key), new, note, high))
    return rows


def offsets_to_write(rows: Iterable[OffsetReset]) -> dict[TopicPartition, int]:
    return {(row.topic, row.partition): row.new for row in rows if row.changes and row.new is not None}
