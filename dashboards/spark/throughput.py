"""Replication throughput per mirrored partition and window, in records/s and MB/s (1 MB = 10^6 value bytes).

The window rate is what was replicated over the time the slices covered (sum / sum of slice seconds),
so a window only partly covered by slices is not diluted; p50/p95/max describe the per-slice rates.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, WINDOW_COLUMNS, with_window

BYTES_PER_MB = 1_000_000.0


def _per_second(column: str) -> Column:
    return F.when(F.col("interval_s") > 0, F.col(column) / F.col("interval_s"))


def throughput_aggregates() -> list[Column]:
    """The aggregates of a (mirrored partition, window) group of windowed samples `throughput_columns` reads."""
    covered_s = F.sum(F.when(F.col("interval_s") > 0, F.col("interval_s")))
    records_per_s, mb_per_s = _per_second("records"), _per_second("bytes") / BYTES_PER_MB
    # One exact percentile per measure, for both fractions: each fraction apart would collect it twice.
    return [
        F.count(F.lit(1)).alias("samples"),
        F.sum("records").alias("records"),
        F.sum("bytes").alias("bytes"),
        F.coalesce(F.sum("records") / covered_s, F.lit(0.0)).alias("records_per_s"),
        F.coalesce(F.sum("bytes") / covered_s / BYTES_PER_MB, F.lit(0.0)).alias("mb_per_s"),
        F.percentile(records_per_s, [0.5, 0.95]).alias("_records_per_s_p"),
        F.max(records_per_s).alias("records_per_s_max"),
        F.percentile(mb_per_s, [0.5, 0.95]).alias("_mb_per_s_p"),
        F.max(mb_per_s).alias("mb_per_s_max"),
    ]


def throughput_columns() -> list[Column]:
    """`flow_throughput`'s measures from `throughput_aggregates`."""
    return [
        *map(F.col, ("samples", "records", "bytes", "records_per_s", "mb_per_s")),
        F.col("_records_per_s_p")[0].alias("records_per_s_p50"),
        F.col("_records_per_s_p")[1].alias("records_per_s_p95"),
        F.col("records_per_s_max"),
        F.col("_mb_per_s_p")[0].alias("mb_per_s_p50"),
        F.col("_mb_per_s_p")[1].alias("mb_per_s_p95"),
        F.col("mb_per_s_max"),
    ]


def flow_throughput(samples: DataFrame, window: timedelta) -> DataFrame:
    return (
        with_window(samples, window)
        .groupBy(*PARTITION_KEY, *WINDOW_COLUMNS)
        .agg(*throughput_aggregates())
        .select(*PARTITION_KEY, *WINDOW_COLUMNS, *throughput_columns())
    )
