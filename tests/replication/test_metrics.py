"""Metrics math, without a broker: rates, records behind, gaps, the snapshot."""

from __future__ import annotations

from collections import deque

import pytest

from replication.metrics import GapEvent, MirrorMetrics, records_behind, seconds_behind, windowed_rate


@pytest.mark.parametrize(
    ("end", "last_fetched", "next_offset", "position", "behind"),
    [
        (100, 49, 50, None, 50),
        (100, None, 100, None, 0),
        (40, 59, 50, None, 10),  # the broker reports an end below what it served: use the fetched offset
        (10, None, 50, None, 0),  # never negative
        (None, None, 0, None, 0),
        (None, 0, 0, None, 1),
        (4, 2, 3, None, 1),  # a commit marker at 3, unknown as such: counted (an upper bound)
        (4, 2, 3, 4, 0),  # the consumer went past it: no record is behind
        (12, 2, 3, 4, 8),  # ... records after the marker are
        (12, 5, 3, 8, 3 + 4),  # 3 read, not acknowledged yet; markers at 6 and 7; 8..11 not read
    ],
)
def test_records_behind(end, last_fetched, next_offset, position, behind):
    assert (
        records_behind(
            source_end_offset=end,
            last_fetched_offset=last_fetched,
            next_offset=next_offset,
            consumer_position=position,
        )
        == behind
    )


def test_windowed_rate_over_the_window_then_zero_when_idle():
    samples = deque([(0.0, 0), (10.0, 100), (20.0, 300)])
    assert windowed_rate(samples, now=20.0, window_s=30.0) == pytest.approx(15.0)
    assert windowed_rate(samples, now=35.0, window_s=30.0) == pytest.approx(300 / 35)
    assert windowed_rate(samples, now=45.0, window_s=30.0) == pytest.approx(200 / 35)  # baseline moved to 10
    assert windowed_rate(samples, now=100.0, window_s=30.0) == 0.0


def test_snapshot_per_remote_partition_and_totals():
    metrics = MirrorMetrics(rate_window_s=30.0)
    common = {"topic": "A.orders", "source_topic": "orders"}
    metrics.record_position(
        partition=0, next_offset=0, source_end_offset=500, last_fetched_offset=None, now=0.0, **common
    )
    metrics.record_replicated(
        partition=0, records=100, byte_count=4000, replication_latency_ms=12.0, now=10.0, **common
    )
    metrics.record_replicated(
        partition=0, records=200, byte_count=8000, replication_latency_ms=8.0, now=20.0, **common
    )
    metrics.record_polled(partition=0, record_age_ms=250.0, now=20.0, **common)
    metrics.record_position(
        partition=0,
        next_offset=300,
        source_end_offset=500,
        last_fetched_offset=349,
        skipped=2,
        now=20.0,
        **common,
    )
    metrics.record_replicated(
        partition=1, records=7, byte_count=70, replication_latency_ms=None, now=20.0, **common
    )

    snapshot = metrics.snapshot(now=20.0)
    p0 = snapshot.partition("A.orders", 0)
    assert (p0.record_count, p0.byte_count, p0.records_behind, p0.skipped_count) == (300, 12000, 200, 2)
    assert p0.record_rate == pytest.approx(15.0) and p0.byte_rate == pytest.approx(600.0)
    assert (p0.record_age_ms, p0.replication_latency_ms) == (250.0, 8.0)
    assert (snapshot.records, snapshot.bytes, snapshot.records_behind, len(snapshot)) == (307, 12070, 200, 2)
    assert [p.partition for p in snapshot] == [0, 1]


def test_gaps_are_counted_with_their_events_and_errors_kept():
    metrics = MirrorMetrics()
    retention = GapEvent("orders", 0, 100, 130, 30, 5.0, "retention")
    recreated = GapEvent("orders", 0, 200, 0, None, 6.0, "recreated")
    metrics.record_gap(retention, topic="A.orders", source_topic="orders", stopped=False)
    metrics.record_gap(recreated, topic="A.orders", source_topic="orders", stopped=True)
    metrics.record_error(topic="A.orders", partition=0, source_topic="orders", message="stopped", now=6.0)
    snapshot = metrics.snapshot(now=7.0)
    p0 = snapshot.partition("A.orders", 0)
    assert (p0.gap_count, p0.lost_records, p0.stopped, p0.last_error) == (2, 30, True, "stopped")
    assert snapshot.gap_events == (retention, recreated)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({"records_behind": 0, "last_replicated_timestamp_ms": 1_000.0}, 0.0),  # nothing behind: 0
        ({"records_behind": 5, "oldest_unreplicated_timestamp_ms": 95_500.0}, 4.5),  # the record's own age
        ({"records_behind": 5, "last_replicated_timestamp_ms": 90_000.0}, 10.0),  # bound: the last replicated
        ({"records_behind": 5, "caught_up_at": 97.0}, 3.0),  # bound: the last time nothing was behind
        ({"records_behind": 5, "last_replicated_timestamp_ms": 90_000.0, "caught_up_at": 97.0}, 3.0),
        ({"records_behind": 5, "last_replicated_timestamp_ms": 101_000.0}, 0.0),  # a clock ahead: never < 0
        ({"records_behind": 5}, None),  # neither known: unknown, not 0
        ({"records_behind": 5, "oldest_unreplicated_timestamp_ms": -1}, None),  # a record without timestamp
    ],
)
def test_seconds_behind_is_the_age_of_the_oldest_unreplicated_record(kwargs, expected):
    assert seconds_behind(now=100.0, **kwargs) == (None if expected is None else pytest.approx(expected))


