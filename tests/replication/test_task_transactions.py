"""`Transactions` without a task, on an in-memory transactional sink (replication/memory/task_io.py):
init once per sink and never for a superseded task, commits retried on timeouts, what a failure means
(abort and restart, or fenced), and the counters: records count once a commit included them, an aborted
transaction's records are counted apart. tests/replication/test_transactions.py runs them on Kafka."""

from __future__ import annotations

import pytest

from replication.config import DeliveryGuarantee, FlowConfig
from replication.memory.task_io import (
    MemoryCluster,
    MemorySource,
    MemoryTransactionalSink,
    MemoryTransactionError,
    memory_transaction_failure,
)
from replication.metrics import MirrorMetrics
from replication.partition_state import Acknowledgements, PartitionState
from replication.positions import PERSIST_INTERVAL_S
from replication.slices import SliceErrorKind
from replication.task_io import TransactionFailure
from replication.task_metrics import TaskMetrics
from replication.transactions import TransactionFailed, Transactions
from tests.replication.states import partition_state

FLOW = FlowConfig(
    source="A", target="B", topics=("orders",), delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE
)


class Setup:
    def __init__(self) -> None:
        self.cluster = MemoryCluster()
        self.sinks = [MemoryTransactionalSink(self.cluster)]
        self.metrics = MirrorMetrics()
        self.acks = Acknowledgements()
        self.now = 1_000.0  # the task's clock, moved by the test
        self.transactions = Transactions(
            sink=lambda: self.sinks[-1],
            failure=memory_transaction_failure,
            timeout_s=0.5,
            metrics=TaskMetrics(metrics=self.metrics, source=MemorySource(self.cluster), transactional=True),
            flow=FLOW,
            task_index=3,
            acks=self.acks,
            clock=lambda: self.now,
        )

    @property
    def sink(self) -> MemoryTransactionalSink:
        return self.sinks[-1]

    def acknowledged(self, partition: int, records: int, *, size: int = 10) -> PartitionState:
        """A partition whose `records` records were acknowledged in the open transaction."""
        state = partition_state(partition, acks=self.acks)
        state.acked_records, state.acked_bytes = records, records * size
        assert self.transactions.acknowledged(state)
        return state


def test_init_runs_once_per_sink_and_never_for_a_superseded_task():
    setup = Setup()
    assert setup.transactions.initialise(superseded=lambda: None) is None and setup.transactions.ready
    setup.sinks.append(MemoryTransactionalSink(setup.cluster))  # a fresh producer: not initialised
    assert not setup.transactions.ready
    error = setup.transactions.initialise(superseded=lambda: "generation 4 replaced generation 3")
    assert error.kind is SliceErrorKind.SUPERSEDED and "generation 4 replaced generation 3" in error.message
    assert setup.sink.calls == [] and not setup.transactions.ready  # it never fenced anyone


def test_a_fencing_begun_during_init_stops_the_task_before_it_writes():
    setup = Setup()
    answers = iter([None, "the flow's partitions were assigned anew"])
    error = setup.transactions.initialise(superseded=lambda: next(answers))
    assert error.kind is SliceErrorKind.SUPERSEDED and setup.sink.calls == ["init"]
    assert not setup.transactions.ready


@pytest.mark.parametrize(
    ("failure", "keep_sink"), [(TransactionFailure.RETRY, True), (TransactionFailure.FATAL, False)]
)
def test_an_init_that_fails_is_a_start_error_naming_the_acl_and_says_whether_the_sink_may_retry(
    failure, keep_sink
):
    setup = Setup()
    setup.sink.failing["init"] = [failure]
    error = setup.transactions.initialise(superseded=lambda: None)
    assert error.kind is SliceErrorKind.START and "flow A->B task 3" not in error.message
    assert "initialising the transactions of A->B task 3 on B failed" in error.message
    assert "TransactionalId mirrorplane-*" in error.message
    assert setup.transactions.ready_to_retry is keep_sink and not setup.transactions.ready


