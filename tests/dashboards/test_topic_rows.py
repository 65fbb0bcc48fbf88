"""Topic rows: the same traffic written one row per partition and one row per topic (workers.lake) gives
the report job the same capacity plan, daily usage, flow status and flow figures; lake files written
before the `partitions` column read as one partition a row."""

from __future__ import annotations

from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from dashboards.spark.jobs import CapacityOptions, ReportOptions, run_reports
from dashboards.spark.lake import topic_row_partition
from dashboards.spark.status import partition_status
from dashboards.spark.usage import daily_flow_usage
from replication.metrics import PartitionMetrics
from tests.dashboards.conftest import T0, sample
from workers.lake import Counts, MetricsLake, lake_rows

RECORD = 1_000  # bytes
SLICE_S = 10
SLICES = 90  # 15 minutes: three report windows
STALL_FROM = 60  # `payments` stops replicating for the last window (every partition of it)
TASKS = 2
TOPICS = {"orders": 8, "payments": 4}
OPTIONS = ReportOptions(capacity=CapacityOptions(tasks_max=TASKS, workers=1))


def _assignment() -> dict[int, list[tuple[str, int]]]:
    """MM2's: round robin over the sorted partitions (each task holds some of every topic)."""
    ordered = sorted((topic, p) for topic, count in TOPICS.items() for p in range(count))
    return {task: ordered[task::TASKS] for task in range(TASKS)}


def _metrics(topic: str, partition: int, k: int) -> PartitionMetrics:
    """Partition (topic, partition) after slice k: 1,000 records behind at the start, producing
    100 + 10 x partition records a slice and replicating 100 (none once stalled)."""
    produced = 100 + 10 * partition
    replicated = 100 * min(k + 1, STALL_FROM if topic == "payments" else SLICES)
    return PartitionMetrics(
        topic=f"A.{topic}",
        partition=partition,
        source_topic=topic,
        record_count=replicated,
        record_rate=0.0,
        byte_count=replicated * RECORD,
        byte_rate=0.0,
        record_age_ms=60.0,
        replication_latency_ms=100.0,
        records_behind=1_000 + produced * (k + 1) - replicated,
        seconds_behind=None,
        source_end_offset=1_000 + produced * (k + 1),
        next_offset=replicated,
        skipped_count=0,
        gap_count=0,
        lost_records=0,
        stopped=False,
        last_error=None,
    )


def _write_lake(root: Path, *, topic_rows_above: int) -> int:
    """The traffic as the workers write it, each task's slices through `lake_rows`; the rows written."""
    lake = MetricsLake(root, flush_interval_s=3_600, flush_rows=1_000_000)
    written = 0
    for task, partitions in _assignment().items():
        counts: dict[tuple[str, int], Counts] = {}
        for k in range(SLICES):
            rows, counts = lake_rows(
                flow_id=1,
                flow_name="A->B",
                task_index=task,
                worker=f"w{task}:1",
                partitions=[_metrics(topic, p, k) for topic, p in partitions],
                previous=counts,
                interval_s=float(SLICE_S),
                at=T0 + timedelta(seconds=SLICE_S * k),
                topic_rows_above=topic_rows_above,
            )
            lake.append(rows)
            written += len(rows)
    lake.flush()
    return written


def _reports(spark, root: Path, state: Path) -> dict[str, list[dict]]:
    return run_reports(
        spark=spark, lake_dir=root, state_dir=state, options=OPTIONS, now=T0 + timedelta(days=2)
    ).datasets


def _sorted(rows: list[dict], *key: str) -> list[dict]:
    return sorted(rows, key=lambda row: tuple(str(row[name]) for name in key))


def _approx(rows: list[dict]) -> list:
    """Rows compared column by column, floats to pytest's tolerance (sums add in another order)."""
    return [pytest.approx(row) for row in rows]


def _per_flow_window(rows: list[dict], column: str) -> dict:
    totals: dict = defaultdict(float)
    for row in rows:
        totals[(row["flow_id"], row["window_start"])] += row[column] or 0
    return dict(totals)


