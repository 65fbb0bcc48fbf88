"""`PartitionStarter` without a task, on the in-memory clients: partitions start at their stored position
or the earliest offset, in one read each for all of them; exactly_once resumes after the last source
offset the remote partition holds and re-derives the offset syncs a crash prevented; a remote partition
the target does not know yet is waited for, without an error, for `wait_s`."""

from __future__ import annotations

import dataclasses

from replication.config import FlowConfig
from replication.formats import OffsetSync
from replication.memory.task_io import MemoryEmitter, MemoryIO, MemoryReader
from replication.mirroring import SOURCE_OFFSET_HEADER
from replication.partition_state import Acknowledgements
from replication.positions import InMemoryPositionStore, PositionWriter
from replication.starting import PartitionStarter
from replication.task_io import Readers

FLOW = FlowConfig(source="A", target="B", topics=("orders",))
REMOTE_TOPICS = {("orders", 0): "A.orders", ("orders", 1): "A.orders"}


class CountingReader(MemoryReader):
    def __init__(self, cluster, calls: list) -> None:
        super().__init__(cluster)
        self.calls = calls

    def watermarks_all(self, keys):
        self.calls.append(("watermarks_all", list(keys)))
        return super().watermarks_all(keys)

    def tails(self, keys):
        self.calls.append(("tails", list(keys)))
        return super().tails(keys)


def starter_on(io: MemoryIO, store: InMemoryPositionStore, calls: list, now: list) -> PartitionStarter:
    task_io = dataclasses.replace(
        io.task_io(),
        source_reader=lambda: CountingReader(io.source_cluster, calls),
        target_reader=lambda: CountingReader(io.target_cluster, calls),
    )
    acks = Acknowledgements()
    positions = PositionWriter(flow=FLOW.name, store=store, offset_syncs=MemoryEmitter, acks=acks)
    return PartitionStarter(
        flow=FLOW,
        positions=positions,
        acks=acks,
        readers=Readers(task_io),
        wait_s=30.0,
        clock=lambda: now[0],
        label="flow A->B task 0",
    )


def test_partitions_start_at_their_stored_position_or_the_earliest_offset_in_one_read():
    io, store, calls = MemoryIO(), InMemoryPositionStore(), []
    io.source_cluster.create("orders", 2)
    io.source_cluster.delete_before("orders", 1, 4)
    store.save(flow=FLOW.name, positions={("orders", 0): 7})
    states, failures = starter_on(io, store, calls, [0.0]).from_positions(REMOTE_TOPICS, {})
    assert failures == {} and {key: state.next_offset for key, state in states.items()} == {
        ("orders", 0): 7,
        ("orders", 1): 4,
    }
    assert calls == [("watermarks_all", [("orders", 1)])]  # only the one never replicated


def test_exactly_once_resumes_after_what_the_remote_partition_holds_and_re_derives_its_syncs():
    io, store, calls = MemoryIO(), InMemoryPositionStore(), []
    io.source_cluster.create("orders", 2)
    io.target_cluster.create("A.orders", 1)  # partition 1 is not created on the target yet
    for upstream in range(5):  # written before a crash; the position stored was 2
        header = [(SOURCE_OFFSET_HEADER, upstream.to_bytes(8, "big"))]
        io.target_cluster.append("A.orders", 0, key=None, value=b"v", headers=header)
    store.save(flow=FLOW.name, positions={("orders", 0): 2, ("orders", 1): 0})
    now = [100.0]
    starter = starter_on(io, store, calls, now)
    states, _ = starter.from_positions(REMOTE_TOPICS, {})
    assert starter.from_target(states, REMOTE_TOPICS) == {}  # partition 1 waits: no error
    assert list(states) == [("orders", 0)] and states[("orders", 0)].next_offset == 5
    assert states[("orders", 0)].syncs.drain(now=100.0) == [OffsetSync("orders", 0, 2, 2)]
    assert calls.count(("tails", [("A.orders", 0), ("A.orders", 1)])) == 1  # one read for both
    assert starter.awaiting_remote == {("orders", 1): 100.0}
    now[0] += 30.0  # waited long enough: now its start is an error
    states, _ = starter.from_positions(REMOTE_TOPICS, {})
    failures = starter.from_target(states, REMOTE_TOPICS)
    assert list(failures) == [("orders", 1)] and failures[("orders", 1)].unknown_partition
