"""Record age and replication latency percentiles per mirrored partition and window.

Each lake sample holds the slice's maximum (MM2's record-age-ms at poll, replication-latency-ms at the
target's ack), so these are percentiles of per-slice worst cases: an upper bound on the per-record ones.
Slices that replicated nothing have no latency and are left out.
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, WINDOW_COLUMNS, with_window

PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
MEASURES = ("record_age_ms", "replication_latency_ms")


def latency_percentiles(samples: DataFrame, window: timedelta) -> DataFrame:
    # One exact percentile per measure, for all fractions: each fraction apart would collect it again.
    fractions = [fraction for _, fraction in PERCENTILES]
    aggregates = [
        aggregate
        for measure in MEASURES
        for aggregate in (
            F.percentile(measure, fractions).alias(f"_{measure}_p"),
            F.max(measure).alias(f"{measure}_max"),
        )
    ]
    columns = [
        column
        for measure in MEASURES
        for column in (
            *(
                F.col(f"_{measure}_p")[i].alias(f"{measure}_{name}")
                for i, (name, _) in enumerate(PERCENTILES)
            ),
            f"{measure}_max",
        )
    ]
    return (
        with_window(samples, window)
        .where(F.col("record_age_ms").isNotNull() | F.col("replication_latency_ms").isNotNull())
        .groupBy(*PARTITION_KEY, *WINDOW_COLUMNS)
        .agg(F.count(F.lit(1)).alias("samples"), *aggregates)
        .select(*PARTITION_KEY, *WINDOW_COLUMNS, "samples", *columns)
    )