@pytest.fixture(scope="module")
def both_shapes(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("topic-rows")
    partition_rows = _write_lake(base / "per-partition", topic_rows_above=1_000)
    topic_rows = _write_lake(base / "per-topic", topic_rows_above=0)
    return (
        (partition_rows, _reports(spark, base / "per-partition", base / "state-partition")),
        (topic_rows, _reports(spark, base / "per-topic", base / "state-topic")),
    )


def test_topic_rows_are_one_per_task_and_topic_per_slice(both_shapes):
    (partition_rows, _), (topic_rows, _) = both_shapes
    assert partition_rows == SLICES * sum(TOPICS.values())
    assert topic_rows == SLICES * TASKS * len(TOPICS)


def test_the_same_traffic_gives_the_same_capacity_plan_and_usage(both_shapes):
    (_, per_partition), (_, per_topic) = both_shapes
    plan = _sorted(per_partition["capacity_plan"], "scope", "flow_name", "horizon_days")
    assert plan and {row["verdict"] for row in plan} != {"NOT_ENOUGH_DATA"}
    assert plan[0]["partitions"] == sum(TOPICS.values())
    assert _sorted(per_topic["capacity_plan"], "scope", "flow_name", "horizon_days") == _approx(plan)
    assert per_topic["daily_flow_usage"] == _approx(per_partition["daily_flow_usage"])
    (usage,) = per_partition["daily_flow_usage"]
    assert usage["partitions"] == 12 and usage["task_saturated_mb_per_s"] > 0


def test_the_same_traffic_gives_the_same_flow_status_and_figures(both_shapes):
    (_, per_partition), (_, per_topic) = both_shapes
    statuses = _sorted(per_partition["flow_status"], "window_start")
    # Every partition lags, growing, until `payments` (4 partitions) stalls in the last window.
    assert [(s["status"], s["partitions"], s["partitions_err"], s["partitions_warn"]) for s in statuses] == [
        ("WARN", 12, 0, 12),
        ("WARN", 12, 0, 12),
        ("ERR", 12, 4, 8),
    ]
    assert _sorted(per_topic["flow_status"], "window_start") == statuses
    last = statuses[-1]["window_start"]
    topic_status = {
        s["remote_topic"]: s["status"] for s in per_topic["partition_status"] if s["window_start"] == last
    }
    assert topic_status == {"A.orders": "WARN", "A.payments": "STALL"}
    for dataset, column in (
        ("flow_throughput", "mb_per_s"),
        ("flow_throughput", "records_per_s"),
        ("partition_lag", "records_behind_last"),
        ("partition_lag", "records_behind_max"),
    ):
        assert _per_flow_window(per_topic[dataset], column) == pytest.approx(
            _per_flow_window(per_partition[dataset], column)
        ), (dataset, column)
    assert {(row["partition"], row["partitions"]) for row in per_topic["partition_lag"]} == {
        (-1, 4),
        (-1, 2),
        (-2, 4),
        (-2, 2),
    }


def test_lake_files_without_the_partitions_column_read_as_one_partition_a_row(spark, tmp_path, both_shapes):
    (_, per_partition), _ = both_shapes
    root = tmp_path / "old"
    _write_lake(root, topic_rows_above=1_000)
    for path in root.rglob("*.parquet"):
        pq.write_table(pq.read_table(path).drop_columns(["partitions"]), path)
    old = _reports(spark, root, tmp_path / "state")
    assert {name: len(rows) for name, rows in old.items()} == {
        name: len(rows) for name, rows in per_partition.items()
    }
    for name, key in (
        ("capacity_plan", ("scope", "flow_name", "horizon_days")),
        ("daily_flow_usage", ("flow_id", "date")),
        ("flow_status", ("window_start",)),
        ("partition_status", ("remote_topic", "partition", "window_start")),
        ("partition_lag", ("remote_topic", "partition", "window_start")),
    ):
        assert _sorted(old[name], *key) == _approx(_sorted(per_partition[name], *key)), name


def _topic_row_series(
    flow_id: int, *, change_at: int, offsets: int, partitions: tuple[int, int]
) -> list[tuple]:
    """Task 0's topic row of one flow every 10 s for two windows: 400 records a slice produced and
    replicated, 100 or 50 behind in turn; from slice `change_at` on it adds up `partitions[1]` partitions
    instead of `partitions[0]`, whose offsets add `offsets` to both sums (negative: one went away)."""
    rows, position = [], 0
    for k in range(60):
        moved = offsets if k >= change_at else 0
        end = 10_000 + 400 * k + moved
        new_position = end - (100 if k % 2 else 50)
        records = 0 if k == 0 else new_position - position - (offsets if k == change_at else 0)
        position = new_position
        rows.append(
            sample(
                at_s=10 * k,
                end=end,
                position=position,
                partition=topic_row_partition(0),
                flow_id=flow_id,
                records=records,
                bytes_=records * RECORD,
                record_age_ms=60.0 if records else None,
                replication_latency_ms=100.0 if records else None,
                partitions=partitions[k >= change_at],
            )
        )
    return rows


def test_a_topic_row_whose_partitions_change_is_no_rewind_and_no_burst_of_production(samples_df):
    """A partition leaving a task's share of a topic drops its sums (flow 1), one joining raises them
    (flow 2): neither is the mirror going back nor the source producing a million records."""
    samples = samples_df(
        _topic_row_series(1, change_at=55, offsets=-50_000, partitions=(4, 3))
        + _topic_row_series(2, change_at=55, offsets=1_000_000, partitions=(4, 5))
    )
    statuses = {
        (row["flow_id"], row["window_start"]): (row["status"], row["partitions"])
        for row in partition_status(samples, timedelta(minutes=5)).collect()
    }
    second = T0.replace(tzinfo=None) + timedelta(minutes=5)
    assert statuses[(1, second)] == ("OK", 3)
    assert statuses[(2, second)] == ("OK", 5)
    usage = {row["flow_id"]: row for row in daily_flow_usage(samples, timedelta(minutes=5)).collect()}
    for flow_id, partitions in ((1, 4), (2, 5)):
        # As much produced as replicated, but for the slice of the change (not compared): 1 in 59.
        assert usage[flow_id]["input_mb_per_s"] == pytest.approx(usage[flow_id]["avg_mb_per_s"], rel=0.02)
        assert usage[flow_id]["partitions"] == partitions
