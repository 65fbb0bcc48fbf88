"""`ShardedSink`: a task's remote partitions shared among producers, each partition always on the same one,
in order, through a task's slices, a failed delivery and a full queue (on replication/memory/task_io.py)."""

from __future__ import annotations

import dataclasses

import pytest

from replication.memory.task_io import MemoryCluster, MemorySink
from replication.positions import InMemoryPositionStore
from replication.sink_shards import ShardedSink
from tests.replication.test_source_task_unit import (
    REMOTE,
    TOPIC,
    contents,
    make_io,
    make_task,
    run_until_copied,
)


def record(sink, partition: int, value: bytes, reports: list) -> None:
    sink.produce(
        REMOTE,
        value=value,
        key=None,
        partition=partition,
        timestamp=0,
        headers=None,
        on_delivery=lambda error, message: reports.append((error, message.partition(), message.value())),
    )


def test_partitions_fill_each_producer_in_turn_then_share_them_round_robin_and_never_move():
    made: list[MemorySink] = []
    cluster = MemoryCluster()
    cluster.create(REMOTE, 9)

    def make() -> MemorySink:
        made.append(MemorySink(cluster))
        return made[-1]

    sink = ShardedSink(make, partitions_per_producer=2, max_producers=3)
    assert len(made) == 1  # the first producer at once, the others with their first partition
    reports: list = []
    order = [0, 1, 2, 3, 4, 5, 6, 7, 8, 0, 4, 8]
    for index, partition in enumerate(order):
        record(sink, partition, b"%d" % index, reports)
    assert len(made) == 3 and len(sink) == len(order)
    assert [sorted(made[i].produced) for i in range(3)] == [
        [(REMOTE, 0), (REMOTE, 1), (REMOTE, 6)],  # 6: the 7th partition, round robin from the first
        [(REMOTE, 2), (REMOTE, 3), (REMOTE, 7)],
        [(REMOTE, 4), (REMOTE, 5), (REMOTE, 8)],
    ]
    assert sink.route(REMOTE, 8) == made[2].produce  # the hot loop's way to the same producer
    assert sink.flush(1.0) == 0 and len(sink) == 0
    assert len(reports) == len(order) and all(error is None for error, _, _ in reports)
    assert [value for value in (m.value() for m in cluster.read(REMOTE, 0))] == [b"0", b"9"]
    assert [m.value() for m in cluster.read(REMOTE, 8)] == [b"8", b"11"]


def test_every_producer_there_is_learns_a_topic_asked_about_and_a_later_one_asks_for_itself():
    made: list[MemorySink] = []
    cluster = MemoryCluster()
    sink = ShardedSink(lambda: made.append(MemorySink(cluster)) or made[-1], partitions_per_producer=1)
    assert sink.list_topics("A.x", 5.0) is None  # the first producer's answer
    record(sink, 0, b"a", [])
    record(sink, 1, b"b", [])  # a second producer: not asked about A.x in the fetch loop
    sink.list_topics("A.y", 5.0)
    assert [m.warmed for m in made] == [["A.x", "A.y"], ["A.y"]]


def test_poll_serves_every_producers_reports_and_len_counts_them_all():
    cluster = MemoryCluster()
    cluster.create(REMOTE, 4)
    made: list[MemorySink] = []
    sink = ShardedSink(
        lambda: made.append(MemorySink(cluster, per_poll=1)) or made[-1], partitions_per_producer=1
    )
    reports: list = []
    for partition in range(4):
        record(sink, partition, b"v", reports)
    assert len(made) == 4 and len(sink) == 4
    assert sink.poll(0.1) == 4  # one from each producer (each serves one a poll)
    assert len(sink) == 0 and len(reports) == 4


def test_a_bad_setting_is_refused():
    with pytest.raises(ValueError, match="1 or more"):
        ShardedSink(lambda: MemorySink(MemoryCluster()), partitions_per_producer=0)


def sharded(io, **settings):
    """`io`'s task_io with each sink sharded over memory sinks (`settings`: ShardedSink's)."""
    task_io = io.task_io

    def sharded_task_io(**kwargs):
        plain = task_io(**kwargs)
        return dataclasses.replace(plain, sink=lambda: ShardedSink(plain.sink, **settings))

    io.task_io = sharded_task_io
    return io


def test_a_task_copies_every_partition_in_order_through_several_producers():
    io, store = (
        sharded(make_io(partitions=7, records=60), partitions_per_producer=2, max_producers=3),
        (InMemoryPositionStore()),
    )
    task = make_task(io, store, partitions=7)
    run_until_copied(task, io, partitions=7)
    for partition in range(7):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)
    sink = task._delivery.sink
    assert isinstance(sink, ShardedSink) and len(sink.producers) == 3
    assert all(producer.reports for producer in sink.producers)  # each wrote and reported some


def test_a_full_producer_is_waited_on_and_nothing_is_lost_or_reordered():
    io = sharded(make_io(partitions=4, records=200), partitions_per_producer=2)
    for _ in range(2):  # the sinks the sharded sink makes first: queues of 5 records
        io.sinks.append(MemorySink(io.target_cluster, capacity=5, per_poll=2))
    task = make_task(io, InMemoryPositionStore(), partitions=4, per_partition=50)
    run_until_copied(task, io, partitions=4, slices=400)
    assert sum(sink.buffer_errors for sink in io.made) > 0
    for partition in range(4):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)


def test_a_failed_delivery_on_one_producer_restarts_the_partitions_on_a_new_sharded_sink():
    io = sharded(make_io(partitions=4, records=30), partitions_per_producer=2)
    io.sinks.append(MemorySink(io.target_cluster))
    io.sinks.append(MemorySink(io.target_cluster, fail_at={(REMOTE, 2): 10}))  # the second producer's
    task = make_task(io, InMemoryPositionStore(), partitions=4)
    first = task._delivery.sink
    results = run_until_copied(task, io, partitions=4)
    errors = [error for result in results for error in result.errors]
    assert [error.partition for error in errors] == [(TOPIC, 2)], errors
    assert task._delivery.sink is not first  # replaced whole, as one producer is
    for partition in (0, 1, 3):
        assert contents(io.target_cluster, REMOTE, partition) == contents(io.source_cluster, TOPIC, partition)
    # at_least_once: partition 2 again from its oldest record not acknowledged (1), to its end
    copied, source = contents(io.target_cluster, REMOTE, 2), contents(io.source_cluster, TOPIC, 2)
    assert copied[0] == source[0] and copied[-(len(source) - 1) :] == source[1:]
