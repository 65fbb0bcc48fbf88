"""MirrorMaker 2's per-partition replication metrics, plus lag and the data-loss detector.

Per remote topic and partition: record-count, record-rate, byte-count, byte-rate, record-age-ms (at
poll: now - record timestamp), replication-latency-ms (at target ack: now - record timestamp), and what
MM2 lacks: the lag, `records_behind` and `seconds_behind` (defined once, in docs/lag.md, and computed
by the two functions of that name below), gap events (records the source deleted before they were
replicated) and the last error. Tasks report once per batch or slice, never per record; `snapshot()` is
what workers store and the runner logs.
Thread-safe: the tasks of a flow share one `MirrorMetrics`. Time is passed in (or read from `clock`).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

DEFAULT_RATE_WINDOW_S = 30.0
MAX_GAP_EVENTS = 1000
# Upper bounds (ms) of the replication-latency histogram's buckets; one more bucket holds what is above.
LATENCY_BUCKETS_MS = (5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000)


def latency_bucket(latency_ms: float) -> int:
    """The index of the bucket a latency falls in: the first bound at or above it, else the overflow."""
    return next(
        (i for i, bound in enumerate(LATENCY_BUCKETS_MS) if latency_ms <= bound), len(LATENCY_BUCKETS_MS)
    )


def cumulative(counts: Iterator[int] | tuple[int, ...] | list[int]) -> list[int]:
    """Per-bucket counts -> Prometheus's cumulative `le` counts (the last one is the total)."""
    total, result = 0, []
    for count in counts:
        total += count
        result.append(total)
    return result


RemotePartition = tuple[str, int]


@dataclass(frozen=True)
class GapEvent:
    """Source records that no longer existed when the task reached them: never replicated.

    `lost_records` is None when the count is unknowable: the partition's end went below the position
    (topic deleted and recreated, or truncated), so the records past the position are gone unseen.
    """

    topic: str
    partition: int
    expected_offset: int
    resumed_offset: int
    lost_records: int | None
    detected_at: float
    reason: str


@dataclass(frozen=True)
class PartitionMetrics:
    topic: str  # the remote topic
    partition: int
    source_topic: str
    record_count: int
    record_rate: float
    byte_count: int
    byte_rate: float
    record_age_ms: float | None
    replication_latency_ms: float | None
    records_behind: int
    seconds_behind: float | None  # None: unknown (see `seconds_behind`)
    source_end_offset: int | None
    next_offset: int | None  # next source offset to replicate (the replicated position)
    skipped_count: int  # records not replicated on purpose (the provenance header says they looped)
    gap_count: int
    lost_records: int
    stopped: bool
    last_error: str | None
    # Records wait on the source and the task's source passes it over (replication.fetch_stall): Burrow's
    # STALL, until a record of it is fetched
    stalled: bool = False
    # Records by replication latency since the task started: counts per LATENCY_BUCKETS_MS bucket (and the
    # overflow), and their latencies' sum. Each observation is the newest acknowledged record's latency,
    # weighted by the records acknowledged since the previous one (MM2's replication-latency-ms, per record).
    latency_counts: tuple[int, ...] = ()
    latency_sum_ms: float = 0.0
    # Transactional flows: records the target acknowledged in a transaction that was then aborted (never
    # visible to read_committed readers, not in record_count; replicated again from the last commit).
    aborted_count: int = 0


@dataclass(frozen=True)
class MetricsSnapshot:
    """Every partition's metrics at `at`, plus the gap events; iterates over the partitions."""

    at: float
    partitions: tuple[PartitionMetrics, ...]
    gap_events: tuple[GapEvent, ...] = ()

    def __iter__(self) -> Iterator[PartitionMetrics]:
        return iter(self.partitions)

    def __len__(self) -> int:
        return len(self.partitions)

    def __getitem__(self, index: int) -> PartitionMetrics:
        return self.partitions[index]

    @property
    def records(self) -> int:
        return sum(p.record_count for p in self.partitions)

    @property
    def bytes(self) -> int:
        return sum(p.byte_count for p in self.partitions)

    @property
    def records_behind(self) -> int:
        return sum(p.records_behind for p in self.partitions)

    @property
    def seconds_behind(self) -> float | None:
        """The worst partition's; None when no partition knows its own."""
        return max((p.seconds_behind for p in self.partitions if p.seconds_behind is not None), default=None)

    def partition(self, topic: str, partition: int) -> PartitionMetrics | None:
        return next((p for p in self.partitions if (p.topic, p.partition) == (topic, partition)), None)


