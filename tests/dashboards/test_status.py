"""Burrow's rules, each status from a partition with a known window, plus the flow's worst status."""

from __future__ import annotations

from datetime import timedelta

from pyspark.testing import assertDataFrameEqual

from dashboards.spark.status import flow_status, partition_status
from tests.dashboards.conftest import sample

WINDOW = timedelta(hours=1)
# partition: [(t, end offset, position)]; the window holds the last 3 samples, "now" is t=30.
PARTITIONS = {
    0: ([(0, 100, 90), (10, 200, 190), (20, 300, 297), (30, 400, 400)], "OK"),  # lag now 0
    1: ([(0, 100, 90), (5, 200, 190), (10, 300, 290)], "STOP"),  # silent 20 s > 10 s span
    2: ([(0, 110, 100), (10, 210, 200), (20, 310, 300), (30, 410, 150)], "REWIND"),
    3: ([(0, 100, 50), (10, 200, 200), (20, 300, 295), (30, 400, 393)], "OK"),  # zero lag in window
    4: ([(0, 100, 90), (10, 200, 100), (20, 300, 100), (30, 400, 100)], "STALL"),
    # Lags 0 | 10, 10, 20: the zero fell out of the window, and lag never decreased.
    5: ([(0, 100, 100), (10, 200, 190), (20, 300, 290), (30, 400, 380)], "WARN"),
    6: ([(0, 100, 50), (10, 200, 170), (20, 300, 280), (30, 400, 375)], "OK"),  # lag went down once
    # The position went back (200 -> 150) but passed its old best (250): recovered, so no REWIND;
    # lags 10, 150, 150 never decreased.
    7: ([(0, 100, 90), (10, 210, 200), (20, 300, 150), (30, 400, 250)], "WARN"),
}


def statuses(samples_df, window_samples: int = 3):
    rows = [
        sample(at_s=t, end=end, position=position, partition=partition)
        for partition, (points, _) in PARTITIONS.items()
        for t, end, position in points
    ]
    return partition_status(samples_df(rows), WINDOW, window_samples=window_samples)


def test_every_burrow_status_in_rule_order(spark, samples_df):
    expected = spark.createDataFrame(
        [(partition, status) for partition, (_, status) in PARTITIONS.items()], "partition int, status string"
    )
    assertDataFrameEqual(statuses(samples_df).select("partition", "status"), expected)


def test_the_flow_takes_its_worst_partition_and_names_the_error_causes(spark, samples_df):
    result = flow_status(statuses(samples_df)).select(
        "status", "cause", "partitions", "partitions_err", "partitions_warn"
    )
    expected = spark.createDataFrame(
        [("ERR", "REWIND,STALL,STOP", 8, 3, 2)],
        "status string, cause string, partitions long, partitions_err long, partitions_warn long",
    )
    assertDataFrameEqual(result, expected)


def test_a_flow_with_only_lagging_partitions_warns(spark, samples_df):
    rows = [sample(at_s=t, end=e, position=p, partition=5) for t, e, p in PARTITIONS[5][0]]
    result = flow_status(partition_status(samples_df(rows), WINDOW, window_samples=3))
    assert [(r.status, r.cause) for r in result.collect()] == [("WARN", None)]


def test_a_silent_partition_is_evaluated_in_later_windows_of_its_flow(samples_df):
    rows = [sample(at_s=t, end=100 * t + 10, position=100 * t, partition=0) for t in (0, 60, 120, 180)]
    rows += [sample(at_s=t, end=100 * t + 10, position=100 * t, partition=1) for t in (0, 60)]
    result = partition_status(samples_df(rows), timedelta(minutes=1), window_samples=3)
    by_window = {(r.partition, r.window_start.minute): r.status for r in result.collect()}
    # Partition 1 reports at t=0 and 60 (a 60 s span) then falls silent: at t=120 the silence only
    # equals the span (its constant lag warns), at t=180 it outlasts it: STOP.
    assert by_window[(1, 2)] == "WARN"
    assert by_window[(1, 3)] == "STOP"
    assert by_window[(0, 3)] == "WARN"  # constant lag of 10 never decreased


def test_empty_input_gives_no_status(samples_df):
    assert partition_status(samples_df([]), WINDOW).count() == 0


def test_burrow_leaves_out_samples_without_an_end_offset(spark, samples_df):
    """Lags 10, 20, (unknown), 30: never decreased, WARN. Read as lag 0, the unknown one would make it OK;
    a window holding only such samples gets no status."""
    rows = [
        sample(at_s=0, end=110, position=100),
        sample(at_s=10, end=125, position=105),
        sample(at_s=20, end=None, position=110),
        sample(at_s=30, end=145, position=115),
        sample(at_s=3600, end=None, position=120),  # the next window: no lag sample
    ]
    result = partition_status(samples_df(rows), WINDOW, window_samples=10).select("window_start", "status")
    assert [row.status for row in result.collect()] == ["WARN"]
