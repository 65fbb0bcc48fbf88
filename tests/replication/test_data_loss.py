"""The data-loss detector: the pure decision, and on embedded brokers a position past the partition's
end (topic recreated) reported as a gap, then the partition stopped or skipped per data.loss.policy."""

from __future__ import annotations

import time

import pytest

from replication.config import DataLossPolicy
from replication.metrics import MirrorMetrics
from replication.positions import InMemoryPositionStore
from replication.source import DataLoss, detect_data_loss
from tests.replication.test_source_task import content, create_topics, make_task, produce, read_partition


def test_offsets_deleted_by_retention_are_counted_and_replication_resumes_at_the_earliest():
    loss = detect_data_loss(expected_offset=100, earliest_offset=130, end_offset=500)
    assert loss is not None and (loss.resumed_offset, loss.lost_records) == (130, 30)
    assert "100..129" in loss.reason


def test_an_end_below_the_position_is_a_loss_of_unknown_size():
    loss = detect_data_loss(expected_offset=100, earliest_offset=0, end_offset=40)
    assert loss == DataLoss(0, None, loss.reason) and "recreated" in loss.reason


@pytest.mark.parametrize(("expected", "earliest", "end"), [(100, 0, 500), (100, 100, 100), (0, 0, 0)])
def test_no_loss_while_the_next_offset_exists_or_is_the_end(expected, earliest, end):
    assert detect_data_loss(expected_offset=expected, earliest_offset=earliest, end_offset=end) is None


def run_until_gap(task, *, timeout_s: float = 30):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = task.run_slice(max_seconds=0.3)
        if result.gap_events:
            return result
    raise AssertionError("no gap detected")


@pytest.mark.kafka
@pytest.mark.parametrize("policy", [DataLossPolicy.STOP, DataLossPolicy.SKIP])
def test_position_past_the_end_is_reported_then_stopped_or_skipped(cluster_a, cluster_b, unique_name, policy):
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    new_records = [(None, b"new-%d" % i, None, 1_700_000_000_000 + i) for i in range(3)]
    produce(cluster_a, topic, {0: new_records, 1: new_records})
    # The position says 10 records of partition 0 were replicated, but the source partition now ends at
    # 3: the topic was deleted and recreated while the task was down.
    store = InMemoryPositionStore()
    store.save(flow="A->B", positions={(topic, 0): 10, (topic, 1): 0})
    metrics = MirrorMetrics()
    task = make_task(cluster_a, cluster_b, [topic], store=store, metrics=metrics, data_loss_policy=policy)
    task.assign([(topic, 0), (topic, 1)])
    result = run_until_gap(task)

    (event,) = result.gap_events
    assert (event.topic, event.partition, event.expected_offset, event.lost_records) == (topic, 0, 10, None)
    partition0 = metrics.snapshot().partition(f"A.{topic}", 0)
    assert partition0.gap_count == 1 and metrics.snapshot().gap_events == (event,)
    if policy == DataLossPolicy.STOP:
        assert result.stopped_partitions == ((topic, 0),) and partition0.stopped
        assert "data loss" in partition0.last_error and "stopped" in partition0.last_error
        assert event.resumed_offset == 10
        task.run_slice(max_seconds=0.5)
        assert store.load(flow="A->B", partitions=[(topic, 0)]) == {(topic, 0): 10}
        expected_partition0 = []
    else:
        assert event.resumed_offset == 0 and result.stopped_partitions == ()
        deadline = time.monotonic() + 30
        while task.run_slice(max_seconds=0.3).positions.get((topic, 0)) != 3:
            assert time.monotonic() < deadline
        expected_partition0 = new_records
    deadline = time.monotonic() + 30
    while task.run_slice(max_seconds=0.3).positions.get((topic, 1)) != 3:  # the other partition goes on
        assert time.monotonic() < deadline
    task.close()
    assert content(read_partition(cluster_b, f"A.{topic}", 0)) == expected_partition0
    assert content(read_partition(cluster_b, f"A.{topic}", 1)) == new_records
