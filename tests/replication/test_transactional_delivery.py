"""exactly_once in transactions asks the sink for one delivery report per run (a partition's records of
one fetched batch), not per record, and the commit places the rest (`PartitionState.run_reporter`,
`deliver_committed`), on in-memory clients: the copy, its positions and its offset syncs are the same as
with a report per record, and a transaction whose commit fails (a record in it failed) moves no position."""

from __future__ import annotations

import logging
import time

import pytest

from replication.config import DeliveryGuarantee
from replication.memory.task_io import MemoryTransactionalSink, MemoryTransactionError
from replication.mirroring import source_offset_of, source_offsets
from replication.partition_state import Acknowledgements
from replication.positions import InMemoryPositionStore
from replication.source import SliceErrorKind, TaskFenced
from replication.task_io import TransactionFailure
from tests.replication.states import partition_state
from tests.replication.test_source_task_unit import REMOTE, TOPIC, make_io, make_task, run_until_copied

EOS = DeliveryGuarantee.EXACTLY_ONCE


def copied_in_order(io, partitions: int = 3) -> bool:
    """Each target partition holds its source partition's values, each once, with their source offsets."""
    return all(
        _offsets_and_values(io.target_cluster.read(REMOTE, partition))
        == [(r.offset(), r.value()) for r in io.source_cluster.read(TOPIC, partition)]
        for partition in range(partitions)
    )


def _offsets_and_values(records) -> list:
    return list(
        zip(source_offsets([r.headers() for r in records]), [r.value() for r in records], strict=True)
    )


class ReportsWithTheCommit(MemoryTransactionalSink):
    """Serves no report before a commit: every report of a transaction comes with its commit."""

    committing = False

    def poll(self, timeout: float = 0) -> int:
        return super().poll(timeout) if self.committing else 0

    def commit_transaction(self, timeout: float) -> None:
        self.committing = True
        try:
            super().commit_transaction(timeout)
        finally:
            self.committing = False


def copy(*, transactional: bool, per_partition: int, sink: type[MemoryTransactionalSink] | None = None):
    io, store = make_io(records=100), InMemoryPositionStore()
    if sink is not None:
        io.sinks.append(sink(io.target_cluster))
    task = make_task(io, store, guarantee=EOS, per_partition=per_partition, transactional=transactional)
    results = run_until_copied(task, io)
    task.close()
    return io, store, task, results


def test_one_report_per_run_copies_positions_and_syncs_as_a_report_per_record_does():
    io, store, task, results = copy(transactional=True, per_partition=7)
    plain_io, plain_store, plain_task, _ = copy(transactional=False, per_partition=7)
    keys = [(TOPIC, p) for p in range(3)]
    assert copied_in_order(io)
    assert store.load(flow=task.flow.name, partitions=keys) == {key: 100 for key in keys}
    assert sum(result.records for result in results) == 300
    assert io.emitter.emitted == plain_io.emitter.emitted  # the same MM2 offset syncs, record for record
    reports = sum(sink.reports for sink in io.made)
    assert sum(sink.reports for sink in plain_io.made) == 300
    assert reports == 3 * 15  # one per run of 7 records (15 runs of each partition's 100)
    assert all(isinstance(sink, MemoryTransactionalSink) for sink in io.made)
    snapshot = task.metrics.snapshot()
    assert sum(p.record_count for p in snapshot) == 300 and sum(p.byte_count for p in snapshot) == sum(
        p.byte_count for p in plain_task.metrics.snapshot()
    )


def test_in_transactions_only_the_first_and_last_record_of_each_run_carry_the_source_offset():
    io, *_ = copy(transactional=True, per_partition=7)
    plain_io, *_ = copy(transactional=False, per_partition=7)
    for partition in range(3):
        records = io.target_cluster.read(REMOTE, partition)
        marked = [source_offset_of(r.headers()) for r in records if source_offset_of(r.headers()) is not None]
        # Runs of 7 over 100 records: 14 of 7 and one of 2, each marked on its first and last record.
        assert marked == sorted({*range(0, 100, 7), *range(6, 100, 7), 99})
        assert source_offsets([r.headers() for r in records]) == list(range(100))
        plain = plain_io.target_cluster.read(REMOTE, partition)  # gapless without transactions: every record
        assert [source_offset_of(r.headers()) for r in plain] == list(range(100))


