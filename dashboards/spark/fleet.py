"""The capacity plan's rows of groups of flows: the fleet's (scope "overall") and each worker pool's (scope
"pool"), from their flows' rows (`capacity` module doc: one rule, here, for both).

Columns are numpy arrays as `sizing` computes them (NaN for null); a group's rows are one a horizon, the
fleet's first, then the pools' in the order of their names.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pyarrow as pa

from dashboards.spark.sizing import ceil_div, days_to_capacity, trend, verdict
from dashboards.spark.windowed import max_of_doubles, row_groups, sum_of_doubles

OVERALL = "overall"
POOL = "pool"  # the scope of a worker pool's rows
DEFAULT_POOL = ""  # controlplane.flows.pools.DEFAULT_POOL: a flow with no pool, or one deleted since

SUMMED = (
    "current_mb_per_s",
    "current_avg_mb_per_s",
    "growth_mb_per_s_per_day",
    "projected_mb_per_s",
    "projected_avg_mb_per_s",
    "partitions",
    "tasks",
    "input_mb_per_s",
    "saturated_windows",
)
HIGHEST = ("network_latency_ms", "observed_task_mb_per_s", "newest_date")
# What else of its flows' rows a group's rows read.
MEMBER_COLUMNS = ("record_bytes", "tasks_needed", "capacity_mb_per_s", "tasks_to_add", "verdict")


def pool_name(pool: str) -> str:
    """A pool's rows' `flow_name`: "pool <name>", "pool default" for the default pool (as the pools page
    labels it); never a flow's ("A->B") nor the fleet's."""
    return f"{POOL} {pool or 'default'}"


def group_rows(
    flows: Mapping[str, np.ndarray],
    *,
    flow_pools: np.ndarray,
    horizons: int,
    usage: tuple[np.ndarray, np.ndarray],
    usage_pools: np.ndarray,
    workers: int,
    pool_workers: Mapping[str, int] | None,
    trend_days: int,
    nic_mb_per_s: float,
    threshold: float,
    tasks_per_worker: int,
) -> dict[str, np.ndarray]:
    """The rows of the fleet and of each pool per horizon, from the flows' rows (`flows`: a row per flow
    and horizon, `horizons` a flow, each flow's pool in `flow_pools`): loads, growth, partitions, tasks,
    tasks needed and capacities add up; unknown when any flow's per-task capacity is unknown. The growth
    fit (days, R²) is that of the group's summed daily load (`usage`: the day numbers and average MB/s
    of the flows' usage rows, each row's pool in `usage_pools`). The group's workers (the fleet's
    `workers`; a pool's from `pool_workers`, none when it does not name the pool, unknown when None)
    bound its capacity by their NICs and are what the verdict compares workers needed with: enough for
    the tasks needed (20 a worker) and for the load at the network threshold."""
    names, flow_pool = np.unique(flow_pools.astype(str), return_inverse=True)
    count = (1 + len(names)) * horizons
    horizon = np.arange(len(flow_pool) * horizons) % horizons
    # Each flow row counts in two groups: the fleet (group 0) and its pool (1 + its name's rank).
    rows = np.tile(np.arange(len(horizon)), 2)
    group = np.concatenate([horizon, (1 + np.repeat(flow_pool, horizons)) * horizons + horizon])
    member = {name: flows[name][rows] for name in (*SUMMED, *HIGHEST, *MEMBER_COLUMNS)}
    sums = {name: sum_of_doubles(member[name], group, count) for name in SUMMED}
    highest = {name: max_of_doubles(member[name], group, count) for name in HIGHEST}
    known = np.bincount(group, weights=np.isnan(member["tasks_needed"]), minlength=count) == 0
    under = np.bincount(group, weights=member["verdict"] == "UNDER_PROVISIONED", minlength=count) > 0

    def when_known(values: np.ndarray) -> np.ndarray:
        return np.where(known, sum_of_doubles(values, group, count), np.nan)

    load = sums["current_avg_mb_per_s"]
    with np.errstate(divide="ignore", invalid="ignore"):
        # Null, not a division by zero, for a group of idle flows.
        weighted = sum_of_doubles(member["record_bytes"] * member["current_avg_mb_per_s"], group, count)
        record_bytes = np.where(load != 0, weighted / load, np.nan)
    tasks_needed, task_capacity = when_known(member["tasks_needed"]), when_known(member["capacity_mb_per_s"])
    days, r2 = _group_fit(usage, np.searchsorted(names, usage_pools.astype(str)), len(names), trend_days)
    pool_counts = [np.nan if pool_workers is None else pool_workers.get(name, 0) for name in names]
    have = np.repeat(np.array([workers, *pool_counts], np.float64), horizons)
    projected = sums["projected_mb_per_s"]
    needed = np.fmax(ceil_div(tasks_needed, tasks_per_worker), ceil_div(projected, nic_mb_per_s * threshold))
    needed = np.where(np.isnan(tasks_needed), np.nan, np.fmax(needed, 1))
    nics = have * nic_mb_per_s
    capacity = np.where(np.isnan(task_capacity) | np.isnan(have), np.nan, np.fmin(task_capacity, nics))
    return {
        **sums,
        **highest,
        "scope": np.repeat(np.array([OVERALL, *[POOL] * len(names)], object), horizons),
        "pool": np.repeat(np.array([None, *names], object), horizons),
        "flow_name": np.repeat(np.array([OVERALL, *map(pool_name, names)], object), horizons),
        "horizon_days": np.tile(flows["horizon_days"][:horizons], 1 + len(names)),
        "record_bytes": record_bytes,
        "tasks_needed": tasks_needed,
        "tasks_to_add": when_known(np.fmax(member["tasks_to_add"], 0)),
        "days": np.repeat(days, horizons),
        "growth_r2": np.repeat(r2, horizons),
        "workers": have,
        "per_worker_mb_per_s": np.full(count, nic_mb_per_s),
        "capacity_mb_per_s": capacity,
        "workers_needed": needed,
        "workers_to_add": needed - have,
        "verdict": np.where(under & ~np.isnan(needed), "UNDER_PROVISIONED", verdict(needed, have)),
        # Unknown workers: unknown NICs (projected is never null).
        "network_to_add_mbps": np.maximum(projected * 8 / threshold - nics * 8, 0.0),
        "days_to_capacity": days_to_capacity(
            sums["current_mb_per_s"], sums["growth_mb_per_s_per_day"], capacity * threshold
        ),
    }


def _group_fit(
    usage: tuple[np.ndarray, np.ndarray], pool: np.ndarray, pools: int, trend_days: int
) -> tuple[np.ndarray, np.ndarray]:
    """Days and R² of the growth fit of each group's summed daily average load, from the flows' usage rows
    (`usage`: their day numbers and average MB/s; `pool`: each one's pool, of `pools`): the fleet's first,
    then each pool's."""
    day, avg_mb_per_s = usage
    group = np.concatenate([np.zeros(len(pool), np.int64), 1 + pool])
    rows = pa.table({"day": np.tile(day, 2)})
    series, first = row_groups(rows, ["day"], key=group)
    load = sum_of_doubles(np.tile(avg_mb_per_s, 2), series, len(first))
    fit = trend(np.tile(day, 2)[first], load, group[first], trend_days=trend_days)
    days, r2 = np.zeros(1 + pools), np.full(1 + pools, np.nan)
    days[fit.groups], r2[fit.groups] = fit.days, fit.r2
    return days, r2
