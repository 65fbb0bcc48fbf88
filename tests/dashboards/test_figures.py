"""Figure builders on plain report rows: traces, axes and values."""

from __future__ import annotations

from datetime import UTC, date, datetime

import pytest

from dashboards.figures import (
    STATUS_LEVELS,
    capacity_figure,
    lag_figure,
    latency_figure,
    status_heatmap,
    throughput_figure,
)
from dashboards.spark.lake import topic_row_partition

T1, T2 = datetime(2026, 1, 1, 0, 0, tzinfo=UTC), datetime(2026, 1, 1, 0, 5, tzinfo=UTC)


def partition_row(partition: int, start: datetime, **values) -> dict:
    return {
        "flow_name": "A->B",
        "remote_topic": "A.orders",
        "partition": partition,
        "window_start": start,
        **values,
    }


def test_lag_has_one_line_per_partition_in_time_order():
    rows = [
        partition_row(0, T2, records_behind_max=7, seconds_behind_max=1.5),
        partition_row(0, T1, records_behind_max=3, seconds_behind_max=0.5),
        partition_row(1, T1, records_behind_max=0, seconds_behind_max=0.0),
    ]
    figure = lag_figure(rows)
    assert [t.name for t in figure.data] == ["A->B A.orders[0]", "A->B A.orders[1]"]
    assert list(figure.data[0].y) == [3, 7] and list(figure.data[0].x) == [T1, T2]
    assert figure.layout.yaxis.title.text == "records behind"
    assert list(lag_figure(rows, measure="seconds").data[0].y) == [0.5, 1.5]
    with pytest.raises(ValueError):
        lag_figure(rows, measure="bytes")


def test_throughput_sums_partitions_per_flow():
    rows = [
        partition_row(0, T1, mb_per_s=1.5, records_per_s=10.0),
        partition_row(1, T1, mb_per_s=2.0, records_per_s=5.0),
    ]
    (trace,) = throughput_figure(rows).data
    assert (trace.name, list(trace.y)) == ("A->B", [3.5])
    assert throughput_figure(rows, unit="records").layout.yaxis.title.text == "records/s"


def test_latency_shows_each_percentile_of_the_worst_partition():
    def stats(base):
        return {
            f"replication_latency_ms_{s}": base * k
            for s, k in (("p50", 1), ("p95", 2), ("p99", 3), ("max", 4))
        }

    rows = [partition_row(0, T1, **stats(10.0)), partition_row(1, T1, **stats(20.0))]
    figure = latency_figure(rows)
    assert [t.name for t in figure.data] == ["A->B p50", "A->B p95", "A->B p99", "A->B max"]
    assert [list(t.y) for t in figure.data] == [[20.0], [40.0], [60.0], [80.0]]


def test_status_heatmap_is_partition_by_time_coloured_by_status():
    rows = [
        partition_row(0, T1, status="OK"),
        partition_row(0, T2, status="STALL"),
        partition_row(1, T2, status="STOP"),
    ]
    (heatmap,) = status_heatmap(rows).data
    assert list(heatmap.y) == ["A->B A.orders[0]", "A->B A.orders[1]"]
    ok, stall, stop = (STATUS_LEVELS.index(s) for s in ("OK", "STALL", "STOP"))
    assert [list(r) for r in heatmap.z] == [[ok, stall], [None, stop]]
    assert list(heatmap.colorbar.ticktext) == list(STATUS_LEVELS)


def test_a_topic_row_is_labelled_with_its_task_and_partitions():
    rows = [
        partition_row(3, T1, status="OK", partitions=1),
        partition_row(topic_row_partition(1), T1, status="STALL", partitions=600),
    ]
    (heatmap,) = status_heatmap(rows).data
    assert list(heatmap.y) == ["A->B A.orders[3]", "A->B A.orders[task 1: 600 partitions]"]


def test_capacity_chart_projects_on_dates_and_annotates_the_verdict():
    plan = [
        {
            "scope": "overall",
            "flow_name": "overall",
            "horizon_days": h,
            "newest_date": date(2026, 1, 1),
            "projected_mb_per_s": p,
            "capacity_mb_per_s": 50.0,
            "threshold": 0.8,
            "verdict": v,
            "workers": 1,
            "tasks": 2,
            "workers_needed": w,
            "tasks_needed": 4,
            "days_to_capacity": 5.0,
            "runs_out_on": date(2026, 1, 6),
            "fit_confidence": "low",
        }
        for h, p, v, w in ((0, 15.0, "RIGHT_SIZED", 1), (30, 75.0, "UNDER_PROVISIONED", 2))
    ]
    usage = [{"flow_name": "A->B", "date": "2026-01-01", "p95_mb_per_s": 12.0}]  # as stored (JSON)
    figure = capacity_figure(plan, usage)
    measured, projected, capacity, runs_out = figure.data
    assert list(measured.y) == [12.0] and list(projected.y) == [15.0, 75.0]
    assert list(projected.x) == [date(2026, 1, 1), date(2026, 1, 31)] and list(capacity.y) == [40.0, 40.0]
    assert list(runs_out.x) == [date(2026, 1, 6)]
    # One measured day: the axis spans the projection and a day either side, not a millisecond.
    assert list(figure.layout.xaxis.range) == ["2025-12-31", "2026-02-01"]
    assert figure.layout.annotations[0].text.startswith("RIGHT_SIZED: 15 MB/s of 50 MB/s capacity")
    assert "in 5 days (low confidence)" in figure.layout.annotations[0].text
    with pytest.raises(ValueError):
        capacity_figure(plan, flow="B->A")


def test_capacity_chart_without_enough_data_says_so_and_draws_no_capacity():
    row = {"flow_name": "A->B", "horizon_days": 0, "newest_date": "2026-01-01", "projected_mb_per_s": 0.086}
    row |= {"capacity_mb_per_s": None, "threshold": 0.8, "verdict": "NOT_ENOUGH_DATA", "runs_out_on": None}
    figure = capacity_figure([row], [], flow="A->B")
    assert [trace.name for trace in figure.data] == ["measured (daily p95)", "projected"]
    assert figure.layout.annotations[0].text.startswith("not enough data: 0.086 MB/s")


def test_a_pool_whose_live_workers_are_unknown_says_so_not_that_no_task_saturated():
    row = {"scope": "pool", "pool": "payments", "flow_name": "pool payments", "horizon_days": 0}
    row |= {"newest_date": "2026-01-01", "projected_mb_per_s": 41.5, "capacity_mb_per_s": None}
    row |= {"threshold": 0.8, "verdict": "NOT_ENOUGH_DATA", "tasks_needed": 11, "workers": None}
    text = capacity_figure([row], [], flow="pool payments").layout.annotations[0].text
    assert text == "not enough data: 41.5 MB/s<br>live workers unknown (Redis did not answer)"
