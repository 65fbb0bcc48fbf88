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

The overall rows add up every flow's rows, a pool's rows its flows' (one rule, `_fleet`): the daily loads
add (the sum of p95s bounds the p95 of the sum from above). A flow runs only on its pool's workers
(controlplane.flows.pools), so a pool is judged on the live workers consuming its queue; the fleet still on
the workers it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from dashboards.spark.frames import DAY_SECONDS, FLOW_KEY
from dashboards.spark.usage import DEFAULT_USAGE_WINDOW, daily_flow_usage

DEFAULT_HORIZON_DAYS = (7, 30, 90)
NETWORK_THRESHOLD = 0.8  # Cruise Control's network capacity threshold
MAX_PARTITIONS_PER_TASK = 150
MAX_TASKS_PER_WORKER = 20
OVERALL = "overall"
POOL = "pool"  # the scope of a worker pool's rows
DEFAULT_POOL = ""  # controlplane.flows.pools.DEFAULT_POOL: a flow with no pool, or one deleted since
NOT_ENOUGH_DATA = "NOT_ENOUGH_DATA"
DEFAULT_PLAN_MONTHS = 6


def _with_pool(usage: DataFrame, pools: Mapping[int, str]) -> DataFrame:
    """`usage` with each flow's worker `pool` (DEFAULT_POOL for a flow `pools` does not name)."""
    pool = F.lit(DEFAULT_POOL)
    if pools:  # a literal map: no join, no broadcast job
        named = F.map_from_arrays(F.lit(list(pools)), F.lit(list(pools.values())))
        pool = F.coalesce(F.try_element_at(named, F.col("flow_id")), pool)
    return usage.withColumn("pool", pool)


def _trend(usage: DataFrame, *, trend_days: int, key: Sequence[str] = FLOW_KEY) -> DataFrame:
    """Per flow (`key`) over its newest `trend_days` days: latest load and sizing inputs, the growth fit
    (slope, R², days), partitions, task speeds."""
    newest = F.max("date").over(Window.partitionBy(*key))
    day_number = F.datediff(F.col("date"), F.lit("1970-01-01").cast("date")).cast("double")
    recent = (
        usage.withColumn("_newest", newest)
        .where(F.datediff(F.col("_newest"), F.col("date")) < trend_days)
        .withColumn("_day", day_number)
    )
    fit = [
        F.count(F.lit(1)).alias("days"),
        F.max("date").alias("newest_date"),
        F.coalesce(F.regr_slope("avg_mb_per_s", "_day"), F.lit(0.0)).alias("growth_mb_per_s_per_day"),
        F.regr_r2("avg_mb_per_s", "_day").alias("growth_r2"),
    ]
    if "p95_mb_per_s" not in usage.columns:  # a group's series: only its fit is used
        return recent.groupBy(*key).agg(*fit)
    newest_of = lambda column: F.max_by(column, "date").alias(column)  # noqa: E731
    return recent.groupBy(*key).agg(
        *fit,
        F.max_by("p95_mb_per_s", "date").alias("current_mb_per_s"),
        F.max_by("avg_mb_per_s", "date").alias("current_avg_mb_per_s"),
        F.max_by("partitions", "date").cast("long").alias("partitions"),
        newest_of("input_mb_per_s"),
        newest_of("record_bytes"),
        newest_of("network_latency_ms"),
        F.max("task_saturated_mb_per_s").alias("saturated_task_mb_per_s"),
        F.max("task_observed_mb_per_s").alias("observed_task_mb_per_s"),
        F.sum("saturated_windows").alias("saturated_windows"),
    )


def _ceil_div(numerator: Column, denominator: Column) -> Column:
    """ceil(n / d) as a long; null when d is not positive (nothing measured to size with)."""
    return F.when(denominator > 0, F.ceil(numerator / denominator)).cast("long")


def _verdict(needed: Column, have: Column) -> Column:
    return (
        F.when(needed.isNull() | have.isNull(), NOT_ENOUGH_DATA)
        .when(needed > have, "UNDER_PROVISIONED")
        .when(needed < have, "OVER_PROVISIONED")
        .otherwise("RIGHT_SIZED")
    )


def _days_to_capacity(current: Column, growth: Column, limit: Column) -> Column:
    """Days until `current` growing by `growth` a day reaches `limit`: 0 when already past it, null when
    the limit is unknown or the load is not growing."""
    return (
        F.when(limit.isNull(), None)
        .when(current >= limit, 0.0)
        .when(growth > 0, (limit - current) / growth)
        .cast("double")
    )


