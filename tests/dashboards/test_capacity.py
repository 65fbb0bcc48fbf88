"""Capacity plans: the saturation rule on windows with known answers, then sizing, projections, the
fleet's sums, days to capacity and verdicts on known numbers."""

from __future__ import annotations

import math
from datetime import date, timedelta

import pytest
from pyspark.sql import functions as F

from dashboards.figures import capacity_headline
from dashboards.spark.capacity import NOT_ENOUGH_DATA, capacity_plan_from_usage
from dashboards.spark.lake import spark_schema_ddl
from dashboards.spark.usage import daily_flow_usage
from tests.dashboards.conftest import sample

USAGE_SCHEMA = (
    "flow_id long, flow_name string, date date, records long, bytes long, partitions long, tasks long, "
    "workers long, avg_mb_per_s double, p95_mb_per_s double, max_mb_per_s double, "
    "task_saturated_mb_per_s double, task_observed_mb_per_s double, saturated_windows long, "
    "record_bytes double, input_mb_per_s double, network_latency_ms double"
)
RECORD = 1_000  # bytes
IDLE, IN_FLIGHT, SATURATED, STALLED, HALF_COVERED, TWO_WORKERS, SOME_EMPTY = 1, 2, 3, 4, 5, 6, 7


def _window(
    flow_id: int,
    *,
    produced: int,
    replicated: int,
    backlog: int,
    slices: range,
    empty_every: int = 0,
    partition: int = 0,
) -> list[tuple]:
    """Samples every 10 s of one partition: `produced` records a slice at the source, `replicated` of
    them by the mirror (none in every `empty_every`-th slice), `backlog` records behind from the start;
    ack 40 ms after the poll."""
    rows, position = [], 0
    for k in slices:
        end = backlog + produced * (k + 1)
        copied = 0 if empty_every and k % empty_every == 0 else replicated
        position = min(position + copied, end)
        rows.append(
            sample(
                at_s=10 * k,
                end=end,
                position=position,
                flow_id=flow_id,
                partition=partition,
                records=copied,
                bytes_=copied * RECORD,
                record_age_ms=60.0 if copied else None,
                replication_latency_ms=100.0 if copied else None,
            )
        )
    return rows


@pytest.fixture(scope="module")
def usage(spark):
    """The 12:00-12:05 window (T0) of five flows, each one partition with a sample every 10 s from
    11:59:50 (the window before holds only that one sample)."""
    whole = range(-1, 30)
    rows = [
        *_window(IDLE, produced=0, replicated=0, backlog=0, slices=whole),
        # 100 records a slice, all replicated but the 5 produced since the last poll: busy, never behind.
        *[
            (*r[:8], r[8] + 5, *r[9:])
            for r in _window(IN_FLIGHT, produced=100, replicated=100, backlog=0, slices=whole)
        ],
        # 200 produced, 100 replicated a slice on a backlog of 1000: behind all window.
        *_window(SATURATED, produced=200, replicated=100, backlog=1_000, slices=whole),
        # Behind, but its position never moves: stalled, not saturated.
        *_window(STALLED, produced=200, replicated=0, backlog=1_000, slices=whole),
        # Saturated while it reported, but only for the first half of the window.
        *_window(HALF_COVERED, produced=200, replicated=100, backlog=1_000, slices=range(-1, 15)),
        # Behind all window, one slice in seven an empty fetch (issue 36: a flow 60,000 records and 150 s
        # behind and growing had the verdict NOT_ENOUGH_DATA because a handful of its slices copied none).
        *_window(SOME_EMPTY, produced=200, replicated=100, backlog=1_000, slices=whole, empty_every=7),
        # Saturated all window, its slices taken in turn by two workers (each covers half the window).
        *[
            (*r[:7], f"w0:{k % 2}", *r[8:])
            for k, r in enumerate(
                _window(TWO_WORKERS, produced=200, replicated=100, backlog=1_000, slices=whole)
            )
        ],
    ]
    usage = daily_flow_usage(spark.createDataFrame(rows, spark_schema_ddl()), timedelta(minutes=5))
    return spark.createDataFrame(usage.toArrow())  # one day: the 11:55 and 12:00 windows


@pytest.fixture(scope="module")
def usage_by_flow(usage):
    return {row.flow_id: row for row in usage.collect()}


