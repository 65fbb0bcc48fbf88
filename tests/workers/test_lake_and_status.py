"""The metrics lake writer (real Parquet files) and the status/event rows the workers store."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from django.db import connection

from controlplane.flows import services
from controlplane.status import partition_writes, runtime
from controlplane.status.models import FlowEvent, FlowEventKind, FlowPartitionStatus, PartitionState
from dashboards.spark.lake import arrow_schema, topic_row_partition
from replication.metrics import GapEvent, PartitionMetrics
from workers.lake import Counts, MetricsLake, lake_rows
from workers.plans import TaskRef
from workers.replication import _record_quietly


def _metrics(
    partition: int, *, records: int, behind: int = 0, stopped: bool = False, rate: float = 0.0
) -> PartitionMetrics:
    return PartitionMetrics(
        topic="A.orders",
        partition=partition,
        source_topic="orders",
        record_count=records,
        record_rate=rate,
        byte_count=records * 10,
        byte_rate=rate * 10,
        record_age_ms=1500.0,
        replication_latency_ms=20.4,
        records_behind=behind,
        seconds_behind=2.5 if behind else 0.0,
        source_end_offset=records + behind,
        next_offset=records,
        skipped_count=0,
        gap_count=0,
        lost_records=0,
        stopped=stopped,
        last_error=None,
    )


AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def test_lake_rows_count_records_of_the_slice_only():
    rows, totals = lake_rows(
        flow_id=3,
        flow_name="A->B",
        task_index=1,
        worker="host:1",
        partitions=[_metrics(0, records=150), _metrics(1, records=40)],
        previous={("A.orders", 0): Counts(100, 1000), ("A.orders", 1): Counts(40, 400)},
        interval_s=1.0,
        at=AT,
        topic_rows_above=500,
    )
    assert [(row["partition"], row["records"], row["bytes"]) for row in rows] == [(0, 50, 500), (1, 0, 0)]
    assert rows[1]["record_age_ms"] is None  # nothing replicated in the slice: no age sample
    assert totals == {("A.orders", 0): Counts(150, 1500), ("A.orders", 1): Counts(40, 400)}


def test_a_large_task_writes_one_lake_row_per_topic_per_slice(tmp_path, settings):
    """2,000 partitions over 4 topics: 4 rows a slice (not 2,000), each standing for its topic's
    partitions; a task at the threshold still writes one row per partition."""
    topics = ("A.orders", "A.payments", "A.users", "A.audit")
    large = [
        replace(
            _metrics(p // 4, records=10 + p, behind=p % 3),
            topic=topics[p % 4],
            source_topic=topics[p % 4][2:],
        )
        for p in range(2_000)
    ]
    lake = MetricsLake(tmp_path, flush_interval_s=3_600, flush_rows=1_000_000)
    counts: dict = {}
    for _slice in range(3):
        rows, counts = lake_rows(
            flow_id=3,
            flow_name="A->B",
            task_index=1,
            worker="h:1",
            partitions=large,
            previous=counts,
            interval_s=1.0,
            at=AT,
            topic_rows_above=settings.METRICS_TOPIC_ROWS_ABOVE,
        )
        lake.append(rows)
    (path,) = lake.flush()
    table = pq.read_table(path)
    assert table.num_rows == 3 * len(topics)
    assert set(table.column("partition").to_pylist()) == {topic_row_partition(1)} == {-2}
    assert table.column("partitions").to_pylist() == [500] * 12
    first = {row["remote_topic"]: row for row in table.slice(0, 4).to_pylist()}
    orders = [m for m in large if m.topic == "A.orders"]
    assert first["A.orders"]["records"] == sum(m.record_count for m in orders)  # no previous slice
    assert first["A.orders"]["next_offset"] == sum(m.next_offset for m in orders)
    assert first["A.orders"]["source_end_offset"] - first["A.orders"]["next_offset"] == sum(
        m.records_behind for m in orders
    )
    assert table.slice(4).column("records").to_pylist() == [0] * 8  # nothing since
    at_threshold, _ = lake_rows(
        flow_id=3,
        flow_name="A->B",
        task_index=1,
        worker="h:1",
        partitions=large[: settings.METRICS_TOPIC_ROWS_ABOVE],
        previous={},
        interval_s=1.0,
        at=AT,
        topic_rows_above=settings.METRICS_TOPIC_ROWS_ABOVE,
    )
    assert len(at_threshold) == settings.METRICS_TOPIC_ROWS_ABOVE
    assert {row["partitions"] for row in at_threshold} == {1}


def test_lake_buffers_and_writes_one_file_per_date_and_flow(tmp_path):
    now = [0.0]
    lake = MetricsLake(tmp_path, flush_interval_s=10, flush_rows=1000, clock=lambda: now[0])
    rows, _ = lake_rows(
        flow_id=3,
        flow_name="A->B",
        task_index=0,
        worker="h:1",
        partitions=[_metrics(0, records=5)],
        previous={},
        interval_s=1.0,
        at=AT,
        topic_rows_above=500,
    )
    assert lake.append(rows) == []  # buffered
    assert lake.append(rows) == []
    now[0] = 11.0
    (path,) = lake.append(rows)
    written = Path(path)
    assert written.parent == tmp_path / "date=2026-03-01" / "flow=3"
    assert written.name.startswith("part-") and written.suffix == ".parquet"
    table = pq.read_table(written)
    assert table.schema.equals(arrow_schema())
    assert table.num_rows == 3
    assert not list(tmp_path.rglob(".*.tmp"))


@pytest.fixture
def flow(db):
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="a.example:9092")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="b.example:9092")
    return services.flow_create(actor=None, source=a, target=b, enabled=True, topics=["orders"])


def test_flow_spec_version_follows_every_change(flow):
    (spec,) = runtime.runtime_flow_specs()
    assert spec.runnable and spec.flow.name == "A->B" and spec.flow.topics == ("orders",)
    services.flow_update(actor=None, flow=flow, tasks_max=3)
    assert runtime.runtime_flow_spec(flow_id=flow.pk).config_version != spec.config_version
    services.flow_pause(actor=None, flow=flow)
    assert runtime.runtime_flow_specs() == []
    assert not runtime.runtime_flow_spec(flow_id=flow.pk).runnable
    services.flow_delete(actor=None, flow=flow)
    assert runtime.runtime_flow_spec(flow_id=flow.pk) is None


def test_partition_statuses_are_upserted_and_pruned(flow):
    partition_writes.partition_statuses_save(
        flow_id=flow.pk, task_index=0, partitions=[_metrics(0, records=10, behind=5)], task_error=None, at=AT
    )
    partition_writes.partition_statuses_save(
        flow_id=flow.pk,
        task_index=1,
        partitions=[_metrics(0, records=12, behind=0, rate=40.0), _metrics(1, records=3, stopped=True)],
        task_error=None,
        at=AT,
    )
    rows = {s.partition: s for s in FlowPartitionStatus.objects.filter(flow=flow)}
    assert rows[0].replicated_offset == 12 and rows[0].records_behind == 0 and rows[0].seconds_behind == 0.0
    assert rows[0].observed_at == AT
    assert rows[0].task_index == 1 and rows[0].replication_latency_ms == 20
    assert rows[0].record_rate == 40.0 and rows[0].byte_rate == 400.0 and rows[0].last_error == ""
    assert rows[1].state == PartitionState.STOP
    partition_writes.partition_statuses_save(
        flow_id=flow.pk,
        task_index=1,
        partitions=[_metrics(0, records=12, behind=7)],
        task_error="target B unreachable",
        at=AT,
    )
    row = FlowPartitionStatus.objects.get(flow=flow, partition=0)
    assert row.state == PartitionState.ERR and (row.records_behind, row.seconds_behind) == (7, 2.5)
    assert row.last_error == "target B unreachable" and row.record_rate == 0.0
    assert runtime.partition_statuses_prune(flow_id=flow.pk, replicated=[("orders", 0)]) == 1
    assert list(FlowPartitionStatus.objects.filter(flow=flow).values_list("partition", flat=True)) == [0]


def test_gap_event_names_the_lost_offsets(flow):
    gap = GapEvent(
        "orders",
        2,
        expected_offset=100,
        resumed_offset=130,
        lost_records=30,
        detected_at=0,
        reason="retention",
    )
    runtime.flow_gap_record(flow_id=flow.pk, gap=gap, remote_topic="A.orders", stopped=False, at=AT)
    event = FlowEvent.objects.get(flow=flow)
    assert event.kind == FlowEventKind.DATA_LOSS_GAP
    assert (event.topic, event.partition, event.first_offset, event.last_offset) == ("orders", 2, 100, 129)
    assert "30 records" in event.message and "resumed at offset 130" in event.message


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite checks no foreign key here")
def test_a_status_write_for_a_deleted_flow_is_one_line_not_a_traceback(caplog):
    """A worker still running a slice of a flow just deleted: its write is refused (the flow row is gone)
    and logged as one line; the chain's next slice ends it (workers.plans.decide_slice)."""
    a = services.cluster_create(actor=None, alias="A", bootstrap_servers="a.example:9092")
    b = services.cluster_create(actor=None, alias="B", bootstrap_servers="b.example:9092")
    flow = services.flow_create(actor=None, source=a, target=b, enabled=True, topics=["orders"])
    flow_id = flow.pk
    services.flow_delete(actor=None, flow=flow)
    ref = TaskRef(flow_id, 0)
    with caplog.at_level(logging.INFO, logger="workers.replication"):
        _record_quietly(
            ref,
            lambda: partition_writes.partition_statuses_save(
                flow_id=flow_id, task_index=0, partitions=[_metrics(0, records=1)], task_error=None, at=AT
            ),
        )
    (line,) = [r for r in caplog.records if r.name == "workers.replication"]
    assert line.levelno == logging.INFO and "flow was deleted" in line.getMessage() and line.exc_info is None
