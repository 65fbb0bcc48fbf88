"""Throughput and latency percentiles per partition and window, on known values."""

from __future__ import annotations

from datetime import timedelta

from pyspark.testing import assertDataFrameEqual

from dashboards.spark.latency import latency_percentiles
from dashboards.spark.throughput import flow_throughput
from tests.dashboards.conftest import sample

WINDOW = timedelta(minutes=1)


def test_throughput_is_covered_rate_with_percentiles_of_slice_rates(spark, samples_df):
    rows = [
        sample(at_s=0, end=0, position=0, records=100, bytes_=1_000_000, interval_s=10),
        sample(at_s=10, end=0, position=0, records=300, bytes_=3_000_000, interval_s=10),
        sample(at_s=60, end=0, position=0, records=50, bytes_=500_000, interval_s=5),  # next window
    ]
    result = flow_throughput(samples_df(rows), WINDOW).select(
        "samples",
        "records",
        "records_per_s",
        "mb_per_s",
        "records_per_s_p50",
        "records_per_s_p95",
        "records_per_s_max",
        "mb_per_s_max",
    )
    expected = spark.createDataFrame(
        [(2, 400, 20.0, 0.2, 20.0, 29.0, 30.0, 0.3), (1, 50, 10.0, 0.1, 10.0, 10.0, 10.0, 0.1)],
        "samples long, records long, records_per_s double, mb_per_s double, records_per_s_p50 double, "
        "records_per_s_p95 double, records_per_s_max double, mb_per_s_max double",
    )
    assertDataFrameEqual(result, expected)


def test_a_slice_without_duration_counts_records_but_no_rate(spark, samples_df):
    rows = [
        sample(at_s=0, end=0, position=0, records=100, bytes_=100, interval_s=10),
        sample(at_s=5, end=0, position=0, records=7, bytes_=7, interval_s=0),
    ]
    row = flow_throughput(samples_df(rows), WINDOW).collect()[0]
    assert (row.records, row.records_per_s_max) == (107, 10.0)


def test_latency_percentiles_leave_out_idle_slices(spark, samples_df):
    ages = [10.0, 20.0, 30.0, 40.0]
    rows = [
        sample(at_s=i, end=0, position=0, record_age_ms=age, replication_latency_ms=age + 5)
        for i, age in enumerate(ages)
    ]
    rows.append(sample(at_s=9, end=0, position=0))  # replicated nothing: no latency
    result = latency_percentiles(samples_df(rows), WINDOW).select(
        "samples",
        "record_age_ms_p50",
        "record_age_ms_p95",
        "record_age_ms_p99",
        "record_age_ms_max",
        "replication_latency_ms_p50",
        "replication_latency_ms_max",
    )
    expected = spark.createDataFrame(
        [(4, 25.0, 38.5, 39.7, 40.0, 30.0, 45.0)],
        "samples long, record_age_ms_p50 double, record_age_ms_p95 double, record_age_ms_p99 double, "
        "record_age_ms_max double, replication_latency_ms_p50 double, replication_latency_ms_max double",
    )
    assertDataFrameEqual(result, expected)


def test_empty_input_gives_no_rows(samples_df):
    assert flow_throughput(samples_df([]), WINDOW).count() == 0
    assert latency_percentiles(samples_df([]), WINDOW).count() == 0
