"""The data-loss detector: the pure decision, `DataLossCheck` on in-memory clients, and on embedded brokers a position past the partition's
end (topic recreated) reported as a gap, then the partition stopped or skipped per data.loss.policy."""

from __future__ import annotations

import time

import pytest

from replication.config import DataLossPolicy
from replication.data_loss import DataLossCheck
from replication.memory.task_io import MemoryCluster, MemoryEmitter, MemoryReader, MemorySource
from replication.metrics import MirrorMetrics
from replication.mirroring import DataLoss, detect_data_loss
from replication.partition_state import Acknowledgements
from replication.positions import InMemoryPositionStore, PositionWriter
from replication.slices import SliceErrorKind
from replication.task_metrics import TaskMetrics
from tests.replication.states import partition_state
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


@pytest.mark.parametrize("policy", [DataLossPolicy.STOP, DataLossPolicy.SKIP])
def test_the_check_without_a_task_turns_an_out_of_range_fetch_into_one_gap_then_stops_or_skips(policy):
    """`DataLossCheck` on the in-memory clients: a fetch error that is not about a running partition is
    no slice error, an out-of-range one is checked at the slice end, once."""
    cluster = MemoryCluster()
    cluster.create("orders", 1)
    for i in range(10):
        cluster.append("orders", 0, key=None, value=b"v%d" % i)
    cluster.delete_before("orders", 0, 6)  # retention: offsets 2..5 go before the task reaches them
    source = MemorySource(cluster)
    source.assign({("orders", 0): 2})
    metrics, acks = MirrorMetrics(), Acknowledgements()
    reporter = TaskMetrics(metrics=metrics, source=source, transactional=False)
    positions = PositionWriter(
        flow="A->B", store=InMemoryPositionStore(), offset_syncs=MemoryEmitter, acks=acks
    )
    check = DataLossCheck(
        source=source,
        reader=lambda: MemoryReader(cluster),
        policy=policy,
        metrics=reporter,
        positions=positions,
        gap_confirm_s=0.0,
        label="flow A->B task 0",
    )
    state = partition_state(acks=acks, start=2)
    states = {state.key: state}
    (fetched,) = source.fetch(first_wait_s=0, max_records=100)
    assert check.fetch_error(fetched, states) is None and check.out_of_range == {("orders", 0)}
    assert check.fetch_error(fetched, {}) is None  # not a running partition's: a warning, not an error
    events, errors = check.check(states, fetched=[], swept=[], now=100.0)
    (event,) = events
    assert (event.expected_offset, event.lost_records) == (2, 4) and check.reseek
    assert metrics.snapshot(now=100.0)[0].gap_count == 1
    if policy == DataLossPolicy.STOP:
        (error,) = errors
        assert error.kind is SliceErrorKind.DATA_LOSS and state.stopped and state.next_offset == 2
        assert positions.dirty == {}
    else:
        assert errors == [] and not state.stopped and state.next_offset == event.resumed_offset == 6
        assert positions.dirty == {state.key: state}  # the position moved without an acknowledgement
    assert check.check(states, fetched=[], swept=[state.key], now=101.0) == ([], [])  # reported once


def test_an_out_of_range_report_whose_check_cannot_read_the_source_is_checked_again_next_slice():
    """The source stops fetching a partition whose offset it reported out of range (librdkafka with
    auto.offset.reset=error) until it is assigned again: a report dropped because the source did not answer
    the check's read would leave the partition never fetched again, with no error."""
    cluster = MemoryCluster()
    cluster.create("orders", 1)
    for i in range(10):
        cluster.append("orders", 0, key=None, value=b"v%d" % i)
    cluster.delete_before("orders", 0, 6)
    source = MemorySource(cluster)
    source.assign({("orders", 0): 2})
    acks = Acknowledgements()
    check = DataLossCheck(
        source=source,
        reader=lambda: MemoryReader(cluster),
        policy=DataLossPolicy.SKIP,
        metrics=TaskMetrics(metrics=MirrorMetrics(), source=source, transactional=False),
        positions=PositionWriter(
            flow="A->B", store=InMemoryPositionStore(), offset_syncs=MemoryEmitter, acks=acks
        ),
        gap_confirm_s=0.0,
        label="flow A->B task 0",
    )
    state = partition_state(acks=acks, start=2)
    states = {state.key: state}
    (fetched,) = source.fetch(first_wait_s=0, max_records=100)
    assert check.fetch_error(fetched, states) is None
    cluster.unreachable = "timed out"
    assert check.check(states, fetched=[], swept=[], now=100.0) == ([], []) and not check.reseek
    cluster.unreachable = None
    (event,), errors = check.check(states, fetched=[], swept=[], now=101.0)
    assert event.expected_offset == 2 and check.reseek and state.next_offset == 6 and errors == []
