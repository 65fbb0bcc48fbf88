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


@dataclass(frozen=True)
class OffsetReset:
    topic: str
    partition: int
    current: int | None  # committed now (None: nothing committed)
    new: int | None  # the offset the reset writes (None: not written, `note` says why)
    note: str = ""

    @property
    def changes(self) -> bool:
        return self.new is not None and self.new != self.current

    def to_dict(self) -> dict:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "current": self.current,
            "new": self.new,
            "changes": self.changes,
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
) -> list[OffsetReset]:
    """The offset each partition gets; never below the log start (a consumer would apply its
    auto.offset.reset there, possibly skipping to the end). Offsets above the reported end are kept: a
    translated or time-found offset names a record that exists, and some brokers report an end too low."""
    rows = []
    for key in sorted(set(partitions)):
        low, high = earliest.get(key), end.get(key)
        note = ""
        if strategy is ResetStrategy.EARLIEST:
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
        if low is None or high is None:
            new, note = None, "the partition's offsets could not be read: not written"
        rows.append(OffsetReset(key[0], key[1], current.get(key), new, note))
    return rows


def offsets_to_write(rows: Iterable[OffsetReset]) -> dict[TopicPartition, int]:
    return {(row.topic, row.partition): row.new for row in rows if row.changes and row.new is not None}
