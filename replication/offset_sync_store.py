"""`OffsetSyncStore`: exact upstream -> downstream offset translation from MM2 offset syncs.

A mirror copies each source partition, in order, to one target partition. Between two points where
(upstream - downstream) changes, upstream offset `u_i + k` was written at downstream offset `d_i + k`.
`MirrorSourceTask` emits an offset sync at a partition's first record and at EVERY change of that
difference (an upstream skip: compaction, transaction markers, a retention gap; a downstream skip:
transaction markers on the target; a rewind after a crash: duplicates), so the syncs describe the whole
mapping and translation is exact, where MM2 keeps 64 syncs and translates at most one offset past one.

Translation of a consumer's committed upstream offset `c` (the next record it wants):

* the latest sync `(u_i, d_i)` with `u_i <= c` gives `d_i + (c - u_i)`;
* never past the next sync's `d_{i+1}`: when `c` falls in an upstream gap before `u_{i+1}`, those
  upstream offsets have no record and the consumer's next record is the one at `d_{i+1}`;
* past the newest sync `(u_n, d_n)`: at most `d_n + 1`. Syncs are written after the target acknowledged
  their record, so records after `d_n` may already sit on the target with a sync not yet readable; if
  that sync marks an upstream gap, extrapolating `d_n + (c - u_n)` would make the consumer skip records.
  `d_n + 1` never skips (it re-reads at most the records since the newest sync), and it is exact once
  the mirror's periodic progress sync (the newest acknowledged pair) is read, i.e. whenever the flow is
  idle, drained or paused, which is when failover writes group offsets;
* below the oldest known sync: `None`. Nothing proves where those records went, and a guess could make
  a consumer skip records, so no checkpoint is emitted and no group offset is written for them.

Guarantee: for every upstream offset at or above the oldest sync held, the translated offset is one
from which a consumer of the target partition reads, as its next record, the copy of the first
upstream record at or after `c` (or nothing when none is mirrored yet), provided only the mirror writes
to the target partition and `c <= u_n + 1`; for larger `c` it reads from the copy of the first record
after `u_n` (a re-read, never a skip). A result may point into a downstream gap (a transaction marker);
consumers read on to the same next record.

History, memory and compaction: the store keeps the syncs where the difference changes (a sync that
only confirms progress, such as MM2's `offset.lag.max` sync, updates the newest run instead of adding
one) in two int64 arrays per partition, 16 bytes a change, capped at `max_syncs_per_partition` (the
oldest are dropped first). A process reads the offset-syncs topic from its beginning, so it holds every
sync still in the topic plus every one it read since. On Apache Kafka that topic is compacted by key
(topic, partition): after compaction only the newest sync of each partition survives, so a process
started later translates exactly from that sync on and returns `None` for older offsets (groups that far
behind get no checkpoint until they pass it), never a wrong offset. A rewind (a sync whose upstream or
downstream offset is not above the previous one: duplicates after a crash, a recreated target topic)
drops the syncs it invalidates, so offsets from there on translate to the newest copy. A sync below the
newest one that the held syncs already translate exactly is no rewind but old news, written late by a
worker that was frozen past its lease (a zombie): it is ignored, or it would drop its successor's syncs.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from collections.abc import Iterable

from replication.formats import OffsetSync

TopicPartition = tuple[str, int]

DEFAULT_MAX_SYNCS_PER_PARTITION = 1_000_000


class _PartitionSyncs:
    """The offset syncs of one source partition, strictly increasing in both upstream and downstream.

    `run_end[i]` is the downstream offset where the records of run `i` stop: the next sync's downstream
    offset, kept when a rewind drops that sync (-1 for the newest run, which is still growing).
    """

    def __init__(self, *, max_syncs: int) -> None:
        self.upstream = array("q")
        self.downstream = array("q")
        self.run_end = array("q")
        self.max_syncs = max_syncs
        # The newest sync read, which may confirm progress of the newest run without starting a new one.
        self.newest_upstream = -1
        self.newest_downstream = -1

    def add(self, upstream: int, downstream: int) -> None:
        if (upstream, downstream) == (self.newest_upstream, self.newest_downstream):
            return  # re-emitted after a restart: nothing new
        if (
            upstream <= self.newest_upstream
            and downstream <= self.newest_downstream
            and self._describes(upstream, downstream)
        ):
            # Old news, not a rewind: a pair the held syncs already translate exactly, written late (a
            # worker frozen past its lease emits the syncs of what it committed after its successor's).
            return
        if upstream <= self.newest_upstream or downstream <= self.newest_downstream:
            self._drop_invalidated(upstream=upstream, downstream=downstream)
        elif self.upstream and upstream - downstream == self.upstream[-1] - self.downstream[-1]:
            self.newest_upstream, self.newest_downstream = upstream, downstream
            return
        if self.run_end and self.run_end[-1] < 0:
            self.run_end[-1] = downstream
        self.upstream.append(upstream)
        self.downstream.append(downstream)
        self.run_end.append(-1)
        self.newest_upstream, self.newest_downstream = upstream, downstream
        if len(self.upstream) > self.max_syncs:
            # Drop an eighth at a time so trimming the front of the arrays stays amortized O(1).
            excess = len(self.upstream) - self.max_syncs + self.max_syncs // 8
            for column in (self.upstream, self.downstream, self.run_end):
                del column[:excess]

    def _describes(self, upstream: int, downstream: int) -> bool:
        """The held syncs put the record of `upstream` at `downstream`, inside a run (not extrapolated)."""
        index = bisect_right(self.upstream, upstream) - 1
        if index < 0:
            return False
        end = self.run_end[index] if self.run_end[index] >= 0 else self.newest_downstream + 1
        translated = self.downstream[index] + (upstream - self.upstream[index])
        return translated == downstream and translated < end

    def _drop_invalidated(self, *, upstream: int, downstream: int) -> None:
        """A rewind: syncs at or past the new one (either side) no longer describe the target."""
        keep = len(self.upstream)
        while keep and (self.upstream[keep - 1] >= upstream or self.downstream[keep - 1] >= downstream):
            keep -= 1
        for column in (self.upstream, self.downstream, self.run_end):
            del column[keep:]

    def sync_upstream(self, offset: int) -> tuple[int, int] | None:
        """The sync `translate(offset)` rests on: its run's first sync, or the newest sync read when
        `offset` lies past it (the result is then bounded by it)."""
        index = bisect_right(self.upstream, offset) - 1
        if index < 0:
            return None
        if index == len(self.upstream) - 1 and offset >= self.newest_upstream:
            return self.newest_upstream, self.newest_downstream
        return self.upstream[index], self.downstream[index]

    def sync_downstream(self, offset: int) -> tuple[int, int] | None:
        """The sync `translate_back(offset)` rests on (as `sync_upstream`)."""
        index = bisect_right(self.downstream, offset) - 1
        if index < 0:
            return None
        if index == len(self.downstream) - 1 and offset >= self.newest_downstream:
            return self.newest_upstream, self.newest_downstream
        return self.upstream[index], self.downstream[index]

    def translate(self, offset: int) -> int | None:
        index = bisect_right(self.upstream, offset) - 1
        if index < 0:
            return None
        translated = self.downstream[index] + (offset - self.upstream[index])
        if self.run_end[index] >= 0:
            return min(translated, self.run_end[index])
        # Past the newest sync only its own record is proven (see the module docstring).
        return min(translated, self.newest_downstream + 1)

    def translate_back(self, offset: int) -> int | None:
        """The inverse of `translate`: where a consumer at downstream `offset` resumes upstream."""
        index = bisect_right(self.downstream, offset) - 1
        if index < 0:
            return None
        translated = self.upstream[index] + (offset - self.downstream[index])
        if index + 1 < len(self.upstream):
            return min(translated, self.upstream[index + 1])
        return min(translated, self.newest_upstream + 1)


class OffsetSyncStore:
    """Every offset sync read (see the module docstring for what it keeps and what it guarantees)."""

    def __init__(self, *, max_syncs_per_partition: int = DEFAULT_MAX_SYNCS_PER_PARTITION) -> None:
        if max_syncs_per_partition < 1:
            raise ValueError("max_syncs_per_partition must be at least 1")
        self._max_syncs = max_syncs_per_partition
        self._partitions: dict[TopicPartition, _PartitionSyncs] = {}

    def update(self, sync: OffsetSync) -> None:
        """Add a sync; syncs must be fed in the order they were written (the offset-syncs topic order)."""
        key = (sync.topic, sync.partition)
        syncs = self._partitions.get(key)
        if syncs is None:
            syncs = self._partitions[key] = _PartitionSyncs(max_syncs=self._max_syncs)
        syncs.add(sync.upstream_offset, sync.downstream_offset)

    def update_all(self, syncs: Iterable[OffsetSync]) -> None:
        for sync in syncs:
            self.update(sync)

    def translate_downstream(self, topic: str, partition: int, upstream_offset: int) -> int | None:
        """The downstream offset a consumer at `upstream_offset` resumes from, or None if unprovable."""
        syncs = self._partitions.get((topic, partition))
        if syncs is None or upstream_offset < 0:
            return None
        return syncs.translate(upstream_offset)

    def translate_upstream(self, topic: str, partition: int, downstream_offset: int) -> int | None:
        """Failback: the upstream offset from which a consumer of the remote partition at
        `downstream_offset` reads on, on the source (`topic` is the source topic). Exact within the
        runs the syncs describe; past the newest sync at most one past its upstream offset (re-reads,
        never skips); None below the oldest sync."""
        syncs = self._partitions.get((topic, partition))
        if syncs is None or downstream_offset < 0:
            return None
        return syncs.translate_back(downstream_offset)

    def sync_used(
        self, topic: str, partition: int, offset: int, *, downstream: bool = False
    ) -> OffsetSync | None:
        """The offset sync a translation of `offset` (upstream; downstream when `downstream`) rests on;
        None when it cannot be translated."""
        syncs = self._partitions.get((topic, partition))
        if syncs is None or offset < 0:
            return None
        pair = syncs.sync_downstream(offset) if downstream else syncs.sync_upstream(offset)
        return None if pair is None else OffsetSync(topic, partition, *pair)

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._partitions)

    def oldest_upstream_offset(self, topic: str, partition: int) -> int | None:
        """The lowest upstream offset this store can translate (None when it knows no sync)."""
        syncs = self._partitions.get((topic, partition))
        return syncs.upstream[0] if syncs is not None and syncs.upstream else None

    def newest_sync(self, topic: str, partition: int) -> OffsetSync | None:
        syncs = self._partitions.get((topic, partition))
        if syncs is None or syncs.newest_upstream < 0:
            return None
        return OffsetSync(topic, partition, syncs.newest_upstream, syncs.newest_downstream)

    def sync_count(self, topic: str, partition: int) -> int:
        """How many difference changes are held for the partition (a memory figure)."""
        syncs = self._partitions.get((topic, partition))
        return len(syncs.upstream) if syncs is not None else 0
