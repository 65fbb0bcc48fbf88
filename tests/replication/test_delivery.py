"""`Delivery` and the acknowledgements of `PartitionState`, without a task: a fetched batch is produced in
order per partition, positions move only by acknowledged prefixes, a full sink waits for room, a refused
record or a failed delivery fails its partition there, skipped records move the position without a send,
and a record waiting for its schema holds its partition (on replication/memory/task_io.py)."""

from __future__ import annotations

import dataclasses
import time

import pytest

from replication.delivery import Delivery, ProduceFailed
from replication.memory.task_io import MemoryIO, MemorySink
from replication.mirroring import SKIP
from replication.partition_state import Acknowledgements, PartitionState
from replication.schema_hold import SchemaHold
from replication.slices import SliceErrorKind
from replication.task_io import SchemaWait
from tests.replication.states import partition_state
from tests.replication.test_source_task_unit import REMOTE, TOPIC, make_io


class Run:
    """A Delivery on `io`'s clients, with a state per partition starting at offset 0."""

    def __init__(
        self,
        io: MemoryIO,
        *,
        partitions: int = 2,
        rewrite=None,
        schema_ids=None,
        batch_reports_within_s: float | None = None,
        partition_only_refusals: bool = True,
    ) -> None:
        """One report per record unless `batch_reports_within_s` (at_least_once on a gapless sink); every
        refusal raised unless `partition_only_refusals` (`TaskIO.refusal_partition_only`)."""
        task_io = io.task_io(batch_reports_within_s=batch_reports_within_s)
        if not partition_only_refusals:
            task_io = dataclasses.replace(task_io, refusal_partition_only=None)
        self.hold = SchemaHold(clock=lambda: 100.0, label="flow A->B task 0")
        self.delivery = Delivery(
            io=task_io, rewrite=rewrite, schema_ids=schema_ids, hold=self.hold, label="flow A->B task 0"
        )
        self.states = {(TOPIC, p): partition_state(p, acks=self.delivery.acks) for p in range(partitions)}
        self.source = task_io.source
        self.source.assign({key: 0 for key in self.states})
        self.polled: list[PartitionState] = []
        self.fetch_errors: list = []
        self.waits = 0

    def send(self, *, room_after_waits: int = 10**9) -> bool:
        def wait_for_room() -> bool:
            self.waits += 1
            return self.waits < room_after_waits

        return self.delivery.send(
            self.source.fetch(first_wait_s=0, max_records=1_000),
            states=self.states,
            polled=self.polled,
            on_fetch_error=self.fetch_errors.append,
            wait_for_room=wait_for_room,
        )

    def state(self, partition: int) -> PartitionState:
        return self.states[(TOPIC, partition)]


def test_a_batch_is_produced_in_order_and_positions_move_by_acknowledged_prefixes():
    io = make_io(partitions=2, records=5)
    sink = MemorySink(io.target_cluster)
    sink.hold = {(REMOTE, 1)}  # partition 1's reports do not come yet
    io.sinks.append(sink)
    run = Run(io)
    assert run.send()
    assert run.polled == [run.state(0), run.state(1)]  # once each, in the order the fetch had them
    assert [run.state(p).next_offset for p in (0, 1)] == [5, 5]
    assert [run.state(p).position for p in (0, 1)] == [0, 0]  # nothing acknowledged yet
    run.delivery.serve(1.0)
    assert len(run.delivery) == 5 and run.delivery.acks.records == 5
    assert [run.state(p).position for p in (0, 1)] == [5, 0]
    assert [r.value() for r in io.target_cluster.read(REMOTE, 0)] == [b"p0-v%d" % i for i in range(5)]
    assert run.delivery.acks.take_touched() == [run.state(0)]  # each partition once, however many reports
    sink.hold = set()
    run.delivery.serve(1.0)
    assert run.delivery.acks.take_touched() == [run.state(1)] and run.state(1).position == 5
    assert run.delivery.acks.take_touched() == []


def test_a_full_sink_is_served_between_tries_and_the_batch_ends_when_told():
    io = make_io(partitions=1, records=10)
    io.sinks.append(MemorySink(io.target_cluster, capacity=3, per_poll=1))
    run = Run(io, partitions=1)
    assert not run.send(room_after_waits=2)
    assert run.waits == 2 and run.delivery.sink.buffer_errors == 2
    state = run.state(0)
    # The record that met the full queue was not sent: the position and the next offset stay before it.
    assert state.next_offset == 4 and list(state.in_flight) == [2, 3] and state.position == 2