def test_a_commit_that_times_out_is_retried_and_then_what_it_held_counts_as_replicated():
    setup = Setup()
    setup.transactions.begin()
    state = setup.acknowledged(0, 5)
    setup.sink.failing["commit"] = [TransactionFailure.RETRY, TransactionFailure.RETRY]
    setup.transactions.commit()
    assert setup.sink.calls == ["begin", "commit", "commit", "commit"] and not setup.transactions.open
    assert setup.transactions.committed([state]) == {("orders", 0): state}
    assert (state.committed_records, state.committed_bytes) == (5, 50)
    assert setup.transactions.committed([state]) == {}  # latency observed once per commit


def test_a_commit_that_fails_says_what_the_failure_means():
    setup = Setup()
    setup.transactions.begin()
    setup.sink.failing["commit"] = [TransactionFailure.ABORT]
    with pytest.raises(TransactionFailed) as failed:
        setup.transactions.commit()
    assert (
        failed.value.failure is TransactionFailure.ABORT
        and failed.value.doing == "committing the transaction"
    )
    assert setup.sink.calls == ["begin", "commit"]


def test_an_aborted_transaction_is_aborted_and_its_records_are_counted_apart_never_as_replicated():
    setup = Setup()
    setup.transactions.begin()
    state = setup.acknowledged(0, 5)
    setup.transactions.commit()
    setup.transactions.committed([state])
    setup.transactions.begin()
    state.acked_records, state.acked_bytes = 12, 120  # 7 more in the transaction that fails
    assert setup.transactions.acknowledged(state)
    failed = TransactionFailed(
        "committing the transaction", Exception("coordinator moved"), TransactionFailure.ABORT
    )
    error = setup.transactions.fail(failed, superseded=None, running=2, now=100.0)
    assert error.kind is SliceErrorKind.TRANSACTION and "2 partition(s) restart" in error.message
    assert setup.sink.calls[-1] == "abort" and not setup.transactions.open
    assert (state.acked_records, state.acked_bytes) == (5, 50)  # back to what commits included
    (partition,) = setup.metrics.snapshot(now=100.0)
    assert partition.aborted_count == 7 and partition.record_count == 0


@pytest.mark.parametrize(
    ("superseded", "kind"), [(None, SliceErrorKind.FENCED), ("reassigned", SliceErrorKind.SUPERSEDED)]
)
def test_a_fenced_task_stops_for_good_and_aborts_nothing_itself(superseded, kind):
    setup = Setup()
    setup.transactions.begin()
    setup.acknowledged(0, 3)
    failed = setup.transactions.failed("replicating", MemoryTransactionError(TransactionFailure.FENCED))
    assert failed.failure is TransactionFailure.FENCED
    error = setup.transactions.fail(failed, superseded=superseded, running=1, now=100.0)
    assert error.kind is kind and "this one stops writing" in error.message
    assert (superseded or "another worker runs this task now") in error.message
    assert "abort" not in setup.sink.calls  # the producer that fenced it aborts what it left open
    assert sum(p.aborted_count for p in setup.metrics.snapshot(now=100.0)) == 3


def test_the_open_transactions_age_is_read_from_the_tasks_clock():
    """`goes_on` measures the open transaction's age on the task's clock (as its other collaborators do):
    a transaction that grew past the cadence with a backlog behind it goes on within its grown bounds,
    and commits once that clock passes them with no backlog left."""
    setup = Setup()
    setup.transactions.begin()
    setup.acks.records, setup.acks.bytes = 1, 10  # a record acknowledged in it (none: it goes on)
    assert setup.transactions.goes_on(lambda records: True)  # a backlog: its bounds double
    setup.now += PERSIST_INTERVAL_S * 1.5
    assert setup.transactions.goes_on(lambda records: False)  # within the doubled time bound
    setup.now += PERSIST_INTERVAL_S  # 2.5 cadences old: past it
    assert not setup.transactions.goes_on(lambda records: False)
