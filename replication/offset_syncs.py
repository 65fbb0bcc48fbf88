"""`OffsetSyncWriter`: when an acknowledged (upstream, downstream) pair becomes an MM2 offset sync.

A mirror writes each source partition to one target partition in order, so between two points where
(upstream - downstream) changes, upstream offset `u + k` sits at downstream offset `d + k`. A sync at the
first record of a partition in this task's life and at EVERY change of that difference (an upstream
skip: compaction, transaction markers, a retention gap; a rewind: duplicates after a restart; a target
that went backwards) therefore describes the whole mapping, and `OffsetSyncStore` translates exactly.

For MM2's own readers (which translate at most one offset past a sync) the writer also keeps MM2's
`offset.lag.max` rule, a sync once the downstream offset has moved `offset.lag.max` past the last one,
and a periodic progress sync of the newest acknowledged pair, like MM2's syncs at offset commits.

Pure: no I/O, time passed in. The task drains the decided syncs, sends them through an
`OffsetSyncEmitter` and persists the positions they cover only once they are acknowledged, so a crash
never leaves a translated range without its sync.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from replication.formats import OffsetSync

PROGRESS_SYNC_INTERVAL_S = 5.0


class OffsetSyncEmitter(Protocol):
    def send(self, records: Sequence[OffsetSync]) -> None:
        """Start writing the syncs, without waiting for the cluster (`delivered` says when it
        acknowledged them); raise when they cannot be sent."""

    def delivered(self, *, timeout_s: float) -> bool:
        """Whether the cluster acknowledged every sync sent, waiting up to `timeout_s` for it (0: a look
        only); raise when one of them failed."""

    def prepare(self) -> None:
        """Open the connections and the topic now, so that the first `emit` does not wait for them."""

    def close(self) -> None: ...


class OffsetSyncWriter:
    """The offset-sync decisions of one source partition, fed with acknowledged pairs in offset order."""

    __slots__ = (
        "topic",
        "partition",
        "_offset_lag_max",
        "_difference",
        "_last_sync",
        "_last_progress_at",
        "_latest_upstream",
        "_latest_downstream",
        "_due",
    )

    def __init__(self, *, topic: str, partition: int, offset_lag_max: int) -> None:
        self.topic, self.partition = topic, partition
        self._offset_lag_max = offset_lag_max
        self._difference: int | None = None  # upstream - downstream of the current run; None: no sync yet
        self._last_sync: tuple[int, int] | None = None
        self._last_progress_at: float | None = None
        self._latest_upstream = -1
        self._latest_downstream = -1
        self._due: list[OffsetSync] = []

    def on_ack(self, upstream: int, downstream: int) -> None:
        """The target acknowledged source offset `upstream` at `downstream` (a record outside a run)."""
        last_sync_downstream = self._last_sync[1] if self._last_sync is not None else -1
        # MM2 translates one past a sync, hence the + 1 in its offset.lag.max rule.
        if (
            upstream - downstream != self._difference
            or downstream - (last_sync_downstream + 1) >= self._offset_lag_max
        ):
            self._sync(upstream, downstream)
        self._latest_upstream, self._latest_downstream = upstream, downstream

    def on_run(self, upstream: int, downstream: int, count: int) -> None:
        """`count` acknowledged pairs `(upstream + k, downstream + k)` in order: the same syncs as `on_ack`
        for each, decided per sync instead of per record (one difference, so only the first pair and
        the `offset.lag.max` rule can sync)."""
        last = downstream + count - 1
        start = downstream
        if upstream - downstream != self._difference:
            self._sync(upstream, downstream)
            start += 1
        assert self._last_sync is not None  # a difference was known, or was just synced
        difference, lag = upstream - downstream, self._offset_lag_max
        synced = max(start, self._last_sync[1] + 1 + lag)
        while synced <= last:
            self._sync(synced + difference, synced)
            synced += 1 + max(lag, 0)
        self._latest_upstream, self._latest_downstream = last + difference, last

    def _sync(self, upstream: int, downstream: int) -> None:
        self._difference = upstream - downstream
        self._last_sync = (upstream, downstream)
        self._due.append(OffsetSync(self.topic, self.partition, upstream, downstream))

    def drain(self, *, now: float, final: bool = False) -> list[OffsetSync]:
        """The syncs to emit now, in order; adds a progress sync when one is due. Clears them.

        `final` (the task is closing: paused, reassigned, failing over) always adds the progress sync, so
        translation is exact up to the last acknowledged record the moment replication stops.
        """
        if self._last_progress_at is None:
            self._last_progress_at = now
        progressed = self._last_sync is not None and self._last_sync[0] < self._latest_upstream
        if progressed and (final or now - self._last_progress_at >= PROGRESS_SYNC_INTERVAL_S):
            self._sync(self._latest_upstream, self._latest_downstream)
        if self._due:
            self._last_progress_at = now
        due, self._due = self._due, []
        return due

    @property
    def idle(self) -> bool:
        """Nothing to emit, now or later, before the next acknowledgement (no sync due, no progress
        sync pending): a task does not look at an idle writer until its partition moves again."""
        return not self._due and (self._last_sync is None or self._last_sync[0] >= self._latest_upstream)

    def requeue(self, syncs: Sequence[OffsetSync]) -> None:
        """Put back syncs whose emission failed, ahead of any decided since, so they go out first."""
        self._due[:0] = syncs
