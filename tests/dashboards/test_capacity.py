"""Capacity plans: daily usage from samples, then sizing, projections and verdicts on known numbers."""

from __future__ import annotations

from datetime import date, timedelta

import pytest

from dashboards.spark.capacity import capacity_plan_from_usage, daily_flow_usage
from tests.dashboards.conftest import sample

USAGE_SCHEMA = (
    "flow_id long, flow_name string, date date, records long, bytes long, partitions long, tasks long, "
    "workers long, avg_mb_per_s double, p95_mb_per_s double, max_mb_per_s double, "
    "task_saturated_mb_per_s double, task_observed_mb_per_s double"
)


def test_daily_usage_measures_a_task_while_it_is_behind(samples_df):
    rows = [
        sample(at_s=0, end=500, position=400, partition=0, bytes_=1_000_000, interval_s=10),
        sample(at_s=0, end=500, position=500, partition=1, bytes_=2_000_000, interval_s=10),
    ]
    (usage,) = daily_flow_usage(samples_df(rows), timedelta(minutes=5)).collect()
    assert (usage.partitions, usage.tasks, usage.bytes) == (2, 1, 3_000_000)
    assert usage.avg_mb_per_s == pytest.approx(0.3)
    assert usage.task_saturated_mb_per_s == pytest.approx(0.3)  # partition 0 was behind


def plan(spark, *, workers: int, saturated: float | None = 5.0):
    usage = spark.createDataFrame(
        [
            (1, "A->B", date(2026, 1, 1), 0, 0, 20, 2, 1, 10.0, 12.0, 13.0, saturated, 4.0),
            (1, "A->B", date(2026, 1, 2), 0, 0, 20, 2, 1, 12.0, 15.0, 16.0, saturated, 4.0),
        ],
        USAGE_SCHEMA,
    )
    rows = capacity_plan_from_usage(
        usage, worker_nic_mbps=400, retention_hours=24, tasks_max=2, workers=workers
    ).collect()
    return {(r.scope, r.horizon_days): r for r in rows}


def test_projection_tasks_workers_and_verdicts(spark):
    rows = plan(spark, workers=1)
    now, month, quarter = rows[("flow", 0)], rows[("overall", 30)], rows[("flow", 90)]
    assert now.growth_mb_per_s_per_day == pytest.approx(2.0)  # daily average 10 -> 12
    assert now.projected_mb_per_s == pytest.approx(15.0)  # the newest day's p95
    # 15 MB/s at 5 MB/s per task and a 0.8 threshold: 4 tasks, but tasks.max is 2.
    assert (now.tasks, now.tasks_needed, now.tasks_to_add, now.verdict) == (2, 4, 2, "UNDER_PROVISIONED")
    assert now.per_worker_mb_per_s == pytest.approx(50.0)  # the 400 Mbit/s NIC, not 20 x 5 MB/s
    assert now.network_utilization == pytest.approx(0.3)
    assert now.disk_growth_gb_per_day == pytest.approx(12.0 * 86.4)
    assert now.retention_disk_gb == pytest.approx(12.0 * 86.4)  # 24 h retention
    assert rows[("overall", 0)].verdict == "RIGHT_SIZED"
    # In 30 days 75 MB/s: 35 MB/s above one worker's 40 -> ceil(35 / 40) = 1 more worker.
    assert month.projected_mb_per_s == pytest.approx(75.0)
    assert (month.workers_needed, month.workers_to_add, month.verdict) == (2, 1, "UNDER_PROVISIONED")
    assert quarter.tasks_needed == 20  # never more tasks than partitions


def test_too_many_workers_is_over_provisioned(spark):
    now = plan(spark, workers=4)[("overall", 0)]
    assert (now.workers_needed, now.workers_to_add, now.verdict) == (1, -3, "OVER_PROVISIONED")


def test_an_unsaturated_task_is_only_a_lower_bound(spark):
    now = plan(spark, workers=1, saturated=None)[("flow", 0)]
    assert (now.per_task_mb_per_s, now.per_task_saturated) == (4.0, False)
