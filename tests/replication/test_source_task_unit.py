"""MirrorSourceTask's runtime on in-memory clients (replication/memory/task_io.py), no broker: order,
acknowledgements out of order across partitions, a delivery failure freezing the position, backpressure,
exactly_once resume after a crash, data loss, and the typed errors of a slice. The MM2 decisions it runs
(replication.mirroring) are tested as pure functions at the end."""

from __future__ import annotations

import itertools
import logging
import math
import time

import pytest

from replication.config import DataLossPolicy, DeliveryGuarantee, FlowConfig
from replication.fetch_stall import FetchStalls
from replication.formats import OffsetSync
from replication.memory.task_io import MemoryIO, MemorySink
from replication.metrics import MirrorMetrics
from replication.mirroring import (
    SKIP,
    DataLoss,
    gap_event,
    gap_suspected,
    header_rewriter,
    reread_start,
    resume_point,
    source_offset_of,
    source_offsets,
    waits_for_remote_partition,
)
from replication.offset_sync_store import OffsetSyncStore
from replication.partition_state import Acknowledgements, PartitionState
from replication.policy import replication_policy_for
from replication.positions import InMemoryPositionStore
from replication.source import MirrorSourceTask, SliceErrorKind
from replication.task_io import Tail

TOPIC, REMOTE = "orders", "A.orders"


def make_io(partitions: int = 3, records: int = 50) -> MemoryIO:
    io = MemoryIO()
    io.source_cluster.create(TOPIC, partitions)
    io.target_cluster.create(REMOTE, partitions)
    for partition in range(partitions):
        for i in range(records):
            io.source_cluster.append(
                TOPIC,
                partition,
                key=b"k%d" % i,
                value=b"p%d-v%d" % (partition, i),
                headers=[("trace", b"%d" % i)] if i % 3 == 0 else None,
                timestamp_ms=1_600_000_000_000 + i,
            )
    return io


def make_task(
    io: MemoryIO,
    store: InMemoryPositionStore,
    *,
    partitions: int = 3,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
    data_loss: DataLossPolicy = DataLossPolicy.STOP,
    per_partition: int = 7,
    remote_wait_s: float = 30.0,
    clock=time.time,
    transactional: bool = False,
    batch_reports_within_s: float | None = math.inf,
    metrics: MirrorMetrics | None = None,
    superseded=lambda: None,
) -> MirrorSourceTask:
    flow = FlowConfig(
        source="A",
        target="B",
        enabled=True,
        topics=(TOPIC,),
        delivery_guarantee=guarantee,
        data_loss_policy=data_loss,
    )
    task = MirrorSourceTask(
        flow=flow,
        policy=replication_policy_for(flow, known_aliases=("A", "B")),
        task_index=0,
        position_store=store,
        io=io.task_io(
            per_partition=per_partition,
            transactional=transactional,
            batch_reports_within_s=batch_reports_within_s,
        ),
        gap_confirm_s=0.0,
        remote_partition_wait_s=remote_wait_s,
        clock=clock,
        metrics=metrics,
        superseded=superseded,
    )
    task.assign([(TOPIC, p) for p in range(partitions)])
    return task


def run_until_copied(task: MirrorSourceTask, io: MemoryIO, *, partitions: int = 3, slices: int = 50) -> list:
    results = []
    for _ in range(slices):
        results.append(task.run_slice(max_seconds=5, return_when_caught_up=True))
        positions = results[-1].positions
        if all(
            positions.get((TOPIC, p)) == io.source_cluster.partitions[(TOPIC, p)].end
            for p in range(partitions)
        ):
            return results
    raise AssertionError(f"not copied after {slices} slices: {results[-1]}")


def contents(cluster, topic: str, partition: int) -> list[tuple]:
    return [record.content() for record in cluster.read(topic, partition)]


def test_each_partition_is_copied_record_for_record_in_order_to_the_same_partition():
    io, store = make_io(), InMemoryPositionStore()
    task = make_task(io, store)
    results = run_until_copied(task, io)
    for partition in range(3):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)
    assert sum(result.records for result in results) == 150 and all(result.ok for result in results)
    assert store.load(flow=task.flow.name, partitions=[(TOPIC, p) for p in range(3)]) == {
        (TOPIC, p): 50 for p in range(3)
    }


