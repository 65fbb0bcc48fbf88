"""The numpy percentile of the grouped Arrow functions against Spark's exact `percentile`."""

from __future__ import annotations

import numpy as np
import pytest
from pyspark.sql import functions as F
from pyspark.testing import assertDataFrameEqual

from dashboards.spark.percentiles import exact_percentiles

FRACTIONS = [0.0, 0.25, 1 / 3, 0.5, 0.95, 0.99, 1.0]


@pytest.mark.parametrize("window_count", [8, 70_000])  # window indices in 16 bits, and past them
def test_exact_percentiles_are_sparks_to_the_last_bit(spark, window_count):
    rng = np.random.default_rng(7)
    groups = {
        0: [0.1, 0.7, None, 3.3, 0.7],  # even count of known values, a tie, a null
        1: [2.5],  # a single value
        2: [None, None],  # nothing known: null
        3: [1.1, 9.9, 4.4, 7.7, 2.2],  # odd count
        4: [5.0, 5.0, 5.0, 5.0],  # all tied: no interpolation
        5: [0.3, 0.1, 0.2, 0.1, 0.3, 0.7],  # ties at the interpolated ranks
        6: [
            *rng.lognormal(3.0, 2.0, 37).tolist(),
            None,
        ],  # positions between ranks, values of every magnitude
        # 7 and later have no row at all: null, like a window without samples
    }
    rows = [(group, value) for group, values in groups.items() for value in values]
    frame = spark.createDataFrame(rows, "window int, value double")
    spark_result = frame.groupBy("window").agg(F.percentile("value", FRACTIONS).alias("p"))

    windows = np.array([window for window, _ in rows])
    values = np.array([np.nan if value is None else value for _, value in rows])
    result = exact_percentiles(values, windows, window_count=window_count, fractions=FRACTIONS)
    assert np.isnan(result[7:]).all()
    expected = spark.createDataFrame(
        [(window, None if np.isnan(result[window]).all() else result[window].tolist()) for window in groups],
        "window int, p array<double>",
    )
    assertDataFrameEqual(spark_result, expected, rtol=0, atol=0)