class SlowAndSmall(MemoryTransactionalSink):
    """Holds 3 records at most and serves one report per poll, each poll taking 5 ms: the sink is full
    in the middle of every batch for longer than the persist cadence."""

    def __init__(self, cluster) -> None:
        super().__init__(cluster, capacity=3, per_poll=1)

    def poll(self, timeout: float = 0) -> int:
        time.sleep(0.005)
        return super().poll(timeout)


def test_a_sink_full_in_the_middle_of_a_batch_never_commits_the_transaction_there():
    io, store, task, results = copy(transactional=True, per_partition=7, sink=SlowAndSmall)
    assert io.made[0].buffer_errors > 100 and not [error for result in results for error in result.errors]
    assert len(io.made) == 1  # no restart: nothing was produced outside a transaction
    assert copied_in_order(io)
    assert io.made[0].calls == ["init", "begin", "commit"]  # one batch (1.5 s), so one transaction


def test_a_record_the_sink_refuses_for_its_size_leaves_a_committed_tail_a_restart_resumes_from_exactly():
    io, store = make_io(records=20), InMemoryPositionStore()
    io.record_limit_bytes = 64
    io.source_cluster.append(TOPIC, 1, key=b"big", value=b"x" * 100)  # offset 20: refused, too large
    for i in range(21, 30):
        io.source_cluster.append(TOPIC, 1, key=b"k%d" % i, value=b"p1-v%d" % i)
    task = make_task(io, store, guarantee=EOS, transactional=True, per_partition=50)
    errors = [error for _ in range(3) for error in task.run_slice(max_seconds=1).errors]
    task.close()
    assert SliceErrorKind.PRODUCE in {error.kind for error in errors}, errors
    written = io.target_cluster.read(REMOTE, 1)
    # Committed without the refused record: its run (0..29 fetched at once) ends on 19, with its header.
    assert [source_offset_of(r.headers()) for r in written][-1] == 19
    assert source_offsets([r.headers() for r in written]) == list(range(20))
    # The position write after that commit lost (a crash): the restart resumes from the tail, not from 5.
    store.save(flow=task.flow.name, positions={(TOPIC, 1): 5})
    again = make_task(io, store, guarantee=EOS, transactional=True, per_partition=50)
    again.run_slice(max_seconds=1)
    again.close()
    assert source_offsets([r.headers() for r in io.target_cluster.read(REMOTE, 1)]) == list(range(20))


def test_reports_that_come_with_the_commit_belong_to_the_transaction_it_committed():
    io, store, task, _ = copy(transactional=True, per_partition=7, sink=ReportsWithTheCommit)
    plain_io, *_ = copy(transactional=False, per_partition=7)
    keys = [(TOPIC, p) for p in range(3)]
    assert isinstance(io.made[0], ReportsWithTheCommit) and io.made[0].reports > 0
    assert copied_in_order(io)
    assert store.load(flow=task.flow.name, partitions=keys) == {key: 100 for key in keys}
    assert io.emitter.emitted == plain_io.emitter.emitted
    assert sum(p.record_count for p in task.metrics.snapshot()) == 300


def test_a_failed_record_fails_its_transaction_whose_records_move_no_position():
    io, store = make_io(records=50), InMemoryPositionStore()
    io.sinks.append(MemoryTransactionalSink(io.target_cluster, fail_at={(REMOTE, 1): 20}))
    task = make_task(io, store, guarantee=EOS, transactional=True)
    result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    assert SliceErrorKind.TRANSACTION in {error.kind for error in result.errors}, result.errors
    assert io.made[0].calls[-1] == "abort"
    keys = [(TOPIC, p) for p in range(3)]
    # Every record was fetched and sent in one transaction: nothing of it is a position.
    assert store.load(flow=task.flow.name, partitions=keys) == {}
    assert sum(p.record_count for p in task.metrics.snapshot()) == 0
    run_until_copied(task, io)  # restarted from what the target holds, on a fresh producer
    assert copied_in_order(io)
    assert store.load(flow=task.flow.name, partitions=keys) == {key: 50 for key in keys}