def _fit_confidence(days: Column, r2: Column) -> Column:
    """How far to trust the growth fit: high from 14 days at R² >= 0.8, medium from 7 days at R² >= 0.5."""
    return (
        F.when((days >= 14) & (r2 >= 0.8), "high").when((days >= 7) & (r2 >= 0.5), "medium").otherwise("low")
    )


PLAN_COLUMNS = (
    "scope",
    "pool",
    *FLOW_KEY,
    "horizon_days",
    "newest_date",
    "days",
    "partitions",
    "record_bytes",
    "input_mb_per_s",
    "network_latency_ms",
    "tasks",
    "workers",
    "current_mb_per_s",
    "current_avg_mb_per_s",
    "growth_mb_per_s_per_day",
    "growth_r2",
    "fit_confidence",
    "projected_mb_per_s",
    "per_task_mb_per_s",
    "per_task_source",
    "per_task_saturated",
    "saturated_windows",
    "observed_task_mb_per_s",
    "per_worker_mb_per_s",
    "capacity_mb_per_s",
    "days_to_capacity",
    "runs_out_on",
    "nic_mb_per_s",
    "network_utilization",
    "network_needed_mbps",
    "network_to_add_mbps",
    "threshold",
    "tasks_needed",
    "workers_needed",
    "tasks_to_add",
    "workers_to_add",
    "plan_months",
    "disk_growth_gb_per_day",
    "retention_disk_gb",
    "verdict",
)


