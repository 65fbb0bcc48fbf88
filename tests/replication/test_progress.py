"""`Progress` without a task: a fetch's partitions and the acknowledged ones are routed to the positions to
write, the metrics to report and the gap check, each once, without walking every partition; with a
transaction open, latency waits for the commit; the caught-up check asks only unconfirmed partitions, the
backlog only the partitions moved since it was last asked."""

from __future__ import annotations

import time

from replication.config import DeliveryGuarantee, FlowConfig
from replication.memory.task_io import (
    CREATE_TIME,
    MemoryCluster,
    MemoryRecord,
    MemorySource,
    MemoryTransactionalSink,
    memory_transaction_failure,
)
from replication.metrics import MirrorMetrics
from replication.partition_state import Acknowledgements, PartitionState
from replication.positions import InMemoryPositionStore, PositionWriter
from replication.progress import Progress
from replication.task_metrics import TaskMetrics
from replication.transactions import Transactions
from tests.replication.states import partition_state


class CountingSource(MemorySource):
    def __init__(self, cluster) -> None:
        super().__init__(cluster)
        self.asked: list = []

    def watermarks(self, topic, partition):
        self.asked.append((topic, partition))
        return super().watermarks(topic, partition)


def setup(*, transactional: bool = False, partitions: int = 3):
    cluster = MemoryCluster()
    cluster.create("orders", partitions)
    source = CountingSource(cluster)
    acks, metrics = Acknowledgements(), MirrorMetrics()
    reporter = TaskMetrics(metrics=metrics, source=source, transactional=transactional)
    positions = PositionWriter(flow="A->B", store=InMemoryPositionStore(), offset_syncs=list, acks=acks)
    transactions = (
        Transactions(
            sink=lambda: MemoryTransactionalSink(cluster),
            failure=memory_transaction_failure,
            timeout_s=1.0,
            metrics=reporter,
            flow=FlowConfig(source="A", target="B", delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE),
            task_index=0,
            acks=acks,
            clock=time.monotonic,
        )
        if transactional
        else None
    )
    progress = Progress(
        acks=acks, positions=positions, metrics=reporter, transactions=transactions, source=source
    )
    states = {("orders", p): partition_state(p, acks=acks) for p in range(partitions)}
    return progress, states, positions, reporter, metrics, transactions, source, cluster


def delivered(state: PartitionState, offset: int) -> None:
    state.in_flight.append(offset)
    record = MemoryRecord(
        "A.orders", state.partition, offset, None, b"v", None, (CREATE_TIME, 1_700_000_000_000)
    )
    state.on_delivery(None, record)


def test_a_fetch_and_its_acknowledgements_reach_positions_metrics_and_the_gap_check_once_each():
    progress, states, positions, reporter, metrics, *_ = setup()
    first = states[("orders", 0)]
    first.last_polled_timestamp_ms = 1_700_000_000_000
    progress.polled_now.append(first)
    delivered(states[("orders", 1)], 0)
    delivered(states[("orders", 1)], 1)
    progress.observe(states, 1_700_000_000.5)
    assert set(positions.dirty) == set(reporter.unreported) == {("orders", 0), ("orders", 1)}
    assert progress.fetched == [first] and set(progress.unconfirmed) == {("orders", 0)}
    assert progress.polled_now == [] and first.last_polled_timestamp_ms is None
    snapshot = {p.partition: p for p in metrics.snapshot(now=1_700_000_000.5)}
    assert snapshot[0].record_age_ms == 500.0 and sum(snapshot[1].latency_counts) == 2
    progress.polled_now.append(first)
    first.last_polled_timestamp_ms = 1_700_000_000_000
    progress.observe(states, 1_700_000_001.0)
    assert progress.fetched == [first]  # once per slice


def test_with_a_transaction_open_latency_waits_for_the_commit():
    progress, states, positions, reporter, metrics, transactions, *_ = setup(transactional=True)
    transactions.open = True
    state = states[("orders", 2)]
    delivered(state, 0)
    progress.collect(states, 1_700_000_000.1)
    assert sum(sum(p.latency_counts) for p in metrics.snapshot(now=1_700_000_000.1)) == 0
    assert transactions.uncommitted == {state.key: state}
    transactions.open = False
    progress.committed(states, 1_700_000_000.2)
    assert state.committed_records == 1
    assert sum(sum(p.latency_counts) for p in metrics.snapshot(now=1_700_000_000.2)) == 1


def test_caught_up_asks_the_source_only_about_unconfirmed_partitions_then_nothing():
    progress, states, _, _, _, _, source, cluster = setup()
    cluster.append("orders", 1, key=None, value=b"v")
    for state in states.values():
        progress.started(state)
    assert not progress.fetched_to_end()  # partition 1 has a record not read yet
    assert source.asked == [("orders", 0), ("orders", 1)]
    states[("orders", 1)].next_offset = 1
    assert progress.fetched_to_end()
    source.asked.clear()
    assert progress.fetched_to_end() and source.asked == []  # an idle task asks nothing


def test_the_backlog_counts_every_running_partition_and_asks_only_those_moved_since():
    """A transaction holding only partition 0 still has partition 1's records behind it."""
    progress, states, _, _, _, transactions, source, cluster = setup(transactional=True)
    for partition, records in ((0, 3), (1, 5)):
        for _ in range(records):
            cluster.append("orders", partition, key=None, value=b"v")
    for state in states.values():
        progress.started(state)
    assert progress.behind(8) and not progress.behind(9)
    assert sorted(source.asked) == [("orders", 0), ("orders", 1), ("orders", 2)]
    source.asked.clear()
    assert progress.behind(8) and source.asked == []  # nothing moved: the kept total
    first = states[("orders", 0)]
    first.next_offset = 3  # fetched to its end, acknowledged in the open transaction
    first.last_polled_timestamp_ms = 1_700_000_000_000
    progress.polled_now.append(first)
    transactions.open = True
    delivered(first, 0)
    progress.observe(states, 1_700_000_000.0)
    assert list(transactions.uncommitted) == [("orders", 0)]
    assert progress.behind(5) and not progress.behind(6) and source.asked == [("orders", 0)]
    states[("orders", 1)].stopped = True  # by the gap check: waits no more
    progress.backlog.moved[("orders", 1)] = states[("orders", 1)]
    assert not progress.behind(1)


def test_a_partition_gone_leaves_the_backlog_and_one_whose_end_is_unknown_is_asked_again():
    progress, states, _, _, _, _, source, cluster = setup(transactional=True)
    for _ in range(4):
        cluster.append("orders", 2, key=None, value=b"v")
    for state in states.values():
        progress.started(state)
    assert progress.behind(4)
    progress.backlog.keep_only({key: state for key, state in states.items() if key != ("orders", 2)})
    assert not progress.behind(1)
    ends = source.watermarks
    source.watermarks = lambda topic, partition: None if partition == 1 else ends(topic, partition)
    for _ in range(2):
        cluster.append("orders", 1, key=None, value=b"v")
    progress.started(states[("orders", 1)])
    assert not progress.behind(1)
    source.watermarks = ends
    assert progress.behind(2) and not progress.behind(3)
