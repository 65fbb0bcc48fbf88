"""Replication lag per mirrored partition: `records_behind` and `seconds_behind` as docs/lag.md defines them.

`seconds_behind` is the age of the oldest record not yet replicated: the sample time minus the produce
time of the next offset to replicate. Samples do not carry that record's timestamp, so it is estimated
as kafka-lag-exporter's time lag does. Every sample is a point (source end offset, time)
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

from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pandas as pd
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import PARTITION_KEY, partition_key_ddl, records_behind, window_seconds
from dashboards.spark.windowed import key_columns, longs, partition_counts

DEFAULT_LOOKBACK = timedelta(hours=1)
SAMPLE_LAG_COLUMNS = (
    *PARTITION_KEY,
    "ts",
    "source_end_offset",
    "next_offset",
    "records_behind",
    "seconds_behind",
)


def seconds_behind(
    *,
    t: np.ndarray,
    end: np.ndarray,
    position: np.ndarray,
    lookback_s: float,
    partitions: np.ndarray | None = None,
) -> np.ndarray:
    """Seconds behind for one partition's samples sorted by time (t in seconds); NaN when unknown.

    A sample whose source end offset is unknown (`end` NaN: the slice read no watermarks) is no point,
    and its own seconds behind is unknown. `partitions` (a topic row's, per sample): a change starts a
    new epoch, as its sums then add up other partitions.
    """
    known = ~np.isnan(end) if np.issubdtype(end.dtype, np.floating) else np.ones(len(end), bool)
    partitions = np.ones(len(t), np.int32) if partitions is None else partitions
    result = np.full(len(t), np.nan)
    if known.any():
        result[known] = _seconds_behind_of_points(
            t=t[known],
            end=end[known].astype(np.int64),
            position=position[known],
            lookback_s=lookback_s,
            partitions=partitions[known],
        )
    return result


def _seconds_behind_of_points(
    *, t: np.ndarray, end: np.ndarray, position: np.ndarray, lookback_s: float, partitions: np.ndarray
) -> np.ndarray:
    """`seconds_behind` of samples that all know their end offset.

    Vectorised: within an epoch end offsets are sorted, so both brackets are binary searches.
    """
    result = np.full(len(t), np.nan)
    epoch = np.concatenate([[0], np.cumsum((np.diff(end) < 0) | (np.diff(partitions) != 0))])
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
            end=frame["source_end_offset"].to_numpy(float),  # NaN: unknown
            position=frame["next_offset"].to_numpy(np.int64),
            lookback_s=lookback_s,
            partitions=frame["_partitions"].to_numpy(np.int32),
        )
        return frame.drop(columns=["_t", "_partitions"])

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
        F.coalesce(F.col("partitions"), F.lit(1)).alias("_partitions"),
    )
    schema = narrow.drop("_t", "_partitions").schema.add("seconds_behind", "double")
    lagged = narrow.groupBy(*PARTITION_KEY).applyInPandas(
        _partition_seconds_behind(lookback.total_seconds()), schema=schema
    )
    # pandas has no null double: NaN marks "unknown" on the way back, null is what Spark readers expect.
    return lagged.withColumn(
        "seconds_behind", F.when(~F.isnan("seconds_behind"), F.col("seconds_behind"))
    ).select(*SAMPLE_LAG_COLUMNS)


# What the grouped functions read of a sample.
POINT_COLUMNS = ("ts", "source_end_offset", "next_offset", "partitions")
PARTITION_LAG_SCHEMA = (
    "samples long, records_behind_last long, records_behind_max long, records_behind_avg double, "
    "seconds_behind_last double, seconds_behind_max double, seconds_behind_avg double, partitions int"
)


def window_lag_table(*, window_s: int, lookback_s: float, key: Sequence[str] = PARTITION_KEY):
    """One mirrored partition's samples (an Arrow table) in, its lag per window out, after its `key`.

    The same aggregates as Spark's over `sample_lag` rows: count; the newest sample's value (as
    max_by ts); max and average ignoring unknowns (null when all are unknown). Records behind is
    unknown for a sample without a source end offset. `partitions` is the newest sample's (a topic
    row's: the partitions its sums cover).
    """
    import pyarrow as pa

    def apply(table: pa.Table) -> pa.Table:
        micros = table.column("ts").cast(pa.int64()).to_numpy()
        order = np.argsort(micros, kind="stable")
        micros = micros[order]
        end, known = (array[order] for array in longs(table, "source_end_offset"))
        position = table.column("next_offset").to_numpy()[order]
        partitions = partition_counts(table)[order]
        behind_s = seconds_behind(
            t=micros / 1_000_000.0,
            end=np.where(known, end, np.nan),
            position=position,
            lookback_s=lookback_s,
            partitions=partitions,
        )
        behind = np.maximum(end - position, 0)
        seconds = micros // 1_000_000
        starts = np.flatnonzero(np.diff(seconds - seconds % window_s, prepend=-1))  # first row of each window
        lasts = np.append(starts[1:], len(micros)) - 1
        counts = lasts - starts + 1
        behind_counts = np.add.reduceat(known.astype(np.int64), starts)
        seconds_known = ~np.isnan(behind_s)
        known_counts = np.add.reduceat(seconds_known.astype(np.int64), starts)
        with np.errstate(invalid="ignore", divide="ignore"):
            seconds_avg = np.add.reduceat(np.where(seconds_known, behind_s, 0.0), starts) / known_counts
            behind_avg = np.add.reduceat(np.where(known, behind, 0).astype(float), starts) / behind_counts
        window_start = (seconds - seconds % window_s)[starts] * 1_000_000
        keys = key_columns(table, key, len(starts))
        timestamp = table.schema.field("ts").type
        return pa.table(
            {
                **keys,
                "window_start": pa.array(window_start, timestamp),
                "window_end": pa.array(window_start + window_s * 1_000_000, timestamp),
                "samples": pa.array(counts, pa.int64()),
                "records_behind_last": pa.array(behind[lasts], pa.int64(), mask=~known[lasts]),
                "records_behind_max": pa.array(
                    np.maximum.reduceat(np.where(known, behind, -1), starts),
                    pa.int64(),
                    mask=behind_counts == 0,
                ),
                "records_behind_avg": pa.array(behind_avg, from_pandas=True),
                # NaN (unknown) becomes null.
                "seconds_behind_last": pa.array(behind_s[lasts], from_pandas=True),
                "seconds_behind_max": pa.array(np.fmax.reduceat(behind_s, starts), from_pandas=True),
                "seconds_behind_avg": pa.array(
                    np.where(known_counts > 0, seconds_avg, np.nan), from_pandas=True
                ),
                "partitions": pa.array(partitions[lasts], pa.int32()),
            }
        )

    return apply


def partition_lag(
    samples: DataFrame, window: timedelta, *, lookback: timedelta = DEFAULT_LOOKBACK
) -> DataFrame:
    """Lag per mirrored partition and window: records and seconds behind, last / max / average.

    The aggregates of `sample_lag` rows per window, computed in the same grouped function (Arrow in,
    one row per window out) rather than shipping every sample's lag back to Spark to aggregate there.
    """
    narrow = samples.select(*PARTITION_KEY, *POINT_COLUMNS)
    return narrow.groupBy(*PARTITION_KEY).applyInArrow(
        window_lag_table(window_s=window_seconds(window), lookback_s=lookback.total_seconds()),
        schema=f"{partition_key_ddl(samples)}, window_start timestamp, window_end timestamp, {PARTITION_LAG_SCHEMA}",
    )