def capacity_plan_from_usage(
    usage: DataFrame,
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
) -> DataFrame:
    """One row per flow and horizon (0 = now, the `horizon_days` and `plan_months` x 30 days), plus the
    fleet's rows (scope "overall"), which add up every flow's, and each worker pool's (scope "pool"),
    which add up its flows' (see the module doc). Every row but the fleet's names its `pool`.

    `pools` maps a flow id to its worker pool (a flow it does not name is in DEFAULT_POOL);
    `pool_workers` gives the live workers consuming each pool's queue (a pool it does not name has none;
    None: not known, and the pools' verdicts are NOT_ENOUGH_DATA). `workers` are the fleet's.
    Rows come grouped: the fleet's, then each pool's followed by its flows', by horizon.
    """
    nic_mb_per_s = worker_nic_mbps / 8  # megabits -> megabytes
    horizons = usage.sparkSession.createDataFrame(
        [(h,) for h in sorted({0, *horizon_days, plan_months * 30})], "horizon_days int"
    )
    usage = _with_pool(usage, pools or {})
    trend = _trend(usage, trend_days=trend_days, key=(*FLOW_KEY, "pool"))
    measured = F.lit(per_task_mb_per_s).cast("double")
    per_task = F.coalesce(F.col("saturated_task_mb_per_s"), measured)
    flows = (
        trend.crossJoin(horizons)
        .withColumn("scope", F.lit("flow"))
        # A flow that cannot keep up copies less than its source produces: its load is what it must copy.
        .withColumn("current_mb_per_s", F.greatest("current_mb_per_s", "input_mb_per_s"))
        .withColumn("tasks", F.least(F.lit(tasks_max), F.col("partitions")).cast("long"))
        .withColumn("per_task_mb_per_s", per_task)
        .withColumn(
            "per_task_source",
            F.when(F.col("saturated_task_mb_per_s").isNotNull(), "saturated windows").when(
                measured.isNotNull(), "measured"
            ),
        )
        .withColumn("per_task_saturated", F.col("saturated_task_mb_per_s").isNotNull())
        .withColumn(
            "projected_mb_per_s",
            F.greatest(
                F.col("current_mb_per_s") + F.col("growth_mb_per_s_per_day") * F.col("horizon_days"),
                F.lit(0.0),
            ),
        )
        .withColumn(
            "projected_avg_mb_per_s",
            F.greatest(
                F.col("current_avg_mb_per_s") + F.col("growth_mb_per_s_per_day") * F.col("horizon_days"),
                F.lit(0.0),
            ),
        )
    )
    known = F.col("per_task_mb_per_s") > 0
    projected = F.col("projected_mb_per_s")
    per_worker = F.least(F.lit(nic_mb_per_s), F.col("per_task_mb_per_s") * tasks_per_worker)
    tasks_needed = F.when(
        known,
        F.least(
            F.greatest(
                _ceil_div(projected, F.col("per_task_mb_per_s") * threshold),
                _ceil_div(F.col("partitions"), F.lit(partitions_per_task)),
                F.lit(1),
            ),
            F.col("partitions"),
        ),
    )
    flows = (
        flows.withColumn("per_worker_mb_per_s", per_worker)
        .withColumn("capacity_mb_per_s", F.col("tasks") * F.col("per_task_mb_per_s"))
        .withColumn("tasks_needed", tasks_needed.cast("long"))
        .withColumn(
            "workers_needed",
            F.when(
                known,
                F.greatest(
                    _ceil_div(projected, per_worker * threshold),
                    _ceil_div(F.col("tasks_needed"), F.lit(tasks_per_worker)),
                    F.lit(1),
                ),
            ).cast("long"),
        )
        .withColumn("verdict", _verdict(F.col("tasks_needed"), F.col("tasks")))
        .withColumn("tasks_to_add", F.col("tasks_needed") - F.col("tasks"))
        .withColumn("workers_to_add", F.lit(None).cast("long"))  # workers are the pool's: see its rows
        .withColumn("network_to_add_mbps", F.lit(None).cast("double"))
    )
    flows = flows.withColumn(
        "days_to_capacity",
        _days_to_capacity(
            F.col("current_mb_per_s"),
            F.col("growth_mb_per_s_per_day"),
            F.col("capacity_mb_per_s") * threshold,
        ),
    )
    # Each flow counts in two groups: the fleet (pool "": any non-null key) and its pool.
    groups = F.array(
        F.struct(F.lit(OVERALL).alias("scope"), F.lit(DEFAULT_POOL).alias("pool")),
        F.struct(F.lit(POOL).alias("scope"), F.col("pool").alias("pool")),
    )
    group_workers = F.when(F.col("_group.scope") == OVERALL, F.lit(workers)).otherwise(
        _pool_workers(pool_workers)
    )
    grouped = _fleet(
        flows,
        usage,
        groups=groups,
        workers=group_workers,
        trend_days=trend_days,
        nic_mb_per_s=nic_mb_per_s,
        threshold=threshold,
        tasks_per_worker=tasks_per_worker,
    )
    fleet = F.col("_group.scope") == OVERALL
    grouped = grouped.withColumns(
        {
            "scope": F.col("_group.scope"),
            "pool": F.when(~fleet, F.col("_group.pool")),
            "flow_name": F.when(fleet, OVERALL).otherwise(_pool_name(F.col("_group.pool"))),
        }
    )
    mb_per_day_to_gb = DAY_SECONDS / 1000 * replication_factor
    return (
        flows.withColumn("workers", F.lit(workers).cast("long"))
        .unionByName(grouped, allowMissingColumns=True)
        .withColumn("growth_r2", F.col("growth_r2").cast("double"))
        .withColumn("fit_confidence", _fit_confidence(F.col("days"), F.col("growth_r2")))
        .withColumn(
            "runs_out_on",
            F.date_add(F.col("newest_date"), F.ceil(F.round("days_to_capacity", 6)).cast("int")),
        )
        # A pool no live worker consumes has no network to use: null, not a division by zero.
        .withColumn("network_utilization", F.try_divide(projected, F.col("workers") * nic_mb_per_s))
        .withColumn("network_needed_mbps", projected * 8 / threshold)
        .withColumn("disk_growth_gb_per_day", F.col("projected_avg_mb_per_s") * mb_per_day_to_gb)
        .withColumn(
            "retention_disk_gb",
            F.col("projected_avg_mb_per_s") * retention_hours * 3600 / 1000 * replication_factor,
        )
        .withColumn("nic_mb_per_s", F.lit(nic_mb_per_s))
        .withColumn("threshold", F.lit(threshold))
        .withColumn("plan_months", F.lit(plan_months))
        .select(*PLAN_COLUMNS)
        # A few rows a flow: one sorted partition costs no sampling job, as orderBy's range partitioning does.
        .coalesce(1)
        .sortWithinPartitions(
            F.col("scope") != OVERALL, "pool", F.col("scope") != POOL, "flow_name", "flow_id", "horizon_days"
        )
    )


def _pool_workers(pool_workers: Mapping[str, int] | None) -> Column:
    """The live workers of the pool `_group.pool`: 0 when `pool_workers` does not name it, null when
    not known."""
    if pool_workers is None:
        return F.lit(None).cast("long")
    if not pool_workers:
        return F.lit(0).cast("long")
    counts = F.map_from_arrays(F.lit(list(pool_workers)), F.lit(list(pool_workers.values())))
    return F.coalesce(F.try_element_at(counts, F.col("_group.pool")), F.lit(0)).cast("long")


def _pool_name(pool: Column) -> Column:
    """A pool's rows' `flow_name`: "pool <name>", "pool default" for the default pool (as the pools page
    labels it); never a flow's ("A->B") nor the fleet's."""
    label = F.when(pool == DEFAULT_POOL, "default").otherwise(pool)
    return F.concat(F.lit(f"{POOL} "), label)