def test_a_task_is_saturated_only_when_behind_and_busy_for_the_whole_window(usage_by_flow):
    saturated = {
        flow: (row.saturated_windows, row.task_saturated_mb_per_s) for flow, row in usage_by_flow.items()
    }
    assert saturated[SATURATED] == (1, pytest.approx(100 * RECORD / 10 / 1e6))  # 0.01 MB/s, the 12:00 window
    # Whichever workers ran the task's slices: saturated (issue 28: flows behind all window said
    # NOT_ENOUGH_DATA when their task moved between the demo's two workers).
    assert saturated[TWO_WORKERS] == saturated[SATURATED]
    # Some empty slices while behind: still saturated, at the rate it copied over the window.
    assert saturated[SOME_EMPTY] == (1, pytest.approx(100 * RECORD * 25 / 300 / 1e6))
    for flow in (IDLE, IN_FLIGHT, STALLED, HALF_COVERED):
        assert saturated[flow] == (0, None), flow
    in_flight = usage_by_flow[IN_FLIGHT]
    assert in_flight.task_observed_mb_per_s == pytest.approx(0.01)  # what it did, not what it could do


def test_daily_usage_gives_the_sizing_inputs(usage_by_flow):
    saturated, in_flight = usage_by_flow[SATURATED], usage_by_flow[IN_FLIGHT]
    assert (saturated.partitions, saturated.record_bytes) == (1, RECORD)
    assert saturated.network_latency_ms == pytest.approx(40.0)  # ack 100 ms after the record, poll at 60
    # Produced twice what was replicated (the first sample has no sample before it to count from).
    assert saturated.input_mb_per_s == pytest.approx(saturated.avg_mb_per_s * 2 * 30 / 31)
    assert in_flight.input_mb_per_s == pytest.approx(in_flight.avg_mb_per_s * 30 / 31)
    assert usage_by_flow[IDLE].input_mb_per_s is None  # nothing replicated: no record size to count in


def test_a_barely_loaded_flow_gets_no_verdict_without_a_measured_task(usage):
    usage = usage.where(f"flow_id = {IN_FLIGHT}")
    rows = capacity_plan_from_usage(usage, worker_nic_mbps=10_000, retention_hours=1, tasks_max=2, workers=1)
    by_scope = {row.scope: row for row in rows.where("horizon_days = 0").collect()}
    fleet, flow = by_scope["overall"], by_scope["flow"]
    assert (flow.verdict, flow.tasks_needed, flow.capacity_mb_per_s) == (NOT_ENOUGH_DATA, None, None)
    assert (fleet.verdict, fleet.workers_needed, fleet.days_to_capacity) == (NOT_ENOUGH_DATA, None, None)
    measured = capacity_plan_from_usage(
        usage, worker_nic_mbps=10_000, retention_hours=1, tasks_max=2, workers=1, per_task_mb_per_s=30.0
    ).where("horizon_days = 0 AND scope = 'flow'")
    (flow,) = measured.collect()
    assert (flow.verdict, flow.tasks_needed, flow.per_task_source) == ("RIGHT_SIZED", 1, "measured")


def test_a_flow_that_cannot_keep_up_for_two_windows_is_saturated_and_sized(spark):
    """Issue 36: a flow falling further behind for whole windows, with some empty slices among its
    samples, is judged UNDER_PROVISIONED on its measured task, with the tasks it needs; its load is what
    its source produced, not the less it managed to copy."""
    rows = [
        row
        for partition in range(4)
        for row in _window(
            SOME_EMPTY,
            produced=200,
            replicated=100,
            backlog=1_000,
            slices=range(-1, 60),
            empty_every=7,
            partition=partition,
        )
    ]
    usage = daily_flow_usage(spark.createDataFrame(rows, spark_schema_ddl()), timedelta(minutes=5))
    (day,) = usage.collect()
    assert day.saturated_windows == 2  # 12:00 and 12:05, each with four or five empty slices
    plan = capacity_plan_from_usage(
        spark.createDataFrame(usage.toArrow()),
        worker_nic_mbps=10_000,
        retention_hours=1,
        tasks_max=1,
        workers=1,
    )
    (flow,) = plan.where("horizon_days = 0 AND scope = 'flow'").collect()
    assert flow.per_task_saturated and flow.per_task_source == "saturated windows"
    assert flow.current_mb_per_s == pytest.approx(day.input_mb_per_s)  # twice what it copied
    assert flow.tasks_needed == math.ceil(flow.current_mb_per_s / (flow.per_task_mb_per_s * 0.8)) >= 3
    assert (flow.verdict, flow.tasks, flow.tasks_to_add) == ("UNDER_PROVISIONED", 1, flow.tasks_needed - 1)
    headline = capacity_headline(flow.asDict(), newline="\n")
    assert "saturated: a task could not keep up in 2 window(s)" in headline
    assert f"1 task(s) (needs {flow.tasks_needed})" in headline


