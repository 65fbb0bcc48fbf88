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

Both are computed in numpy from each partition's Burrow features per window (`partition_status_table`,
`flow_status_table`: the report job calls them on the pass's rows in its driver); `partition_status` and
`flow_status` give them for Spark's samples as DataFrames.

A topic row (`lake` module doc) is judged as one partition whose position and end offset are its
partitions' sums, and counts in its flow's partitions (all, erring, warning) as the `partitions` it stands
for: a stall of all of them shows, a stall of some among moving ones does not (docs/analytics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from dashboards.spark.frames import (
    FLOW_KEY,
    PARTITION_KEY,
    WINDOW_COLUMNS,
    partition_key_ddl,
    window_seconds,
)
from dashboards.spark.windowed import key_columns, partition_counts, report_windows, row_groups

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
    """`partition_status_table` of Spark's samples, as a DataFrame (the report job calls the table function
    on the pass's rows it holds already).

    `features`: `newest_window_features(samples, window, window_samples=...)` when already computed.
    """
    if window_samples < 1:
        raise ValueError("a Burrow window holds at least one sample")
    if features is None:
        features = newest_window_features(samples, window, window_samples=window_samples)
    table = partition_status_table(features.toArrow(), window_seconds(window))
    return samples.sparkSession.createDataFrame(table)


def flow_status(partition_statuses: DataFrame) -> DataFrame:
    """`flow_status_table` of Spark's partition statuses (`partition_status` output), as a DataFrame."""
    return partition_statuses.sparkSession.createDataFrame(flow_status_table(partition_statuses.toArrow()))


def _window_field(windows: pa.StructArray, name: str) -> np.ndarray:
    """One `_window` field as int64 (µs for a timestamp), 0 where null."""
    values = windows.field(name)
    if pa.types.is_timestamp(values.type):
        values = values.cast(pa.int64())
    return pc.fill_null(values, 0).to_numpy().astype(np.int64)


def burrow_status(windows: pa.StructArray, evaluated_at: np.ndarray) -> np.ndarray:
    """Burrow's rules (module doc), first match wins, on `_window` features evaluated at `evaluated_at` (µs)."""
    last, first = _window_field(windows, "last_sample_at"), _window_field(windows, "first_sample_at")
    min_lag, samples = _window_field(windows, "min_lag"), _window_field(windows, "samples")
    min_offset, max_offset = _window_field(windows, "min_offset"), _window_field(windows, "max_offset")
    lag_change, lag_changes = windows.field("min_lag_change"), _window_field(windows, "min_lag_change")
    moved = samples >= 2
    rules = [
        (_window_field(windows, "records_behind") == 0, "OK"),
        ((evaluated_at - last > last - first) & (min_lag > 0), "STOP"),
        (_window_field(windows, "next_offset") < max_offset, "REWIND"),
        (min_lag == 0, "OK"),
        (moved & (min_offset == max_offset), "STALL"),
        (moved & lag_change.is_valid().to_numpy(zero_copy_only=False) & (lag_changes >= 0), "WARN"),
    ]
    return np.select([rule for rule, _ in rules], [status for _, status in rules], default="OK")


def _ranges(begin: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The integers of every range [begin[i], end[i]) in order, and the i each comes from."""
    counts = np.maximum(end - begin, 0)
    owner = np.repeat(np.arange(len(begin)), counts)
    offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]) if len(counts) else counts
    return begin[owner] + np.arange(counts.sum()) - offsets[owner], owner


def partition_status_table(features: pa.Table, window_s: int) -> pa.Table:
    """Status per mirrored partition at the end of each report window its flow reported in (OK, WARN,
    STOP, STALL, REWIND), from the partitions' `_window` features per window (`newest_window_features`, the
    report job's pass rows): evaluated at the flow's newest sample in that window, from the partition's
    first window on, on its newest features at or before that window (a silent partition is still seen)."""
    features = features.filter(pc.is_valid(features.column("_window")))
    windows = features.column("_window").combine_chunks()
    start_type = features.schema.field("window_start").type
    starts, rank = np.unique(features.column("window_start").cast(pa.int64()).to_numpy(), return_inverse=True)
    rank = rank.astype(np.int64)
    ranks = len(starts)
    flow, _ = row_groups(features, FLOW_KEY)
    partition, _ = row_groups(features, PARTITION_KEY)
    # The flows' windows (flow, window) in order, each evaluated at the newest of its samples.
    flow_window = flow.astype(np.int64) * ranks + rank
    points, point_of_row = np.unique(flow_window, return_inverse=True)
    evaluated_at = np.full(len(points), np.iinfo(np.int64).min)
    np.maximum.at(evaluated_at, point_of_row, _window_field(windows, "last_sample_at"))
    # Each partition's rows in window order; its first window, and its flow's windows from there on.
    partition_window = partition.astype(np.int64) * ranks + rank
    order = np.argsort(partition_window, kind="stable")
    partition_window = partition_window[order]
    firsts = order[np.flatnonzero(np.diff(partition[order], prepend=-1) != 0)]  # a row per partition
    point, owner = _ranges(
        np.searchsorted(points, flow_window[firsts]), np.searchsorted(points, (flow[firsts] + 1) * ranks)
    )
    # The partition's newest features at or before each of those windows.
    wanted = partition[firsts][owner].astype(np.int64) * ranks + points[point] % ranks
    rows = order[np.searchsorted(partition_window, wanted, side="right") - 1]
    taken, at = windows.take(pa.array(rows)), evaluated_at[point]
    window_start = starts[points[point] % ranks]
    return pa.table(
        {name: features.column(name).take(pa.array(rows)) for name in PARTITION_KEY}
        | {
            "window_start": pa.array(window_start, pa.int64()).cast(start_type),
            "window_end": pa.array(window_start + window_s * 1_000_000, pa.int64()).cast(start_type),
            "evaluated_at": pa.array(at, pa.int64()).cast(windows.type.field("last_sample_at").type),
            "status": pa.array(burrow_status(taken, at), pa.string()),
            "records_behind": taken.field("records_behind"),
            "next_offset": taken.field("next_offset"),
            "last_sample_at": taken.field("last_sample_at"),
            "window_samples": taken.field("samples"),
            "partitions": taken.field("partitions"),
        }
    )


def flow_status_table(statuses: pa.Table) -> pa.Table:
    """A flow's status per window from its partitions' (`partition_status_table`): the worst one wins, ERR
    with its causes named (sorted), each row counting as the `partitions` it stands for (a topic row: its
    partitions)."""
    group, firsts = row_groups(statuses, [*FLOW_KEY, "window_start"])
    count = len(firsts)
    status = statuses.column("status").to_numpy(zero_copy_only=False)
    partitions = pc.fill_null(statuses.column("partitions"), 0).to_numpy().astype(np.int64)

    def total(where: np.ndarray) -> np.ndarray:
        sums = np.zeros(count, np.int64)
        np.add.at(sums, group[where], partitions[where])
        return sums

    errors, warnings = total(np.isin(status, ERROR_CAUSES)), total(status == "WARN")
    seen = {cause: np.bincount(group[status == cause], minlength=count) > 0 for cause in sorted(ERROR_CAUSES)}
    causes = [",".join(cause for cause, where in seen.items() if where[i]) or None for i in range(count)]
    first_rows = pa.array(firsts)
    return pa.table(
        {name: statuses.column(name).take(first_rows) for name in (*FLOW_KEY, *WINDOW_COLUMNS)}
        | {
            "status": pa.array(np.select([errors > 0, warnings > 0], ["ERR", "WARN"], "OK"), pa.string()),
            "cause": pa.array(causes, pa.string()),
            "partitions": pa.array(total(np.ones(len(status), bool))),
            "partitions_err": pa.array(errors),
            "partitions_warn": pa.array(warnings),
        }
    )
