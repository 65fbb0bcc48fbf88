"""Spark's exact `percentile` per report window, in numpy, for the grouped Arrow functions.

Spark's exact percentile collects every value of a group and then sorts them; over the samples of a
whole lake that is most of the throughput and latency aggregation. A grouped Arrow function already
holds each mirrored partition's samples, so it sorts them there, by (window, value), once per measure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np


def exact_percentiles(
    values: np.ndarray, windows: np.ndarray, *, window_count: int, fractions: Sequence[float]
) -> np.ndarray:
    """Per window (0 .. window_count - 1) and fraction, what Spark's `percentile(value, fractions)` gives.

    `values` are doubles with NaN for null, `windows` each value's window. As Spark 4.3
    (catalyst.expressions.aggregate.PercentileBase): nulls are ignored and a window without values gives
    null (NaN); otherwise, over its n values sorted, position = (n - 1) x fraction and the result is
    low = value[floor(position)] when floor and ceil are equal or hold the same value, else
    low + (position - floor) x (value[ceil(position)] - low), in that floating-point order (earlier
    Sparks interpolated as (ceil - position) x low + (position - floor) x high: a last bit apart).
    """
    known = ~np.isnan(values)
    values, windows = values[known], windows[known]
    # By window, ascending within it: a sort by value, then a stable one by window, a radix sort when
    # the window indices fit 16 bits (a lexsort of both is about twice as slow).
    by_value = np.argsort(values)
    window_keys = windows[by_value]
    if window_count <= 1 << 16:
        window_keys = window_keys.astype(np.uint16)
    values = values[by_value[np.argsort(window_keys, kind="stable")]]
    counts = np.bincount(windows, minlength=window_count)
    present = np.flatnonzero(counts)
    first = (np.cumsum(counts) - counts)[present]
    last_index = counts[present] - 1
    result = np.full((window_count, len(fractions)), np.nan)
    for column, fraction in enumerate(fractions):
        position = last_index * fraction
        lower, higher = np.floor(position), np.ceil(position)
        low = values[first + lower.astype(np.int64)]
        high = values[first + higher.astype(np.int64)]
        interpolated = low + (position - lower) * (high - low)
        result[present, column] = np.where((lower == higher) | (low == high), low, interpolated)
    return result


def named_percentiles(
    measures: Mapping[str, np.ndarray],
    windows: np.ndarray,
    *,
    window_count: int,
    percentiles: Sequence[tuple[str, float]],
) -> dict[str, np.ndarray]:
    """`<measure>_<name>` -> its `exact_percentiles` per window, for every measure and (name, fraction)."""
    fractions = [fraction for _, fraction in percentiles]
    arrays = {}
    for measure, values in measures.items():
        result = exact_percentiles(values, windows, window_count=window_count, fractions=fractions)
        arrays.update({f"{measure}_{name}": result[:, i] for i, (name, _) in enumerate(percentiles)})
    return arrays
