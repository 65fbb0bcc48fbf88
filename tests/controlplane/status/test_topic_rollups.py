"""Per-topic roll-ups from the tasks' rows (issue 34 item 1): the live RPO per topic and a /metrics scrape
read a flow's topics from its task rows, never every partition row, and say what the partition rows
grouped in SQL say; a flow whose task rows do not carry them (an earlier worker, too many topics) is still
grouped from its partition rows."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane.assurance import rpo
from controlplane.flows import services
from controlplane.metrics import prometheus
from controlplane.status import partition_writes, partitions, rollup, topic_rollups
from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus
from replication.metrics import PartitionMetrics

STATUS_TABLE = f'"{FlowPartitionStatus._meta.db_table}"'


def _metrics(n: int, *, topics: int = 7) -> PartitionMetrics:
    """Partition n of topic n % topics, with figures of every kind: lag unknown, caught up, behind with and
    without a known age, nothing replicated yet, stopped, stalled, failing on its own."""
    kind = n % 9
    known_end = kind != 0
    behind = (0, 0, 5, 17, 3, 0, 40, 2, 9)[kind]
    count = 0 if kind == 4 else 100 + n
    return PartitionMetrics(
        topic=f"A.t{n % topics}",
        partition=n // topics,
        source_topic=f"t{n % topics}",
        record_count=count,
        record_rate=0.0,
        byte_count=count * (37 + n % 5),
        byte_rate=0.0,
        record_age_ms=None if kind in (0, 1) else 10.0 * n,
        replication_latency_ms=None if kind == 0 else 3.0 * n,
        records_behind=behind,
        seconds_behind=None if kind in (0, 3) else float(behind) / 2,
        source_end_offset=(count + behind) if known_end else None,
        next_offset=count,
        skipped_count=0,
        gap_count=0,
        lost_records=0,
        stopped=kind == 5,
        last_error="refused" if kind == 7 else None,
        stalled=kind == 8,
    )


@pytest.fixture
def flow(db, two_clusters, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    a, b = two_clusters
    return services.flow_create(actor=None, source=a, target=b, enabled=True, topics=["t.*"])


def _save(flow, metrics, *, task_index: int, at) -> None:
    partition_writes.partition_statuses_save(  # every row written: the rows say what the slice says
        flow_id=flow.pk, task_index=task_index, partitions=metrics, task_error=None, at=at
    )


def _two_tasks(flow, *, second_age_s: float = 0.0):
    now = timezone.now()
    everything = [_metrics(n) for n in range(300)]
    _save(flow, everything[0::2], task_index=0, at=now)
    _save(flow, everything[1::2], task_index=1, at=now - timedelta(seconds=second_age_s))
    return now


def _reads_of_partition_rows(queries) -> list[str]:
    return [q["sql"] for q in queries.captured_queries if STATUS_TABLE in q["sql"]]


@pytest.mark.parametrize("second_age_s", [0.0, 300.0])  # the second task fresh, then silent past the limit
def test_the_tasks_topic_figures_say_what_the_partition_rows_grouped_in_sql_say(flow, second_age_s):
    now = _two_tasks(flow, second_age_s=second_age_s)

    with CaptureQueriesContext(connection) as queries:
        from_tasks = topic_rollups.topic_statuses(flow_ids=[flow.pk], now=now)[flow.pk]
    grouped = partitions.grouped_topic_statuses(flow_ids=[flow.pk], now=now)[flow.pk]

    assert _reads_of_partition_rows(queries) == [] and len(queries.captured_queries) == 1
    assert [dataclasses.asdict(t) for t in from_tasks] == [dataclasses.asdict(t) for t in grouped]
    assert len(from_tasks) == 7 and sum(t.partitions for t in from_tasks) == 300
    states = {state for t in from_tasks for state in t.states}
    if second_age_s:
        assert rollup.STALE in states and any(t.stale for t in from_tasks)
    else:  # every kind of partition shown: waiting for its lag, caught up, stopped, stalled
        assert states == {rollup.WAITING, "OK", "STOP", "STALL"}
    assert any(t.bytes_behind for t in from_tasks) and any(t.seconds_behind for t in from_tasks)


def test_the_live_rpo_and_a_scrape_read_no_partition_row(flow, settings):
    settings.MIRRORPLANE_METRICS_PARTITION_LEVEL = "topic"  # a large flow's /metrics: per topic
    now = _two_tasks(flow)
    status = rollup.flow_status(flow=flow, now=now)

    with CaptureQueriesContext(connection) as queries:
        live = rpo.flow_rpo(status, budget=status.budget, now=now, tasks=status.tasks)
    assert queries.captured_queries == []  # the flow page's tasks carry its topics
    with CaptureQueriesContext(connection) as queries:
        text = prometheus.exposition().decode()
    assert _reads_of_partition_rows(queries) == []

    expected = sum(p.records_behind for p in map(_metrics, range(300)) if p.source_end_offset is not None)
    assert live.records_behind == expected and len(live.topics) == 7
    scraped = [line for line in text.splitlines() if line.startswith("mirrorplane_topic_records_behind{")]
    assert len(scraped) == 7 and sum(float(line.rsplit(" ", 1)[1]) for line in scraped) == expected


def test_a_flow_whose_tasks_carry_no_topic_figures_is_grouped_from_its_partition_rows(flow):
    now = _two_tasks(flow)
    expected = partitions.grouped_topic_statuses(flow_ids=[flow.pk], now=now)[flow.pk]
    # A worker of the version before writes its task row without them (the column's database default)
    FlowTaskStatus.objects.filter(flow=flow, task_index=1).update(topic_figures=[])

    with CaptureQueriesContext(connection) as queries:
        found = topic_rollups.topic_statuses(flow_ids=[flow.pk], now=now)[flow.pk]

    assert found == expected and len(_reads_of_partition_rows(queries)) == 1


def test_a_task_of_more_topics_than_kept_stores_none_and_is_grouped(flow, monkeypatch):
    monkeypatch.setattr(topic_rollups, "TOPICS_KEPT_MAX", 3)
    now = timezone.now()
    _save(flow, [_metrics(n, topics=4) for n in range(40)], task_index=0, at=now)
    assert FlowTaskStatus.objects.get(flow=flow).topic_figures == []
    found = topic_rollups.topic_statuses(flow_ids=[flow.pk], now=now)[flow.pk]
    assert [t.topic for t in found] == ["t0", "t1", "t2", "t3"] and sum(t.partitions for t in found) == 40


def test_an_idle_topic_keeps_its_roll_up_and_a_moving_one_is_rolled_up_anew(flow):
    writes = partition_writes.StatusWrites()
    start = timezone.now()
    metrics = [_metrics(n) for n in range(70)]

    def save(at):
        partition_writes.partition_statuses_save(
            flow_id=flow.pk, task_index=0, partitions=metrics, task_error=None, at=at, writes=writes
        )
        return {t.topic: t for t in topic_rollups.topic_statuses(flow_ids=[flow.pk], now=at)[flow.pk]}

    save(start)
    first = {topic: entry for topic, (_, entry) in writes.topics.items()}
    metrics[0] = dataclasses.replace(metrics[0], records_behind=1000, source_end_offset=2000)  # t0 moves
    second = save(start + timedelta(seconds=1))

    assert all(writes.topics[topic][1] is first[topic] for topic in first if topic != "t0")
    assert writes.topics["t0"][1] is not first["t0"]
    figures = writes.figures(metrics, task_index=0, task_error=None)
    assert [kept for _, (_, kept) in sorted(writes.topics.items())] == partition_writes.topic_figures(figures)
    assert second["t0"].records_behind == first["t0"].records_behind + 1000
