"""The report job end to end on a generated lake, and its incremental rule."""

from __future__ import annotations

import math
import shutil
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from dashboards.lakegen import generate_lake
from dashboards.spark.jobs import (
    CARRIED,
    REPORT_KEYS,
    ReportOptions,
    ReportState,
    _read_groups,
    flow_groups,
    list_lake_partitions,
    run_reports,
)
from dashboards.spark.lake import lake_location

OPTIONS = ReportOptions(window=timedelta(minutes=30), lag_lookback=timedelta(hours=1), window_samples=5)
START = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def lake(tmp_path_factory):
    """Three days, two flows of five partitions, a sample every 10 minutes; the incidents in flow 1."""
    root = tmp_path_factory.mktemp("lake")
    generate_lake(root, flows=2, partitions=5, samples=3 * 144, start=START, step_s=600, seed=3)
    return root


def merged(*runs) -> dict[str, dict]:
    """Rows keyed as the web app stores them: a later run's row replaces an earlier one."""
    tables: dict[str, dict] = {}
    for run in runs:
        for name, rows in run.datasets.items():
            key = REPORT_KEYS[name]
            if key is None:
                tables[name] = {i: row for i, row in enumerate(rows)}
            else:
                tables.setdefault(name, {}).update({tuple(row[c] for c in key): row for row in rows})
    return tables


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        math.isclose(v, b[k], rel_tol=1e-9, abs_tol=1e-9) if isinstance(v, float) else v == b[k]
        for k, v in a.items()
    )


FULL_RUN_AT = START + timedelta(days=3, hours=2)


@pytest.fixture(scope="module")
def full_run(spark, lake, tmp_path_factory):
    state = tmp_path_factory.mktemp("full-state")
    return run_reports(spark=spark, lake_dir=lake, state_dir=state, options=OPTIONS, now=FULL_RUN_AT), state


def test_incremental_runs_read_only_new_partitions_and_equal_a_full_run(spark, lake, full_run, tmp_path):
    days = sorted(p.name for p in lake.glob("date=*"))
    growing = tmp_path / "lake"
    for day in days[:2]:
        shutil.copytree(lake / day, growing / day)
    progress = []
    first = run_reports(
        spark=spark,
        lake_dir=growing,
        state_dir=tmp_path / "state",
        options=OPTIONS,
        now=START + timedelta(days=1, hours=12),
        on_progress=lambda step, f: progress.append(f),
    )
    # Day 1 is over (sealed); day 2 is still being written: read, not recorded.
    assert first.partitions_sealed == [f"{days[0]}/flow=1", f"{days[0]}/flow=2"]
    assert len(first.partitions_read) == 4
    assert progress[0] == 0.0 and progress[-1] == 1.0 and progress == sorted(progress)

    shutil.copytree(lake / days[2], growing / days[2])
    second = run_reports(
        spark=spark, lake_dir=growing, state_dir=tmp_path / "state", options=OPTIONS, now=FULL_RUN_AT
    )
    # Day 1 is not read again; day 2 is re-read (it was open), day 3 is new.
    assert second.partitions_read == [f"{d}/flow={f}" for d in days[1:] for f in (1, 2)]
    incremental, complete = merged(first, second), merged(full_run[0])
    for name in REPORT_KEYS:
        assert complete[name], name
        assert incremental[name].keys() == complete[name].keys(), name
        assert all(same(incremental[name][k], complete[name][k]) for k in complete[name]), name


def test_the_generated_incidents_show_in_the_reports(full_run):
    result = full_run[0]
    seen = {(r["flow_id"], r["partition"], r["status"]) for r in result.datasets["partition_status"]}
    for partition, status in ((1, "STALL"), (2, "REWIND"), (3, "WARN"), (4, "STOP")):
        assert (1, partition, status) in seen, (partition, status)
    assert "ERR" in {r["status"] for r in result.datasets["flow_status"] if r["flow_id"] == 1}
    lagging = [r for r in result.datasets["partition_lag"] if (r["flow_id"], r["partition"]) == (1, 3)]
    assert max(r["seconds_behind_max"] for r in lagging) > 3600  # 20% short for days: hours behind
    # Flow 1's lagging partition saturates its task: a verdict. Flow 2 keeps up (a few records behind at
    # most, never on records older than a slice): not enough data, and so not for the fleet either.
    verdicts = {(r["flow_name"], r["verdict"]) for r in result.datasets["capacity_plan"]}
    assert {v for name, v in verdicts if name == "dc1->dc2#1"} <= {
        "UNDER_PROVISIONED",
        "RIGHT_SIZED",
        "OVER_PROVISIONED",
    }
    assert {v for name, v in verdicts if name != "dc1->dc2#1"} == {"NOT_ENOUGH_DATA"}