def test_acks_out_of_order_across_partitions_move_each_position_by_its_own_acknowledged_prefix():
    io, store = make_io(), InMemoryPositionStore()
    sink = MemorySink(io.target_cluster, per_poll=3)  # reports a few at a time, the highest partition first
    sink.hold = {(REMOTE, 0)}  # partition 0's reports do not come yet
    io.sinks.append(sink)
    ticks = itertools.count(1_700_000_000, 10)  # 10 s a reading: every moved position is due when looked at
    task = make_task(io, store, clock=lambda: float(next(ticks)))
    for _ in range(200):
        result = task.run_slice(max_seconds=0.02, settle=False)
        if result.positions.get((TOPIC, 1)) == result.positions.get((TOPIC, 2)) == 50:
            break
    assert result.positions[(TOPIC, 0)] == 0  # nothing of it acknowledged: its position stays at 0
    assert result.positions[(TOPIC, 1)] == result.positions[(TOPIC, 2)] == 50
    assert io.target_cluster.read(REMOTE, 0) == [] and len(sink) == 50
    sink.hold = set()
    assert task.settle() == []
    assert store.load(flow=task.flow.name, partitions=[(TOPIC, 0)]) == {(TOPIC, 0): 50}
    for partition in range(3):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


def test_a_delivery_failure_freezes_the_position_at_the_failed_record_and_the_partition_restarts_there():
    """One report per record (a flow whose records may be skipped or held, or after a late report)."""
    io, store = make_io(), InMemoryPositionStore()
    failing = MemorySink(io.target_cluster, fail_at={(REMOTE, 1): 20})
    io.sinks.append(failing)
    task = make_task(io, store, batch_reports_within_s=None)
    result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    (error,) = result.errors
    assert error.kind is SliceErrorKind.DELIVERY and error.partition == (TOPIC, 1)
    assert "offset 20" in str(error) and "restarts from there" in str(error)
    assert result.positions[(TOPIC, 1)] == 20  # never past a record the target did not acknowledge
    assert len(io.target_cluster.read(REMOTE, 1)) == 20
    (metrics,) = [p for p in task.metrics.snapshot() if (p.topic, p.partition) == (REMOTE, 1)]
    assert metrics.last_error == str(error)
    run_until_copied(task, io)  # restarted from offset 20 on a fresh producer
    assert len(io.made) == 2
    for partition in range(3):  # nothing lost, nothing twice
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


def test_at_least_once_a_failed_batch_report_restarts_its_partition_from_the_oldest_record_not_acknowledged():
    """One report per partition per batch: record 20 of partition 1 fails (and the rest of its batch, a
    gapless producer). The records of that batch before it were written, unreported: the partition
    restarts from its oldest record not acknowledged, so they are written again (at_least_once), and
    nothing is lost or reordered after them. The other partitions go on undisturbed."""
    io, store = make_io(), InMemoryPositionStore()
    io.sinks.append(MemorySink(io.target_cluster, fail_at={(REMOTE, 1): 20}))
    task = make_task(io, store)
    result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    (error,) = result.errors
    assert error.kind is SliceErrorKind.DELIVERY and "restarts from there" in str(error)
    restart = result.positions[(TOPIC, 1)]
    assert restart <= 20 and f"offset {restart} " in str(error)  # never past an unacknowledged record
    run_until_copied(task, io)
    source = contents(io.source_cluster, TOPIC, 1)
    copied = contents(io.target_cluster, REMOTE, 1)
    assert copied == source[:20] + source[restart:]  # written, then again from the restart: no gap
    for partition in (0, 2):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


class WarmCheckingSink(MemorySink):
    """Refuses a record for a topic it was not asked the metadata of first."""

    def produce(self, topic, **record) -> None:
        assert topic in self.warmed, f"first record to {topic} before its metadata was asked"
        super().produce(topic, **record)


def test_the_producer_learns_each_remote_topic_before_its_first_record_once_per_producer():
    io, store = make_io(), InMemoryPositionStore()
    first = WarmCheckingSink(io.target_cluster, fail_at={(REMOTE, 1): 20})
    io.sinks += [first, WarmCheckingSink(io.target_cluster)]
    task = make_task(io, store, batch_reports_within_s=None)  # the restart at 20 exactly
    run_until_copied(task, io)  # the delivery failure replaces the producer: the new one learns it too
    assert [sink.warmed for sink in io.made] == [[REMOTE], [REMOTE]]
    for partition in range(3):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