def test_at_least_once_asks_one_report_per_partition_per_batch_and_it_places_the_records_before_it():
    io = make_io(partitions=2, records=5)
    sink = MemorySink(io.target_cluster)
    io.sinks.append(sink)
    run = Run(io, batch_reports_within_s=60.0)
    assert run.send()
    run.delivery.serve(1.0)
    # Each partition's last record of the batch, and its very first (it places where they go on the target).
    assert sink.reports == 4
    assert [run.state(p).position for p in (0, 1)] == [5, 5] and run.delivery.acks.records == 10
    sizes = sum(len(r) for p in (0, 1) for r in io.source_cluster.read(TOPIC, p))
    assert run.delivery.acks.bytes == sizes == sum(run.state(p).acked_bytes for p in (0, 1))
    for p in (0, 1):
        for i in range(5, 9):
            io.source_cluster.append(
                TOPIC, p, key=None, value=b"p%d-v%d" % (p, i), headers=None, timestamp_ms=1
            )
    assert run.send()
    run.delivery.serve(1.0)
    assert sink.reports == 6 and [run.state(p).position for p in (0, 1)] == [9, 9]
    assert [r.value() for r in io.target_cluster.read(REMOTE, 1)] == [b"p1-v%d" % i for i in range(9)]


def test_a_late_batch_report_fails_its_partition_where_nothing_is_acknowledged_then_each_record_reports():
    """A report that came later than the producer's message.timeout.ms allows cannot vouch for the
    records before it (one of them may have timed out, the next written): the partition restarts from
    its oldest record not acknowledged, and the task's records ask one report each from then on."""
    io = make_io(partitions=2, records=5)
    sink = MemorySink(io.target_cluster)
    io.sinks.append(sink)
    run = Run(io, batch_reports_within_s=0.0)  # every report is late
    assert run.send()
    run.delivery.serve(1.0)
    errors = run.delivery.failures(run.states)
    assert sorted(e.partition for e in errors) == [(TOPIC, 0), (TOPIC, 1)]
    assert all("offset 0 " in e.message and "after the batch was sent" in e.message for e in errors)
    assert [run.state(p).position for p in (0, 1)] == [0, 0]
    io.source_cluster.append(TOPIC, 0, key=b"k", value=b"late", headers=None, timestamp_ms=1)
    fresh = {(TOPIC, 0): partition_state(0, acks=run.delivery.acks, start=5)}
    reports = sink.reports
    run.source.assign({(TOPIC, 0): 5})
    run.states = fresh
    assert run.send()
    run.delivery.serve(1.0)
    assert sink.reports == reports + 1 and fresh[(TOPIC, 0)].position == 6  # its own report, on time


def _sent_with_reports_held() -> tuple:
    """Two partitions' batch of 5 records each sent, one report per partition per batch trusted within
    60 s, every report held back by the sink: (io, sink, run, the clock when they were sent)."""
    io = make_io(partitions=2, records=5)
    sink = MemorySink(io.target_cluster)
    sink.hold = {(REMOTE, 0), (REMOTE, 1)}
    io.sinks.append(sink)
    run = Run(io, batch_reports_within_s=60.0)
    assert run.send()
    return io, sink, run, time.monotonic()


def test_batch_reports_still_in_flight_when_reports_turn_per_record_place_their_records_first(monkeypatch):
    """A late report turns the task's reports per record while another partition's batch reports are still
    in flight (a broker creating thousands of partitions answers some after 100 s): that partition's
    reports settle together, the batch reports placing the records before them, then one record each. On
    5,000 partitions this mix once failed the slice (`zip() argument 2 is longer`): every partition
    restarted from its stored position."""
    io, sink, run, now = _sent_with_reports_held()
    sink.hold = {(REMOTE, 1)}
    with monkeypatch.context() as late:  # partition 0's report comes 100 s after its batch was sent
        late.setattr(time, "monotonic", lambda: now + 100.0)
        run.delivery.serve(1.0)
    assert run.state(0).failed_at == 0 and run.state(1).position == 0
    for i in range(5, 9):
        io.source_cluster.append(TOPIC, 1, key=None, value=b"p1-v%d" % i, headers=None, timestamp_ms=1)
    reports = sink.reports
    assert run.send()  # partition 1's new records: one report each now
    sink.hold = set()
    run.delivery.serve(1.0)
    assert sink.reports == reports + 2 + 4  # its batch's two (its first record, its last), then four
    state = run.state(1)
    assert state.failed_at is None and state.position == 9 and state.acked_records == 9
    assert run.delivery.acks.records == 9 and state.acked_downstream == 8
    sizes = sum(len(r) for r in io.source_cluster.read(TOPIC, 1))
    assert state.acked_bytes == sizes
    assert [r.value() for r in io.target_cluster.read(REMOTE, 1)] == [b"p1-v%d" % i for i in range(9)]


