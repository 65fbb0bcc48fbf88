"""The rules of a capacity plan (`capacity` module doc), on numpy columns, as Spark's SQL gives them.

A column is a float64 array with NaN for null (as `windowed.doubles` reads one), counts too until the
plan's table casts them to longs: null compares false and propagates through arithmetic, and `np.fmax`
/ `np.fmin` skip it as Spark's `greatest` / `least` do.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NOT_ENOUGH_DATA = "NOT_ENOUGH_DATA"
LAST_DAY = 2_932_896  # 9999-12-31, days since 1970-01-01: the last day a date (Python's, the web's) holds


def ceil_div(numerator: np.ndarray | float, denominator: np.ndarray | float) -> np.ndarray:
    """ceil(n / d); null when d is not positive (nothing measured to size with)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(np.asarray(denominator) > 0, np.ceil(np.divide(numerator, denominator)), np.nan)


def verdict(needed: np.ndarray, have: np.ndarray) -> np.ndarray:
    """Cruise Control's verdict on what is needed against what there is; NOT_ENOUGH_DATA when either is
    unknown."""
    rules = [np.isnan(needed) | np.isnan(have), needed > have, needed < have]
    return np.select(rules, [NOT_ENOUGH_DATA, "UNDER_PROVISIONED", "OVER_PROVISIONED"], "RIGHT_SIZED")


def days_to_capacity(current: np.ndarray, growth: np.ndarray, limit: np.ndarray) -> np.ndarray:
    """Days until `current` growing by `growth` a day reaches `limit`: 0 when already past it, null when
    the limit is unknown or the load is not growing."""
    with np.errstate(divide="ignore", invalid="ignore"):
        reached = (limit - current) / growth
    return np.select([np.isnan(limit), current >= limit, growth > 0], [np.nan, 0.0, reached], np.nan)


def days_to_run_out(days: np.ndarray) -> np.ndarray:
    """Whole days until capacity runs out, from `days_to_capacity`: ceil(round(days, 6)), rounding half up
    as Spark's `round` does (a fraction of a day below 5e-7 is rounding, not a day more)."""
    millionths = np.floor(days * 1e6 + 0.5)
    return -np.floor_divide(-millionths, 1e6)


def runs_out_on(newest_day: np.ndarray, days: np.ndarray) -> np.ndarray:
    """The day (days since 1970-01-01) capacity runs out: `days_to_run_out` after the newest day; null when
    it does not, or only after 9999-12-31 (a load growing by a hair: no date to name, as good as never,
    where the report's rows could hold no such date)."""
    day = newest_day + days_to_run_out(days)
    with np.errstate(invalid="ignore"):
        return np.where(day <= LAST_DAY, day, np.nan)


def fit_confidence(days: np.ndarray, r2: np.ndarray) -> np.ndarray:
    """How far to trust the growth fit: high from 14 days at R² >= 0.8, medium from 7 days at R² >= 0.5."""
    return np.select([(days >= 14) & (r2 >= 0.8), (days >= 7) & (r2 >= 0.5)], ["high", "medium"], "low")


def least_squares(
    x: np.ndarray, y: np.ndarray, group: np.ndarray, count: int
) -> tuple[np.ndarray, np.ndarray]:
    """Spark's `regr_slope(y, x)` and `regr_r2(y, x)` per group (`group`: each row's, of `count`) over
    the rows where y is not null (NaN): the slope null when x does not vary (fewer than two points
    among them), R² null then too, and 1 when y does not vary.

    Values are measured from their group's first before the means are taken, so that equal values vary
    by exactly 0, as Spark's running update finds them (their mean may round away from them).
    """
    known = ~np.isnan(y)
    x, y, group = x[known], y[known], group[known]
    n = np.bincount(group, minlength=count)
    _, first = np.unique(group, return_index=True)
    origin_x, origin_y = np.zeros(count), np.zeros(count)
    origin_x[group[first]], origin_y[group[first]] = x[first], y[first]
    dx, dy = x - origin_x[group], y - origin_y[group]
    with np.errstate(divide="ignore", invalid="ignore"):
        dx = dx - (np.bincount(group, weights=dx, minlength=count) / n)[group]
        dy = dy - (np.bincount(group, weights=dy, minlength=count) / n)[group]
        sxx = np.bincount(group, weights=dx * dx, minlength=count)
        syy = np.bincount(group, weights=dy * dy, minlength=count)
        sxy = np.bincount(group, weights=dx * dy, minlength=count)
        slope = np.where(sxx == 0, np.nan, sxy / sxx)
        r2 = np.select([sxx == 0, syy == 0], [np.nan, 1.0], sxy * sxy / sxx / syy)
    return slope, r2


@dataclass(frozen=True)
class Trend:
    """Per group, over its newest `trend_days` days (`trend`): the growth fit and the rows it read."""

    rows: np.ndarray  # the rows of the trend days (indices into the series)
    group: np.ndarray  # each of those rows' group, dense from 0 (groups without any are left out)
    groups: np.ndarray  # each group's number in the series' grouping
    newest: np.ndarray  # each group's newest row (index into the series)
    days: np.ndarray  # how many rows (days) it has
    growth: np.ndarray  # least-squares slope of the values a day; null (NaN) when not defined
    r2: np.ndarray


def trend(day: np.ndarray, values: np.ndarray, group: np.ndarray, *, trend_days: int) -> Trend:
    """The growth fit of each group's daily series (a row a day: its `day` number and value, NaN for null)
    over the newest `trend_days` days it has: Spark's `regr_slope` and `regr_r2` (`least_squares`)."""
    count = int(group.max()) + 1 if len(group) else 0
    newest_day = np.full(count, np.iinfo(np.int64).min)
    np.maximum.at(newest_day, group, day)
    rows = np.flatnonzero(newest_day[group] - day < trend_days)
    groups, recent = np.unique(group[rows], return_inverse=True)
    order = np.lexsort((day[rows], recent))
    newest = rows[order[np.append(np.diff(recent[order]) != 0, True)[: len(order)]]]
    slope, r2 = least_squares(day[rows].astype(np.float64), values[rows], recent, len(groups))
    days = np.bincount(recent, minlength=len(groups)).astype(np.float64)
    return Trend(rows, recent, groups, newest, days, slope, r2)
