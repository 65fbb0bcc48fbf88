"""Record age and replication latency percentiles per mirrored partition and window.

Each lake sample holds the slice's maximum (MM2's record-age-ms at poll, replication-latency-ms at the
target's ack), so these are percentiles of per-slice worst cases: an upper bound on the per-record ones.
Slices that replicated nothing have no latency and are left out. The percentiles are Spark's exact
`percentile`, computed in a grouped Arrow function (`dashboards.spark.percentiles`).
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, WINDOW_COLUMNS, with_window
from dashboards.spark.percentiles import doubles, named_percentiles, percentile_schema, window_percentiles

PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
MEASURES = ("record_age_ms", "replication_latency_ms")
# What `latency_percentiles_of` reads of a sample, and the columns it gives per window.
SAMPLE_COLUMNS = ("ts", *MEASURES)
PERCENTILE_SCHEMA = percentile_schema(MEASURES, PERCENTILES)


def has_latency() -> Column:
    return F.col("record_age_ms").isNotNull() | F.col("replication_latency_ms").isNotNull()


def latency_aggregates() -> list[Column]:
    """The aggregates of a (mirrored partition, window) group of windowed samples `latency_columns` reads.

    Maxima ignore nulls, so they are the same over every sample or over those with a latency: the
    group may hold samples without one (`_latency_samples` counts those with one).
    """
    return [
        F.count(F.when(has_latency(), F.lit(1))).alias("_latency_samples"),
        *(F.max(measure).alias(f"{measure}_max") for measure in MEASURES),
    ]


def latency_percentiles_of(table: pa.Table, windows: np.ndarray, window_count: int) -> dict[str, np.ndarray]:
    """PERCENTILE_SCHEMA's arrays per window of one mirrored partition's samples (Spark's exact percentile,
    which ignores nulls: the same over every sample or over those with a latency)."""
    return named_percentiles(
        {measure: doubles(table, measure) for measure in MEASURES},
        windows,
        window_count=window_count,
        percentiles=PERCENTILES,
    )


def latency_columns() -> list[Column]:
    """`latency_percentiles`' measures from `latency_aggregates` beside `latency_percentiles_of`."""
    return [
        F.col("_latency_samples").alias("samples"),
        *(
            F.col(name)
            for measure in MEASURES
            for name in (*(f"{measure}_{name}" for name, _ in PERCENTILES), f"{measure}_max")
        ),
    ]


def latency_percentiles(samples: DataFrame, window: timedelta) -> DataFrame:
    with_latency = samples.where(has_latency())
    percentiles = window_percentiles(
        with_latency,
        window,
        columns=SAMPLE_COLUMNS,
        measures=latency_percentiles_of,
        schema=PERCENTILE_SCHEMA,
    )
    return (
        with_window(with_latency, window)
        .groupBy(*PARTITION_KEY, *WINDOW_COLUMNS)
        .agg(*latency_aggregates())
        .join(percentiles, [*PARTITION_KEY, "window_start"])
        .select(*PARTITION_KEY, *WINDOW_COLUMNS, *latency_columns())
    )