def test_a_record_the_sink_refuses_is_a_produce_error_and_is_retried_from_its_offset():
    io, store = make_io(partitions=1), InMemoryPositionStore()
    io.sinks.append(MemorySink(io.target_cluster, refuse={(REMOTE, 0): 10}))
    task = make_task(io, store, partitions=1, batch_reports_within_s=None)  # one report per record
    produce, delivery = task.run_slice(max_seconds=5).errors  # not sent: its position freezes there too
    assert (produce.kind, delivery.kind) == (SliceErrorKind.PRODUCE, SliceErrorKind.DELIVERY)
    assert produce.partition == delivery.partition == (TOPIC, 0) and "offset 10" in str(produce)
    run_until_copied(task, io, partitions=1)
    assert contents(io.target_cluster, REMOTE, 0) == contents(io.source_cluster, TOPIC, 0)


def test_a_refused_record_restarts_its_partition_alone_on_the_same_sink():
    """At 5,000 partitions one record refused as "Unknown topic" restarted every partition on a new producer
    (seconds, and a fetch of all of them again): now only its partition starts again, from that record."""
    io, store = make_io(), InMemoryPositionStore()
    io.sinks.append(MemorySink(io.target_cluster, refuse={(REMOTE, 0): 10}))
    task = make_task(io, store, batch_reports_within_s=None)  # one report per record
    first = task.run_slice(max_records=60, max_seconds=5)
    assert [e.kind for e in first.errors] == [SliceErrorKind.PRODUCE, SliceErrorKind.DELIVERY]
    others = {p: task._states[(TOPIC, p)] for p in (1, 2)}
    results = run_until_copied(task, io)
    assert len(io.made) == 1  # no new sink: the others were never restarted
    assert all(task._states[(TOPIC, p)] is state for p, state in others.items())
    assert not any(result.errors for result in results)
    for partition in range(3):  # nothing lost, nothing twice
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


class FlushCountingSink(MemorySink):
    """Counts the flushes asked of it: on Kafka each waits for every record in flight, up to its timeout."""

    flushes = 0

    def flush(self, timeout: float = 0) -> int:
        self.flushes += 1
        return super().flush(timeout)


def test_a_late_batch_report_restarts_its_partition_alone_without_waiting_for_the_others():
    """At 5,000 new partitions a target still creating them acknowledged some batches past the time a
    report vouches for the records before it: each such partition restarted every partition on a new
    producer, after a flush that waited for every record of the task in flight (41 s of a 240 s
    profile). Now it restarts alone, on the same sink, while the other partitions' records stay in flight."""
    io, store = make_io(), InMemoryPositionStore()
    sink = FlushCountingSink(io.target_cluster)
    sink.hold = {(REMOTE, 1)}  # partition 1's records stay in flight, without a report
    io.sinks.append(sink)
    task = make_task(io, store, batch_reports_within_s=0.0)  # every batch report comes too late
    first = task.run_slice(max_seconds=1, settle=False)
    assert sorted(e.partition for e in first.errors) == [(TOPIC, 0), (TOPIC, 2)]
    assert all("after the batch was sent" in e.message for e in first.errors)
    held, flushes = task._states[(TOPIC, 1)], sink.flushes
    task.run_slice(max_seconds=1, settle=False)
    assert task._source.fetched_from[-1] == {(TOPIC, 0): 0, (TOPIC, 2): 0}  # from their oldest record
    assert sink.flushes == flushes and len(io.made) == 1  # no flush, no new sink
    assert task._states[(TOPIC, 1)] is held and len(sink) == 50
    sink.hold = set()
    run_until_copied(task, io)  # partition 1's report, late too when it comes, restarts it alone
    assert len(io.made) == 1
    for partition in range(3):  # every record, the late batch twice (at_least_once)
        source = contents(io.source_cluster, TOPIC, partition)
        assert contents(io.target_cluster, REMOTE, partition) == source + source


def fetched_anew(task: MirrorSourceTask) -> list[set]:
    """The partitions each assignment of the task's source fetched from their positions again."""
    return [set(assigned) for assigned in task._source.fetched_from]


