"""Keys and fixed time windows shared by the report transforms."""

from __future__ import annotations

from datetime import timedelta

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

FLOW_KEY = ("flow_id", "flow_name")
# One mirrored partition: the source partition and the remote partition it is copied to (same number).
PARTITION_KEY = (*FLOW_KEY, "source_topic", "remote_topic", "partition")
WINDOW_COLUMNS = ("window_start", "window_end")
DAY_SECONDS = 86_400


def window_seconds(window: timedelta) -> int:
    seconds = window.total_seconds()
    if seconds < 1 or seconds != int(seconds):
        raise ValueError(f"a report window is a whole number of seconds, not {window}")
    return int(seconds)


def window_start(ts: Column, window: timedelta) -> Column:
    """Start of the fixed window `ts` falls in; windows are aligned on the Unix epoch (so on UTC days)."""
    seconds = F.unix_seconds(ts)
    return F.timestamp_seconds(seconds - F.pmod(seconds, F.lit(window_seconds(window))))


def window_end(start: Column, window: timedelta) -> Column:
    """End (exclusive) of the fixed window starting at `start`."""
    return F.timestamp_seconds(F.unix_seconds(start) + window_seconds(window))


def with_window(samples: DataFrame, window: timedelta) -> DataFrame:
    start = window_start(F.col("ts"), window)
    return samples.withColumn("window_start", start).withColumn("window_end", window_end(start, window))


def epoch_seconds(column: str) -> Column:
    """Fractional Unix seconds of a timestamp column (microsecond precision)."""
    return F.unix_micros(F.col(column)) / F.lit(1_000_000.0)


def records_behind() -> Column:
    """Records the source has that the mirror has not replicated, clamped at 0.

    A broker may report an end offset below what it already served (DESIGN.md §4): never negative.
    """
    return F.greatest(F.col("source_end_offset") - F.col("next_offset"), F.lit(0)).cast("long")


def partition_key_ddl(samples: DataFrame) -> str:
    """`flow_id bigint, ...`: the PARTITION_KEY columns of `samples` as a schema, for grouped functions."""
    return ", ".join(f"`{name}` {samples.schema[name].dataType.simpleString()}" for name in PARTITION_KEY)
