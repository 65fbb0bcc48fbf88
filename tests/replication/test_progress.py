"""`Progress` without a task: a fetch's partitions and the acknowledged ones are routed to the positions to
write, the metrics to report and the gap check, each once, without walking every partition; with a
transaction open, latency waits for the commit; the caught-up check asks only unconfirmed partitions."""

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
