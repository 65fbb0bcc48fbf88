"""exactly_once in Kafka transactions on Apache Kafka (`exactly.once.transactions`, the default): a zombie
task is fenced by the task that took over, what it left uncommitted is aborted, and a read_committed
reader of the remote topic sees every source record exactly once, in order; `Transactions` alone on real
producers."""

from __future__ import annotations

import dataclasses
import os
import signal
import threading
import time
from collections.abc import Sequence

import pytest
from confluent_kafka import KafkaError, KafkaException

from harness.runtime import wait_until
from replication import transactions
from replication.config import DeliveryGuarantee, FlowConfig
from replication.kafka.clients import make_producer
from replication.kafka.source_io import (
    PartitionReader,
    kafka_task_io,
    mirror_producer,
    transaction_failure,
    transactional_id,
)
from replication.metrics import MirrorMetrics
from replication.mirroring import source_offsets
from replication.partition_state import Acknowledgements
from replication.policy import DefaultReplicationPolicy
from replication.positions import InMemoryPositionStore
from replication.runner import SLICE_SECONDS
from replication.source import MirrorSourceTask, SliceErrorKind, SliceResult, TaskFenced
from replication.task_io import TransactionFailure
from replication.task_metrics import TaskMetrics
from replication.transactions import TransactionFailed, Transactions
from tests.replication.test_source_task import (
    create_topics,
    make_task,
    produce_backlog,
    read_offset_syncs,
    read_partition,
    run_until,
    translate,
)

pytestmark = pytest.mark.kafka

PARTITIONS = 2
RECORDS = 8_000  # over about 4 s: the zombie is caught mid-stream, with a transaction open
EOS = DeliveryGuarantee.EXACTLY_ONCE


