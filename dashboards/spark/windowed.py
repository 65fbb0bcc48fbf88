"""Spark's aggregates per report window of one mirrored partition's samples, in numpy.

The report job ships each mirrored partition's samples, in time order, to one grouped Arrow function
and computes every per-window measure there (one pass over the samples instead of one Spark
aggregation per report). These helpers give what Spark's aggregate over the same rows gives: sums add
in row order (`ufunc.at` is unbuffered and ordered; `reduceat` and `sum` add pairwise, a last bit
apart from Spark), nulls are ignored and a window without a value gives null. Doubles carry null as
NaN, as Spark's `percentile` and `max` treat the samples' nulls (a NaN sample is not written).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from dashboards.spark.frames import PARTITION_KEY, partition_key_ddl, window_seconds

# Measures per report window of a mirrored partition's samples: name -> numpy array (NaN = null) or
# Arrow array, from (the samples, each sample's window, the number of windows).
WindowMeasures = Callable[[pa.Table, np.ndarray, int], Mapping[str, np.ndarray | pa.Array]]


def report_windows(table: pa.Table, window_s: int) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's report window, as an index into the table's windows in time order; their starts (µs)."""
    seconds = table.column("ts").cast(pa.int64()).to_numpy() // 1_000_000
    starts, windows = np.unique(seconds - seconds % window_s, return_inverse=True)
    return windows, starts * 1_000_000


def doubles(table: pa.Table, column: str) -> np.ndarray:
    """A numeric column as doubles, NaN for null (Spark casts longs to doubles the same way)."""
    return table.column(column).to_numpy(zero_copy_only=False).astype(np.float64)


def longs(table: pa.Table, column: str) -> tuple[np.ndarray, np.ndarray]:
    """A long column as int64 with 0 for null, and which rows are not null."""
    values = table.column(column)
    return pc.fill_null(values, 0).to_numpy().astype(np.int64), values.is_valid().to_numpy()


def partition_counts(table: pa.Table) -> np.ndarray:
    """How many mirrored partitions each sample stands for (`lake.LAKE_COLUMNS` "partitions"): 1 where the
    column is null or absent (lake files written before it, and frames built without it)."""
    if "partitions" not in table.column_names:
        return np.ones(table.num_rows, np.int32)
    return pc.fill_null(table.column("partitions"), 1).to_numpy().astype(np.int32)


def dense_codes(column: pa.ChunkedArray | pa.Array) -> tuple[np.ndarray, int]:
    """Each value's rank among the column's distinct values in order of appearance (null: -1), and how many
    there are; a dictionary-encoded column's indices as they are (equal for equal values when its
    dictionary holds each value once, as a unified one does)."""
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    encoded = array.dictionary_encode()
    return pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64), len(encoded.dictionary)


def combined_codes(table: pa.Table, columns: Sequence[str], key: np.ndarray | None = None) -> np.ndarray:
    """An int64 per row, equal for the rows equal on `key` (when given, it orders first) and `columns`:
    mixed-radix `dense_codes`, renumbered densely whenever the next column could overflow."""
    key = np.zeros(table.num_rows, np.int64) if key is None else key.astype(np.int64)
    span = int(key.max()) + 1 if len(key) else 1
    for column in columns:
        codes, distinct = dense_codes(table.column(column))
        if span * (distinct + 1) >= 2**62:
            distinct_keys, key = np.unique(key, return_inverse=True)
            span = len(distinct_keys)
        key = key * (distinct + 1) + codes + 1
        span *= distinct + 1
    return key


def row_groups(
    table: pa.Table, columns: Sequence[str], key: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Each row's group (dense, from 0) by `key` (when given, first) and `columns`, and each group's first row."""
    _, first, group = np.unique(
        combined_codes(table, columns, key=key), return_index=True, return_inverse=True
    )
    return group.astype(np.int64), first


def count_per_window(windows: np.ndarray, window_count: int, where: np.ndarray | None = None) -> np.ndarray:
    """Spark's `count` per window of the rows `where` holds (all rows without it)."""
    return np.bincount(windows if where is None else windows[where], minlength=window_count)


def sum_of_doubles(values: np.ndarray, windows: np.ndarray, window_count: int) -> np.ndarray:
    """Spark's `sum` of a double column per window: in row order; NaN (null) for a window without values."""
    known = ~np.isnan(values)
    sums = np.zeros(window_count)
    np.add.at(sums, windows[known], values[known])
    return np.where(count_per_window(windows, window_count, known) > 0, sums, np.nan)


def sum_of_longs(
    values: np.ndarray, valid: np.ndarray, windows: np.ndarray, window_count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Spark's `sum` of a long column per window, and which windows have one (Spark's sum is null else)."""
    sums = np.zeros(window_count, np.int64)
    np.add.at(sums, windows[valid], values[valid])
    return sums, count_per_window(windows, window_count, valid) > 0


def max_of_doubles(values: np.ndarray, windows: np.ndarray, window_count: int) -> np.ndarray:
    """Spark's `max` per window, ignoring NaN (null); NaN for a window without values."""
    maxima = np.full(window_count, np.nan)
    np.fmax.at(maxima, windows, values)
    return maxima


def max_of_longs(values: np.ndarray, windows: np.ndarray, window_count: int) -> np.ndarray:
    """Spark's `max` of a non-null long column per window (every window has a row)."""
    maxima = np.full(window_count, np.iinfo(np.int64).min)
    np.maximum.at(maxima, windows, values)
    return maxima


def key_columns(table: pa.Table, key: Sequence[str], rows: int) -> dict[str, pa.Array]:
    """A grouped function's output columns for its group's `key`: the first sample's values, `rows` times."""
    first = table.slice(0, 1)
    return {name: pa.repeat(first.column(name)[0], rows) for name in key}


def arrow_columns(measures: Mapping[str, np.ndarray | pa.Array]) -> dict[str, pa.Array]:
    """Measures as Arrow arrays: numpy doubles with NaN becoming null."""
    return {
        name: array if isinstance(array, pa.Array) else pa.array(array, from_pandas=True)
        for name, array in measures.items()
    }


def window_measures(
    samples: DataFrame,
    window: timedelta,
    *,
    columns: Sequence[str],
    measures: WindowMeasures,
    schema: str,
) -> DataFrame:
    """Per mirrored partition and report window it reported in: its bounds and the arrays of `measures`
    (`schema`), from a grouped Arrow function over the sample `columns` they read ("ts" among them)."""
    window_s = window_seconds(window)

    def apply(table: pa.Table) -> pa.Table:
        windows, starts = report_windows(table, window_s)
        timestamp = table.schema.field("ts").type
        return pa.table(
            {
                **key_columns(table, PARTITION_KEY, len(starts)),
                "window_start": pa.array(starts, timestamp),
                "window_end": pa.array(starts + window_s * 1_000_000, timestamp),
                **arrow_columns(measures(table, windows, len(starts))),
            }
        )

    return (
        samples.select(*PARTITION_KEY, *dict.fromkeys(columns))
        .groupBy(*PARTITION_KEY)
        .applyInArrow(
            apply,
            schema=f"{partition_key_ddl(samples)}, window_start timestamp, window_end timestamp, {schema}",
        )
    )
