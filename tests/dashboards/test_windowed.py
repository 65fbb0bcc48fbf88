"""The numpy aggregates of the report job's grouped pass against Spark's, and the carry rule."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from pyspark.sql import functions as F

from dashboards.spark.jobs import carried_rows
from dashboards.spark.windowed import (
    count_per_window,
    longs,
    max_of_doubles,
    max_of_longs,
    sum_of_doubles,
    sum_of_longs,
)


def test_sums_maxima_and_counts_are_sparks_to_the_last_bit(spark):
    rng = np.random.default_rng(11)
    windows = np.repeat(np.arange(6), [300, 1, 2, 257, 40, 3])
    doubles = rng.lognormal(0.0, 6.0, len(windows)) * rng.choice([-1.0, 1.0], len(windows))
    doubles[rng.random(len(windows)) < 0.1] = np.nan
    doubles[windows == 2] = np.nan  # a window without a value: null
    integers = rng.integers(-(10**12), 10**12, len(windows))
    known = rng.random(len(windows)) > 0.1
    known[windows == 1] = False
    rows = [
        (int(w), None if np.isnan(d) else float(d), int(i) if k else None)
        for w, d, i, k in zip(windows, doubles, integers, known, strict=True)
    ]
    # One partition: Spark's partial aggregation then adds each window's values in row order.
    frame = spark.createDataFrame(rows, "window int, d double, i long").coalesce(1)
    expected = {
        row.window: row
        for row in frame.groupBy("window")
        .agg(
            F.sum("d").alias("sum_d"),
            F.sum("i").alias("sum_i"),
            F.max("d").alias("max_d"),
            F.max(F.coalesce("i", F.lit(0))).alias("max_i"),
            F.count("d").alias("count_d"),
        )
        .collect()
    }
    count = 7  # window 6 has no row at all
    table = pa.table({"i": pa.array(integers, mask=~known)})
    sums_i, present_i = sum_of_longs(*longs(table, "i"), windows, count)
    actual = {
        "sum_d": sum_of_doubles(doubles, windows, count),
        "max_d": max_of_doubles(doubles, windows, count),
        "max_i": max_of_longs(np.where(known, integers, 0), windows, count),
        "count_d": count_per_window(windows, count, ~np.isnan(doubles)),
    }
    for window in range(count):
        row = expected.get(window)
        if row is None:
            assert np.isnan(actual["sum_d"][window]) and not present_i[window]
            continue
        assert (None if np.isnan(actual["sum_d"][window]) else actual["sum_d"][window]) == row.sum_d
        assert (None if np.isnan(actual["max_d"][window]) else actual["max_d"][window]) == row.max_d
        assert (int(sums_i[window]) if present_i[window] else None) == row.sum_i
        assert actual["max_i"][window] == row.max_i
        assert actual["count_d"][window] == row.count_d
    # The test can tell: numpy's pairwise sum of the long window is a few bits away from Spark's.
    pairwise = np.add.reduce(np.nan_to_num(doubles[windows == 0]))
    assert pairwise != expected[0].sum_d


def test_the_carry_keeps_the_lookback_and_the_samples_before_it_that_burrow_needs():
    minute = 60_000_000
    micros = np.array([50, 0, 10, 20, 30, 40, 55, 60]) * minute  # out of time order on purpose
    sealed = np.array([True, True, True, True, True, True, True, False])  # the newest is not sealed
    # Sealed newest: 55; lookback 10 minutes keeps 50 and 55 (45 onwards), plus the 2 before them.
    rows = carried_rows(micros, sealed, lookback_s=600, window_samples=3)
    assert (micros[rows] // minute).tolist() == [30, 40, 50, 55]
    assert carried_rows(micros, sealed, lookback_s=600, window_samples=1).tolist() == [0, 6]
    assert carried_rows(micros, np.zeros(8, bool), lookback_s=600, window_samples=3).tolist() == []
