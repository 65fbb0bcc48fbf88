"""Replication throughput per mirrored partition and window, in records/s and MB/s (1 MB = 10^6 value bytes).

The window rate is what was replicated over the time the slices covered (sum / sum of slice seconds),
so a window only partly covered by slices is not diluted; p50/p95/max describe the per-slice rates.
Computed per mirrored partition in numpy (`dashboards.spark.windowed`, Spark's aggregates and exact
`percentile` to the last bit), so the report job adds them to its one grouped pass over the samples.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame

from dashboards.spark.percentiles import named_percentiles
from dashboards.spark.windowed import (
    count_per_window,
    doubles,
    longs,
    max_of_doubles,
    sum_of_doubles,
    sum_of_longs,
    window_measures,
)

BYTES_PER_MB = 1_000_000.0
PERCENTILES = (("p50", 0.5), ("p95", 0.95))
RATES = ("records_per_s", "mb_per_s")
# What `throughput_measures` reads of a sample, and the columns it gives per window.
SAMPLE_COLUMNS = ("ts", "records", "bytes", "interval_s")
MEASURE_SCHEMA = ", ".join(
    [
        "samples long, records long, bytes long, records_per_s double, mb_per_s double",
        *(f"{rate}_{name} double" for rate in RATES for name in (*(n for n, _ in PERCENTILES), "max")),
    ]
)


def throughput_measures(
    table: pa.Table, windows: np.ndarray, window_count: int
) -> dict[str, np.ndarray | pa.Array]:
    """MEASURE_SCHEMA's arrays per window of one mirrored partition's samples, as Spark's aggregates give:

    samples (count), records and bytes (sums), the covered rates coalesce(sum / sum(interval_s > 0), 0.0)
    and, of the per-slice rates (null without slice seconds), the exact percentiles and the maximum.
    """
    interval_s = doubles(table, "interval_s")
    timed = interval_s > 0
    covered_s = sum_of_doubles(np.where(timed, interval_s, np.nan), windows, window_count)
    measures: dict[str, np.ndarray | pa.Array] = {"samples": count_per_window(windows, window_count)}
    slice_rates, covered_rates = {}, {}
    # Records per second are divided by 1.0 (exact), MB per second by 10^6, as Spark's expressions do.
    for column, rate, scale in (("records", "records_per_s", 1.0), ("bytes", "mb_per_s", BYTES_PER_MB)):
        total, present = sum_of_longs(*longs(table, column), windows, window_count)
        measures[column] = pa.array(total, mask=~present)
        with np.errstate(divide="ignore", invalid="ignore"):
            covered = np.where(present, total.astype(np.float64), np.nan) / covered_s / scale
            slice_rates[rate] = np.where(timed, doubles(table, column) / interval_s, np.nan) / scale
        covered_rates[rate] = np.where(np.isnan(covered), 0.0, covered)
    measures.update(covered_rates)
    percentiles = named_percentiles(slice_rates, windows, window_count=window_count, percentiles=PERCENTILES)
    for rate, values in slice_rates.items():
        measures.update({f"{rate}_{name}": percentiles[f"{rate}_{name}"] for name, _ in PERCENTILES})
        measures[f"{rate}_max"] = max_of_doubles(values, windows, window_count)
    return measures


def flow_throughput(samples: DataFrame, window: timedelta) -> DataFrame:
    """Per mirrored partition and window: MEASURE_SCHEMA after its key and window bounds."""
    return window_measures(
        samples, window, columns=SAMPLE_COLUMNS, measures=throughput_measures, schema=MEASURE_SCHEMA
    )