def test_a_run_report_places_every_record_sent_before_it_and_the_commit_the_rest():
    state = partition_state(0, acks=Acknowledgements())
    sent = []
    for offset in (10, 11, 12, 15, 16):  # an upstream skip at 13-14 (markers, compaction)
        reporter = state.run_reporter() if offset in (10, 15) else None
        state.in_flight.append(offset)
        state.sent_bytes += 3
        sent.append(reporter)
    sent[0](None, report_at(100))  # the first run's report (its first record) at target 100
    sent[3](None, report_at(103))  # the report of offset 15 (the second run's first record) at target 103
    state.acks.settle()
    assert list(state.in_flight) == [16] and state.acked_records == 4 and state.acked_downstream == 103
    state.deliver_committed()
    assert not state.in_flight and state.acked_records == 5 and state.acked_bytes == 15
    syncs = [(sync.upstream_offset, sync.downstream_offset) for sync in state.syncs.drain(now=0, final=True)]
    assert syncs == [(10, 100), (15, 103), (16, 104)]  # the skip, then the closing progress sync


def report_at(offset: int):
    """A delivery report's message: acknowledged at target `offset`."""
    return type("Report", (), {"offset": lambda self: offset, "timestamp": lambda self: (1, 0)})()


def test_records_between_two_run_reports_with_another_writers_between_them_are_placed_never_above_their_place():
    """Another writer's record landed at 101 inside the first run: 11 and 12 are really at 102 and 103,
    15 at 104. Placed after the last acknowledged (101, 102: a translated consumer re-reads one record),
    never before the report (102, 103 would be right here only by luck, and past the truth if the other
    writer's records were after them)."""
    state = partition_state(0, acks=Acknowledgements())
    sent = []
    for offset in (10, 11, 12, 15):
        sent.append(state.run_reporter() if offset in (10, 15) else None)
        state.in_flight.append(offset)
        state.sent_bytes += 3
    sent[0](None, report_at(100))
    sent[3](None, report_at(104))
    state.acks.settle()
    assert not state.in_flight and state.acked_records == 4 and state.acked_downstream == 104
    syncs = [(sync.upstream_offset, sync.downstream_offset) for sync in state.syncs.drain(now=0, final=True)]
    truth = {10: 100, 11: 102, 12: 103, 15: 104}
    assert syncs and all(downstream <= truth[upstream] for upstream, downstream in syncs), syncs
    assert (15, 104) in syncs


class WithAnotherWriter(MemoryTransactionalSink):
    """Another producer writes to the remote partition 0 too: one record of its own before every third
    of the task's records there."""

    written = 0

    def _write(self, key, record):
        if key == (REMOTE, 0):
            self.written += 1
            if self.written % 3 == 0:
                self.cluster.append(REMOTE, 0, key=b"other", value=b"other", headers=None, timestamp_ms=1)
        return super()._write(key, record)


def test_with_another_writer_on_a_remote_partition_no_offset_sync_is_above_its_records_place():
    io, store, task, _ = copy(transactional=True, per_partition=7, sink=WithAnotherWriter)
    where = {}
    for partition in range(3):
        ours = [record for record in io.target_cluster.read(REMOTE, partition) if record.key() != b"other"]
        for record, upstream in zip(ours, source_offsets([r.headers() for r in ours]), strict=True):
            where[partition, upstream] = record.offset()
    assert len(where) == 300 and isinstance(io.made[0], WithAnotherWriter)
    syncs = [(s.partition, s.upstream_offset, s.downstream_offset) for s in io.emitter.emitted]
    above = [(p, up, down, where[p, up]) for p, up, down in syncs if down > where[p, up]]
    assert syncs and not above
    exact = [(p, up, down) for p, up, down in syncs if p != 0]
    assert all(down == where[p, up] for p, up, down in exact)  # one writer: every sync exact


