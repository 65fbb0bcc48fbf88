"""The replication-latency histogram: buckets, weighting by records, and its Prometheus form per flow."""

from __future__ import annotations

from types import SimpleNamespace

from controlplane.metrics.prometheus import latency_histogram
from replication.metrics import LATENCY_BUCKETS_MS, MirrorMetrics, cumulative, latency_bucket


def test_a_latency_falls_in_the_first_bucket_at_or_above_it_and_past_the_last_in_the_overflow():
    assert latency_bucket(0) == 0 and latency_bucket(5) == 0 and latency_bucket(5.1) == 1
    assert latency_bucket(60000) == len(LATENCY_BUCKETS_MS) - 1
    assert latency_bucket(60001) == len(LATENCY_BUCKETS_MS)
    assert cumulative([1, 0, 2, 3]) == [1, 1, 3, 6]


def test_observations_are_weighted_by_the_records_acknowledged_and_kept_per_partition():
    metrics = MirrorMetrics(clock=lambda: 100.0)
    observe = dict(topic="A.t", partition=0, source_topic="t", now=100.0)
    metrics.record_latency(latency_ms=20.0, records=3, **observe)
    metrics.record_latency(latency_ms=700.0, records=1, **observe)
    metrics.record_latency(latency_ms=1.0, records=0, **observe)  # nothing acknowledged: no observation
    partition = metrics.snapshot().partition("A.t", 0)
    counts = list(partition.latency_counts)
    assert counts[latency_bucket(20.0)] == 3 and counts[latency_bucket(700.0)] == 1 and sum(counts) == 4
    assert partition.latency_sum_ms == 20.0 * 3 + 700.0


def test_the_flow_histogram_sums_its_partitions_in_seconds_and_skips_rows_of_another_layout():
    width = len(LATENCY_BUCKETS_MS) + 1
    first = [0] * width
    first[latency_bucket(20)] = 3
    second = [0] * width
    second[latency_bucket(700)] = 1
    rows = [
        SimpleNamespace(latency_counts=first, latency_sum_ms=60.0),
        SimpleNamespace(latency_counts=second, latency_sum_ms=700.0),
        SimpleNamespace(latency_counts=[5, 5], latency_sum_ms=999.0),  # another version's buckets
    ]
    buckets, total_s = latency_histogram(rows)
    as_dict = dict(buckets)
    assert as_dict["0.025"] == 3 and as_dict["0.5"] == 3 and as_dict["1"] == 4 and as_dict["+Inf"] == 4
    assert total_s == 0.76
    assert latency_histogram([SimpleNamespace(latency_counts=[], latency_sum_ms=0.0)]) is None
