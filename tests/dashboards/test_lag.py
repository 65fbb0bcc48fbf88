"""Lag in records and seconds: interpolation, extrapolation, lookback, epochs, windows, empty input."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from dashboards.spark.lag import partition_lag, sample_lag
from tests.dashboards.conftest import T0, sample

# End offsets 100, 200, 400, 600 at t = 0, 10, 20, 30: production speeds up from 10/s to 20/s.
POINTS = [(0, 100), (10, 200), (20, 400), (30, 600)]


def lag_rows(frame):
    return frame.select("ts", "records_behind", "seconds_behind")


def test_seconds_behind_interpolates_between_the_points_around_the_position(spark, samples_df):
    positions = [0, 150, 400, 300]
    samples = samples_df(
        [sample(at_s=t, end=e, position=p) for (t, e), p in zip(POINTS, positions, strict=True)]
    )
    expected = spark.createDataFrame(
        [
            # Only one point so far: when offset 0 was produced is unknown.
            (T0, 100, None),
            # 150 lies between 100 (t=0) and 200 (t=10): produced at t=5.
            (T0 + timedelta(seconds=10), 50, 5.0),
            (T0 + timedelta(seconds=20), 0, 0.0),  # caught up
            # 300 lies between 200 (t=10) and 400 (t=20): produced at t=15, 15 s before t=30.
            (T0 + timedelta(seconds=30), 300, 15.0),
        ],
        "ts timestamp, records_behind long, seconds_behind double",
    )
    assertDataFrameEqual(lag_rows(sample_lag(samples)), expected)


def test_seconds_behind_extrapolates_from_the_oldest_point_of_the_lookback(spark, samples_df):
    positions = [100, 200, 400, 150]
    samples = samples_df(
        [sample(at_s=t, end=e, position=p) for (t, e), p in zip(POINTS, positions, strict=True)]
    )
    last = T0 + timedelta(seconds=30)
    # With a long lookback 150 is interpolated between t=0 and t=10: produced at t=5, 25 s behind.
    long = sample_lag(samples, lookback=timedelta(hours=1)).where(f"ts = '{last.isoformat()}'")
    assertDataFrameEqual(
        lag_rows(long),
        spark.createDataFrame(
            [(last, 450, 25.0)], "ts timestamp, records_behind long, seconds_behind double"
        ),
    )
    # A 15 s lookback keeps the points at t=20 and 30 only (20/s): 150 was produced 250 records = 12.5 s
    # before t=20, so at t=7.5, 22.5 s behind.
    short = sample_lag(samples, lookback=timedelta(seconds=15)).where(f"ts = '{last.isoformat()}'")
    assertDataFrameEqual(
        lag_rows(short),
        spark.createDataFrame(
            [(last, 450, 22.5)], "ts timestamp, records_behind long, seconds_behind double"
        ),
    )


def test_a_source_log_that_restarts_forgets_the_old_points(spark, samples_df):
    # The topic was recreated between t=10 and t=20: end offsets drop from 2000 to 100.
    rows = [(0, 1000, 1000), (10, 2000, 2000), (20, 100, 100), (30, 300, 200)]
    samples = samples_df([sample(at_s=t, end=e, position=p) for t, e, p in rows])
    last = T0 + timedelta(seconds=30)
    # 200 lies between the new log's 100 (t=20) and 300 (t=30): produced at t=25.
    assertDataFrameEqual(
        lag_rows(sample_lag(samples).where(f"ts = '{last.isoformat()}'")),
        spark.createDataFrame([(last, 100, 5.0)], "ts timestamp, records_behind long, seconds_behind double"),
    )


def test_an_end_offset_below_the_position_is_caught_up_not_negative(spark, samples_df):
    samples = samples_df([sample(at_s=0, end=100, position=100), sample(at_s=10, end=90, position=120)])
    assert [(r.records_behind, r.seconds_behind) for r in sample_lag(samples).orderBy("ts").collect()] == [
        (0, 0.0),
        (0, 0.0),
    ]


def test_partition_lag_aggregates_per_window_and_a_sample_on_the_edge_opens_the_next(spark, samples_df):
    positions = [0, 150, 400, 300]
    samples = samples_df(
        [sample(at_s=t, end=e, position=p) for (t, e), p in zip(POINTS, positions, strict=True)]
    )
    result = partition_lag(samples, timedelta(seconds=20)).select(
        "window_start",
        "window_end",
        "samples",
        "records_behind_last",
        "records_behind_max",
        "records_behind_avg",
        "seconds_behind_last",
        "seconds_behind_max",
        "seconds_behind_avg",
    )
    at = lambda s: T0 + timedelta(seconds=s)  # noqa: E731
    expected = spark.createDataFrame(
        [
            (at(0), at(20), 2, 50, 100, 75.0, 5.0, 5.0, 5.0),  # the unknown first value is left out
            (at(20), at(40), 2, 300, 300, 150.0, 15.0, 15.0, 7.5),  # t=20 opens this window
        ],
        "window_start timestamp, window_end timestamp, samples long, records_behind_last long, "
        "records_behind_max long, records_behind_avg double, seconds_behind_last double, "
        "seconds_behind_max double, seconds_behind_avg double",
    )
    assertDataFrameEqual(result, expected)


def test_empty_input_gives_empty_lag(samples_df):
    assert partition_lag(samples_df([]), timedelta(minutes=5)).count() == 0


def test_a_sample_without_an_end_offset_is_no_point_and_its_lag_is_unknown(spark, samples_df):
    """A slice that read no watermarks writes a null end offset: its lag is unknown, not 0, and its
    position is not a point to interpolate between."""
    samples = samples_df(
        [
            sample(at_s=0, end=100, position=100),
            sample(at_s=10, end=None, position=150),
            sample(at_s=20, end=300, position=200),  # between the points at 0 (100) and 20 (300): 10 s
            sample(at_s=40, end=None, position=250),  # a window with no known end offset
        ]
    )
    per_sample = (
        sample_lag(samples)
        .where(F.col("ts") == T0 + timedelta(seconds=10))
        .select("records_behind", "seconds_behind")
    )
    assert [tuple(row) for row in per_sample.collect()] == [(None, None)]
    result = partition_lag(samples, timedelta(seconds=20)).select(
        "samples",
        "records_behind_last",
        "records_behind_max",
        "records_behind_avg",
        "seconds_behind_last",
        "seconds_behind_max",
    )
    expected = spark.createDataFrame(
        [(2, None, 0, 0.0, None, 0.0), (1, 100, 100, 100.0, 10.0, 10.0), (1, None, None, None, None, None)],
        "samples long, records_behind_last long, records_behind_max long, records_behind_avg double, "
        "seconds_behind_last double, seconds_behind_max double",
    )
    assertDataFrameEqual(result, expected)