def test_partitions_that_start_later_or_again_leave_the_others_fetching_where_they_are():
    """At 5,000 partitions every start of a few more (a remote topic created later) or restart of one (a
    refused record) assigned all of them again: each fetched anew, what it had fetched ahead thrown away.
    Now only the partitions that start, start again or leave change the source's assignment."""
    io, store = make_io(), InMemoryPositionStore()
    del io.target_cluster.partitions[(REMOTE, 2)]  # partition 2 waits for its remote partition
    io.sinks.append(MemorySink(io.target_cluster, refuse={(REMOTE, 0): 10}))
    task = make_task(io, store, guarantee=DeliveryGuarantee.EXACTLY_ONCE)  # without transactions
    task.run_slice(max_records=30, max_seconds=5)  # 0 and 1 start; 0's record 10 is refused
    assert fetched_anew(task) == [{(TOPIC, 0), (TOPIC, 1)}]
    io.target_cluster.create(REMOTE, 3)
    run_until_copied(task, io)
    assert fetched_anew(task) == [{(TOPIC, 0), (TOPIC, 1)}, {(TOPIC, 0), (TOPIC, 2)}]
    assert task._source.fetched_from[1][(TOPIC, 0)] == 10  # from the refused record
    for partition in range(3):  # nothing lost, nothing twice
        values = [record.value() for record in io.target_cluster.read(REMOTE, partition)]
        assert values == [b"p%d-v%d" % (partition, i) for i in range(50)]
    task.assign([(TOPIC, 1), (TOPIC, 2)])  # partition 0 leaves: the others go on
    task.run_slice(max_seconds=1, return_when_caught_up=True)
    assert task._source.assigned == {(TOPIC, 1), (TOPIC, 2)} and len(fetched_anew(task)) == 3
    assert fetched_anew(task)[-1] == set()


def test_a_partition_the_source_passes_over_is_fetched_again_with_a_warning(caplog):
    """At 5,000 partitions on Apache Kafka one partition once gave no record for minutes, its records
    waiting on the source, the task fetching the others and saying nothing. Now the task has the source
    fetch it again after FETCH_STALL_S, with a warning naming it, and it is copied whole."""
    io, store = make_io(records=10), InMemoryPositionStore()
    now = [1_000.0]
    task = make_task(io, store, clock=lambda: now[0])
    task._source.passed_over = {(TOPIC, 1)}
    with caplog.at_level(logging.WARNING, logger="replication.fetch_stall"):
        for i in range(12):  # 12 slices 15 s apart, the other partitions fed all along
            for partition in (0, 2):
                io.source_cluster.append(
                    TOPIC, partition, key=None, value=b"more", headers=None, timestamp_ms=i
                )
            task.run_slice(max_seconds=0.2, return_when_caught_up=True)
            now[0] += 15.0
    (warning,) = [r.getMessage() for r in caplog.records]
    assert f"{TOPIC}[1]: 10 record(s) wait on the source and none was fetched for 120 s" in warning
    assert "the source's next offset for it: 0, the task's: 0" in warning
    assert fetched_anew(task)[1:] == [{(TOPIC, 1)}]  # it alone
    assert contents(io.target_cluster, REMOTE, 1) == contents(io.source_cluster, TOPIC, 1)


def test_a_passed_over_partition_reports_stall_until_a_record_of_it_is_fetched(caplog):
    """Its metrics say `stalled` (STALL on its status row) from the first warning, through a second one
    while fetching it again does not heal it, until a record of it is fetched."""
    io, store = make_io(records=10), InMemoryPositionStore()
    now = [1_000.0]
    task = make_task(io, store, clock=lambda: now[0])
    task._source.stuck = {(TOPIC, 1)}
    seen = []
    with caplog.at_level(logging.WARNING, logger="replication.fetch_stall"):
        for i in range(20):  # 20 slices 15 s apart, the other partitions fed all along
            if i == 18:
                task._source.stuck = set()
            for partition in (0, 2):
                io.source_cluster.append(
                    TOPIC, partition, key=None, value=b"more", headers=None, timestamp_ms=i
                )
            task.run_slice(max_seconds=0.2, return_when_caught_up=True)
            seen.append({p.partition for p in task.metrics.snapshot() if p.stalled})
            now[0] += 15.0
    assert len(caplog.records) == 2  # 120 s after its start, and 120 s after it was fetched again
    assert seen[:8] == [set()] * 8
    assert seen[8:18] == [{1}] * 10
    assert seen[18:] == [set()] * 2
    assert contents(io.target_cluster, REMOTE, 1) == contents(io.source_cluster, TOPIC, 1)


def test_a_stall_another_task_of_the_flow_reported_ends_when_this_one_starts_the_partition():
    """Dedicated mode's tasks of a flow share one MirrorMetrics: a task closed (a rebalance) while one of
    its partitions was STALL left it STALL for good, since only that task could clear it."""
    io, store = make_io(records=10), InMemoryPositionStore()
    now = [1_000.0]
    first = make_task(io, store, clock=lambda: now[0])
    first._source.stuck = {(TOPIC, 1)}
    for _ in range(9):  # 120 s, 15 s a slice, the other partitions fed
        for partition in (0, 2):
            io.source_cluster.append(TOPIC, partition, key=None, value=b"more", headers=None, timestamp_ms=1)
        first.run_slice(max_seconds=0.2, return_when_caught_up=True)
        now[0] += 15.0
    assert [p.partition for p in first.metrics.snapshot() if p.stalled] == [1]
    first.close()
    second = make_task(io, store, clock=lambda: now[0], metrics=first.metrics)
    second.run_slice(max_seconds=0.2, return_when_caught_up=True)
    assert [p.partition for p in second.metrics.snapshot() if p.stalled] == []
    second.close()