def test_nothing_new_reads_nothing_and_a_late_file_is_reported(spark, lake, full_run, tmp_path):
    copy, state = tmp_path / "lake", tmp_path / "state"
    shutil.copytree(lake, copy)
    shutil.copytree(full_run[1], state)
    first_day = sorted(copy.glob("date=*/flow=1"))[0]
    shutil.copy(first_day / "part-00000.parquet", first_day / "part-late.parquet")
    for day in sorted(copy.glob("date=*"))[-1:]:
        shutil.rmtree(day)  # the open day: nothing is left to re-read
    again = run_reports(spark=spark, lake_dir=copy, state_dir=state, options=OPTIONS, now=FULL_RUN_AT)
    assert again.late_files == [f"{first_day.parent.name}/flow=1/part-late.parquet"]
    assert (again.partitions_read, again.samples_read) == ([], 0)
    assert len(again.datasets["capacity_plan"]) == len(full_run[0].datasets["capacity_plan"])


def test_a_window_that_does_not_divide_a_day_is_refused(spark, tmp_path):
    with pytest.raises(ValueError, match="divide a day"):
        run_reports(
            spark=spark,
            lake_dir=tmp_path,
            state_dir=tmp_path / "s",
            options=ReportOptions(window=timedelta(minutes=7)),
        )


def test_samples_without_an_end_offset_have_unknown_lag_and_still_count(spark, lake, full_run, tmp_path):
    """Workers write a null end offset for a slice that read no watermarks (seen in `make demo`): the
    job must not fail on it; those windows report unknown lag and their throughput as usual."""
    copy = tmp_path / "lake"
    shutil.copytree(lake, copy)
    path = sorted(copy.glob("date=*/flow=1/*.parquet"))[0]
    table = pq.read_table(path)
    unknown = pc.and_(
        pc.equal(table["partition"], 0), pc.less(table["ts"], table["ts"][0].as_py() + timedelta(hours=2))
    )
    ends = pc.if_else(unknown, pa.scalar(None, pa.int64()), table["source_end_offset"])
    pq.write_table(
        table.set_column(table.schema.get_field_index("source_end_offset"), "source_end_offset", ends), path
    )

    result = run_reports(
        spark=spark, lake_dir=copy, state_dir=tmp_path / "state", options=OPTIONS, now=FULL_RUN_AT
    )
    first_hours = [
        row
        for row in result.datasets["partition_lag"]
        if (row["flow_id"], row["partition"]) == (1, 0) and row["window_start"] < START + timedelta(hours=2)
    ]
    assert first_hours and all(row["records_behind_max"] is None for row in first_hours)
    assert all(row["seconds_behind_max"] is None for row in first_hours)
    assert len(result.datasets["flow_throughput"]) == len(full_run[0].datasets["flow_throughput"])
    assert result.samples_read == full_run[0].samples_read


def test_flows_are_packed_whole_into_groups_of_about_equal_bytes():
    assert flow_groups({1: 100, 2: 90, 3: 50, 4: 40, 5: 10}, 2) == [[1, 4, 5], [2, 3]]
    assert flow_groups({7: 0, 3: 5}, 8) == [[3], [7]]  # never more groups than flows
    assert flow_groups({}, 8) == []


def test_the_pass_reads_each_group_of_flows_in_one_task(spark, lake, full_run):
    """Every file of a group's flows, and the carry, in one Spark partition: one Python worker holds
    every sample of a mirrored partition without a shuffle."""
    partitions = list_lake_partitions(lake)
    state = ReportState(full_run[1])
    files, groups = _read_groups(
        spark, location=lake_location(lake), to_read=partitions, sealed_names=set(), carry=state.path("carry")
    )
    assert sorted(groups) == [[1], [2]]  # the tests' session: 2 shuffle partitions, 2 flows
    flow = F.regexp_extract("path", r"flow=(\d+)", 1)
    tasks = files.select(flow, "_origin", "_group").rdd.glom().map(sorted).collect()
    per_flow = sorted(len(list(lake.glob(f"date=*/flow={f}/*.parquet"))) for f in (1, 2))
    assert sorted(len(rows) for rows in tasks) == [n + 1 for n in per_flow]  # its files and the carry
    for index, rows in enumerate(tasks):
        assert {(origin, group) for _, origin, group in rows if origin == CARRIED} == {(CARRIED, index)}
        assert {int(f) for f, origin, _ in rows if origin != CARRIED} == set(groups[index])