def test_a_partition_whose_batch_report_came_late_places_none_of_the_reports_after_it(monkeypatch):
    """Its records sent since, one report each, follow a record that may have timed out: it restarts
    from its oldest record in flight and counts nothing of what came after (no acknowledgement, no offset
    sync placed on a guess)."""
    io, sink, run, now = _sent_with_reports_held()
    sink.hold = {(REMOTE, 1)}
    with monkeypatch.context() as late:
        late.setattr(time, "monotonic", lambda: now + 100.0)
        run.delivery.serve(1.0)  # partition 0's: reports turn per record
        for i in range(5, 9):
            io.source_cluster.append(TOPIC, 1, key=None, value=b"p1-v%d" % i, headers=None, timestamp_ms=1)
        assert run.send()
        sink.hold = set()
        run.delivery.serve(1.0)  # partition 1's batch report, late too, then its four
    state = run.state(1)
    assert state.failed_at == 0 and state.position == 0
    assert state.acked_records == 0 and run.delivery.acks.records == 0
    assert state.syncs.drain(now=0.0, final=True) == []


def test_a_failure_after_the_failed_record_is_no_news_and_leaves_a_restarted_state_listed():
    """A partition restarted alone leaves its old records in flight on the same sink: the failure of one
    sent after the old state's failed record is not listed again, so it cannot take the place of the new
    state's own failure in `acks.failed` (the new state would never restart, its position frozen)."""
    acks = Acknowledgements()
    old = partition_state(0, acks=acks)
    old.in_flight.extend(range(5, 9))
    old.fail(5, "its batch report came late")
    assert old.restartable and acks.take_failed() == {(TOPIC, 0): old}
    new = partition_state(0, acks=acks, start=5)
    new.in_flight.append(5)
    new.fail(5, "unknown partition")
    old.fail(7, "unknown partition")  # a report of the old records, after the restart
    assert acks.take_failed() == {(TOPIC, 0): new} and old.failed_at == 5
    old.fail(3, "earlier")  # an earlier record failing moves it: listed again
    assert acks.take_failed() == {(TOPIC, 0): old}


def test_a_partition_failed_where_records_before_it_are_in_flight_stays_before_them():
    """One report per record, a record refused when sent: those sent before it are still in flight. A
    position written at the refused record would lose them to a crash if their delivery then failed."""
    state = partition_state(0)
    state.in_flight.extend(range(0, 3))
    state.next_offset = 3
    assert not state.restartable
    state.fail(3, "record too large")
    assert state.position == 0 and not state.restartable
    state.in_flight.clear()  # their reports came
    assert state.position == 3 and state.restartable


def test_a_record_refused_after_records_that_asked_no_report_fails_its_partition_at_the_oldest():
    """One report per partition per batch: the records sent before the refused one asked for none, and the
    batch's last record, whose report would have vouched for them, is not sent. Their timeout would go
    unheard: the partition fails at its oldest record in flight, and every record asks for its own report
    from then on, so the refused record then fails alone."""
    io = make_io(partitions=2, records=5)
    sink = MemorySink(io.target_cluster, refuse={(REMOTE, 0): 2})
    io.sinks.append(sink)
    run = Run(io, batch_reports_within_s=60.0)
    assert run.send()
    (refused,) = run.delivery.take_refused()
    assert refused.offset == 2 and run.state(0).failed_at == 0 and run.state(0).restartable
    run.delivery.serve(1.0)
    assert run.state(1).position == 5
    fresh = partition_state(0, acks=run.delivery.acks)
    run.states[(TOPIC, 0)] = fresh
    run.source.assign({(TOPIC, 0): 0})
    sink.refuse[(REMOTE, 0)] = sink.produced[(REMOTE, 0)] + 2  # record 2 refused again
    assert run.send()
    (again,) = run.delivery.take_refused()
    assert again.offset == 2 and fresh.failed_at == 2 and not fresh.restartable  # 0 and 1 in flight
    run.delivery.serve(1.0)
    assert fresh.position == 2 and fresh.restartable and fresh.acked_records == 2


