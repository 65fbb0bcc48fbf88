"""Record age and replication latency percentiles per mirrored partition and window.

Each lake sample holds the slice's maximum (MM2's record-age-ms at poll, replication-latency-ms at the
target's ack), so these are percentiles of per-slice worst cases: an upper bound on the per-record ones.
Slices that replicated nothing have no latency and are left out.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, WINDOW_COLUMNS, with_window

PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
MEASURES = ("record_age_ms", "replication_latency_ms")


def has_latency() -> Column:
    return F.col("record_age_ms").isNotNull() | F.col("replication_latency_ms").isNotNull()


def latency_aggregates() -> list[Column]:
    """The aggregates of a (mirrored partition, window) group of windowed samples `latency_columns` reads.

    Percentiles and maxima ignore nulls, so they are the same over every sample or over those with a
    latency: the group may hold samples without one (`_latency_samples` counts those with one).
    """
    # One exact percentile per measure, for all fractions: each fraction apart would collect it again.
    fractions = [fraction for _, fraction in PERCENTILES]
    return [
        F.count(F.when(has_latency(), F.lit(1))).alias("_latency_samples"),
        *(
            aggregate
            for measure in MEASURES
            for aggregate in (
                F.percentile(measure, fractions).alias(f"_{measure}_p"),
                F.max(measure).alias(f"{measure}_max"),
            )
        ),
    ]


def latency_columns() -> list[Column]:
    """`latency_percentiles`' measures from `latency_aggregates`."""
    return [
        F.col("_latency_samples").alias("samples"),
        *(
            column
            for measure in MEASURES
            for column in (
                *(
                    F.col(f"_{measure}_p")[i].alias(f"{measure}_{name}")
                    for i, (name, _) in enumerate(PERCENTILES)
                ),
                F.col(f"{measure}_max"),
            )
        ),
    ]


def latency_percentiles(samples: DataFrame, window: timedelta) -> DataFrame:
    return (
        with_window(samples, window)
        .where(has_latency())
        .groupBy(*PARTITION_KEY, *WINDOW_COLUMNS)
        .agg(*latency_aggregates())
        .select(*PARTITION_KEY, *WINDOW_COLUMNS, *latency_columns())
    )
