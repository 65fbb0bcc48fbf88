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


def window_end(start: Column, window: timedelta) -> Column:
    """End (exclusive) of the fixed window starting at `start`."""
    return F.timestamp_seconds(F.unix_seconds(start) + window_seconds(window))


def records_behind() -> Column:
    """Records the source has that the mirror has not replicated, clamped at 0.

    A broker may report an end offset below what it already served (DESIGN.md §4): never negative.
    Null (unknown) when the slice read no end offset.
    """
    behind = F.col("source_end_offset") - F.col("next_offset")
    return F.when(behind.isNotNull(), F.greatest(behind, F.lit(0))).cast("long")


def partition_key_ddl(samples: DataFrame) -> str:
    """`flow_id bigint, ...`: the PARTITION_KEY columns of `samples` as a schema, for grouped functions."""
    return ", ".join(f"`{name}` {samples.schema[name].dataType.simpleString()}" for name in PARTITION_KEY)
