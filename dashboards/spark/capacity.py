"""Capacity plans: is the replication fleet the right size now, and in 7/30/90 days?

Sizing follows Confluent's one-task method and Cruise Control's thresholds (REFERENCE.md "Capacity"):

- load: a flow's MB/s (1 MB = 10^6 bytes) per report window (5 minutes by default, as Cruise Control
  averages); a day's load is the p95 of its windows, its average the mean of them.
- per-task capacity: the best window MB/s one task achieved while its partitions were behind (a task
  with a backlog runs flat out); when no task was ever behind this is only a lower bound, the best MB/s
  seen, and `per_task_saturated` is false.
- per-worker capacity: min(NIC MB/s, tasks per worker x per-task capacity).
- growth: least-squares slope of the daily average MB/s over the trend days; projection = the newest
  day's load + slope x days, never below 0.
- tasks needed = ceil(load / (per-task x threshold)), at least ceil(partitions / 150), at most the
  partitions (a task owns whole partitions); workers needed = ceil(load / (per-worker x threshold)), at
  least ceil(tasks / tasks per worker).
- verdict (Cruise Control): UNDER_PROVISIONED when load > capacity x threshold, i.e. more workers (flows:
  tasks) are needed than there are, with workers to add = ceil(excess / (per-worker x threshold));
  OVER_PROVISIONED when fewer would do; RIGHT_SIZED otherwise. A flow is judged on its tasks, the fleet
  (scope "overall") on its workers.
- target disk: average bytes/s x retention x replication factor; daily growth likewise per day.

The overall row adds the flows' daily loads (the sum of p95s bounds the p95 of the sum from above).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from dashboards.spark.frames import DAY_SECONDS, FLOW_KEY, PARTITION_KEY, partition_key_ddl, window_seconds
from dashboards.spark.throughput import BYTES_PER_MB
from dashboards.spark.windowed import (
    doubles,
    key_columns,
    longs,
    max_of_longs,
    report_windows,
    sum_of_doubles,
    sum_of_longs,
)

DEFAULT_USAGE_WINDOW = timedelta(minutes=5)
DEFAULT_HORIZON_DAYS = (7, 30, 90)
NETWORK_THRESHOLD = 0.8  # Cruise Control's network capacity threshold
MAX_PARTITIONS_PER_TASK = 150
MAX_TASKS_PER_WORKER = 20
OVERALL = "overall"


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
)
USAGE_SCHEMA = "records long, bytes long, _covered_s double, _behind long"


def _dense_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Each value's rank among the column's distinct values (null: -1), and how many there are."""
    encoded = column.combine_chunks().dictionary_encode()
    return pc.fill_null(encoded.indices, -1).to_numpy().astype(np.int64), len(encoded.dictionary)


def task_usage(
    table: pa.Table, windows: np.ndarray, window_count: int, *, by: Sequence[str] = ("task_index", "worker")
) -> tuple[np.ndarray, pa.Table]:
    """One mirrored partition's samples reduced to a row per window and task (`by`: its index and worker),
    in that order: each row's window index, and (*by, USAGE_SCHEMA) as Spark's sum and max give them.

    `_covered_s` sums the slice seconds (null without any), `_behind` is the most records behind.
    """
    key = windows.astype(np.int64)
    for column in by:
        codes, distinct = _dense_codes(table.column(column))
        key = key * (distinct + 1) + codes + 1
    groups, first, group_of_row = np.unique(key, return_index=True, return_inverse=True)
    count = len(groups)
    interval_s = doubles(table, "interval_s")
    end, end_known = longs(table, "source_end_offset")
    position, position_known = longs(table, "next_offset")
    # greatest(end - position, 0): Spark's greatest skips the null a missing offset gives.
    behind = np.where(end_known & position_known, np.maximum(end - position, 0), 0)
    usage = {column: table.column(column).take(first) for column in by}
    for column in ("records", "bytes"):
        total, present = sum_of_longs(*longs(table, column), group_of_row, count)
        usage[column] = pa.array(total, mask=~present)
    usage["_covered_s"] = pa.array(
        sum_of_doubles(np.where(interval_s > 0, interval_s, np.nan), group_of_row, count), from_pandas=True
    )
    usage["_behind"] = pa.array(max_of_longs(behind, group_of_row, count))
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
    return daily_flow_usage_from_windows(window_usage(samples, window))