def stall_fixture(partitions: int) -> tuple[dict, FetchStalls]:
    """`partitions` running states with a record waiting each, and their `FetchStalls` (after 10 s)."""
    io = MemoryIO()
    io.source_cluster.create(TOPIC, partitions)
    for partition in range(partitions):
        io.source_cluster.append(TOPIC, partition, key=None, value=b"v", headers=None, timestamp_ms=1)
    source = io.task_io().source
    source.assign({(TOPIC, p): 0 for p in range(partitions)})
    states = {
        key: PartitionState(
            topic=key[0],
            partition=key[1],
            remote_topic=REMOTE,
            start=0,
            offset_lag_max=100,
            acks=Acknowledgements(),
        )
        for key in source.assigned
    }
    stalls = FetchStalls(source=source, label="t", on_stall=lambda state, stalled, now: None, after_s=10.0)
    stalls.keep_only(states, now=0.0)
    return states, stalls


def test_a_task_that_fetches_nothing_for_want_of_room_passes_over_no_partition():
    """A task whose producer has no room fetches nothing for a while: no partition is fetched again."""
    states, stalls = stall_fixture(2)
    first = states[(TOPIC, 0)]
    stalls.check(states, fetched=[first], caught_up=False, in_flight=1, now=1.0)  # first records after 1 s
    for now in range(5, 100, 5):
        stalls.check(states, fetched=[], caught_up=False, in_flight=1, now=float(now))
    assert not stalls.reseek
    stalls.check(states, fetched=[first], caught_up=True, in_flight=0, now=100.0)
    assert not stalls.reseek  # a slice that ended caught up passed over nobody
    stalls.check(states, fetched=[first], caught_up=False, in_flight=1, now=100.0)
    assert stalls.reseek == {(TOPIC, 1)}  # started at 0 s, passed over while the task fetched 0


def test_a_task_whose_partitions_all_wait_long_for_their_first_record_is_behind_not_passing_them_over():
    """At 5,000 partitions on a loaded machine every partition's first record came 100-140 s after it
    started: a task with many partitions overdue at once, or whose partitions usually wait that long, is
    behind, and none of them is fetched again (a first version fetched 2,878 of 5,000 again)."""
    states, stalls = stall_fixture(40)
    fetched = [states[(TOPIC, p)] for p in range(10)]
    stalls.check(states, fetched=fetched, caught_up=False, in_flight=1, now=130.0)  # 10 after 130 s
    assert stalls.first_fetch_s is not None and stalls.first_fetch_s >= 100
    stalls.check(states, fetched=fetched[:1], caught_up=False, in_flight=1, now=200.0)
    assert not stalls.reseek  # 200 s is under 3 x the usual wait for a first record
    stalls.check(states, fetched=fetched[:1], caught_up=False, in_flight=1, now=400.0)
    assert not stalls.reseek  # 30 of 40 overdue at once: the task is behind


def test_a_record_too_large_for_the_target_stalls_its_partition_only():
    """A record the target never takes (a value over its message.max.bytes): its partition waits on it
    with an error every slice, the others copy everything on the same sink."""
    io, store = make_io(records=20), InMemoryPositionStore()
    io.record_limit_bytes = 100
    io.source_cluster.append(
        TOPIC, 0, key=b"big", value=b"x" * 101, headers=None, timestamp_ms=1
    )  # offset 20
    io.source_cluster.append(TOPIC, 0, key=b"k", value=b"after", headers=None, timestamp_ms=2)
    for partition in (1, 2):
        for i in range(100):
            io.source_cluster.append(
                TOPIC, partition, key=b"m", value=b"v%d" % i, headers=None, timestamp_ms=3
            )
    task = make_task(io, store)  # one report per partition per batch
    results = [task.run_slice(max_seconds=0.5) for _ in range(6)]
    assert len(io.made) == 1
    assert all(any("offset 20" in e.message for e in r.errors) for r in results[1:])  # said every slice
    assert results[-1].positions == {(TOPIC, 0): 20, (TOPIC, 1): 120, (TOPIC, 2): 120}
    # Partition 0's first 20 twice: in flight without a report of their own when record 20 was refused
    # (the batch's last record would have vouched for them), it restarted from them once; every record
    # asked for its own report from then on.
    assert [len(io.target_cluster.read(REMOTE, p)) for p in range(3)] == [40, 120, 120]