def usage_rows(spark, days: int, *, flows=((1, "A->B", 5.0),), growth=0.25):
    """`days` days of each flow: daily average 1 + growth x day, p95 0.5 above, 20 partitions."""
    rows = [
        (flow_id, name, date(2026, 1, 1) + timedelta(days=d), 0, 0, 20, 2, 1, 1 + growth * d, 1.5 + growth * d,
         2.0 + growth * d, saturated, 4.0, 1, 500.0, 1 + growth * d, 30.0)
        for flow_id, name, saturated in flows
        for d in range(days)
    ]  # fmt: skip
    return spark.createDataFrame(rows, USAGE_SCHEMA)


def test_a_growing_flow_runs_out_when_the_fit_says_and_the_plan_says_what_to_add(spark):
    usage = usage_rows(spark, 14)
    rows = capacity_plan_from_usage(
        usage, worker_nic_mbps=400, retention_hours=24, tasks_max=2, workers=1, plan_months=1
    ).collect()
    by = {(r.scope, r.horizon_days): r for r in rows}
    now, month = by[("flow", 0)], by[("flow", 30)]
    assert {r.horizon_days for r in rows} == {0, 7, 30, 90}
    assert now.growth_mb_per_s_per_day == pytest.approx(0.25)
    assert (now.growth_r2, now.fit_confidence, now.days) == (pytest.approx(1.0), "high", 14)
    # p95 now 4.75 MB/s, 2 tasks x 5 MB/s at the 0.8 threshold = 8 MB/s: (8 - 4.75) / 0.25 = 13 days.
    assert (now.capacity_mb_per_s, now.verdict) == (10.0, "RIGHT_SIZED")
    assert now.days_to_capacity == pytest.approx(13.0)
    assert now.runs_out_on == date(2026, 1, 14) + timedelta(days=13)
    assert (now.partitions, now.record_bytes, now.input_mb_per_s, now.network_latency_ms) == (
        20, 500.0, pytest.approx(4.25), 30.0
    )  # fmt: skip
    # In a month: 4.75 + 7.5 = 12.25 MB/s needs ceil(12.25 / 4) = 4 tasks: add 2.
    assert (month.projected_mb_per_s, month.tasks_needed, month.tasks_to_add) == (
        pytest.approx(12.25), 4, 2
    )  # fmt: skip
    assert month.network_needed_mbps == pytest.approx(12.25 * 8 / 0.8)
    assert by[("overall", 0)].days_to_capacity == pytest.approx(13.0)


def test_fleet_figures_add_up_and_an_under_provisioned_flow_makes_the_fleet_so(spark):
    usage = usage_rows(spark, 3, flows=((1, "A->B", 5.0), (2, "B->A", 1.0)))
    rows = capacity_plan_from_usage(usage, worker_nic_mbps=400, retention_hours=24, tasks_max=2, workers=4)
    by = {(r.flow_name, r.horizon_days): r for r in rows.collect()}
    fleet, flows = by[("overall", 0)], [by[("A->B", 0)], by[("B->A", 0)]]
    for column in ("current_mb_per_s", "projected_mb_per_s", "tasks", "tasks_needed", "capacity_mb_per_s"):
        assert getattr(fleet, column) == pytest.approx(sum(getattr(f, column) for f in flows)), column
    # B->A: 2 MB/s at 1 MB/s per task and 0.8 -> 3 tasks, has 2; the fleet has 4 workers for 1 needed.
    assert [f.verdict for f in flows] == ["OVER_PROVISIONED", "UNDER_PROVISIONED"]
    assert (fleet.verdict, fleet.workers_needed, fleet.tasks_to_add) == ("UNDER_PROVISIONED", 1, 1)
    assert fleet.fit_confidence == "low"  # three days
    # No pools given: every flow is in the default pool, whose live workers are not known.
    pool = by[("pool default", 0)]
    assert (pool.pool, pool.tasks_needed, pool.workers_needed) == ("", fleet.tasks_needed, 1)
    assert (pool.workers, pool.workers_to_add, pool.verdict) == (None, None, "UNDER_PROVISIONED")


