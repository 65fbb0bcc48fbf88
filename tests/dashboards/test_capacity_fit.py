"""The capacity plan's growth fit at its edges, on the numpy function directly (Spark's `regr_slope` and
`regr_r2` rules: one day, a flat load, a day without a load), the trend days, the day capacity runs out
on, and the usage state a run leaves."""

from __future__ import annotations

from datetime import date, timedelta

import numpy as np
import pyarrow as pa
import pytest

from dashboards.spark.capacity import capacity_plan_table
from dashboards.spark.jobs import merged_usage
from dashboards.spark.sizing import days_to_run_out, least_squares

START = date(2026, 1, 1)


def usage(
    loads: list[float | None], *, flow_id: int = 1, name: str = "A->B", start: date = START
) -> pa.Table:
    """A flow's daily usage from `start`, a day per load (MB/s; None: none measured), a task carrying 5 MB/s."""
    days = len(loads)
    return pa.table(
        {
            "flow_id": pa.array([flow_id] * days, pa.int64()),
            "flow_name": [name] * days,
            "date": pa.array([start + timedelta(days=d) for d in range(days)], pa.date32()),
            "partitions": pa.array([20] * days, pa.int64()),
            "avg_mb_per_s": pa.array(loads, pa.float64()),
            "p95_mb_per_s": pa.array(loads, pa.float64()),
            "task_saturated_mb_per_s": [5.0] * days,
            "task_observed_mb_per_s": [5.0] * days,
            "saturated_windows": pa.array([1] * days, pa.int64()),
            "record_bytes": [500.0] * days,
            "input_mb_per_s": pa.array([None] * days, pa.float64()),
            "network_latency_ms": [30.0] * days,
        }
    )


def now(table: pa.Table, **options) -> dict[str, dict]:
    """The plan's rows for now, by flow name ("overall", "pool default", the flows')."""
    plan = capacity_plan_table(
        table, worker_nic_mbps=400, retention_hours=24, tasks_max=2, workers=1, **options
    )
    return {row["flow_name"]: row for row in plan.to_pylist() if row["horizon_days"] == 0}


def fit(row: dict) -> tuple:
    return row["days"], row["growth_mb_per_s_per_day"], row["growth_r2"], row["fit_confidence"]


def test_one_day_has_no_growth_fit():
    rows = now(usage([2.0]))
    for name in ("A->B", "overall", "pool default"):
        assert fit(rows[name]) == (1, 0.0, None, "low"), name


def test_a_flat_load_fits_exactly_even_when_its_mean_does_not():
    # 14 x 0.1 does not add up to 1.4: measured from its mean, a flat load would vary by rounding.
    flat = pa.concat_tables([usage([0.1] * 14), usage([0.2] * 14, flow_id=2, name="B->A")])
    rows = now(flat)
    # Spark's regr_r2 is 1 when the load does not vary, and the slope 0.
    for name in ("A->B", "B->A", "overall", "pool default"):
        assert fit(rows[name]) == (14, 0.0, 1.0, "high"), name
    assert rows["A->B"]["days_to_capacity"] is None  # not growing: never runs out


def test_a_day_without_a_load_counts_as_a_day_but_not_in_the_fit():
    rows = now(usage([1.0, None, 3.0]))
    assert fit(rows["A->B"]) == (3, pytest.approx(1.0), pytest.approx(1.0), "low")


def test_only_the_newest_trend_days_are_fitted():
    falling_then_rising = [20.0 - d for d in range(10)] + [11.0 + 2 * d for d in range(5)]
    rows = now(usage(falling_then_rising), trend_days=5)
    assert fit(rows["A->B"])[:3] == (5, pytest.approx(2.0), pytest.approx(1.0))
    assert fit(rows["overall"])[:3] == (5, pytest.approx(2.0), pytest.approx(1.0))
    assert now(usage(falling_then_rising), trend_days=0) == {}  # no trend days: nothing to plan


def test_capacity_runs_out_on_the_day_rounded_to_a_millionth():
    days = np.array([0.0, 13.0, 13.0000004, 13.0000005, 13.2, np.nan])
    assert days_to_run_out(days).tolist()[:5] == [0.0, 13.0, 13.0, 14.0, 14.0]
    assert np.isnan(days_to_run_out(days)[5])
    # 2 tasks x 5 MB/s at the 0.8 threshold carry 8 MB/s: from 4.75 at 0.25 a day, 13 days after the
    # newest day (the 14th).
    rows = now(usage([1.5 + 0.25 * d for d in range(14)]))
    assert rows["A->B"]["days_to_capacity"] == pytest.approx(13.0)
    assert rows["A->B"]["runs_out_on"] == START + timedelta(days=13 + 13)


@pytest.mark.parametrize("growth", [1e-6, 1e-9])  # 7 million days; 7 billion (past a 32-bit day)
def test_a_load_growing_by_a_hair_runs_out_on_no_date(growth):
    """Capacity reached after 9999-12-31 has no date to name (the report's rows failed on it): null, the
    days still given."""
    rows = now(usage([1.0 + growth * d for d in range(14)]))
    assert rows["A->B"]["days_to_capacity"] == pytest.approx(7.0 / growth, rel=1e-3)
    assert rows["A->B"]["runs_out_on"] is None and rows["overall"]["runs_out_on"] is None


def test_least_squares_follows_sparks_regression_rules():
    x = np.array([1.0, 2.0, 3.0, 1.0, 1.0, 5.0, 1.0, 2.0])
    y = np.array([1.0, 3.0, 5.0, 2.0, 4.0, 7.0, np.nan, np.nan])
    group = np.array([0, 0, 0, 1, 1, 2, 3, 3])
    slope, r2 = least_squares(x, y, group, 5)
    assert slope[0] == pytest.approx(2.0) and r2[0] == pytest.approx(1.0)
    # The day does not vary (one point, or two on the same day), or no load is known: no fit.
    assert np.isnan(slope[1:]).all() and np.isnan(r2[1:]).all()


def test_a_runs_usage_replaces_the_stored_days_it_read_again():
    stored = pa.concat_tables([usage([1.0, 2.0]), usage([5.0, 6.0], flow_id=2, name="B->A")])
    new = usage([4.0, 7.0], start=START + timedelta(days=1))  # day 1 read again, and day 2
    # A state Spark wrote has its columns in another order.
    merged = merged_usage(stored.select(stored.column_names[::-1]), new)
    days = sorted(
        (row["flow_id"], (row["date"] - START).days, row["avg_mb_per_s"]) for row in merged.to_pylist()
    )
    assert days == [(1, 0, 1.0), (1, 1, 4.0), (1, 2, 7.0), (2, 0, 5.0), (2, 1, 6.0)]
    assert merged.schema == new.schema
