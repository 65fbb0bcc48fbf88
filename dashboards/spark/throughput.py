"""Replication throughput per mirrored partition and window, in records/s and MB/s (1 MB = 10^6 value bytes).

The window rate is what was replicated over the time the slices covered (sum / sum of slice seconds),
so a window only partly covered by slices is not diluted; p50/p95/max describe the per-slice rates.
The percentiles are Spark's exact `percentile`, computed in a grouped Arrow function
(`dashboards.spark.percentiles`); the rest are Spark aggregates.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, WINDOW_COLUMNS, with_window
from dashboards.spark.percentiles import doubles, named_percentiles, percentile_schema, window_percentiles

BYTES_PER_MB = 1_000_000.0
PERCENTILES = (("p50", 0.5), ("p95", 0.95))
RATES = ("records_per_s", "mb_per_s")
# What `throughput_percentiles` reads of a sample, and the columns it gives per window.
SAMPLE_COLUMNS = ("ts", "records", "bytes", "interval_s")
PERCENTILE_SCHEMA = percentile_schema(RATES, PERCENTILES)


def _per_second(column: str) -> Column:
    return F.when(F.col("interval_s") > 0, F.col(column) / F.col("interval_s"))


def throughput_aggregates() -> list[Column]:
    """The aggregates of a (mirrored partition, window) group of windowed samples `throughput_columns` reads."""
    covered_s = F.sum(F.when(F.col("interval_s") > 0, F.col("interval_s")))
    return [
        F.count(F.lit(1)).alias("samples"),
        F.sum("records").alias("records"),
        F.sum("bytes").alias("bytes"),
        F.coalesce(F.sum("records") / covered_s, F.lit(0.0)).alias("records_per_s"),
        F.coalesce(F.sum("bytes") / covered_s / BYTES_PER_MB, F.lit(0.0)).alias("mb_per_s"),
        F.max(_per_second("records")).alias("records_per_s_max"),
        F.max(_per_second("bytes") / BYTES_PER_MB).alias("mb_per_s_max"),
    ]


def throughput_percentiles(table: pa.Table, windows: np.ndarray, window_count: int) -> dict[str, np.ndarray]:
    """PERCENTILE_SCHEMA's arrays per window of one mirrored partition's samples: the per-slice rates as
    `throughput_aggregates` computes them (null without slice seconds), through Spark's exact percentile."""
    interval_s = doubles(table, "interval_s")
    timed = interval_s > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        records_per_s = np.where(timed, doubles(table, "records") / interval_s, np.nan)
        mb_per_s = np.where(timed, doubles(table, "bytes") / interval_s, np.nan) / BYTES_PER_MB
    return named_percentiles(
        dict(zip(RATES, (records_per_s, mb_per_s), strict=True)),
        windows,
        window_count=window_count,
        percentiles=PERCENTILES,
    )


def throughput_columns() -> list[Column]:
    """`flow_throughput`'s measures from `throughput_aggregates` beside `throughput_percentiles`."""
    return [
        F.col(name)
        for name in (
            "samples",
            "records",
            "bytes",
            "records_per_s",
            "mb_per_s",
            *(f"records_per_s_{name}" for name, _ in PERCENTILES),
            "records_per_s_max",
            *(f"mb_per_s_{name}" for name, _ in PERCENTILES),
            "mb_per_s_max",
        )
    ]


def flow_throughput(samples: DataFrame, window: timedelta) -> DataFrame:
    percentiles = window_percentiles(
        samples, window, columns=SAMPLE_COLUMNS, measures=throughput_percentiles, schema=PERCENTILE_SCHEMA
    )
    return (
        with_window(samples, window)
        .groupBy(*PARTITION_KEY, *WINDOW_COLUMNS)
        .agg(*throughput_aggregates())
        .join(percentiles, [*PARTITION_KEY, "window_start"])
        .select(*PARTITION_KEY, *WINDOW_COLUMNS, *throughput_columns())
    )
