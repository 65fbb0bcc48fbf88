"""Burrow-style status per mirrored partition and per flow.

Burrow judges a consumer from a sliding window of its last N (offset, time, lag) samples; here the
consumer is the mirror, its offset the position `next_offset` and its lag the records behind. A partition
is evaluated at the end of every report window in which its flow reported anything, at "now" = the
flow's newest sample in that window, so a partition that went silent while the rest of its flow kept
reporting is seen. The rules, first match wins (REFERENCE.md "Lag"):

1. lag now 0 -> OK
2. silent for longer than the window's span and no zero lag in the window -> STOP
3. the position went backwards and did not recover (the newest is below an earlier one) -> REWIND
4. any zero lag in the window -> OK
5. the position never moved -> STALL
6. lag never decreased -> WARN
7. otherwise -> OK

Rules 5 and 6 need two samples to see movement. A flow takes its worst partition: STOP, STALL and REWIND
report as ERR, with the causes listed.

A topic row (`lake` module doc) is judged as one partition whose position and end offset are its
partitions' sums, and counts in its flow's partitions (all, erring, warning) as the `partitions` it stands
for: a stall of all of them shows, a stall of some among moving ones does not (docs/analytics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import numpy as np
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dashboards.spark.frames import (
    FLOW_KEY,
    PARTITION_KEY,
    WINDOW_COLUMNS,
    partition_key_ddl,
    window_end,
    window_seconds,
)
from dashboards.spark.windowed import key_columns, partition_counts, report_windows

DEFAULT_WINDOW_SAMPLES = 10  # Burrow's default window ("intervals")
ERROR_CAUSES = ("STOP", "STALL", "REWIND")


WINDOW_FEATURES = (
    "last_sample_at timestamp, next_offset long, records_behind long, first_sample_at timestamp, "
    "samples long, min_lag long, min_offset long, max_offset long, min_lag_change long, partitions int"
)


def newest_window_features_table(*, window_s: int, window_samples: int, key: Sequence[str] = PARTITION_KEY):
    """One mirrored partition's samples (an Arrow table) in; out, after its `key`, per report window it
    reported in, what Burrow needs about the last `window_samples` samples ending at its newest sample
    in that window.

    Samples without a source end offset (the slice read no watermarks) have no lag: Burrow's samples are
    the others, and a window with none of those gets a null `_window`.
    """
    import pyarrow as pa

    def apply(table: pa.Table) -> pa.Table:
        _, all_starts = report_windows(table, window_s)
        known = table.column("source_end_offset").is_valid().to_numpy(zero_copy_only=False)
        point_starts, window = points_features(table if known.all() else table.filter(known))
        # Each window's row of `window`, null for a window without points.
        row = np.full(len(all_starts), -1)
        row[np.searchsorted(all_starts, point_starts * 1_000_000)] = np.arange(len(point_starts))
        return pa.table(
            {
                **key_columns(table, key, len(all_starts)),
                "window_start": pa.array(all_starts, table.schema.field("ts").type),
                "_window": window.take(pa.array(row, mask=row < 0)),
            }
        )

    def points_features(table: pa.Table) -> tuple[np.ndarray, pa.StructArray]:
        """The start (s) of each window with samples of `table`, all with an end offset, and its features."""
        micros = table.column("ts").cast(pa.int64()).to_numpy()
        order = np.argsort(micros, kind="stable")
        micros = micros[order]
        position = table.column("next_offset").to_numpy()[order]
        lag = np.maximum(table.column("source_end_offset").to_numpy()[order] - position, 0)
        partitions = partition_counts(table)[order]
        # A topic row's sums are one series while they add up the same partitions: a change of
        # `partitions` starts another, and Burrow's window holds only the newest series' samples.
        series = np.concatenate([[0], np.cumsum(np.diff(partitions) != 0)])
        seconds = micros // 1_000_000
        starts = seconds - seconds % window_s
        newest = np.flatnonzero(np.append(np.diff(starts) != 0, len(starts) > 0))  # last row of each window
        # The window of N samples ending at each newest row: rows newest-N+1 .. newest (those that exist).
        rows = newest[:, None] - np.arange(window_samples)[None, :]
        same_series = series[newest][:, None]
        held = (rows >= 0) & (series[np.maximum(rows, 0)] == same_series)
        rows = np.maximum(rows, 0)
        big, small = np.iinfo(np.int64).max, np.iinfo(np.int64).min
        # Its N-1 changes are those of its samples but the first (and a partition's first has none).
        changes = rows[:, : window_samples - 1]
        changed = (changes >= 1) & (series[np.maximum(changes - 1, 0)] == same_series)
        change = np.where(changed, lag[changes] - lag[np.maximum(changes - 1, 0)], big).min(
            axis=1, initial=big
        )
        timestamp = table.schema.field("ts").type
        window = pa.StructArray.from_arrays(
            [
                pa.array(micros[newest], timestamp),
                pa.array(position[newest], pa.int64()),
                pa.array(lag[newest], pa.int64()),
                pa.array(micros[rows[np.arange(len(newest)), held.sum(axis=1) - 1]], timestamp),
                pa.array(held.sum(axis=1), pa.int64()),
                pa.array(np.where(held, lag[rows], big).min(axis=1), pa.int64()),
                pa.array(np.where(held, position[rows], big).min(axis=1), pa.int64()),
                pa.array(np.where(held, position[rows], small).max(axis=1), pa.int64()),
                pa.array(change, pa.int64(), mask=~changed.any(axis=1)),
                pa.array(partitions[newest], pa.int32()),
            ],
            names=[field.split()[0] for field in WINDOW_FEATURES.split(", ")],
        )
        return starts[newest], window

    return apply


def _evaluation_points(features: DataFrame, window: timedelta) -> DataFrame:
    """(partition, window, now): every partition its flow has known, at each window the flow reported in.

    From the window features, not the samples: a flow's newest sample in a window is the newest of its
    partitions' newest there, and a partition is known at a window's "now" from its first window on.
    """
    flow_windows = (
        features.groupBy(*FLOW_KEY, "window_start")
        .agg(F.max("_window.last_sample_at").alias("evaluated_at"))
        .withColumn("window_end", window_end(F.col("window_start"), window))
    )
    partitions = features.groupBy(*PARTITION_KEY).agg(F.min("window_start").alias("_first_window"))
    return (
        partitions.join(flow_windows, list(FLOW_KEY))
        .where(F.col("_first_window") <= F.col("window_start"))
        .drop("_first_window")
    )


def _burrow_status(w: str = "_window") -> F.Column:
    def field(name: str) -> F.Column:
        return F.col(f"{w}.{name}")

    silent_s = F.unix_micros(F.col("evaluated_at")) - F.unix_micros(field("last_sample_at"))
    span_s = F.unix_micros(field("last_sample_at")) - F.unix_micros(field("first_sample_at"))
    moved = field("samples") >= 2
    return (
        F.when(field("records_behind") == 0, "OK")
        .when((silent_s > span_s) & (field("min_lag") > 0), "STOP")
        .when(field("next_offset") < field("max_offset"), "REWIND")
        .when(field("min_lag") == 0, "OK")
        .when(moved & (field("min_offset") == field("max_offset")), "STALL")
        .when(moved & (field("min_lag_change") >= 0), "WARN")
        .otherwise("OK")
    )


def newest_window_features(
    samples: DataFrame, window: timedelta, *, window_samples: int = DEFAULT_WINDOW_SAMPLES
) -> DataFrame:
    """Per mirrored partition and report window it reported in: `_window`, Burrow's view at its newest sample."""
    return (
        samples.select(*PARTITION_KEY, "ts", "source_end_offset", "next_offset", "partitions")
        .groupBy(*PARTITION_KEY)
        .applyInArrow(
            newest_window_features_table(window_s=window_seconds(window), window_samples=window_samples),
            schema=f"{partition_key_ddl(samples)}, window_start timestamp, _window struct<{WINDOW_FEATURES}>",
        )
    )


