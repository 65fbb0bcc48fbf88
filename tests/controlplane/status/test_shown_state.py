"""The state a partition's row shows has one rule (`rollup.shown_state`), evaluated in Python for the rows a
page shows (`rollup.partition_live`) and in SQL for the filters, the order, the per-topic counts and
/metrics (`partitions.TaskReports.shown_state`, built from the same function): both agree on rows of every
kind."""

from __future__ import annotations

import collections
import itertools
from datetime import timedelta

import pytest
from django.utils import timezone

from controlplane.flows import services
from controlplane.flows.models import FlowState
from controlplane.status import partitions, rollup, topic_rollups
from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus, PartitionState

STALE_AFTER = 20
ROW_AGES = (1, STALE_AFTER, STALE_AFTER + 1, 300)  # fresh, at the limit (still fresh), just over, long gone
TASKS = {0: None, 1: 2, 2: 120, 3: 10}  # task_index: its report's age (None: no task row)
LAGS = ((None, None), (0, None), (5, None), (0, 0.0), (5, 3.0), (None, 2.0))  # records, seconds behind


@pytest.fixture
def rows(db, two_clusters, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = STALE_AFTER
    a, b = two_clusters
    flow = services.flow_create(actor=None, source=a, target=b, enabled=True, topics=["t.*"])
    now = timezone.now()
    for task_index, age in TASKS.items():
        if age is not None:
            FlowTaskStatus.objects.create(
                flow=flow,
                task_index=task_index,
                observed_at=now - timedelta(seconds=age),
                rows_current_at=now,
            )
    made = [
        FlowPartitionStatus(
            flow=flow,
            topic=f"t{task_index}",
            partition=partition,
            remote_topic=f"A.t{task_index}",
            task_index=task_index,
            state=state,
            records_behind=records,
            seconds_behind=seconds,
            observed_at=now - timedelta(seconds=row_age),
        )
        for task_index in TASKS
        for partition, (row_age, state, (records, seconds)) in enumerate(
            itertools.product(ROW_AGES, PartitionState.values, LAGS)
        )
    ]
    FlowPartitionStatus.objects.bulk_create(made)
    return flow, now


@pytest.mark.parametrize("flow_state", [FlowState.ACTIVE, FlowState.PAUSED, FlowState.FAULTED])
def test_python_and_sql_show_the_same_state_for_rows_of_every_kind(rows, flow_state):
    flow, now = rows
    flow.state = flow_state
    flow.save(update_fields=["state"])
    stored = list(FlowPartitionStatus.objects.filter(flow=flow))
    live = rollup.partitions_live(stored, flow=flow, budget=rollup.DEFAULT_BUDGET, now=now)
    in_python = {(p.topic, p.partition): p.state for p in live}
    in_sql = {
        (topic, partition): shown
        for _, topic, partition, *_, shown in partitions.partition_values(flow_ids=[flow.pk], now=now)
    }
    assert in_sql == in_python
    # Every kind is there: a vouched old row is fresh, an unvouched one STALE, a fresh unknown lag WAITING.
    assert set(in_python.values()) == {*PartitionState.values, rollup.STALE, rollup.WAITING}
    assert in_python[("t1", 0)] == rollup.WAITING  # fresh row, fresh task, no lag known
    assert in_python[("t1", len(PartitionState.values) * len(LAGS) * 3)] == rollup.WAITING  # old, vouched
    assert in_python[("t0", len(PartitionState.values) * len(LAGS) * 3)] == rollup.STALE  # old, no task
    assert in_python[("t2", len(PartitionState.values) * len(LAGS) * 3)] == rollup.STALE  # old, task silent
    for state in partitions.STATES:
        filtered = partitions.partition_rows(
            flow=flow, state=state, reports=partitions.TaskReports.of([flow.pk], now=now)
        )
        assert sorted(filtered.values_list("topic", "partition")) == sorted(
            key for key, shown in in_python.items() if shown == state
        )
    # Worst first: the rank the order reads in SQL (`shown_state(rank=)`) is the shown state's.
    reports = partitions.TaskReports.of([flow.pk], now=now)
    ordered = partitions.partition_rows(flow=flow, reports=reports).values_list("topic", "partition")
    ranks = [partitions.SEVERITY.get(in_python[key], 0) for key in ordered]
    assert ranks == sorted(ranks, reverse=True) and set(ranks) == {0, 1, 2, 3}
    # The per-topic RPO counts the partitions per state shown.
    by_topic = collections.defaultdict(collections.Counter)
    for (topic, _), shown in in_python.items():
        by_topic[topic][shown] += 1
    topics = topic_rollups.topic_statuses(flow_ids=[flow.pk], now=now)[flow.pk]
    assert {t.topic: t.states for t in topics} == {topic: dict(counts) for topic, counts in by_topic.items()}
