"""Replication lag per mirrored partition: records behind and seconds behind.

Seconds behind follows kafka-lag-exporter's time lag. Every sample is a point (source end offset, time)
of its partition. The time at which the mirror's position `next_offset` was produced is interpolated
between the latest point whose end offset is <= the position and the first point past it; lag seconds is
the sample time minus that time (0 when caught up). When no point inside the lookback lies at or below
the position (the mirror is further behind than the lookback remembers), the time is extrapolated back
from the oldest point in the lookback at the average production rate between it and the sample. With no
production over the lookback the rate is unknown and seconds behind is null.

Points are those of the partition's current "epoch": when the source end offset goes down (topic
recreated or truncated), older points describe another log and are ignored. Within an epoch end offsets
only grow, so the first point past the position is never later than the sample itself: extrapolating
forward from the newest point is never needed.
"""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, WINDOW_COLUMNS, records_behind, with_window

DEFAULT_LOOKBACK = timedelta(hours=1)
SAMPLE_LAG_COLUMNS = (
    *PARTITION_KEY,
    "ts",
    "source_end_offset",
    "next_offset",
    "records_behind",
    "seconds_behind",
)


def seconds_behind(*, t: np.ndarray, end: np.ndarray, position: np.ndarray, lookback_s: float) -> np.ndarray:
    """Seconds behind for one partition's samples sorted by time (t in seconds); NaN when unknown.

    Vectorised: within an epoch end offsets are sorted, so both brackets are binary searches.
    """
    result = np.full(len(t), np.nan)
    epoch = np.concatenate([[0], np.cumsum(np.diff(end) < 0)])
    for e in np.unique(epoch):
        rows = np.flatnonzero(epoch == e)
        te, ee, pe = t[rows], end[rows], position[rows]
        lo = np.searchsorted(ee, pe, side="right") - 1  # latest point with end <= position
        hi = np.minimum(lo + 1, len(rows) - 1)  # first point past the position
        oldest = np.searchsorted(te, te - lookback_s, side="left")  # oldest point in the lookback
        has_recent_lower = (lo >= 0) & (te[np.maximum(lo, 0)] >= te - lookback_s)
        lo_ = np.maximum(lo, 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            interpolated = te[lo_] + (pe - ee[lo_]) * (te[hi] - te[lo_]) / (ee[hi] - ee[lo_])
            production = ee - ee[oldest]
            extrapolated = np.where(
                production > 0, te[oldest] - (ee[oldest] - pe) * (te - te[oldest]) / production, np.nan
            )
        produced_at = np.where(has_recent_lower, interpolated, extrapolated)
        lag = np.maximum(te - produced_at, 0.0)  # NaN stays NaN
        result[rows] = np.where(pe >= ee, 0.0, lag)
    return result


def _partition_seconds_behind(lookback_s: float):
    def apply(frame: pd.DataFrame) -> pd.DataFrame:
        frame = frame.sort_values("_t", kind="stable")
        frame["seconds_behind"] = seconds_behind(
            t=frame["_t"].to_numpy(float),
            end=frame["source_end_offset"].to_numpy(np.int64),
            position=frame["next_offset"].to_numpy(np.int64),
            lookback_s=lookback_s,
        )
        return frame.drop(columns=["_t"])

    return apply


def sample_lag(samples: DataFrame, *, lookback: timedelta = DEFAULT_LOOKBACK) -> DataFrame:
    """Per sample (SAMPLE_LAG_COLUMNS): `records_behind` and `seconds_behind` (null when unknown).

    Seconds behind runs as a grouped pandas function per mirrored partition: each partition's points
    are a sorted array, so the brackets are binary searches. Spark window frames cannot express "the
    latest point at or below a value of another column" without a quadratic sliding frame.
    """
    narrow = samples.select(
        *PARTITION_KEY,
        "ts",
        "source_end_offset",
        "next_offset",
        records_behind().alias("records_behind"),
        (F.unix_micros("ts") / F.lit(1_000_000.0)).alias("_t"),
    )
    schema = narrow.drop("_t").schema.add("seconds_behind", "double")
    lagged = narrow.groupBy(*PARTITION_KEY).applyInPandas(
        _partition_seconds_behind(lookback.total_seconds()), schema=schema
    )
    # pandas has no null double: NaN marks "unknown" on the way back, null is what Spark readers expect.
    return lagged.withColumn(
        "seconds_behind", F.when(~F.isnan("seconds_behind"), F.col("seconds_behind"))
    ).select(*SAMPLE_LAG_COLUMNS)


def partition_lag(
    samples: DataFrame, window: timedelta, *, lookback: timedelta = DEFAULT_LOOKBACK
) -> DataFrame:
    """Lag per mirrored partition and window: records and seconds behind, last / max / average."""
    lagged = with_window(sample_lag(samples, lookback=lookback), window)
    return lagged.groupBy(*PARTITION_KEY, *WINDOW_COLUMNS).agg(
        F.count(F.lit(1)).alias("samples"),
        F.max_by("records_behind", "ts").alias("records_behind_last"),
        F.max("records_behind").alias("records_behind_max"),
        F.avg("records_behind").alias("records_behind_avg"),
        F.max_by("seconds_behind", "ts").alias("seconds_behind_last"),
        F.max("seconds_behind").alias("seconds_behind_max"),
        F.avg("seconds_behind").alias("seconds_behind_avg"),
    )