def test_backpressure_a_full_sink_is_waited_on_and_nothing_is_lost_or_reordered():
    io, store = make_io(records=200), InMemoryPositionStore()
    sink = MemorySink(io.target_cluster, capacity=5, per_poll=2)
    io.sinks.append(sink)
    task = make_task(io, store, per_partition=50)
    run_until_copied(task, io)
    assert sink.buffer_errors > 0 and sink.most_pending <= 5
    for partition in range(3):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


@pytest.mark.parametrize("guarantee", [DeliveryGuarantee.EXACTLY_ONCE, DeliveryGuarantee.AT_LEAST_ONCE])
def test_resume_after_a_crash(guarantee):
    """A crash after records reached the target but before their positions (or reports) did: exactly_once
    resumes after what the target holds (no duplicate, syncs re-derived), at_least_once writes again."""
    io, store = make_io(partitions=2, records=100), InMemoryPositionStore()
    crashing = MemorySink(io.target_cluster)
    io.sinks.append(crashing)
    crashed = make_task(io, store, partitions=2, guarantee=guarantee)
    crashed.run_slice(max_records=60, max_seconds=5)  # positions persisted at 60 records in all
    crashing.hold = {(REMOTE, 0), (REMOTE, 1)}
    crashed.run_slice(max_records=80, max_seconds=5, settle=False)  # 80 more produced, not reported
    crashing.lose_reports()  # they reach the target, the task never hears of them: kill -9
    stored = store.load(flow=crashed.flow.name, partitions=[(TOPIC, 0), (TOPIC, 1)])
    assert sum(stored.values()) == 60

    resumed = make_task(io, store, partitions=2, guarantee=guarantee)
    run_until_copied(resumed, io, partitions=2)
    for partition in range(2):
        source = [record.value() for record in io.source_cluster.read(TOPIC, partition)]
        target = [record.value() for record in io.target_cluster.read(REMOTE, partition)]
        if guarantee == DeliveryGuarantee.EXACTLY_ONCE:
            assert target == source
            assert source_offsets([r.headers() for r in io.target_cluster.read(REMOTE, partition)]) == list(
                range(100)
            )
        else:
            assert len(target) > len(source) and sorted(set(target)) == sorted(source)  # duplicates, no loss
    resumed.close()  # its final progress sync makes translation exact up to the last record
    if guarantee == DeliveryGuarantee.EXACTLY_ONCE:  # over the crashed range too
        syncs = OffsetSyncStore()
        syncs.update_all(io.emitter.emitted)
        for partition in range(2):
            for upstream in range(100):
                assert syncs.translate_downstream(TOPIC, partition, upstream) == upstream


@pytest.mark.parametrize("policy", [DataLossPolicy.STOP, DataLossPolicy.SKIP])
def test_offsets_deleted_before_replication_are_a_gap_then_stopped_or_skipped(policy):
    io, store = make_io(partitions=2, records=30), InMemoryPositionStore()
    io.source_cluster.delete_before(TOPIC, 0, 10)
    store.save(flow="A->B", positions={(TOPIC, 0): 5, (TOPIC, 1): 0})
    task = make_task(io, store, partitions=2, data_loss=policy)
    results = []
    while len(results) < 200 and not (
        any(result.gap_events for result in results) and results[-1].positions.get((TOPIC, 1)) == 30
    ):
        results.append(task.run_slice(max_seconds=0.02))
    results.append(task.run_slice(max_seconds=0.02))
    (event,) = [gap for result in results for gap in result.gap_events]
    assert (event.expected_offset, event.lost_records) == (5, 5)
    if policy == DataLossPolicy.STOP:
        errors = [error for result in results for error in result.errors]
        assert [error.kind for error in errors] == [SliceErrorKind.DATA_LOSS]
        assert results[-1].stopped_partitions == ((TOPIC, 0),) and results[-1].positions[(TOPIC, 0)] == 5
        assert io.target_cluster.read(REMOTE, 0) == []
    else:
        assert event.resumed_offset == 10 and all(result.ok for result in results)
        run_until_copied(task, io, partitions=2)
        assert contents(io.target_cluster, REMOTE, 0) == contents(io.source_cluster, TOPIC, 0)
    assert len(io.target_cluster.read(REMOTE, 1)) == 30  # the other partition goes on
    # where it was: only the partition out of range is assigned anew (skip) or leaves (stop)
    stop = policy == DataLossPolicy.STOP
    assert fetched_anew(task) == [{(TOPIC, 0), (TOPIC, 1)}, set() if stop else {(TOPIC, 0)}]
    assert task._source.assigned == ({(TOPIC, 1)} if stop else {(TOPIC, 0), (TOPIC, 1)})