def partition_status(
    samples: DataFrame,
    window: timedelta,
    *,
    window_samples: int = DEFAULT_WINDOW_SAMPLES,
    features: DataFrame | None = None,
) -> DataFrame:
    """Status per mirrored partition at the end of each report window (OK, WARN, STOP, STALL, REWIND).

    `features`: `newest_window_features(samples, window, window_samples=...)` when already computed.
    """
    if window_samples < 1:
        raise ValueError("a Burrow window holds at least one sample")
    # The newest sample at or before an evaluation point (the flow's newest in window W) is the
    # partition's newest in W, or in the latest earlier window it reported in: all of its samples in W
    # are at or before that instant, all later ones after it. So sample features are reduced to one per
    # partition and window before meeting the evaluation points.
    if features is None:
        features = newest_window_features(samples, window, window_samples=window_samples)
    features = features.where(F.col("_window").isNotNull())  # windows without a lag sample
    up_to_now = (
        Window.partitionBy(*PARTITION_KEY).orderBy("window_start").rowsBetween(Window.unboundedPreceding, 0)
    )
    evaluated = (
        _evaluation_points(features, window)
        .join(
            features.select(*PARTITION_KEY, "window_start", "_window"),
            [*PARTITION_KEY, "window_start"],
            "left",
        )
        .withColumn("_window", F.last("_window", ignorenulls=True).over(up_to_now))
    )
    return evaluated.select(
        *PARTITION_KEY,
        *WINDOW_COLUMNS,
        "evaluated_at",
        _burrow_status().alias("status"),
        F.col("_window.records_behind").alias("records_behind"),
        F.col("_window.next_offset").alias("next_offset"),
        F.col("_window.last_sample_at").alias("last_sample_at"),
        F.col("_window.samples").alias("window_samples"),
        F.col("_window.partitions").alias("partitions"),
    )


def flow_status(partition_statuses: DataFrame) -> DataFrame:
    """A flow's status per window from its partitions' (`partition_status` output): the worst one wins.
    Each row counts as the `partitions` it stands for (a topic row: its partitions)."""
    is_error = F.col("status").isin(*ERROR_CAUSES)
    partitions = F.col("partitions").cast("long")
    errors = F.sum(F.when(is_error, partitions).otherwise(0))
    warnings = F.sum(F.when(F.col("status") == "WARN", partitions).otherwise(0))
    return (
        partition_statuses.groupBy(*FLOW_KEY, *WINDOW_COLUMNS)
        .agg(
            F.sum(partitions).alias("partitions"),
            errors.alias("partitions_err"),
            warnings.alias("partitions_warn"),
            F.sort_array(F.collect_set(F.when(is_error, F.col("status")))).alias("_causes"),
        )
        .select(
            *FLOW_KEY,
            *WINDOW_COLUMNS,
            F.when(F.col("partitions_err") > 0, "ERR")
            .when(F.col("partitions_warn") > 0, "WARN")
            .otherwise("OK")
            .alias("status"),
            F.when(F.size("_causes") > 0, F.concat_ws(",", "_causes")).alias("cause"),
            "partitions",
            "partitions_err",
            "partitions_warn",
        )
    )
