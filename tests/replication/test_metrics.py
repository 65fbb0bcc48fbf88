"""Metrics math, without a broker: rates, records behind, gaps, the snapshot."""

from __future__ import annotations

from collections import deque

import pytest

from replication.metrics import GapEvent, MirrorMetrics, records_behind, windowed_rate


@pytest.mark.parametrize(
    ("end", "last_fetched", "next_offset", "behind"),
    [
        (100, 49, 50, 50),
        (100, None, 100, 0),
        (40, 59, 50, 10),  # the broker reports an end below what it served: use the fetched offset
        (10, None, 50, 0),  # never negative
        (None, None, 0, 0),
        (None, 0, 0, 1),
    ],
)
def test_records_behind(end, last_fetched, next_offset, behind):
    assert (
        records_behind(source_end_offset=end, last_fetched_offset=last_fetched, next_offset=next_offset)
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
