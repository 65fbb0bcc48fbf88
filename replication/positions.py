"""Where a `MirrorSourceTask` resumes: the next source offset to replicate, per source partition.

A position only ever covers records the target acknowledged (and whose offset syncs are durable), so
resuming from it never loses a record. `PositionStore` is the port; `replication.kafka.positions` stores
positions in a compacted topic on the target (dedicated mode), workers may store them in a database.
`PositionWriter` is the task's side: offset syncs first, then the positions they cover, coalesced.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from replication.formats import OffsetSync
from replication.offset_syncs import OffsetSyncEmitter
from replication.partition_state import Acknowledgements, PartitionState
from replication.slices import SliceError, SliceErrorKind
from replication.topic_partition import TopicPartition

# During a slice, positions (and offset syncs) are persisted at least this often: a crash makes a restart
# write again at most what was acknowledged since (at_least_once duplicates, exactly_once tail re-read).
PERSIST_INTERVAL_S = 0.2
PERSIST_RECORDS = 10_000


class PositionStore(Protocol):
    def load(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The stored next source offset of each given partition that has one (others are left out)."""

    def save(self, *, flow: str, positions: Mapping[TopicPartition, int]) -> None:
        """Durably store these positions (other partitions keep theirs); raise if it did not happen."""


class InMemoryPositionStore:
    """A PositionStore in a dict, for unit tests and single-process experiments."""

    def __init__(self) -> None:
        self._positions: dict[tuple[str, str, int], int] = {}
        self._lock = threading.Lock()

    def load(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        with self._lock:
            return {
                (topic, partition): self._positions[(flow, topic, partition)]
                for topic, partition in partitions
                if (flow, topic, partition) in self._positions
            }

    def save(self, *, flow: str, positions: Mapping[TopicPartition, int]) -> None:
        with self._lock:
            for (topic, partition), offset in positions.items():
                self._positions[(flow, topic, partition)] = offset


# A moving partition's position is written at most once per POSITION_RECORD_INTERVAL_S, or sooner once it
# moved POSITION_RECORD_OFFSETS past the written one; an idle partition's never. At 10 records/s per
# partition, writing at every persist (5 a second) made the position records about 30% of the records on
# the target; now they are one per 50 records at that rate, and one per 10,000 at most at any rate.
POSITION_RECORD_INTERVAL_S = 5.0
POSITION_RECORD_OFFSETS = 10_000


def position_record_due(
    *,
    position: int,
    written: int | None,
    written_at: float | None,
    now: float,
    interval_s: float = POSITION_RECORD_INTERVAL_S,
    offsets: int = POSITION_RECORD_OFFSETS,
) -> bool:
    """Whether a partition whose position moved from `written` (stored at `written_at`, None: not by
    this task yet) to `position` writes a position record now.

    The cost of coalescing is what a crash makes a restart redo: at most `interval_s` (or `offsets`) of
    a partition's records beyond those in flight (at_least_once writes them again, exactly_once re-reads
    them from the target's tail and resumes exactly after them). Every position is written at once
    before a partition may move to another task (a settle, a close, a removal).
    """
    if written is None or written_at is None:
        return True
    return now - written_at >= interval_s or position - written >= offsets


class PersistCadence:
    """When a running slice persists its positions: once `interval_s` passed or `records` more records were
    acknowledged since the last time, whichever comes first (time passed in, so it is tested without I/O).

    What a crash can make a restart write again is what was acknowledged since the last persist (plus
    what was in flight), so this bounds at_least_once duplicates and the exactly_once tail re-read.
    """

    def __init__(self, *, interval_s: float, records: int, now: float) -> None:
        self.interval_s, self.records = interval_s, records
        self._at, self._acked = now, 0

    def due(self, *, now: float, acked: int) -> bool:
        return now - self._at >= self.interval_s or acked - self._acked >= self.records

    def persisted(self, *, now: float, acked: int) -> None:
        self._at, self._acked = now, acked


class PositionWriter:
    """One task's positions: the stored ones it knows (asked once per partition), the partitions that
    may have offset syncs to emit or a position to write (`dirty`), and when it last wrote them.

    `write` sends the decided offset syncs, then persists the positions acknowledged syncs cover: a
    position never outruns its syncs.
    Positions are the acknowledged prefix of each partition, so it may run with records in flight. A
    moved position is written when `position_record_due` says (at most one record per partition per
    `POSITION_RECORD_INTERVAL_S` while it moves, none while idle), or at once with `every_position`
    (before the partitions may be resumed by someone else)."""

    def __init__(
        self,
        *,
        flow: str,
        store: PositionStore,
        offset_syncs: Callable[[], OffsetSyncEmitter],
        acks: Acknowledgements,
    ) -> None:
        self._flow, self._store, self._offset_syncs, self._acks = flow, store, offset_syncs, acks
        self._emitter: OffsetSyncEmitter | None = None
        self.dirty: dict[TopicPartition, PartitionState] = {}
        self.known: dict[TopicPartition, int] = {}  # stored next source offsets, as last read or written
        self._looked_up: set[TopicPartition] = set()  # asked the store already
        self.last_offset_sync_at: float | None = None  # when offset syncs were last acknowledged (clock)
        self._sending: _Sending | None = None
        self._cadence = PersistCadence(
            interval_s=PERSIST_INTERVAL_S, records=PERSIST_RECORDS, now=time.monotonic()
        )

    def load(self, keys: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The stored positions of these partitions (one request for those not asked yet)."""
        unknown = [key for key in keys if key not in self._looked_up]
        if unknown:
            self.known.update(self._store.load(flow=self._flow, partitions=unknown))
            self._looked_up.update(unknown)
        return {key: self.known[key] for key in keys if key in self.known}

    def forget(self, key: TopicPartition) -> None:
        """The partition left the task: another task may advance it, so the store is asked again."""
        self._looked_up.discard(key)
        self.known.pop(key, None)

    def emitter(self) -> OffsetSyncEmitter:
        if self._emitter is None:
            self._emitter = self._offset_syncs()
        return self._emitter

    @property
    def opened_emitter(self) -> OffsetSyncEmitter | None:
        return self._emitter

    def due(self) -> bool:
        """A running slice persists now (`PersistCadence`)."""
        return self._cadence.due(now=time.monotonic(), acked=self._acks.records)

    def postpone(self) -> None:
        """A persist that failed waits a whole cadence before the next try."""
        self._cadence.persisted(now=time.monotonic(), acked=self._acks.records)

    def persisted_all(self) -> bool:
        """No acknowledgement since the last write and every position it looked at written."""
        return self._acks.untouched and all(
            state.position == state.persisted for state in self.dirty.values()
        )

    def write(self, *, now: float, final: bool = False, every_position: bool = False) -> SliceError | None:
        """Send the decided offset syncs, then persist the positions due that acknowledged syncs cover;
        the error when either failed (retried).

        The syncs are not waited for (a round trip to the cluster every persist held the task's fetch
        loop: 14% of its time at 20,000 records/s, issue 38): the positions they cover are written at a
        later call, once they are acknowledged, and meanwhile no more syncs are sent. `final` and
        `every_position` (the partitions may move) wait for them, so every position is written now."""
        wait_s = SYNC_TIMEOUT_S if final or every_position else 0.0
        acked = self._acks.records  # before reading the positions: they cover at least these
        covered, error = self._confirm(now=now, wait_s=wait_s)
        if error is not None or self._sending is not None:  # failed, or still unacknowledged: next time
            self._cadence.persisted(now=time.monotonic(), acked=acked)
            return error
        dirty = self.dirty
        drained = [(state, state.syncs.drain(now=now, final=final)) for state in dirty.values()]
        syncs = [sync for _, batch in drained for sync in batch]
        positions = {key: (state, state.position) for key, state in dirty.items()}
        if syncs:
            try:
                self.emitter().send(syncs)
            except Exception as exc:  # the positions wait for the syncs: retried next slice
                return self._sync_failed(drained, exc)
            self._sending = _Sending(drained, positions)
            newer, error = self._confirm(now=now, wait_s=wait_s)  # an emitter may acknowledge at once
            if error is not None:
                return error
            covered.update(newer)
        else:
            covered.update(positions)  # no sync pending: every position now is covered
        changed = {
            key: position
            for key, (state, position) in covered.items()
            if dirty.get(key) is state  # not restarted meanwhile (a new state, its own position)
            and position != state.persisted
            and (
                every_position
                or position_record_due(
                    position=position, written=state.persisted, written_at=state.persisted_at, now=now
                )
            )
        }
        if changed:
            try:
                self._store.save(flow=self._flow, positions=changed)
            except Exception as exc:
                return SliceError(SliceErrorKind.PERSIST, f"persisting positions failed: {exc}")
            for key, offset in changed.items():
                dirty[key].persisted, dirty[key].persisted_at = offset, now
            self.known.update(changed)
        # Kept: a position still to write (coalesced, or its syncs unacknowledged) or a progress sync to come.
        self.dirty = {
            key: state
            for key, state in dirty.items()
            if state.position != state.persisted or not state.syncs.idle
        }
        self._cadence.persisted(now=time.monotonic(), acked=acked)
        return None

    def _confirm(
        self, *, now: float, wait_s: float
    ) -> tuple[dict[TopicPartition, Covered], SliceError | None]:
        """The syncs sent last: once acknowledged, the positions they cover; if they failed, put back (sent
        again first) and the error. Nothing while they are still unacknowledged after `wait_s`."""
        sending = self._sending
        if sending is None:
            return {}, None
        try:
            delivered = self.emitter().delivered(timeout_s=wait_s)
        except Exception as exc:
            self._sending = None
            return {}, self._sync_failed(sending.drained, exc)
        if not delivered:
            if wait_s > 0:
                self._sending = None
                return {}, self._sync_failed(
                    sending.drained, TimeoutError(f"not acknowledged within {wait_s:g}s")
                )
            return {}, None
        self._sending = None
        self.last_offset_sync_at = now
        return dict(sending.positions), None

    def _sync_failed(
        self, drained: list[tuple[PartitionState, list[OffsetSync]]], exc: Exception
    ) -> SliceError:
        """Syncs that failed go back to their writers, ahead of any decided since, and their partitions
        are looked at again (sent first at the next write); the error."""
        for state, batch in drained:
            if batch:
                state.syncs.requeue(batch)
                self.dirty.setdefault(state.key, state)
        count = sum(len(batch) for _, batch in drained)
        return SliceError(SliceErrorKind.OFFSET_SYNC, f"emitting {count} offset sync(s) failed: {exc}")


Covered = tuple[PartitionState, int]  # a partition's state and a position of it that acknowledged syncs cover
# A persist that must write every position (a settle, a close) waits this long for its offset syncs.
SYNC_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class _Sending:
    """Offset syncs sent and not yet acknowledged, and the positions they cover (as when they were sent)."""

    drained: list[tuple[PartitionState, list[OffsetSync]]]
    positions: dict[TopicPartition, Covered]