class Traffic(threading.Thread):
    """Writes RECORDS records to the source topic, about 2,000 per second, round-robin over partitions."""

    def __init__(self, cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic = cluster, topic

    def run(self) -> None:
        producer = make_producer(self.cluster)
        for index in range(RECORDS):
            producer.produce(self.topic, value=b"v%d" % index, partition=index % PARTITIONS)
            if index % 200 == 199:
                producer.poll(0)
                time.sleep(0.1)
        assert producer.flush(30) == 0


def open_transaction_on(
    cluster, topic: str, partitions: int = PARTITIONS, *, among: Sequence[int] | None = None
) -> bool:
    """Some partition (of `among`, default all) holds records of a transaction not committed yet: its
    high watermark is past its last stable offset."""
    keys = [(topic, partition) for partition in (range(partitions) if among is None else among)]
    uncommitted = PartitionReader(cluster, timeout_s=5)
    committed = PartitionReader(cluster, timeout_s=5, read_committed=True)
    try:
        high, _ = uncommitted.watermarks_all(keys)
        stable, _ = committed.watermarks_all(keys)
    finally:
        uncommitted.close()
        committed.close()
    return any(high[key][1] > stable[key][1] for key in keys if key in high and key in stable)


def freeze_in_a_transaction(
    pid: int, cluster, topic: str, partitions: int = PARTITIONS, *, among: Sequence[int] | None = None
) -> None:
    """SIGSTOP the only process writing `topic` while it holds a transaction open there (on a partition
    of `among`). The transaction may commit between a check and the freeze, so it is checked frozen; the
    caller sends SIGCONT."""
    while True:
        wait_until(
            lambda: open_transaction_on(cluster, topic, partitions, among=among),
            timeout_s=30,
            what="a transaction",
        )
        os.kill(pid, signal.SIGSTOP)
        if open_transaction_on(cluster, topic, partitions, among=among):
            return
        os.kill(pid, signal.SIGCONT)


def test_a_zombie_task_is_fenced_and_read_committed_readers_see_each_record_once(
    cluster_a, cluster_b, unique_name
):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topics(cluster_a, [topic], PARTITIONS)
    create_topics(cluster_b, [remote], PARTITIONS)
    keys = [(topic, partition) for partition in range(PARTITIONS)]
    store = InMemoryPositionStore()  # shared by both, as the Kafka position store is between workers
    traffic = Traffic(cluster_a, topic)

    zombie = make_task(cluster_a, cluster_b, [topic], store=store, delivery_guarantee=EOS)
    zombie.assign(keys)
    # Started (its transactions initialised) before the traffic's 4 s begin: a zombie that took longer
    # to start on a loaded machine read the whole stream in its first slices and had nothing left to
    # freeze on (once in CI: "the zombie never had a transaction to commit").
    zombie.run_slice(max_seconds=0.3)
    traffic.start()
    run_until(zombie, lambda: zombie.run_slice(max_seconds=0.3).records > 0, timeout_s=30)
    # The zombie's worker freezes mid-slice, with records of a transaction written and not committed yet
    # (as SIGSTOP does in tests/workers/test_takeover.py; a zombie that went on replicating could be
    # between two transactions when it is fenced, with nothing left to abort); its lease expires and
    # another worker starts the same task.
    freezing, thaw = threading.Event(), threading.Event()
    commit = zombie._transactions.commit

    def freeze_then_commit():
        freezing.set()
        thaw.wait(60)
        return commit()

    zombie._transactions.commit = freeze_then_commit
    outcome: dict[str, SliceResult] = {}
    frozen = threading.Thread(target=lambda: outcome.update(result=zombie.run_slice(max_seconds=60)))
    frozen.start()
    assert freezing.wait(30), "the zombie never had a transaction to commit"
    deadline = time.monotonic() + 30
    while not open_transaction_on(cluster_b, remote):
        assert time.monotonic() < deadline, "the zombie's open transaction never reached the broker"
    successor = make_task(cluster_a, cluster_b, [topic], store=store, delivery_guarantee=EOS)
    successor.assign(keys)
    successor.run_slice(max_seconds=0.3)  # its producer's init_transactions fences the zombie's
    thaw.set()  # the zombie wakes and commits

    frozen.join(60)
    assert not frozen.is_alive()
    fenced = [error for error in outcome["result"].errors if error.kind == SliceErrorKind.FENCED]
    assert fenced, outcome["result"].errors
    assert "another worker runs this task now" in str(fenced[0])
    with pytest.raises(TaskFenced):
        zombie.run_slice(max_seconds=0.1)  # it never writes again
    zombie.close()

    traffic.join(60)
    ends = {key: RECORDS // PARTITIONS for key in keys}
    run_until(
        successor,
        lambda: all(successor.run_slice(max_seconds=0.3).positions.get(k, -1) >= e for k, e in ends.items()),
    )
    successor.close()
    aborted = 0
    syncs = read_offset_syncs(cluster_a, topic)
    for partition in range(PARTITIONS):
        committed = read_partition(cluster_b, remote, partition, isolation="read_committed")
        assert source_offsets([m.headers() for m in committed]) == list(range(RECORDS // PARTITIONS))
        # Offsets stay exact across the commit markers and the zombie's aborted records.
        mine = sorted((s for s in syncs if s.partition == partition), key=lambda s: s.upstream_offset)
        upstreams = source_offsets([m.headers() for m in committed])
        wrong = [
            (upstream, m.offset(), translate(mine, upstream))
            for m, upstream in zip(committed, upstreams, strict=True)
            if translate(mine, upstream) != m.offset()
        ]
        assert not wrong, (
            f"partition {partition}: (source, target, translated) {wrong[:5]}; syncs {mine[:20]}"
        )
        assert [m.value() for m in committed] == [
            b"v%d" % index for index in range(partition, RECORDS, PARTITIONS)
        ]
        aborted += len(read_partition(cluster_b, remote, partition)) - len(committed)
    # The zombie's open transaction was aborted, not committed: its records are physically there, and a
    # read_committed reader never sees them.
    assert aborted > 0


def test_each_task_of_a_flow_has_its_own_transactional_id():
    flow = FlowConfig(source="A", target="B", delivery_guarantee=EOS)
    assert transactional_id(flow, 0) == "mirrorplane-A->B-0"
    assert transactional_id(flow, 0) != transactional_id(flow, 1)


class _CommitFailsOnce:
    """The task's real transactional producer, whose next commit fails once with an abortable error (as
    a commit that times out on the coordinator does): the task then aborts the transaction for real."""

    def __init__(self, sink) -> None:
        self._sink, self.failed = sink, False

    def __getattr__(self, name):
        return getattr(self._sink, name)

    def __len__(self) -> int:  # records in flight, as the producer's own
        return len(self._sink)

    def commit_transaction(self, *args):
        if not self.failed:
            self.failed = True
            raise KafkaException(
                KafkaError(KafkaError._FAIL, "commit failed (forced by the test)", txn_requires_abort=True)
            )
        return self._sink.commit_transaction(*args)


def test_records_of_an_aborted_transaction_are_counted_apart_never_as_replicated(
    cluster_a, cluster_b, unique_name
):
    """Issue 36 item 5: the replicated counters (record_count, byte_count, the latency histogram) count
    what commits included; an aborted transaction's records are their own counter (aborted_count)."""
    topic, remote = unique_name, f"A.{unique_name}"
    create_topics(cluster_a, [topic], PARTITIONS)
    create_topics(cluster_b, [remote], PARTITIONS)
    producer = make_producer(cluster_a)

    def produce(indexes: range) -> None:
        for index in indexes:
            producer.produce(topic, value=b"v%d" % index, partition=index % PARTITIONS)
        assert producer.flush(30) == 0

    keys = [(topic, partition) for partition in range(PARTITIONS)]
    metrics = MirrorMetrics()
    task = make_task(cluster_a, cluster_b, [topic], metrics=metrics, delivery_guarantee=EOS)
    task.assign(keys)
    produce(range(400))
    run_until(task, lambda: all(task.run_slice(max_seconds=0.3).positions.get(k, -1) >= 200 for k in keys))
    task._delivery.sink = failing = _CommitFailsOnce(task._delivery.sink)  # the next commit fails
    produce(range(400, 2_000))
    errors = []
    run_until(task, lambda: errors.extend(task.run_slice(max_seconds=0.3).errors) or failing.failed)
    assert any(e.kind == SliceErrorKind.TRANSACTION for e in errors), errors
    run_until(task, lambda: all(task.run_slice(max_seconds=0.3).positions.get(k, -1) >= 1_000 for k in keys))
    task.close()

    snapshot = metrics.snapshot()
    committed = sum(
        len(read_partition(cluster_b, remote, p, isolation="read_committed")) for p in range(PARTITIONS)
    )
    written = sum(len(read_partition(cluster_b, remote, p)) for p in range(PARTITIONS))
    assert committed == 2_000
    assert sum(p.record_count for p in snapshot) == 2_000  # each record once, the aborted ones not
    assert sum(sum(p.latency_counts) for p in snapshot) == 2_000
    aborted = sum(p.aborted_count for p in snapshot)
    assert aborted > 0 and aborted <= written - committed  # the rest of what is there: commit markers


def test_transactions_alone_on_kafka_a_second_init_fences_the_first_whose_commit_then_says_fenced(
    cluster_b, unique_name
):
    """`Transactions` without a task, on two real transactional producers of the same task: the second's
    init fences the first, whose commit then fails as FENCED (`transaction_failure` reads librdkafka's
    flags); what the first wrote is never visible to a read_committed reader."""
    remote = f"A.{unique_name}"
    create_topics(cluster_b, [remote], 1)
    flow = FlowConfig(source="A", target="B", topics=(unique_name,), delivery_guarantee=EOS)
    producers = [mirror_producer(flow, cluster_b, task_index=0) for _ in range(2)]
    reporter = TaskMetrics(metrics=MirrorMetrics(), source=None, transactional=True)
    zombie, successor = (
        Transactions(
            sink=lambda producer=producer: producer,
            failure=transaction_failure,
            timeout_s=30.0,
            metrics=reporter,
            flow=flow,
            task_index=0,
            acks=Acknowledgements(),
            clock=time.monotonic,
        )
        for producer in producers
    )
    assert zombie.initialise(superseded=lambda: None) is None
    zombie.begin()
    producers[0].produce(remote, value=b"written by the zombie", partition=0)
    producers[0].flush(30)
    assert successor.initialise(superseded=lambda: None) is None  # fences the zombie's producer
    with pytest.raises(TransactionFailed) as failed:
        zombie.commit()
    assert failed.value.failure is TransactionFailure.FENCED
    error = zombie.fail(failed.value, superseded=None, running=1, now=time.time())
    assert error.kind is SliceErrorKind.FENCED
    successor.begin()
    producers[1].produce(remote, value=b"written by the successor", partition=0)
    successor.commit()
    committed = read_partition(cluster_b, remote, 0, isolation="read_committed")
    assert [m.value() for m in committed] == [b"written by the successor"]


def test_a_commit_failing_after_the_task_was_superseded_is_the_hand_over_and_is_aborted(
    cluster_b, unique_name
):
    """Kafka's coordinator can answer the old assignment's EndTxn, racing the new one's InitProducerId, with
    UNKNOWN_SERVER_ERROR rather than fencing it (seen with 4.1.1 during a designed hand-over): a failed
    transaction of a task whose assignment is not the flow's any more is the hand-over (SUPERSEDED, logged
    as a warning), not a broker error, and its transaction is still aborted, so read_committed readers move
    on at once. The same failure without a new assignment restarts the partitions (TRANSACTION)."""
    remote = f"A.{unique_name}"
    create_topics(cluster_b, [remote], 1)
    flow = FlowConfig(source="A", target="B", topics=(unique_name,), delivery_guarantee=EOS)
    reporter = TaskMetrics(metrics=MirrorMetrics(), source=None, transactional=True)
    unknown = KafkaException(KafkaError(KafkaError.UNKNOWN, "Unknown broker error"))
    kinds = {}
    for index, superseded in enumerate((None, "the flow's tasks were assigned again (generation 2)")):
        producer = mirror_producer(flow, cluster_b, task_index=index)
        task = Transactions(
            sink=lambda producer=producer: producer,
            failure=transaction_failure,
            timeout_s=30.0,
            metrics=reporter,
            flow=flow,
            task_index=index,
            acks=Acknowledgements(),
            clock=time.monotonic,
        )
        assert task.initialise(superseded=lambda: None) is None
        task.begin()
        producer.produce(remote, value=f"aborted {index}".encode(), partition=0)
        producer.flush(30)
        failed = TransactionFailed("committing the transaction", unknown, TransactionFailure.ABORT)
        error = task.fail(failed, superseded=superseded, running=1, now=time.time())
        kinds[superseded is not None] = error.kind
        if superseded:
            assert superseded in error.message and "Unknown broker error" in error.message
    assert kinds == {False: SliceErrorKind.TRANSACTION, True: SliceErrorKind.SUPERSEDED}
    # Both aborted: a read_committed reader sees nothing of them and is not held at their first offset.
    done = mirror_producer(flow, cluster_b, task_index=9)
    done.init_transactions(30)
    done.begin_transaction()
    done.produce(remote, value=b"committed", partition=0)
    done.commit_transaction(30)
    committed = read_partition(cluster_b, remote, 0, isolation="read_committed")
    assert [m.value() for m in committed] == [b"committed"]


class CountingCommits:
    """A Kafka transactional producer whose commits are counted (each one a transaction of the task)."""

    def __init__(self, producer) -> None:
        self._producer, self.commits = producer, 0

    def __getattr__(self, name: str):
        return getattr(self._producer, name)

    def __len__(self) -> int:
        return len(self._producer)

    def commit_transaction(self, timeout: float) -> None:
        self.commits += 1
        self._producer.commit_transaction(timeout)


def test_a_backlog_is_committed_in_fewer_transactions_than_one_per_persist_cadence_each_record_once(
    cluster_a, cluster_b, unique_name, monkeypatch
):
    """Before `TransactionSpan`, a transaction committed at every persist cadence: once `PERSIST_RECORDS`
    more records were acknowledged (a check after each fetch of up to `CONSUME_BATCH` and the reports of
    up to `MAX_IN_FLIGHT` records: 30,000 records at most, 7 commits of this backlog at the least; 12
    measured), or 0.2 s passed, and at each slice end. Spans here are bounded in records only (no time
    bound). The first grows to its cap (16 cadences: 160,000 records, and what is in flight then) while
    every running partition's backlog stays behind it; the 30,000-40,000 records left take one or two
    more (a span commits once less than it holds waits unfetched, and how much was fetched ahead
    varies), a slice end in that tail can add one: 2-3 in 14 runs, 2-5 while only the partitions
    acknowledged in the open transaction counted as its backlog."""
    monkeypatch.setattr(transactions, "PERSIST_INTERVAL_S", 3600.0)
    topic, remote, per_partition = unique_name, f"A.{unique_name}", 100_000
    create_topics(cluster_a, [topic], PARTITIONS)
    create_topics(cluster_b, [remote], PARTITIONS)
    produce_backlog(cluster_a, topic, records=per_partition * PARTITIONS, partitions=PARTITIONS)
    flow = FlowConfig(source="A", target="B", topics=(topic,), delivery_guarantee=EOS)
    policy = DefaultReplicationPolicy(known_aliases=["A", "B"])
    io = kafka_task_io(flow, source=cluster_a, target=cluster_b, policy=policy, task_index=0)
    sinks: list[CountingCommits] = []

    def counted() -> CountingCommits:
        sinks.append(CountingCommits(io.sink()))
        return sinks[-1]

    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=InMemoryPositionStore(),
        io=dataclasses.replace(io, sink=counted),
    )
    task.assign([(topic, partition) for partition in range(PARTITIONS)])
    copied = 0
    deadline = time.monotonic() + 120
    while copied < per_partition * PARTITIONS:  # as dedicated mode runs it
        assert time.monotonic() < deadline, f"{copied} records copied"
        copied += task.run_slice(max_seconds=SLICE_SECONDS, settle=False, return_when_caught_up=True).records
    task.close()
    commits = sum(sink.commits for sink in sinks)
    assert 2 <= commits <= 4, commits  # the cadence's rule: 7 at the least
    for partition in range(PARTITIONS):
        committed = read_partition(cluster_b, remote, partition, isolation="read_committed")
        assert source_offsets([m.headers() for m in committed]) == list(range(per_partition))