def _fleet(
    flows: DataFrame,
    usage: DataFrame,
    *,
    groups: Column,
    workers: Column,
    trend_days: int,
    nic_mb_per_s: float,
    threshold: float,
    tasks_per_worker: int,
) -> DataFrame:
    """The rows of each group of flows per horizon, from its flows' rows at that horizon (`groups`: the
    groups a flow's rows and usage count in, an array of keys, one row per key as `_group`: e.g. the
    fleet and the flow's pool): loads, growth, partitions, tasks, tasks needed and capacities add up;
    unknown when any flow's per-task capacity is unknown. The growth fit (days, R²) is that of the
    group's summed daily load. The group's `workers` (a column over `_group`; null: not known) bound
    its capacity by their NICs and are what the verdict compares workers needed with: enough for the
    tasks needed (20 a worker) and for the load at the network threshold."""
    all_known = F.min(F.col("tasks_needed").isNotNull())
    when_known = lambda column: F.when(all_known, F.sum(column))  # noqa: E731
    summed = ("current_mb_per_s", "current_avg_mb_per_s", "growth_mb_per_s_per_day", "projected_mb_per_s")
    fleet = (
        flows.withColumn("_group", F.explode(groups))
        .groupBy("_group", "horizon_days")
        .agg(
            *(F.sum(c).alias(c) for c in (*summed, "projected_avg_mb_per_s", "partitions", "tasks")),
            F.sum("input_mb_per_s").alias("input_mb_per_s"),
            # Null, not a division by zero, for a group of idle flows.
            F.try_divide(
                F.sum(F.col("record_bytes") * F.col("current_avg_mb_per_s")), F.sum("current_avg_mb_per_s")
            ).alias("record_bytes"),
            F.max("network_latency_ms").alias("network_latency_ms"),
            F.sum("saturated_windows").alias("saturated_windows"),
            F.max("observed_task_mb_per_s").alias("observed_task_mb_per_s"),
            F.max("newest_date").alias("newest_date"),
            when_known("tasks_needed").alias("tasks_needed"),
            when_known("capacity_mb_per_s").alias("_task_capacity"),
            F.when(all_known, F.sum(F.greatest(F.col("tasks_to_add"), F.lit(0)))).alias("tasks_to_add"),
            F.max((F.col("verdict") == "UNDER_PROVISIONED").cast("int")).alias("_flow_under"),
        )
    )
    series = (
        usage.withColumn("_group", F.explode(groups))
        .groupBy("_group", "date")
        .agg(F.sum("avg_mb_per_s").alias("avg_mb_per_s"))
    )
    fit = _trend(series, trend_days=trend_days, key=("_group",))
    projected = F.col("projected_mb_per_s")
    workers_known = F.col("workers").isNotNull()
    workers_needed = F.when(
        F.col("tasks_needed").isNotNull(),
        F.greatest(
            _ceil_div(F.col("tasks_needed"), F.lit(tasks_per_worker)),
            _ceil_div(projected, F.lit(nic_mb_per_s * threshold)),
            F.lit(1),
        ),
    ).cast("long")
    verdict = F.when(
        (F.col("_flow_under") == 1) & F.col("workers_needed").isNotNull(), "UNDER_PROVISIONED"
    ).otherwise(_verdict(F.col("workers_needed"), F.col("workers")))
    nics = F.col("workers") * nic_mb_per_s
    capacity = F.least(F.col("_task_capacity"), nics)
    network_needed = projected * 8 / threshold
    return (
        fleet.join(fit.select("_group", "days", "growth_r2"), "_group")
        .withColumn("workers", workers.cast("long"))
        .withColumn("flow_id", F.lit(None).cast("long"))
        .withColumn("per_worker_mb_per_s", F.lit(nic_mb_per_s))
        .withColumn(
            "capacity_mb_per_s", F.when(F.col("_task_capacity").isNotNull() & workers_known, capacity)
        )
        .withColumn("workers_needed", workers_needed)
        .withColumn("workers_to_add", F.col("workers_needed") - F.col("workers"))
        .withColumn("verdict", verdict)
        .withColumn(
            "network_to_add_mbps", F.when(workers_known, F.greatest(network_needed - nics * 8, F.lit(0.0)))
        )
        .withColumn(
            "days_to_capacity",
            _days_to_capacity(
                F.col("current_mb_per_s"),
                F.col("growth_mb_per_s_per_day"),
                F.col("capacity_mb_per_s") * threshold,
            ),
        )
        .drop("_task_capacity", "_flow_under")
    )


def capacity_plan(
    samples: DataFrame, *, usage_window: timedelta = DEFAULT_USAGE_WINDOW, **plan_options
) -> DataFrame:
    """`capacity_plan_from_usage` over the daily usage of `samples` (options: see there)."""
    return capacity_plan_from_usage(daily_flow_usage(samples, usage_window), **plan_options)