def test_positions_wait_for_their_offset_syncs_and_a_failed_emission_is_an_offset_sync_error():
    io, store = make_io(partitions=1, records=10), InMemoryPositionStore()
    io.emitter.failing = True
    task = make_task(io, store, partitions=1)
    result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    assert [error.kind for error in result.errors] == [SliceErrorKind.OFFSET_SYNC]
    assert result.positions == {} and store.load(flow="A->B", partitions=[(TOPIC, 0)]) == {}
    io.emitter.failing = False
    assert task.run_slice(max_seconds=5, return_when_caught_up=True).positions == {(TOPIC, 0): 10}
    assert io.emitter.emitted[0] == OffsetSync(TOPIC, 0, 0, 0)


def test_a_partition_whose_remote_partition_is_not_created_yet_waits_for_it_without_an_error(caplog):
    io, store = make_io(partitions=2, records=5), InMemoryPositionStore()
    del io.target_cluster.partitions[(REMOTE, 1)]  # in the flow's plan; the target does not know it yet
    task = make_task(io, store, partitions=2, guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    with caplog.at_level(logging.INFO, logger="replication.starting"):
        waiting = task.run_slice(max_seconds=5, return_when_caught_up=True)
    assert waiting.ok and waiting.positions == {(TOPIC, 0): 5}
    assert all(p.last_error is None for p in task.metrics.snapshot().partitions)  # none in its status
    (line,) = [r for r in caplog.records if "waiting for remote topic" in r.getMessage()]
    assert line.levelno == logging.INFO
    assert f"remote topic {REMOTE} to be created (partitions 1)" in line.getMessage()
    io.target_cluster.create(REMOTE, 2)
    started = run_until_copied(task, io, partitions=2)
    assert all(result.ok for result in started)
    assert [r.value() for r in io.target_cluster.read(REMOTE, 1)] == [b"p1-v%d" % i for i in range(5)]


@pytest.mark.parametrize("cause", ["waited too long", "target unreachable"])
def test_a_partition_that_cannot_start_is_a_start_error_and_the_others_replicate(cause):
    io, store = make_io(partitions=2, records=5), InMemoryPositionStore()
    if cause == "waited too long":
        del io.target_cluster.partitions[(REMOTE, 1)]
        task = make_task(io, store, partitions=2, guarantee=DeliveryGuarantee.EXACTLY_ONCE, remote_wait_s=0)
    else:
        task = make_task(io, store, partitions=2, guarantee=DeliveryGuarantee.EXACTLY_ONCE)
        task.assign([(TOPIC, 0)])
        assert task.run_slice(max_seconds=5, return_when_caught_up=True).ok  # partition 0 replicating
        io.target_cluster.unreachable = "connection refused"
        task.assign([(TOPIC, 0), (TOPIC, 1)])
    result = task.run_slice(max_seconds=5, return_when_caught_up=True)
    (error,) = result.errors
    assert error.kind is SliceErrorKind.START and error.partition == (TOPIC, 1)
    assert result.positions == {(TOPIC, 0): 5}


# -- the MM2 decisions (replication.mirroring) ---------------------------------------------------------


def test_header_rewrite_adds_provenance_and_the_source_offset_and_skips_what_came_from_the_target():
    assert (
        header_rewriter(provenance_enabled=False, exactly_once=False, source_alias="A", target_alias="B")
        is None
    )
    rewrite = header_rewriter(provenance_enabled=True, exactly_once=True, source_alias="A", target_alias="B")
    headers = rewrite([("h", b"1")], 42)
    assert headers[0] == ("h", b"1") and source_offset_of(headers) == 42
    looped = header_rewriter(provenance_enabled=True, exactly_once=False, source_alias="B", target_alias="A")
    assert looped(headers, 7) is SKIP  # it was on A already: mirroring it back would loop
    offset_only = header_rewriter(
        provenance_enabled=False, exactly_once=True, source_alias="A", target_alias="B"
    )
    assert offset_only([("h", b"1")], 9) == [
        ("h", b"1"),
        ("mirrorplane.source-offset", (9).to_bytes(8, "big")),
    ]
    assert offset_only(None, 9) == [("mirrorplane.source-offset", (9).to_bytes(8, "big"))]


def test_the_exactly_once_resume_point_is_after_the_last_source_offset_the_target_holds():
    def mirrored(upstream):
        return [("mirrorplane.source-offset", upstream.to_bytes(8, "big"))]

    # remote offsets 100.. hold source offsets 40..45; the position stored was 43
    written = [(100 + i, mirrored(40 + i)) for i in range(6)]
    assert reread_start(stored=43, tail=Tail(0, 106, written[-1])) == 101  # room for a marker per record
    assert resume_point(stored=43, written=written[3:]) == (46, [(43, 103), (44, 104), (45, 105)])
    assert reread_start(stored=46, tail=Tail(0, 106, written[-1])) is None  # nothing past the position
    assert reread_start(stored=0, tail=Tail(0, 0, None)) is None  # an empty remote partition
    assert reread_start(stored=0, tail=Tail(0, 1, (0, None))) is None  # a record this mirror did not write
    assert resume_point(stored=10, written=[]) == (10, [])


def test_source_offsets_places_the_records_between_two_headers_when_nothing_else_is_between():
    def marked(upstream):
        return [("h", b"1"), ("mirrorplane.source-offset", upstream.to_bytes(8, "big"))]

    # In a transaction only each run's first and last record carry the header: runs 40..43 and 47..48.
    run = [marked(40), None, [("h", b"2")], marked(43), marked(47), marked(48)]
    assert source_offsets(run) == [40, 41, 42, 43, 47, 48]
    # Another writer's record between: the count disagrees, so none of that stretch is placed.
    assert source_offsets([marked(40), None, None, None, marked(43)]) == [40, None, None, None, 43]
    # Before the first header and after the last one: not known to be ours.
    assert source_offsets([None, marked(5), None]) == [None, 5, None]
    assert source_offsets([]) == []


def test_the_resume_point_and_its_offset_syncs_with_the_header_on_run_ends_only():
    def mirrored(upstream):
        return [("mirrorplane.source-offset", upstream.to_bytes(8, "big"))]

    # Remote 100..105 hold source 40..45 as one run (headers on 40 and 45), a commit marker at 106, then
    # source 46..47 at 107..108; the position stored was 43, so the reread starts early enough to reach
    # the run's first record.
    written = [(100, mirrored(40)), *[(100 + i, None) for i in range(1, 5)], (105, mirrored(45))]
    written += [(107, mirrored(46)), (108, mirrored(47))]
    start = reread_start(stored=43, tail=Tail(0, 109, written[-1]))
    assert start == 100  # 108 - 2 x (47 - 43)
    point = resume_point(stored=43, written=[w for w in written if w[0] >= start])
    assert point == (48, [(43, 103), (44, 104), (45, 105), (46, 107), (47, 108)])


def test_data_loss_handling_stop_keeps_the_position_skip_resumes_at_the_earliest_offset():
    loss = DataLoss(130, 30, "deleted")
    stop = gap_event(loss, topic="t", partition=0, expected_offset=100, policy=DataLossPolicy.STOP, now=5.0)
    skip = gap_event(loss, topic="t", partition=0, expected_offset=100, policy=DataLossPolicy.SKIP, now=5.0)
    assert (stop.resumed_offset, skip.resumed_offset) == (100, 130) and stop.lost_records == 30
    assert (
        DataLoss(0, None, "recreated").describe("t", 3).startswith("data loss on t[3]: an unknown number of")
    )


def test_a_gap_is_suspected_from_when_the_watermarks_first_exclude_the_position():
    assert gap_suspected(watermarks=(0, 10), next_offset=10, suspect_since=None, now=1.0) is None
    assert gap_suspected(watermarks=None, next_offset=50, suspect_since=3.0, now=4.0) is None
    assert gap_suspected(watermarks=(0, 10), next_offset=50, suspect_since=None, now=4.0) == 4.0
    assert gap_suspected(watermarks=(20, 30), next_offset=10, suspect_since=3.0, now=9.0) == 3.0


def test_a_partition_waits_for_a_remote_partition_the_target_does_not_know_for_a_bounded_time_only():
    def waits(*, unknown_partition=True, waiting_since=10.0, now=10.0):
        return waits_for_remote_partition(
            unknown_partition=unknown_partition, waiting_since=waiting_since, now=now, wait_s=60.0
        )

    assert waits() and waits(now=69.9)  # just created: the target, or the client's metadata, catches up
    assert not waits(now=70.0)  # still unknown a minute on: deleted, or no leader: a start error
    assert not waits(unknown_partition=False)  # a cluster that does not answer, any other failure: at once