def test_a_record_the_sink_refuses_fails_its_partition_at_that_record_and_the_batch_goes_on():
    """A refusal of the record alone (too large): its partition sends nothing more until it restarts, the
    other partitions' records of the batch are sent (`Delivery.take_refused` hands the refusal over)."""
    io = make_io(partitions=2, records=5)
    io.sinks.append(MemorySink(io.target_cluster, refuse={(REMOTE, 0): 2}))
    run = Run(io)
    assert run.send()
    (refused,) = run.delivery.take_refused()
    assert refused.offset == 2 and refused.state is run.state(0)
    assert "producing orders[0] offset 2: record too large" in str(refused)
    assert run.state(0).failed_at == 2 and (TOPIC, 0) in run.delivery.acks.failed
    assert [run.state(p).next_offset for p in (0, 1)] == [2, 5]
    io.source_cluster.append(TOPIC, 0, key=b"k", value=b"later", headers=None, timestamp_ms=1)
    assert run.send()  # a later batch: the failed partition's records are not sent either
    run.delivery.serve(1.0)
    assert [len(io.target_cluster.read(REMOTE, p)) for p in (0, 1)] == [2, 5]
    assert run.state(0).position == 2 and run.delivery.take_refused() == []


def test_a_refusal_in_a_transaction_fails_it_whole():
    io = make_io(partitions=2, records=5)
    io.sinks.append(MemorySink(io.target_cluster, refuse={(REMOTE, 0): 2}))
    run = Run(io, partition_only_refusals=False)  # as a transactional sink's
    with pytest.raises(ProduceFailed) as refused:
        run.send()
    assert refused.value.offset == 2 and run.state(0).failed_at == 2


def test_a_failed_delivery_is_one_delivery_error_and_the_position_stays_before_it():
    io = make_io(partitions=2, records=5)
    io.sinks.append(MemorySink(io.target_cluster, fail_at={(REMOTE, 1): 3}))
    run = Run(io)
    assert run.send()
    run.delivery.serve(1.0)
    (error,) = run.delivery.failures(run.states)
    assert error.kind is SliceErrorKind.DELIVERY and error.partition == (TOPIC, 1)
    assert "orders[1] offset 3 to A.orders failed" in error.message
    assert run.state(1).position == 3 and run.state(0).position == 5
    assert run.delivery.failures(run.states) == []  # reported once
    assert run.delivery.failures({}) == []


def test_records_the_header_rule_skips_move_the_position_without_a_send():
    io = make_io(partitions=1, records=6)
    run = Run(io, partitions=1, rewrite=lambda headers, offset: SKIP if offset % 2 else headers)
    assert run.send()
    run.delivery.serve(1.0)
    assert [r.value() for r in io.target_cluster.read(REMOTE, 0)] == [b"p0-v0", b"p0-v2", b"p0-v4"]
    assert run.state(0).skipped == 3 and run.state(0).position == 6


class WaitsFor:
    """A schema rewriter whose registries lack the schema of one payload."""

    def __init__(self, missing: bytes) -> None:
        self.missing = missing

    def rewrite(self, payload: bytes | None) -> bytes | None:
        if payload == self.missing:
            raise SchemaWait(7, "not on the target registry yet")
        return payload


def test_a_record_waiting_for_its_schema_holds_its_partition_and_the_others_go_on():
    io = make_io(partitions=2, records=5)
    run = Run(io, schema_ids=WaitsFor(b"p0-v2"))
    assert run.send()
    run.delivery.serve(1.0)
    held, other = run.state(0), run.state(1)
    assert held.position == held.next_offset == 2 and held.held[0] == 2  # nothing after it sent
    assert run.hold.held == {(TOPIC, 0): held} and run.hold.reseek == {(TOPIC, 0)}
    assert other.position == 5
    run.source.assign({(TOPIC, 0): 2, (TOPIC, 1): 5})
    assert run.send() and held.next_offset == 2  # still held this slice: its records are not sent