def test_snapshot_seconds_behind_never_understates_the_age_of_what_is_not_replicated():
    metrics = MirrorMetrics()
    common = {"topic": "A.orders", "partition": 0, "source_topic": "orders"}
    # End unknown: not proof of being caught up, so nothing bounds the age yet.
    metrics.record_position(
        next_offset=0, source_end_offset=None, last_fetched_offset=None, now=5.0, **common
    )
    metrics.record_position(next_offset=0, source_end_offset=3, last_fetched_offset=None, now=6.0, **common)
    assert metrics.snapshot(now=6.0)[0].seconds_behind is None
    metrics.record_replicated(
        records=3, byte_count=30, replication_latency_ms=5.0, last_timestamp_ms=6_500.0, now=7.0, **common
    )
    metrics.record_position(next_offset=3, source_end_offset=3, last_fetched_offset=2, now=10.0, **common)
    assert metrics.snapshot(now=10.0)[0].seconds_behind == 0.0  # caught up at 10
    # 40 records arrive; the worker has not read them: they are younger than the moment it was caught up.
    metrics.record_position(next_offset=3, source_end_offset=43, last_fetched_offset=2, now=14.0, **common)
    behind = metrics.snapshot(now=14.0)[0]
    assert (behind.records_behind, behind.seconds_behind) == (40, pytest.approx(4.0))
    # Some of them replicated: the last one's timestamp (newer than the caught-up time) bounds the rest.
    metrics.record_replicated(
        records=10, byte_count=100, replication_latency_ms=9.0, last_timestamp_ms=12_000.0, now=20.0, **common
    )
    metrics.record_position(next_offset=13, source_end_offset=43, last_fetched_offset=12, now=20.0, **common)
    assert metrics.snapshot(now=20.0)[0].seconds_behind == pytest.approx(8.0)  # 20 - 12 (newer than 10)
    assert metrics.snapshot(now=20.0).seconds_behind == pytest.approx(8.0)  # the worst partition's
    # record_age_ms (MM2's) is a different measure and keeps its own name.
    metrics.record_polled(topic="A.orders", partition=0, source_topic="orders", record_age_ms=50.0, now=20.0)
    assert metrics.snapshot(now=20.0)[0].record_age_ms == 50.0


def test_a_snapshot_computes_anew_only_what_was_recorded_or_moves_with_the_clock():
    """Issue 34: an idle partition's metrics are last snapshot's object (the status write then skips it by
    identity); a partition recorded since, one whose rate has not decayed yet and one behind (its age
    grows) are computed anew. Every snapshot equals computing every partition again."""
    clock = [1000.0]
    metrics = MirrorMetrics(rate_window_s=30, clock=lambda: clock[0])

    def replicate(partition: int, *, end: int, at: float) -> None:
        metrics.record_replicated(
            topic="A.t",
            partition=partition,
            source_topic="t",
            records=5,
            byte_count=50,
            replication_latency_ms=3.0,
            now=at,
            last_timestamp_ms=at * 1000,
        )
        metrics.record_position(
            topic="A.t",
            partition=partition,
            source_topic="t",
            next_offset=5,
            source_end_offset=end,
            last_fetched_offset=4,
            now=at,
        )

    for partition in range(6):
        replicate(partition, end=5, at=900.0)  # long ago: rates decayed, caught up
    replicate(4, end=5, at=990.0)  # within the rate window
    replicate(5, end=9, at=900.0)  # 4 records behind

    def fresh() -> list:
        return [
            metrics._partition_metrics("A.t", p, metrics._partitions[("A.t", p)], clock[0]) for p in range(6)
        ]

    first = metrics.snapshot()
    assert list(first.partitions) == fresh()
    clock[0] = 1010.0
    metrics.record_error(topic="A.t", partition=2, source_topic="t", message="boom", now=clock[0])
    second = metrics.snapshot()

    assert list(second.partitions) == fresh()
    reused = [p for p in range(6) if second[p] is first[p]]
    assert reused == [0, 1, 3]  # 2 recorded, 4 still has a rate, 5 is behind
    assert second[5].seconds_behind > first[5].seconds_behind
    clock[0] = 1100.0  # the rate window passed: partition 4 idle from now on
    assert list(metrics.snapshot().partitions) == fresh()
    third, fourth = metrics.snapshot(), metrics.snapshot()
    assert [p for p in range(6) if fourth[p] is third[p]] == [0, 1, 2, 3, 4]
    metrics.forget(topic="A.t", partition=0)
    assert [p.partition for p in metrics.snapshot()] == [1, 2, 3, 4, 5]