def daily_flow_usage_from_windows(reduced: DataFrame) -> DataFrame:
    """`daily_flow_usage` from `window_usage` rows."""
    # A partition's rate under one task in one window; tasks and flows add their partitions' rates.
    partition_rates = reduced.groupBy(
        *FLOW_KEY, "date", "window_start", "task_index", "remote_topic", "partition"
    ).agg(
        F.coalesce(F.sum("bytes") / F.sum("_covered_s") / BYTES_PER_MB, F.lit(0.0)).alias("_mb_per_s"),
        F.max("_behind").alias("_behind"),
    )
    task_rates = (
        partition_rates.groupBy(*FLOW_KEY, "date", "window_start", "task_index")
        .agg(F.sum("_mb_per_s").alias("_task_mb_per_s"), F.max("_behind").alias("_behind"))
        .groupBy(*FLOW_KEY, "date")
        .agg(
            F.max(F.when(F.col("_behind") > 0, F.col("_task_mb_per_s"))).alias("task_saturated_mb_per_s"),
            F.max("_task_mb_per_s").alias("task_observed_mb_per_s"),
        )
    )
    flow_load = (
        partition_rates.groupBy(*FLOW_KEY, "date", "window_start")
        .agg(F.sum("_mb_per_s").alias("_flow_mb_per_s"))
        .groupBy(*FLOW_KEY, "date")
        .agg(
            F.avg("_flow_mb_per_s").alias("avg_mb_per_s"),
            F.percentile("_flow_mb_per_s", 0.95).alias("p95_mb_per_s"),
            F.max("_flow_mb_per_s").alias("max_mb_per_s"),
        )
    )
    # Totals and distinct counts over a first reduction to one row per partition, task and worker a day
    # (three distinct counts over the samples themselves would expand every sample three times).
    shape = (
        reduced.groupBy(*FLOW_KEY, "date", "remote_topic", "partition", "task_index", "worker")
        .agg(F.sum("records").alias("records"), F.sum("bytes").alias("bytes"))
        .groupBy(*FLOW_KEY, "date")
        .agg(
            F.sum("records").alias("records"),
            F.sum("bytes").alias("bytes"),
            F.count_distinct("remote_topic", "partition").alias("partitions"),
            F.count_distinct("task_index").alias("tasks"),
            F.count_distinct("worker").alias("workers"),
        )
    )
    keys = [*FLOW_KEY, "date"]
    return shape.join(flow_load, keys).join(task_rates, keys)


def _overall_usage(usage: DataFrame) -> DataFrame:
    return usage.groupBy("date").agg(
        F.lit(None).cast("long").alias("flow_id"),
        F.lit(OVERALL).alias("flow_name"),
        *(F.sum(c).alias(c) for c in ("avg_mb_per_s", "p95_mb_per_s", "max_mb_per_s", "partitions")),
        F.max("task_saturated_mb_per_s").alias("task_saturated_mb_per_s"),
        F.max("task_observed_mb_per_s").alias("task_observed_mb_per_s"),
    )


def _trend(usage: DataFrame, *, trend_days: int) -> DataFrame:
    """Per flow over its newest `trend_days` days: latest load, growth slope, partitions, task speed."""
    newest = F.max("date").over(Window.partitionBy(*FLOW_KEY))
    day_number = F.datediff(F.col("date"), F.lit("1970-01-01").cast("date")).cast("double")
    recent = (
        usage.withColumn("_newest", newest)
        .where(F.datediff(F.col("_newest"), F.col("date")) < trend_days)
        .withColumn("_day", day_number)
    )
    saturated = F.max("task_saturated_mb_per_s")
    return recent.groupBy(*FLOW_KEY).agg(
        F.count(F.lit(1)).alias("days"),
        F.max_by("p95_mb_per_s", "date").alias("current_mb_per_s"),
        F.max_by("avg_mb_per_s", "date").alias("current_avg_mb_per_s"),
        F.coalesce(F.regr_slope("avg_mb_per_s", "_day"), F.lit(0.0)).alias("growth_mb_per_s_per_day"),
        F.max_by("partitions", "date").cast("long").alias("partitions"),
        F.coalesce(saturated, F.max("task_observed_mb_per_s")).alias("per_task_mb_per_s"),
        saturated.isNotNull().alias("per_task_saturated"),
    )


def _ceil_div(numerator: Column, denominator: Column) -> Column:
    """ceil(n / d) as a long; null when d is not positive (nothing measured to size with)."""
    return F.when(denominator > 0, F.ceil(numerator / denominator)).cast("long")