def records_behind(
    *,
    source_end_offset: int | None,
    last_fetched_offset: int | None,
    next_offset: int,
    consumer_position: int | None = None,
) -> int:
    """Records the source has that are not replicated yet: source end offset - next offset to replicate,
    less the offsets known to hold no record.

    Records read but not acknowledged yet count; so does every offset from the first one not read to the
    end. `consumer_position` is the consumer's position: offsets below it that the task was not given
    are no records to replicate (transaction markers, aborted or compacted-away records), so a
    transactional partition that is caught up reads 0 and not 1. Without it, markers past the position
    count (an upper bound). A broker may report an end offset below records it already served (the
    embedded broker does), so the end is at least one past the last fetched offset; never negative.
    """
    fetched_end = last_fetched_offset + 1 if last_fetched_offset is not None else 0
    end = max(source_end_offset if source_end_offset is not None else 0, fetched_end)
    first_unread = max(consumer_position or 0, fetched_end, next_offset)
    read_unacknowledged = max(fetched_end - next_offset, 0)
    return read_unacknowledged + max(end - first_unread, 0)


def seconds_behind(
    *,
    records_behind: int,
    now: float,
    oldest_unreplicated_timestamp_ms: float | None = None,
    last_replicated_timestamp_ms: float | None = None,
    caught_up_at: float | None = None,
) -> float | None:
    """Age of the oldest source record not yet replicated, in seconds; 0 when none is behind (the RPO).

    Exact when that record's timestamp is known (it was read: `oldest_unreplicated_timestamp_ms`).
    Otherwise a conservative estimate, never below the true age: the record was appended after the last
    replicated record (its timestamp: exact for LogAppendTime, for CreateTime while producers' clocks
    and order agree) and after the last time the partition was seen caught up (`caught_up_at`, epoch
    seconds), so it is at most as old as the newer of the two. None (unknown) when neither is known: a
    task that has neither replicated a record nor caught up since it started.
    """
    if records_behind <= 0:
        return 0.0
    if oldest_unreplicated_timestamp_ms is not None and oldest_unreplicated_timestamp_ms > 0:
        return max(now - oldest_unreplicated_timestamp_ms / 1000, 0.0)
    bounds = [caught_up_at] if caught_up_at is not None else []
    if last_replicated_timestamp_ms is not None and last_replicated_timestamp_ms > 0:
        bounds.append(last_replicated_timestamp_ms / 1000)
    return max(now - max(bounds), 0.0) if bounds else None


def windowed_rate(samples: deque[tuple[float, int]], *, now: float, window_s: float) -> float:
    """Per-second rate of a cumulative counter over the last `window_s`, from (time, total) samples.

    Samples older than the window are dropped except the newest of them, the baseline; an idle counter
    reads 0 once the window has passed.
    """
    while len(samples) > 1 and samples[1][0] <= now - window_s:
        samples.popleft()
    if not samples:
        return 0.0
    base_at, base_total = samples[0]
    latest_total = samples[-1][1]
    elapsed = now - base_at
    return (latest_total - base_total) / elapsed if elapsed > 0 else 0.0


@dataclass
class _PartitionCounters:
    source_topic: str
    record_count: int = 0
    byte_count: int = 0
    record_samples: deque = field(default_factory=deque)
    byte_samples: deque = field(default_factory=deque)
    record_age_ms: float | None = None
    replication_latency_ms: float | None = None
    latency_counts: list[int] = field(default_factory=lambda: [0] * (len(LATENCY_BUCKETS_MS) + 1))
    latency_sum_ms: float = 0.0
    last_replicated_timestamp_ms: float | None = None
    caught_up_at: float | None = None  # the last report that found nothing behind
    source_end_offset: int | None = None
    last_fetched_offset: int | None = None
    consumer_position: int | None = None
    next_offset: int | None = None
    skipped_count: int = 0
    aborted_count: int = 0
    gap_count: int = 0
    lost_records: int = 0
    stopped: bool = False
    stalled: bool = False
    last_error: str | None = None


