"""What a `MirrorSourceTask` tells its flow's `MirrorMetrics`, per partition and never per record: the
record age of each fetch's partitions, the replication latency of what was acknowledged (or committed),
and at slice ends the counts, positions and lag of the partitions that moved, started, failed or hold,
plus a rotating share of the others (`Rotation`), so an idle partition's end is seen without a record.

Transactional tasks count what commits included; an aborted transaction's records are counted apart
(`aborted`), never as replicated.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from replication.metrics import GapEvent, MirrorMetrics
from replication.partition_state import PartitionState
from replication.task_io import RecordSource
from replication.topic_partition import TopicPartition

# What a slice looks at besides the partitions that did something: the end-of-slice data-loss check and
# metrics visit the others in turn, each at least every ROTATION_PERIOD_S (a small task all at once).
ROTATION_PERIOD_S = 5.0
ROTATION_MINIMUM = 16


class Rotation:
    """Keys visited in turn: each `take` returns the next share, sized so that every key comes round at
    least every `period_s` (and at least `minimum` keys a time, so a small set is visited whole)."""

    def __init__(self, *, period_s: float = ROTATION_PERIOD_S, minimum: int = ROTATION_MINIMUM) -> None:
        self.period_s, self.minimum = period_s, minimum
        self._keys: list[TopicPartition] = []
        self._next = 0
        self._taken_at: float | None = None

    def reset(self, keys: Sequence[TopicPartition]) -> None:
        self._keys, self._next = list(keys), 0

    def take(self, *, now: float) -> list[TopicPartition]:
        count = len(self._keys)
        elapsed = self.period_s if self._taken_at is None else now - self._taken_at
        self._taken_at = now
        share = min(count, max(self.minimum, math.ceil(count * max(elapsed, 0.0) / self.period_s)))
        start, self._next = self._next, (self._next + share) % count if count else 0
        return [self._keys[(start + i) % count] for i in range(share)]


class TaskMetrics:
    """One task's reporter: `unreported` holds the partitions with news for the next `report`."""

    def __init__(self, *, metrics: MirrorMetrics, source: RecordSource, transactional: bool) -> None:
        self.metrics = metrics
        self._source, self._transactional = source, transactional
        self.unreported: dict[TopicPartition, PartitionState] = {}

    def polled(self, state: PartitionState, now: float) -> None:
        """The partition's records of the last fetch: the age of the newest (MM2's record-age-ms)."""
        assert state.last_polled_timestamp_ms is not None
        self.metrics.record_polled(
            topic=state.remote_topic,
            partition=state.partition,
            source_topic=state.topic,
            record_age_ms=max(now * 1000 - state.last_polled_timestamp_ms, 0.0),
            now=now,
        )
        state.last_polled_timestamp_ms = None

    def latency(self, state: PartitionState, now: float) -> None:
        """The replication latency of the partition's newest acknowledged record, weighted by the records
        acknowledged since the last observation (MM2's replication-latency-ms)."""
        if state.last_acked is state.observed_ack or state.last_acked is None:
            return
        state.observed_ack = state.last_acked
        state.latency_ms = max(now * 1000 - state.last_acked.timestamp()[1], 0.0)
        self.metrics.record_latency(
            topic=state.remote_topic,
            partition=state.partition,
            source_topic=state.topic,
            latency_ms=state.latency_ms,
            records=state.acked_records - state.observed_records,
            now=now,
        )
        state.observed_records = state.acked_records

    def aborted(self, state: PartitionState, records: int, now: float) -> None:
        """Records acknowledged in a transaction that failed: never replicated."""
        self.metrics.record_aborted(
            topic=state.remote_topic,
            partition=state.partition,
            source_topic=state.topic,
            records=records,
            now=now,
        )

    def gap(self, event: GapEvent, state: PartitionState, *, stopped: bool) -> None:
        self.metrics.record_gap(event, topic=state.remote_topic, source_topic=state.topic, stopped=stopped)
        self.unreported[state.key] = state

    def stall(self, state: PartitionState, *, stalled: bool, now: float) -> None:
        """The partition is passed over by the source (True: STALL on its status) or fetched again."""
        self.metrics.record_stall(
            topic=state.remote_topic,
            partition=state.partition,
            source_topic=state.topic,
            stalled=stalled,
            now=now,
        )

    def error(self, key: TopicPartition, *, remote_topic: str, message: str, now: float) -> None:
        """A source partition's last error, as its status shows it."""
        self.metrics.record_error(
            topic=remote_topic, partition=key[1], source_topic=key[0], message=message, now=now
        )

    def report(
        self,
        states: Mapping[TopicPartition, PartitionState],
        *,
        held: Mapping[TopicPartition, PartitionState],
        now: float,
        swept: Sequence[TopicPartition] = (),
    ) -> None:
        """The metrics of the partitions that moved, started or failed since the last report, of the `held`
        ones (a held partition falls behind while nothing of it moves) and of the `swept` share of the
        others (an idle partition's source end and consumer position change without a record to fetch:
        transaction markers, a stopped partition)."""
        reported, self.unreported = self.unreported, {}
        reported.update((key, states[key]) for key in swept if key in states)
        reported.update(held)
        for key, state in reported.items():
            if states.get(key) is not state:
                continue
            # Transactional: what the commits included (an aborted transaction's records never count).
            counted, counted_bytes = (
                (state.committed_records, state.committed_bytes)
                if self._transactional
                else (state.acked_records, state.acked_bytes)
            )
            records = counted - state.reported_records
            if records > 0:
                assert state.last_acked is not None
                self.metrics.record_replicated(
                    topic=state.remote_topic,
                    partition=state.partition,
                    source_topic=state.topic,
                    records=records,
                    byte_count=counted_bytes - state.reported_bytes,
                    replication_latency_ms=state.latency_ms,
                    now=now,
                    last_timestamp_ms=state.last_acked.timestamp()[1],
                )
                state.reported_records, state.reported_bytes = counted, counted_bytes
            watermarks = self._source.watermarks(*key)
            self.metrics.record_position(
                topic=state.remote_topic,
                partition=state.partition,
                source_topic=state.topic,
                next_offset=state.position,
                source_end_offset=watermarks[1] if watermarks else None,
                last_fetched_offset=state.next_offset - 1,
                # Held: the consumer fetched past the held record, records it was given and dropped; they
                # are behind, so the position does not discount them (markers past it count: a bound).
                consumer_position=None if key in held else self._source.position(*key),
                skipped=state.skipped - state.reported_skipped,
                now=now,
            )
            state.reported_skipped = state.skipped
