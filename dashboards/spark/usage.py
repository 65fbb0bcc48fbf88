"""Usage: what the replication fleet did, per report window and per day (the load the capacity plans size
against, `dashboards.spark.capacity`).

- load: a flow's MB/s (1 MB = 10^6 bytes) per report window (5 minutes by default, as Cruise Control
  averages); a day's load is the p95 of its windows, its average the mean of them; a flow's current
  load is at least what its source produced (input MB/s): a flow that cannot keep up copies less than
  it must.
- per-task capacity: the best window MB/s one task achieved while its partitions were behind (a task
  with a backlog runs flat out); when no task was ever behind this is only a lower bound, the best MB/s
  seen, and `per_task_saturated` is false.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from dashboards.spark.frames import FLOW_KEY, PARTITION_KEY, partition_key_ddl, window_seconds
from dashboards.spark.percentiles import exact_percentiles
from dashboards.spark.throughput import BYTES_PER_MB
from dashboards.spark.windowed import (
    combined_codes,
    doubles,
    key_columns,
    longs,
    max_of_doubles,
    max_of_longs,
    partition_counts,
    report_windows,
    row_groups,
    sum_of_doubles,
    sum_of_longs,
)

DEFAULT_USAGE_WINDOW = timedelta(minutes=5)
NEVER_NULL = ("tasks", "workers", "saturated_windows")  # of `daily_flow_usage`'s columns

# What `task_usage` reads of a sample, and the columns it gives per window, task and worker.
USAGE_SAMPLE_COLUMNS = (
    "ts",
    "task_index",
    "worker",
    "source_end_offset",
    "next_offset",
    "records",
    "bytes",
    "interval_s",
    "record_age_ms",
    "replication_latency_ms",
    "partitions",
)


USAGE_SCHEMA = (
    "records long, bytes long, _covered_s double, _behind long, _saturated boolean, _produced long, "
    "_ack_ms double, _acks long, partitions int"
)


# A task is busy for a window when its slices covered at least this share of it (a slice's interval
# starts in the window before, so a fully covered window sums to about its length, never exactly).
BUSY_SHARE = 0.9

# A partition is saturated for a window when it was behind at at least this share of its samples (the
# tolerance: a sample whose source end is unknown, or a reset, is not behind) and it replicated records.
BEHIND_SHARE = 0.9


@dataclass(frozen=True)
class SampleProgress:
    """Per sample of one mirrored partition, what needs the sample before it (in time):

    - `behind`: the slice left records that the source already had at the previous sample (next_offset <
      the previous source end offset): it could not drain even the backlog it started with, whether it
      replicated some (a busy slice) or none (an empty fetch). Records produced during the slice (in
      flight) do not count.
    - `replicated`: the slice replicated records.
    - `produced`: records the source gained since the previous sample (0 on a reset or unknown, or
      when a topic row's `partitions` changed: its sums then add up other partitions).
    - `ack_ms`: replication latency - record age (poll to the target's ack; NaN when either is unknown).
    """

    behind: np.ndarray
    replicated: np.ndarray
    produced: np.ndarray
    ack_ms: np.ndarray

    def take(self, rows: np.ndarray) -> SampleProgress:
        return SampleProgress(
            self.behind[rows], self.replicated[rows], self.produced[rows], self.ack_ms[rows]
        )


def sample_progress(table: pa.Table) -> SampleProgress:
    """`SampleProgress` of one mirrored partition's samples (any order; the first in time has no previous)."""
    micros = table.column("ts").cast(pa.int64()).to_numpy()
    order = np.argsort(micros, kind="stable")
    end, end_known = longs(table, "source_end_offset")
    position, position_known = longs(table, "next_offset")
    records, records_known = longs(table, "records")
    previous_end, previous_known = np.zeros_like(end), np.zeros(len(end), dtype=bool)
    previous_end[order[1:]], previous_known[order[1:]] = end[order[:-1]], end_known[order[:-1]]
    # A topic row whose partitions changed adds up others than the sample before: no comparison.
    partitions = partition_counts(table)
    previous_known[order[1:]] &= partitions[order[1:]] == partitions[order[:-1]]
    grew = end_known & previous_known & (end >= previous_end)
    behind = grew & position_known & (position < previous_end)
    produced = np.where(grew, end - previous_end, 0)
    ack_ms = doubles(table, "replication_latency_ms") - doubles(table, "record_age_ms")
    return SampleProgress(behind, records_known & (records > 0), produced, ack_ms)


def task_usage(
    table: pa.Table,
    windows: np.ndarray,
    window_count: int,
    *,
    progress: SampleProgress | None = None,
    by: Sequence[str] = ("task_index", "worker"),
) -> tuple[np.ndarray, pa.Table]:
    """One mirrored partition's samples reduced to a row per window and task (`by`: its index and worker),
    in that order: each row's window index, and (*by, USAGE_SCHEMA) as Spark's sum and max give them.

    `_covered_s` sums the slice seconds (null without any), `_behind` is the most records behind,
    `_saturated` says the partition was behind at BEHIND_SHARE of the samples at least and replicated
    records in some (`SampleProgress`: empty slices of a partition that is behind do not clear it; a
    stalled one, replicating nothing, measures no capacity); whether the slices covered the window
    (BUSY_SHARE) is judged per task over all its workers (`daily_flow_usage_from_windows`): a task whose
    slices alternate between workers covers the window too. `_produced` sums the records produced,
    `_ack_ms` and `_acks` sum and count `ack_ms`, `partitions` is the most partitions a sample stood for.
    `progress` is `sample_progress(table)` unless given (computed over more samples, then taken).
    """
    progress = progress or sample_progress(table)
    group_of_row, first = row_groups(table, by, key=windows)
    count = len(first)
    interval_s = doubles(table, "interval_s")
    end, end_known = longs(table, "source_end_offset")
    position, position_known = longs(table, "next_offset")
    # greatest(end - position, 0): Spark's greatest skips the null a missing offset gives.
    behind = np.where(end_known & position_known, np.maximum(end - position, 0), 0)
    usage = {column: table.column(column).take(first) for column in by}
    for column in ("records", "bytes"):
        total, present = sum_of_longs(*longs(table, column), group_of_row, count)
        usage[column] = pa.array(total, mask=~present)
    covered = sum_of_doubles(np.where(interval_s > 0, interval_s, np.nan), group_of_row, count)
    usage["_covered_s"] = pa.array(covered, from_pandas=True)
    usage["_behind"] = pa.array(max_of_longs(behind, group_of_row, count))
    samples = np.bincount(group_of_row, minlength=count)
    behind_samples = np.bincount(group_of_row[progress.behind], minlength=count)
    replicating = np.bincount(group_of_row[progress.replicated], minlength=count) > 0
    usage["_saturated"] = pa.array((behind_samples >= BEHIND_SHARE * samples) & replicating)
    usage["_produced"] = pa.array(
        sum_of_longs(progress.produced, np.ones(len(group_of_row), dtype=bool), group_of_row, count)[0]
    )
    acked = ~np.isnan(progress.ack_ms)
    usage["_ack_ms"] = pa.array(sum_of_doubles(progress.ack_ms, group_of_row, count), from_pandas=True)
    usage["_acks"] = pa.array(np.bincount(group_of_row[acked], minlength=count).astype(np.int64))
    usage["partitions"] = pa.array(
        max_of_longs(partition_counts(table), group_of_row, count).astype(np.int32)
    )
    return windows[first], pa.table(usage)


def window_usage(samples: DataFrame, window: timedelta = DEFAULT_USAGE_WINDOW) -> DataFrame:
    """One row per mirrored partition, window, task and worker: what `daily_flow_usage_from_windows` reads.

    Every aggregate of the daily usage reads it (three times): cache it when the samples are costly.
    The report job takes `task_usage` from its one grouped pass instead.
    """
    window_s = window_seconds(window)

    def apply(table: pa.Table) -> pa.Table:
        windows, starts = report_windows(table, window_s)
        window_of_row, usage = task_usage(table, windows, len(starts))
        return pa.table(
            {
                **key_columns(table, PARTITION_KEY, len(usage)),
                "window_start": pa.array(starts[window_of_row], table.schema.field("ts").type),
                **{name: usage.column(name) for name in usage.column_names},
            }
        )

    kinds = {name: samples.schema[name].dataType.simpleString() for name in ("task_index", "worker")}
    schema = (
        f"{partition_key_ddl(samples)}, window_start timestamp, task_index {kinds['task_index']}, "
        f"worker {kinds['worker']}, {USAGE_SCHEMA}"
    )
    return (
        samples.select(*PARTITION_KEY, *USAGE_SAMPLE_COLUMNS)
        .groupBy(*PARTITION_KEY)
        .applyInArrow(apply, schema)
        .withColumn("date", F.to_date("window_start"))
    )


def daily_flow_usage(samples: DataFrame, window: timedelta = DEFAULT_USAGE_WINDOW) -> DataFrame:
    """Per flow and UTC day: load (average, p95 and max of window MB/s), totals, fleet shape, task speed."""
    return daily_flow_usage_from_windows(window_usage(samples, window), window_s=window_seconds(window))


def daily_flow_usage_from_windows(reduced: DataFrame, *, window_s: int) -> DataFrame:
    """`daily_flow_usage_table` of Spark's `window_usage` rows, as a DataFrame."""
    table = daily_flow_usage_table(reduced.toArrow(), window_s=window_s)
    return reduced.sparkSession.createDataFrame(table)


def daily_flow_usage_table(reduced: pa.Table, *, window_s: int) -> pa.Table:
    """`daily_flow_usage` from `window_usage` rows (an Arrow table; `date` computed from `window_start`, a
    UTC day) of `window_s`-second windows, in numpy: what Spark's aggregation gives (sums of doubles a last
    bit apart, in another order)."""
    micros = reduced.column("window_start").cast(pa.int64()).to_numpy()
    days = micros // (86_400 * 1_000_000)
    table = reduced.append_column("_day", pa.array(days))
    day, day_first = row_groups(table, [*FLOW_KEY, "_day"])
    count = len(day_first)
    # A partition's rate under one task in one window, whichever workers ran its slices (module doc).
    rate, rate_first = row_groups(table, ["window_start", "task_index", "remote_topic", "partition"], key=day)
    rates = len(rate_first)
    byte_sums, has_bytes = sum_of_longs(*longs(table, "bytes"), rate, rates)
    covered_s = sum_of_doubles(doubles(table, "_covered_s"), rate, rates)
    with np.errstate(divide="ignore", invalid="ignore"):
        mb_per_s = np.where(has_bytes & (covered_s > 0), byte_sums / covered_s / BYTES_PER_MB, 0.0)
    covered = np.nan_to_num(covered_s, nan=0.0) >= BUSY_SHARE * window_s
    # Spark's `min` of the partition's `_saturated` (its non-null values; null without any, not saturated).
    flags = table.column("_saturated")
    known = flags.is_valid().to_numpy(zero_copy_only=False)
    flagged = pc.fill_null(flags, False).to_numpy(zero_copy_only=False)
    rate_saturated = (
        (np.bincount(rate, weights=known, minlength=rates) > 0)
        & ~(np.bincount(rate, weights=known & ~flagged, minlength=rates) > 0)
        & covered
    )
    rate_day = day[rate_first]
    # A task is saturated in a window when one of its partitions was saturated all window.
    rate_rows = table.take(pa.array(rate_first))
    task, task_first = row_groups(rate_rows, ["window_start", "task_index"], key=rate_day)
    task_mb = sum_of_doubles(mb_per_s, task, len(task_first))
    task_saturated = np.bincount(task, weights=rate_saturated, minlength=len(task_first)) > 0
    task_day = rate_day[task_first]
    # The flow's load per window, and its day's average, p95 and maximum.
    window, window_first = row_groups(rate_rows, ["window_start"], key=rate_day)
    flow_mb = sum_of_doubles(mb_per_s, window, len(window_first))
    window_day = rate_day[window_first]
    windows_per_day = np.bincount(window_day, minlength=count)
    # Totals and distinct counts (the partitions each count the partitions they stand for).
    partition, partition_first = row_groups(table, ["remote_topic", "partition"], key=day)
    partitions = np.zeros(count, np.int64)
    np.add.at(
        partitions,
        day[partition_first],
        max_of_longs(partition_counts(table), partition, len(partition_first)),
    )
    records, has_records = sum_of_longs(*longs(table, "records"), day, count)
    total_bytes, has_total_bytes = sum_of_longs(*longs(table, "bytes"), day, count)
    produced, has_produced = sum_of_longs(*longs(table, "_produced"), day, count)
    acks, has_acks = sum_of_longs(*longs(table, "_acks"), day, count)
    ack_ms = sum_of_doubles(doubles(table, "_ack_ms"), day, count)

    def distinct(column: str) -> np.ndarray:
        """Spark's `count_distinct(column)` per day: its non-null values."""
        known = table.column(column).is_valid().to_numpy(zero_copy_only=False)
        _, first = np.unique(combined_codes(table, [column], key=day)[known], return_index=True)
        return np.bincount(day[known][first], minlength=count).astype(np.int64)

    average = sum_of_doubles(flow_mb, window_day, count) / windows_per_day
    saturated_mb = np.where(task_saturated, task_mb, np.nan)
    has_load = has_records & (records > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        latency = np.where(has_acks & (acks != 0), ack_ms / acks, np.nan)
        record_bytes = np.where(has_load, total_bytes / records, np.nan)
        input_mb = np.where(has_load & has_produced, average * produced / records, np.nan)
    first_rows = pa.array(day_first)
    table = pa.table(
        {name: table.column(name).take(first_rows) for name in FLOW_KEY}
        | {
            "date": pa.array(days[day_first].astype("datetime64[D]"), pa.date32()),
            "records": pa.array(records, mask=~has_records),
            "bytes": pa.array(total_bytes, mask=~has_total_bytes),
            "tasks": pa.array(distinct("task_index")),
            "workers": pa.array(distinct("worker")),
            "network_latency_ms": pa.array(latency, from_pandas=True),
            "partitions": pa.array(partitions),
            "avg_mb_per_s": pa.array(average, from_pandas=True),
            "p95_mb_per_s": pa.array(
                exact_percentiles(flow_mb, window_day, window_count=count, fractions=[0.95])[:, 0],
                from_pandas=True,
            ),
            "max_mb_per_s": pa.array(max_of_doubles(flow_mb, window_day, count), from_pandas=True),
            "task_saturated_mb_per_s": pa.array(
                max_of_doubles(saturated_mb, task_day, count), from_pandas=True
            ),
            "task_observed_mb_per_s": pa.array(max_of_doubles(task_mb, task_day, count), from_pandas=True),
            "saturated_windows": pa.array(
                np.bincount(task_day, weights=task_saturated, minlength=count).astype(np.int64)
            ),
            "record_bytes": pa.array(record_bytes, from_pandas=True),
            "input_mb_per_s": pa.array(input_mb, from_pandas=True),
        }
    )
    # Counts are never null, as Spark's schema says (the usage state keeps it).
    return table.cast(
        pa.schema([field.with_nullable(field.name not in NEVER_NULL) for field in table.schema])
    )