def _behind(counters: _PartitionCounters) -> int:
    if counters.next_offset is None:
        return 0
    return records_behind(
        source_end_offset=counters.source_end_offset,
        last_fetched_offset=counters.last_fetched_offset,
        next_offset=counters.next_offset,
        consumer_position=counters.consumer_position,
    )


def _moves_with_time(metrics: PartitionMetrics) -> bool:
    """Whether a partition's figures change with the clock alone: a windowed rate decays to 0 once its
    window passes (a 0 rate stays 0: totals only grow), the age of what is behind grows."""
    return bool(metrics.record_rate or metrics.byte_rate or metrics.records_behind)


class MirrorMetrics:
    def __init__(
        self, *, rate_window_s: float = DEFAULT_RATE_WINDOW_S, clock: Callable[[], float] = time.time
    ) -> None:
        self._rate_window_s = rate_window_s
        self._clock = clock
        self._partitions: dict[RemotePartition, _PartitionCounters] = {}
        self._order: list[RemotePartition] | None = []  # the partitions sorted; None: sort again
        # What the last snapshot computed per partition, and the partitions recorded since: a snapshot
        # computes anew only those and the ones whose figures move with the clock (`_moves_with_time`).
        self._computed: dict[RemotePartition, PartitionMetrics] = {}
        self._touched: set[RemotePartition] = set()
        self._gap_events: deque[GapEvent] = deque(maxlen=MAX_GAP_EVENTS)
        self._lock = threading.Lock()

    def _counters(self, topic: str, partition: int, source_topic: str, now: float) -> _PartitionCounters:
        self._touched.add((topic, partition))
        counters = self._partitions.get((topic, partition))
        if counters is None:
            counters = _PartitionCounters(source_topic=source_topic)
            counters.record_samples.append((now, 0))
            counters.byte_samples.append((now, 0))
            self._partitions[(topic, partition)] = counters
            self._order = None
        return counters

    def record_replicated(
        self,
        *,
        topic: str,
        partition: int,
        source_topic: str,
        records: int,
        byte_count: int,
        replication_latency_ms: float | None,
        now: float,
        last_timestamp_ms: float | None = None,
    ) -> None:
        """`records` more records (`byte_count` bytes of values) acknowledged by the target; the last of
        them has timestamp `last_timestamp_ms` (when known)."""
        with self._lock:
            counters = self._counters(topic, partition, source_topic, now)
            counters.record_count += records
            counters.byte_count += byte_count
            counters.record_samples.append((now, counters.record_count))
            counters.byte_samples.append((now, counters.byte_count))
            if replication_latency_ms is not None:
                counters.replication_latency_ms = replication_latency_ms
            if last_timestamp_ms is not None:
                counters.last_replicated_timestamp_ms = last_timestamp_ms

    def record_aborted(
        self, *, topic: str, partition: int, source_topic: str, records: int, now: float
    ) -> None:
        """`records` acknowledged in a transaction that was aborted: counted apart, never as replicated."""
        with self._lock:
            self._counters(topic, partition, source_topic, now).aborted_count += records

    def record_latency(
        self, *, topic: str, partition: int, source_topic: str, latency_ms: float, records: int, now: float
    ) -> None:
        """`records` records acknowledged with (about) `latency_ms` from their timestamp: the histogram."""
        if records <= 0:
            return
        with self._lock:
            counters = self._counters(topic, partition, source_topic, now)
            counters.latency_counts[latency_bucket(latency_ms)] += records
            counters.latency_sum_ms += latency_ms * records

    def record_polled(
        self, *, topic: str, partition: int, source_topic: str, record_age_ms: float, now: float
    ) -> None:
        with self._lock:
            self._counters(topic, partition, source_topic, now).record_age_ms = record_age_ms

    def record_position(
        self,
        *,
        topic: str,
        partition: int,
        source_topic: str,
        next_offset: int,
        source_end_offset: int | None,
        last_fetched_offset: int | None,
        consumer_position: int | None = None,
        skipped: int = 0,
        now: float,
    ) -> None:
        with self._lock:
            counters = self._counters(topic, partition, source_topic, now)
            counters.next_offset = next_offset
            counters.source_end_offset = source_end_offset
            counters.last_fetched_offset = last_fetched_offset
            counters.consumer_position = consumer_position
            counters.skipped_count += skipped
            if source_end_offset is not None and _behind(counters) == 0:
                counters.caught_up_at = now

    def record_gap(self, event: GapEvent, *, topic: str, source_topic: str, stopped: bool) -> None:
        """A data-loss gap on remote `topic`'s partition `event.partition`."""
        with self._lock:
            counters = self._counters(topic, event.partition, source_topic, event.detected_at)
            counters.gap_count += 1
            counters.lost_records += event.lost_records or 0
            counters.stopped = stopped
            self._gap_events.append(event)

    def record_stall(
        self, *, topic: str, partition: int, source_topic: str, stalled: bool, now: float
    ) -> None:
        """The partition is passed over by its task's source (True), or fetched again or started anew
        (False: nothing recorded when it was not stalled)."""
        with self._lock:
            known = self._partitions.get((topic, partition))
            if (known.stalled if known is not None else False) != stalled:
                self._counters(topic, partition, source_topic, now).stalled = stalled

    def record_error(
        self, *, topic: str, partition: int, source_topic: str, message: str, now: float
    ) -> None:
        with self._lock:
            self._counters(topic, partition, source_topic, now).last_error = message

    def forget(self, *, topic: str, partition: int) -> None:
        """Drop a partition no task of this flow replicates any more."""
        with self._lock:
            if self._partitions.pop((topic, partition), None) is not None:
                self._order = None
            self._computed.pop((topic, partition), None)
            self._touched.discard((topic, partition))

    def snapshot(self, *, now: float | None = None) -> MetricsSnapshot:
        """Every partition's metrics, sorted by (remote topic, partition); sorted again only after a
        partition came or went, not at every snapshot. Computed anew only for the partitions recorded
        since the last snapshot and those whose figures move with the clock (a rate not yet decayed to 0,
        records behind: their age grows); an idle partition's are the same object as last time (what a
        status write compares by identity), exactly what computing them again would give."""
        now = self._clock() if now is None else now
        with self._lock:
            if self._order is None:
                self._order = sorted(self._partitions)
            computed, touched = self._computed, self._touched
            partitions = []
            for key in self._order:
                metrics = computed.get(key)
                if metrics is None or key in touched or _moves_with_time(metrics):
                    metrics = computed[key] = self._partition_metrics(*key, self._partitions[key], now)
                partitions.append(metrics)
            touched.clear()
            return MetricsSnapshot(at=now, partitions=tuple(partitions), gap_events=tuple(self._gap_events))

    def _partition_metrics(
        self, topic: str, partition: int, counters: _PartitionCounters, now: float
    ) -> PartitionMetrics:
        behind = _behind(counters)
        return PartitionMetrics(
            topic=topic,
            partition=partition,
            source_topic=counters.source_topic,
            record_count=counters.record_count,
            record_rate=windowed_rate(counters.record_samples, now=now, window_s=self._rate_window_s),
            byte_count=counters.byte_count,
            byte_rate=windowed_rate(counters.byte_samples, now=now, window_s=self._rate_window_s),
            record_age_ms=counters.record_age_ms,
            replication_latency_ms=counters.replication_latency_ms,
            records_behind=behind,
            seconds_behind=seconds_behind(
                records_behind=behind,
                now=now,
                last_replicated_timestamp_ms=counters.last_replicated_timestamp_ms,
                caught_up_at=counters.caught_up_at,
            ),
            source_end_offset=counters.source_end_offset,
            next_offset=counters.next_offset,
            skipped_count=counters.skipped_count,
            aborted_count=counters.aborted_count,
            gap_count=counters.gap_count,
            lost_records=counters.lost_records,
            stopped=counters.stopped,
            stalled=counters.stalled,
            last_error=counters.last_error,
            latency_counts=tuple(counters.latency_counts),
            latency_sum_ms=counters.latency_sum_ms,
        )