def _verdict(needed: Column, have: Column) -> Column:
    return (
        F.when(needed > have, "UNDER_PROVISIONED")
        .when(needed < have, "OVER_PROVISIONED")
        .when(needed.isNotNull(), "RIGHT_SIZED")
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
) -> DataFrame:
    """One row per flow and horizon (0 = now), plus the fleet's rows (scope "overall")."""
    nic_mb_per_s = worker_nic_mbps / 8  # megabits -> megabytes
    flows = _trend(usage, trend_days=trend_days).withColumn("scope", F.lit("flow"))
    flow_tasks = F.least(F.lit(tasks_max), F.col("partitions"))
    flows = flows.withColumn("tasks", flow_tasks.cast("long"))
    overall = (
        _trend(_overall_usage(usage), trend_days=trend_days)
        .withColumn("scope", F.lit(OVERALL))
        .crossJoin(flows.agg(F.sum("tasks").alias("tasks")))
    )
    horizons = usage.sparkSession.createDataFrame(
        [(h,) for h in sorted({0, *horizon_days})], "horizon_days int"
    )
    per_task = F.col("per_task_mb_per_s")
    per_worker = F.least(F.lit(nic_mb_per_s), per_task * tasks_per_worker)
    growth = F.col("growth_mb_per_s_per_day") * F.col("horizon_days")
    projected = F.greatest(F.col("current_mb_per_s") + growth, F.lit(0.0))
    projected_avg = F.greatest(F.col("current_avg_mb_per_s") + growth, F.lit(0.0))
    tasks_needed = F.least(
        F.greatest(
            _ceil_div(projected, per_task * threshold),
            _ceil_div(F.col("partitions"), F.lit(partitions_per_task)),
            F.lit(1),
        ),
        F.col("partitions"),
    )
    workers_needed = F.greatest(
        _ceil_div(projected, per_worker * threshold),
        _ceil_div(F.col("tasks_needed"), F.lit(tasks_per_worker)),
        F.lit(1),
    )
    is_flow = F.col("scope") == "flow"
    mb_per_day_to_gb = DAY_SECONDS / 1000 * replication_factor
    return (
        flows.unionByName(overall)
        .crossJoin(horizons)
        .withColumn("workers", F.lit(workers).cast("long"))
        .withColumn("per_worker_mb_per_s", per_worker)
        .withColumn("projected_mb_per_s", projected)
        .withColumn("tasks_needed", tasks_needed.cast("long"))
        .withColumn("workers_needed", workers_needed.cast("long"))
        .withColumn(
            "capacity_mb_per_s", F.when(is_flow, F.col("tasks") * per_task).otherwise(workers * per_worker)
        )
        .withColumn("network_utilization", projected / F.lit(workers * nic_mb_per_s))
        .withColumn("disk_growth_gb_per_day", projected_avg * mb_per_day_to_gb)
        .withColumn("retention_disk_gb", projected_avg * retention_hours * 3600 / 1000 * replication_factor)
        .withColumn(
            "verdict",
            F.when(is_flow, _verdict(F.col("tasks_needed"), F.col("tasks"))).otherwise(
                _verdict(F.col("workers_needed"), F.col("workers"))
            ),
        )
        .withColumn("tasks_to_add", F.col("tasks_needed") - F.col("tasks"))
        .withColumn("workers_to_add", F.col("workers_needed") - F.col("workers"))
        .withColumn("nic_mb_per_s", F.lit(nic_mb_per_s))
        .withColumn("threshold", F.lit(threshold))
        .select(
            "scope",
            *FLOW_KEY,
            "horizon_days",
            "days",
            "partitions",
            "tasks",
            "workers",
            "current_mb_per_s",
            "current_avg_mb_per_s",
            "growth_mb_per_s_per_day",
            "projected_mb_per_s",
            "per_task_mb_per_s",
            "per_task_saturated",
            "per_worker_mb_per_s",
            "capacity_mb_per_s",
            "nic_mb_per_s",
            "network_utilization",
            "threshold",
            "tasks_needed",
            "workers_needed",
            "tasks_to_add",
            "workers_to_add",
            "disk_growth_gb_per_day",
            "retention_disk_gb",
            "verdict",
        )
    )


def capacity_plan(
    samples: DataFrame, *, usage_window: timedelta = DEFAULT_USAGE_WINDOW, **plan_options
) -> DataFrame:
    """`capacity_plan_from_usage` over the daily usage of `samples` (options: see there)."""
    return capacity_plan_from_usage(daily_flow_usage(samples, usage_window), **plan_options)
