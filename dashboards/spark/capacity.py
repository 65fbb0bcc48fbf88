"""Capacity plans: is the replication fleet the right size now, and in 7/30/90 days?

Sizing follows Confluent's one-task method and Cruise Control's thresholds (REFERENCE.md "Capacity"):

- load and per-task capacity: measured per window and per day by `dashboards.spark.usage`.
- per-worker capacity: min(NIC MB/s, tasks per worker x per-task capacity).
- growth: least-squares slope of the daily average MB/s over the trend days; projection = the newest
  day's load + slope x days, never below 0.
- tasks needed = ceil(load / (per-task x threshold)), at least ceil(partitions / 150), at most the
  partitions (a task owns whole partitions); workers needed = ceil(load / (per-worker x threshold)), at
  least ceil(tasks / tasks per worker).
- verdict (Cruise Control): UNDER_PROVISIONED when load > capacity x threshold, i.e. more workers (flows:
  tasks) are needed than there are, with workers to add = ceil(excess / (per-worker x threshold));
  OVER_PROVISIONED when fewer would do; RIGHT_SIZED otherwise. A flow is judged on its tasks, the fleet
  (scope "overall") and each worker pool (scope "pool") on its workers.
- target disk: average bytes/s x retention x replication factor; daily growth likewise per day.

The overall rows add up every flow's rows, a pool's rows its flows' (one rule, `fleet.group_rows`): the
daily loads add (the sum of p95s bounds the p95 of the sum from above). A flow runs only on its pool's workers
(controlplane.flows.pools), so a pool is judged on the live workers consuming its queue; the fleet still on
the workers it is given.

The plan is computed in numpy from the daily usage as an Arrow table (`capacity_plan_table`: the report
job calls it on the usage state it holds, a row a flow and day, with no Spark job); the rules are in
`sizing`, the groups' rows in `fleet`. `capacity_plan_from_usage` gives it for a DataFrame.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import DataFrame

from dashboards.spark.fleet import DEFAULT_POOL, OVERALL, POOL, group_rows
from dashboards.spark.frames import DAY_SECONDS, FLOW_KEY
from dashboards.spark.sizing import (
    NOT_ENOUGH_DATA,
    Trend,
    ceil_div,
    days_to_capacity,
    fit_confidence,
    runs_out_on,
    trend,
    verdict,
)
from dashboards.spark.usage import DEFAULT_USAGE_WINDOW, daily_flow_usage
from dashboards.spark.windowed import doubles, max_of_doubles, row_groups, sum_of_doubles

# The plan's scopes and verdicts, named from here by its callers.
__all__ = ["DEFAULT_POOL", "NOT_ENOUGH_DATA", "OVERALL", "POOL"]

DEFAULT_HORIZON_DAYS = (7, 30, 90)
NETWORK_THRESHOLD = 0.8  # Cruise Control's network capacity threshold
MAX_PARTITIONS_PER_TASK = 150
MAX_TASKS_PER_WORKER = 20
DEFAULT_PLAN_MONTHS = 6

# The plan's columns and their types (Spark's, when it computed them; a pool's workers may be unknown).
PLAN_SCHEMA = pa.schema(
    [
        pa.field("scope", pa.string(), nullable=False),
        ("pool", pa.string()),
        ("flow_id", pa.int64()),
        ("flow_name", pa.string()),
        ("horizon_days", pa.int32()),
        ("newest_date", pa.date32()),
        pa.field("days", pa.int64(), nullable=False),
        ("partitions", pa.int64()),
        ("record_bytes", pa.float64()),
        ("input_mb_per_s", pa.float64()),
        ("network_latency_ms", pa.float64()),
        ("tasks", pa.int64()),
        ("workers", pa.int64()),
        ("current_mb_per_s", pa.float64()),
        ("current_avg_mb_per_s", pa.float64()),
        ("growth_mb_per_s_per_day", pa.float64()),
        ("growth_r2", pa.float64()),
        pa.field("fit_confidence", pa.string(), nullable=False),
        ("projected_mb_per_s", pa.float64()),
        ("per_task_mb_per_s", pa.float64()),
        ("per_task_source", pa.string()),
        ("per_task_saturated", pa.bool_()),
        ("saturated_windows", pa.int64()),
        ("observed_task_mb_per_s", pa.float64()),
        pa.field("per_worker_mb_per_s", pa.float64(), nullable=False),
        ("capacity_mb_per_s", pa.float64()),
        ("days_to_capacity", pa.float64()),
        ("runs_out_on", pa.date32()),
        pa.field("nic_mb_per_s", pa.float64(), nullable=False),
        ("network_utilization", pa.float64()),
        ("network_needed_mbps", pa.float64()),
        ("network_to_add_mbps", pa.float64()),
        pa.field("threshold", pa.float64(), nullable=False),
        ("tasks_needed", pa.int64()),
        ("workers_needed", pa.int64()),
        ("tasks_to_add", pa.int64()),
        ("workers_to_add", pa.int64()),
        pa.field("plan_months", pa.int32(), nullable=False),
        ("disk_growth_gb_per_day", pa.float64()),
        ("retention_disk_gb", pa.float64()),
        pa.field("verdict", pa.string(), nullable=False),
    ]
)
PLAN_COLUMNS = tuple(PLAN_SCHEMA.names)


def capacity_plan_table(
    usage: pa.Table,
    *,
    worker_nic_mbps: float,
    retention_hours: float,
    tasks_max: int,
    workers: int,
    horizon_days: Sequence[int] = DEFAULT_HORIZON_DAYS,
    trend_days: int = 30,
    threshold: float = NETWORK_THRESHOLD,
    tasks_per_worker: int = MAX_TASKS_PER_WORKER,
    partitions_per_task: int = MAX_PARTITIONS_PER_TASK,
    replication_factor: int = 1,
    per_task_mb_per_s: float | None = None,
    plan_months: int = DEFAULT_PLAN_MONTHS,
    pools: Mapping[int, str] | None = None,
    pool_workers: Mapping[str, int] | None = None,
) -> pa.Table:
    """One row per flow and horizon (0 = now, the `horizon_days` and `plan_months` x 30 days), plus the
    fleet's rows (scope "overall"), which add up every flow's, and each worker pool's (scope "pool"),
    which add up its flows' (see the module doc), from the daily usage (`daily_flow_usage` rows, an
    Arrow table). Every row but the fleet's names its `pool`.

    `pools` maps a flow id to its worker pool (a flow it does not name is in DEFAULT_POOL);
    `pool_workers` gives the live workers consuming each pool's queue (a pool it does not name has none;
    None: not known, and the pools' verdicts are NOT_ENOUGH_DATA). `workers` are the fleet's.
    Rows come grouped: the fleet's, then each pool's followed by its flows', by horizon.
    """
    nic_mb_per_s = worker_nic_mbps / 8  # megabits -> megabytes
    horizons = np.array(sorted({0, *horizon_days, plan_months * 30}), np.float64)
    days = usage.column("date").cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int64)
    flow, _ = row_groups(usage, FLOW_KEY)
    load = doubles(usage, "avg_mb_per_s")
    fit = trend(days, load, flow, trend_days=trend_days)
    if not len(fit.groups):  # no usage, or no trend days (trend_days < 1)
        return PLAN_SCHEMA.empty_table()
    flows = _flow_rows(
        usage,
        fit,
        horizons,
        days=days,
        tasks_max=tasks_max,
        per_task_mb_per_s=per_task_mb_per_s,
        nic_mb_per_s=nic_mb_per_s,
        threshold=threshold,
        tasks_per_worker=tasks_per_worker,
        partitions_per_task=partitions_per_task,
    )
    flow_ids = usage.column("flow_id").take(pa.array(fit.newest)).to_pylist()
    flow_pools = np.array([(pools or {}).get(flow_id, DEFAULT_POOL) for flow_id in flow_ids], object)
    rows = len(flow_ids) * len(horizons)
    flows |= {
        "flow_id": np.repeat(np.array(flow_ids, object), len(horizons)),
        "flow_name": np.repeat(
            np.array(usage.column("flow_name").take(pa.array(fit.newest)).to_pylist(), object), len(horizons)
        ),
        "pool": np.repeat(flow_pools, len(horizons)),
        "workers": np.full(rows, float(workers)),
    }
    groups = group_rows(
        flows,
        flow_pools=flow_pools,
        horizons=len(horizons),
        usage=(days, load),
        usage_pools=flow_pools[flow],  # every flow has trend days
        workers=workers,
        pool_workers=pool_workers,
        trend_days=trend_days,
        nic_mb_per_s=nic_mb_per_s,
        threshold=threshold,
        tasks_per_worker=tasks_per_worker,
    )
    plan = {name: _stacked(name, flows, groups) for name in {*flows, *groups}}
    projected, projected_avg, nics = (
        plan["projected_mb_per_s"],
        plan["projected_avg_mb_per_s"],
        plan["workers"] * nic_mb_per_s,
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        # A pool no live worker consumes has no network to use: null, not a division by zero.
        utilization = np.where(nics != 0, projected / nics, np.nan)
    plan |= {
        "fit_confidence": fit_confidence(plan["days"], plan["growth_r2"]),
        "runs_out_on": runs_out_on(plan["newest_date"], plan["days_to_capacity"]),
        "network_utilization": utilization,
        "network_needed_mbps": projected * 8 / threshold,
        "disk_growth_gb_per_day": projected_avg * (DAY_SECONDS / 1000 * replication_factor),
        "retention_disk_gb": projected_avg * retention_hours * 3600 / 1000 * replication_factor,
        "nic_mb_per_s": np.full(len(projected), nic_mb_per_s),
        "threshold": np.full(len(projected), threshold),
        "plan_months": np.full(len(projected), float(plan_months)),
    }
    table = pa.table([_arrow(plan[field.name], field.type) for field in PLAN_SCHEMA], schema=PLAN_SCHEMA)
    return table.take(_plan_order(table))


def _flow_rows(
    usage: pa.Table,
    fit: Trend,
    horizons: np.ndarray,
    *,
    days: np.ndarray,
    tasks_max: int,
    per_task_mb_per_s: float | None,
    nic_mb_per_s: float,
    threshold: float,
    tasks_per_worker: int,
    partitions_per_task: int,
) -> dict[str, np.ndarray]:
    """A row per flow (`fit`: the trend of each flow's usage rows) and horizon, flow by flow: its load,
    growth and sizing (module doc). A flow's load and shape are its newest day's, its per-task capacity
    the most a task carried in a saturated window over the trend days (or `per_task_mb_per_s`)."""
    count, per_flow = len(fit.groups), len(horizons)

    def newest(column: str) -> np.ndarray:
        return np.repeat(doubles(usage, column)[fit.newest], per_flow)

    def over_trend(reduce: Callable[[np.ndarray, np.ndarray, int], np.ndarray], column: str) -> np.ndarray:
        return np.repeat(reduce(doubles(usage, column)[fit.rows], fit.group, count), per_flow)

    horizon = np.tile(horizons, count)
    growth = np.repeat(np.nan_to_num(fit.growth, nan=0.0), per_flow)  # not growing when not measured
    saturated = over_trend(max_of_doubles, "task_saturated_mb_per_s")
    measured = np.nan if per_task_mb_per_s is None else float(per_task_mb_per_s)
    per_task = np.where(np.isnan(saturated), measured, saturated)
    # A flow that cannot keep up copies less than its source produces: its load is what it must copy.
    current = np.fmax(newest("p95_mb_per_s"), newest("input_mb_per_s"))
    current_avg = newest("avg_mb_per_s")
    projected = np.fmax(current + growth * horizon, 0.0)
    partitions = newest("partitions")
    tasks = np.fmin(tasks_max, partitions)
    known = per_task > 0
    per_worker = np.fmin(nic_mb_per_s, per_task * tasks_per_worker)
    tasks_needed = np.fmax(
        ceil_div(projected, per_task * threshold), ceil_div(partitions, partitions_per_task)
    )
    tasks_needed = np.where(known, np.fmin(np.fmax(tasks_needed, 1), partitions), np.nan)
    workers_needed = np.fmax(
        ceil_div(projected, per_worker * threshold), ceil_div(tasks_needed, tasks_per_worker)
    )
    capacity = tasks * per_task
    return {
        "scope": np.full(len(horizon), "flow", object),
        "horizon_days": horizon,
        "newest_date": np.repeat(days[fit.newest], per_flow).astype(np.float64),
        "days": np.repeat(fit.days, per_flow),
        "growth_r2": np.repeat(fit.r2, per_flow),
        "partitions": partitions,
        "tasks": tasks,
        **{name: newest(name) for name in ("record_bytes", "input_mb_per_s", "network_latency_ms")},
        "current_mb_per_s": current,
        "current_avg_mb_per_s": current_avg,
        "growth_mb_per_s_per_day": growth,
        "projected_mb_per_s": projected,
        "projected_avg_mb_per_s": np.fmax(current_avg + growth * horizon, 0.0),
        "per_task_mb_per_s": per_task,
        "per_task_source": np.where(
            np.isnan(saturated), None if per_task_mb_per_s is None else "measured", "saturated windows"
        ),
        "per_task_saturated": ~np.isnan(saturated),
        "saturated_windows": over_trend(sum_of_doubles, "saturated_windows"),
        "observed_task_mb_per_s": over_trend(max_of_doubles, "task_observed_mb_per_s"),
        "per_worker_mb_per_s": per_worker,
        "capacity_mb_per_s": capacity,
        "days_to_capacity": days_to_capacity(current, growth, capacity * threshold),
        "tasks_needed": tasks_needed,
        "workers_needed": np.where(known, np.fmax(workers_needed, 1), np.nan),
        "tasks_to_add": tasks_needed - tasks,
        "verdict": verdict(tasks_needed, tasks),
    }


def _stacked(name: str, flows: Mapping[str, np.ndarray], groups: Mapping[str, np.ndarray]) -> np.ndarray:
    """A column of the flows' rows then the groups', null (NaN, None) in the rows of those without it."""
    present = next(rows[name] for rows in (flows, groups) if name in rows)
    numeric = present.dtype == np.float64
    return np.concatenate(
        [
            rows[name] if name in rows else np.full(len(rows["scope"]), np.nan if numeric else None)
            for rows in (flows, groups)
        ]
    )


def _arrow(values: np.ndarray, kind: pa.DataType) -> pa.Array:
    """A plan column as Arrow: NaN and None null, whole numbers as longs (a cast that would lose a
    fraction, or overflow an int or a date, raises, as Spark's casts do)."""
    if values.dtype != np.float64:
        return pa.array(values, kind)
    doubles = pa.array(values, from_pandas=True)
    return doubles.cast(pa.int32()).cast(kind) if pa.types.is_date32(kind) else doubles.cast(kind)


def _plan_order(table: pa.Table) -> pa.Array:
    """The fleet's rows, then each pool's followed by its flows', by horizon (nulls first, as Spark sorts)."""
    keys = pa.table(
        {
            "not_fleet": pc.not_equal(table.column("scope"), OVERALL),
            "pool": table.column("pool"),
            "not_pool": pc.not_equal(table.column("scope"), POOL),
            **{name: table.column(name) for name in ("flow_name", "flow_id", "horizon_days")},
        }
    )
    return pc.sort_indices(keys, sort_keys=[(name, "ascending", "at_start") for name in keys.column_names])


def capacity_plan_from_usage(usage: DataFrame, **plan_options) -> DataFrame:
    """`capacity_plan_table` of Spark's daily usage rows (`daily_flow_usage`), as a DataFrame (options:
    see there)."""
    return usage.sparkSession.createDataFrame(capacity_plan_table(usage.toArrow(), **plan_options))


def capacity_plan(
    samples: DataFrame, *, usage_window: timedelta = DEFAULT_USAGE_WINDOW, **plan_options
) -> DataFrame:
    """`capacity_plan_from_usage` over the daily usage of `samples` (options: see there)."""
    return capacity_plan_from_usage(daily_flow_usage(samples, usage_window), **plan_options)
