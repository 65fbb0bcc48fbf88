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
"""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from dashboards.spark.frames import FLOW_KEY, PARTITION_KEY, WINDOW_COLUMNS, records_behind, with_window

DEFAULT_WINDOW_SAMPLES = 10  # Burrow's default window ("intervals")
ERROR_CAUSES = ("STOP", "STALL", "REWIND")


def _with_window_features(samples: DataFrame, window_samples: int) -> DataFrame:
    """Each sample with what Burrow needs about the window of the last `window_samples` ending at it."""
    by_time = Window.partitionBy(*PARTITION_KEY).orderBy("ts")
    last_n = by_time.rowsBetween(-(window_samples - 1), 0)
    # A window of N samples holds N-1 changes: those of all its samples but the first.
    last_changes = by_time.rowsBetween(-(window_samples - 2), 0) if window_samples > 1 else None
    lagged = samples.withColumn("_lag", records_behind())
    change = F.col("_lag") - F.lag("_lag").over(by_time)
    lagged = lagged.withColumn("_lag_change", change)
    min_change = F.min("_lag_change").over(last_changes) if last_changes else F.lit(None).cast("long")
    return lagged.select(
        *PARTITION_KEY,
        "ts",
        F.struct(
            F.col("ts").alias("last_sample_at"),
            F.col("next_offset"),
            F.col("_lag").alias("records_behind"),
            F.min("ts").over(last_n).alias("first_sample_at"),
            F.count(F.lit(1)).over(last_n).alias("samples"),
            F.min("_lag").over(last_n).alias("min_lag"),
            F.min("next_offset").over(last_n).alias("min_offset"),
            F.max("next_offset").over(last_n).alias("max_offset"),
            min_change.alias("min_lag_change"),
        ).alias("_window"),
    )


def _evaluation_points(samples: DataFrame, window: timedelta) -> DataFrame:
    """(partition, window, now): every partition its flow has known, at each window the flow reported in."""
    flow_windows = (
        with_window(samples, window)
        .groupBy(*FLOW_KEY, *WINDOW_COLUMNS)
        .agg(F.max("ts").alias("evaluated_at"))
    )
    partitions = samples.groupBy(*PARTITION_KEY).agg(F.min("ts").alias("_first_seen"))
    return (
        partitions.join(flow_windows, list(FLOW_KEY))
        .where(F.col("_first_seen") <= F.col("evaluated_at"))
        .drop("_first_seen")
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


def partition_status(
    samples: DataFrame, window: timedelta, *, window_samples: int = DEFAULT_WINDOW_SAMPLES
) -> DataFrame:
    """Status per mirrored partition at the end of each report window (OK, WARN, STOP, STALL, REWIND)."""
    if window_samples < 1:
        raise ValueError("a Burrow window holds at least one sample")
    # The newest sample at or before an evaluation point (the flow's newest in window W) is the
    # partition's newest in W, or in the latest earlier window it reported in: all of its samples in W
    # are at or before that instant, all later ones after it. So sample features are reduced to one per
    # partition and window before meeting the evaluation points.
    features = with_window(_with_window_features(samples, window_samples), window)
    newest_per_window = features.groupBy(*PARTITION_KEY, "window_start").agg(
        F.max_by("_window", "ts").alias("_window")
    )
    up_to_now = (
        Window.partitionBy(*PARTITION_KEY).orderBy("window_start").rowsBetween(Window.unboundedPreceding, 0)
    )
    evaluated = (
        _evaluation_points(samples, window)
        .join(newest_per_window, [*PARTITION_KEY, "window_start"], "left")
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
    )


def flow_status(partition_statuses: DataFrame) -> DataFrame:
    """A flow's status per window from its partitions' (`partition_status` output): the worst one wins."""
    is_error = F.col("status").isin(*ERROR_CAUSES)
    errors = F.sum(is_error.cast("int"))
    warnings = F.sum((F.col("status") == "WARN").cast("int"))
    return (
        partition_statuses.groupBy(*FLOW_KEY, *WINDOW_COLUMNS)
        .agg(
            F.count(F.lit(1)).alias("partitions"),
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