class FencedMidTransaction(MemoryTransactionalSink):
    """Fenced by a newer producer of its transactional id after `after` records, as librdkafka's: its
    next produce() raises a fatal error that does not say why ("Local: Fatal error"), and the fencing
    itself comes with the next poll or flush (the error report already queued)."""

    def __init__(self, cluster, *, after: int) -> None:
        super().__init__(cluster)
        self.fenced_after, self.accepted, self.fenced = after, 0, False

    def produce(self, *args, **kwargs) -> None:
        if self.accepted >= self.fenced_after:
            self.fenced = True
            raise MemoryTransactionError(TransactionFailure.FATAL)
        self.accepted += 1
        super().produce(*args, **kwargs)

    def poll(self, timeout: float = 0) -> int:
        if self.fenced:
            raise MemoryTransactionError(TransactionFailure.FENCED)
        return super().poll(timeout)

    def flush(self, timeout: float = 0) -> int:
        if self.fenced:
            raise MemoryTransactionError(TransactionFailure.FENCED)
        return super().flush(timeout)


def test_a_record_refused_by_a_fenced_producer_fences_the_task_not_its_partition(caplog):
    """The demo's exactly_once flows, 30 s in (a new assignment generation fences the running tasks): a
    record the fenced producer refused was logged as that partition's produce ERROR before the task saw
    the fencing. The fencing is what the task reports, once, and no partition failed at a record."""
    io, store = make_io(records=50), InMemoryPositionStore()
    io.sinks.append(FencedMidTransaction(io.target_cluster, after=20))
    task = make_task(io, store, guarantee=EOS, transactional=True)
    with caplog.at_level(logging.WARNING, logger="replication.source"):
        result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    kinds = [error.kind for error in result.errors]
    assert SliceErrorKind.FENCED in kinds and SliceErrorKind.PRODUCE not in kinds, result.errors
    assert not [r.getMessage() for r in caplog.records if "producing" in r.getMessage()]
    with pytest.raises(TaskFenced):
        task.run_slice(max_seconds=0.1)  # it never writes again
    keys = [(TOPIC, p) for p in range(3)]
    assert store.load(flow=task.flow.name, partitions=keys) == {}  # nothing of the transaction persisted
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="replication.source"):
        task.close()  # the worker closes it: what that repeats of the fencing is no new ERROR
    closing = [r for r in caplog.records if "closed with errors" in r.getMessage()]
    assert closing and all(r.levelno == logging.WARNING for r in closing), closing


@pytest.mark.parametrize("reassigned", [False, True])
def test_a_commit_refused_with_an_unknown_error_after_the_task_was_reassigned_is_the_hand_over(
    reassigned, caplog
):
    """The demo's exactly_once flows at a new assignment generation: Kafka 4.1.1's coordinator answered the old
    task's EndTxn, racing the new one's InitProducerId, with an unknown server error instead of fencing it, and
    the task logged an ERROR (a broker fault to whoever reads it). A failed commit is asked whether the
    task's assignment is still the flow's: superseded, it stops as the hand-over (a warning), its
    transaction aborted; still its own, the partitions restart from what is committed (an error), as
    before."""
    io, store = make_io(records=50), InMemoryPositionStore()
    sink = MemoryTransactionalSink(io.target_cluster)
    sink.failing["commit"] = [TransactionFailure.ABORT]  # what the coordinator answered, once
    io.sinks.append(sink)
    reason = "its assignment (generation 3) was replaced by generation 4"

    def superseded() -> str | None:  # the new generation came while the commit was in flight
        return reason if reassigned and "commit" in sink.calls else None

    task = make_task(io, store, guarantee=EOS, transactional=True, superseded=superseded)
    with caplog.at_level(logging.WARNING, logger="replication"):
        result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    kinds = [error.kind for error in result.errors]
    assert kinds == ([SliceErrorKind.SUPERSEDED] if reassigned else [SliceErrorKind.TRANSACTION]), (
        result.errors
    )
    assert "abort" in sink.calls and store.load(flow=task.flow.name, partitions=[(TOPIC, 0)]) == {}
    levels = {r.levelno for r in caplog.records if "committing the transaction" in r.getMessage()}
    assert levels == ({logging.WARNING} if reassigned else {logging.ERROR}), caplog.records
    if reassigned:
        assert reason in result.errors[0].message
        with pytest.raises(TaskFenced):
            task.run_slice(max_seconds=0.1)  # it never writes again
