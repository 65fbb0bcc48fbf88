"""Record age and replication latency percentiles per mirrored partition and window.

Each lake sample holds the slice's maximum (MM2's record-age-ms at poll, replication-latency-ms at the
target's ack), so these are percentiles of per-slice worst cases: an upper bound on the per-record ones.
Slices that replicated nothing have no latency and are left out. Computed per mirrored partition in
numpy (`dashboards.spark.windowed`, Spark's aggregates and exact `percentile` to the last bit), so the
report job adds them to its one grouped pass over the samples.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pyarrow as pa
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dashboards.spark.percentiles import named_percentiles
from dashboards.spark.windowed import count_per_window, doubles, max_of_doubles, window_measures

PERCENTILES = (("p50", 0.5), ("p95", 0.95), ("p99", 0.99))
MEASURES = ("record_age_ms", "replication_latency_ms")
# What `latency_measures` reads of a sample, and the columns it gives per window.
SAMPLE_COLUMNS = ("ts", *MEASURES)
MEASURE_SCHEMA = ", ".join(
    [
        "samples long",
        *(
            f"{measure}_{name} double"
            for measure in MEASURES
            for name in (*(n for n, _ in PERCENTILES), "max")
        ),
    ]
)


def latency_measures(table: pa.Table, windows: np.ndarray, window_count: int) -> dict[str, np.ndarray]:
    """MEASURE_SCHEMA's arrays per window of one mirrored partition's samples: `samples` counts those with a
    latency; percentiles and maxima ignore nulls, so they are the same over every sample or over those."""
    values = {measure: doubles(table, measure) for measure in MEASURES}
    has_latency = ~np.isnan(values["record_age_ms"]) | ~np.isnan(values["replication_latency_ms"])
    percentiles = named_percentiles(values, windows, window_count=window_count, percentiles=PERCENTILES)
    measures = {"samples": count_per_window(windows, window_count, has_latency)}
    for measure, measure_values in values.items():
        measures.update({f"{measure}_{name}": percentiles[f"{measure}_{name}"] for name, _ in PERCENTILES})
        measures[f"{measure}_max"] = max_of_doubles(measure_values, windows, window_count)
    return measures


def latency_percentiles(samples: DataFrame, window: timedelta) -> DataFrame:
    """Per mirrored partition and window with a latency: MEASURE_SCHEMA after its key and window bounds."""
    return window_measures(
        samples, window, columns=SAMPLE_COLUMNS, measures=latency_measures, schema=MEASURE_SCHEMA
    ).where(F.col("samples") > 0)