def test_the_fleet_is_judged_on_workers_and_the_network(spark):
    usage = usage_rows(spark, 2, growth=2.0)
    rows = capacity_plan_from_usage(usage, worker_nic_mbps=400, retention_hours=24, tasks_max=20, workers=4)
    by = {(r.scope, r.horizon_days): r for r in rows.collect()}
    assert (by[("overall", 0)].verdict, by[("overall", 0)].workers_to_add) == ("OVER_PROVISIONED", -3)
    # In 90 days 183.5 MB/s: 20 tasks of 5 MB/s carry 100; 4 workers' 400 Mbit/s NICs carry 200 at most.
    quarter = by[("overall", 90)]
    assert quarter.network_utilization == pytest.approx(183.5 / 200)
    assert quarter.network_to_add_mbps == pytest.approx(max(183.5 * 8 / 0.8 - 1600, 0))
    assert quarter.capacity_mb_per_s == pytest.approx(100.0)


def test_each_pool_adds_up_its_flows_and_is_judged_on_its_own_live_workers(spark):
    # payments: two flows at 41.5 MB/s (p95) growing 20 MB/s a day; the default pool: two at 1.5, flat.
    # Flow 4 has no pool: a flow deleted since, in the default pool. Flow 5 is idle in a pool that no
    # live worker consumes.
    busy = usage_rows(spark, 3, flows=((1, "A->B", 5.0), (2, "B->A", 5.0)), growth=20.0)
    usage = busy.unionByName(usage_rows(spark, 3, flows=((3, "A->C", 5.0), (4, "C->A", 5.0)), growth=0.0))
    idle = usage_rows(spark, 3, flows=((5, "C->B", 5.0),), growth=0.0)
    usage = usage.unionByName(idle.withColumns({"avg_mb_per_s": F.lit(0.0), "p95_mb_per_s": F.lit(0.0)}))
    rows = capacity_plan_from_usage(
        usage,
        worker_nic_mbps=400,  # 50 MB/s a worker, 40 at the threshold
        retention_hours=24,
        tasks_max=20,
        workers=2,
        pools={1: "payments", 2: "payments", 3: "", 5: "idle"},
        pool_workers={"": 1, "payments": 1, "spare": 3},
    ).collect()
    now = [row for row in rows if row.horizon_days == 0]
    assert [(r.scope, r.pool, r.flow_id) for r in now] == [
        ("overall", None, None),
        ("pool", "", None), ("flow", "", 3), ("flow", "", 4),
        ("pool", "idle", None), ("flow", "idle", 5),
        ("pool", "payments", None), ("flow", "payments", 1), ("flow", "payments", 2),
    ]  # fmt: skip
    summed = ("current_mb_per_s", "growth_mb_per_s_per_day", "projected_mb_per_s", "partitions", "tasks")
    for horizon in {row.horizon_days for row in rows}:
        at = [row for row in rows if row.horizon_days == horizon]
        flows = [row for row in at if row.scope == "flow"]
        groups = {(row.scope, row.pool): row for row in at if row.scope != "flow"}
        for (scope, pool), group in groups.items():
            members = [f for f in flows if scope == "overall" or f.pool == pool]
            for column in (*summed, "tasks_needed"):
                expected = sum(getattr(f, column) for f in members)
                assert getattr(group, column) == pytest.approx(expected), (scope, pool, horizon, column)
    fleet, default, idle, payments = (r for r in now if r.scope != "flow")
    # 83 MB/s and 22 tasks needed on 1 worker: needs ceil(83 / 40) = 3, already past capacity (50 MB/s).
    assert (payments.flow_name, payments.workers, payments.workers_needed, payments.workers_to_add) == (
        "pool payments", 1, 3, 2
    )  # fmt: skip
    assert (payments.verdict, payments.capacity_mb_per_s, payments.days_to_capacity) == (
        "UNDER_PROVISIONED", 50.0, 0.0
    )  # fmt: skip
    assert (payments.growth_mb_per_s_per_day, payments.days) == (pytest.approx(40.0), 3)
    # 3 MB/s and 2 tasks needed: its 1 worker is enough, and the load is flat.
    assert (default.flow_name, default.workers, default.workers_needed, default.workers_to_add) == (
        "pool default", 1, 1, 0
    )  # fmt: skip
    assert (default.verdict, default.days_to_capacity) == ("RIGHT_SIZED", None)
    # Nothing to move, but no worker to move it: one to add.
    assert (idle.workers, idle.workers_needed, idle.verdict) == (0, 1, "UNDER_PROVISIONED")
    assert (idle.record_bytes, idle.network_utilization) == (None, None)
    # The fleet keeps its own workers (2) for all 86 MB/s: 3 needed.
    assert (fleet.workers, fleet.workers_needed, fleet.verdict) == (2, 3, "UNDER_PROVISIONED")
    assert {r.workers for r in now if r.scope == "flow"} == {2}
