"""MirrorSourceTask against two embedded clusters: content, order, renaming, backpressure, restarts,
exactly_once after an abrupt stop, exact offset syncs across a gap, provenance."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, TopicPartition

from harness.runtime import READ_TO_END, READ_TO_END_POLL_S
from replication.config import ClusterConfig, DeliveryGuarantee, FlowConfig, OffsetSyncsTopicLocation
from replication.connector import NewRemoteTopic
from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_admin, make_consumer, make_producer
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import PartitionReader, delivery_to_unknown_partition, kafka_task_io
from replication.metrics import MirrorMetrics
from replication.mirroring import SOURCE_OFFSET_HEADER, source_offset_of, source_offsets
from replication.policy import PROVENANCE_HEADER, DefaultReplicationPolicy
from replication.positions import InMemoryPositionStore
from replication.sink_shards import PARTITIONS_PER_PRODUCER
from replication.slices import SliceErrorKind
from replication.source import MirrorSourceTask, SliceResult

pytestmark = pytest.mark.kafka

Record = tuple[bytes | None, bytes | None, list | None, int]  # key, value, headers, timestamp ms


def create_topics(cluster: ClusterConfig, names: list[str], partitions: int) -> None:
    outcome = TopicAdmin(cluster).create_topics(
        [NewRemoteTopic(name, name, partitions, 1, {}) for name in names]
    )
    assert all(error is None for error in outcome.values()), outcome


def produce(cluster: ClusterConfig, topic: str, records: dict[int, list[Record]], **overrides) -> None:
    producer = make_producer(cluster, overrides=overrides)
    for partition, batch in records.items():
        for key, value, headers, timestamp in batch:
            producer.produce(
                topic, key=key, value=value, headers=headers, timestamp=timestamp, partition=partition
            )
    assert producer.flush(30) == 0


def produce_backlog(cluster: ClusterConfig, topic: str, *, records: int, partitions: int) -> None:
    """`records` records for a task to catch up on, round-robin over `partitions`: the n-th one's value
    is b"v<n>"."""
    producer = make_producer(cluster, overrides={"linger.ms": 50})
    for index in range(records):
        while True:
            try:
                producer.produce(topic, value=b"v%d" % index, partition=index % partitions)
                break
            except BufferError:  # the local queue is full: serve delivery reports until there is room
                producer.poll(0.1)
    assert producer.flush(60) == 0


def read_partition(
    cluster: ClusterConfig, topic: str, partition: int, *, isolation: str = "read_uncommitted"
) -> list:
    """Every record of the partition (read_uncommitted: what is physically there), in order."""
    consumer = make_consumer(cluster, overrides={**READ_TO_END, "isolation.level": isolation})
    consumer.assign([TopicPartition(topic, partition, 0)])
    messages = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, READ_TO_END_POLL_S):
                if message.error() is None:
                    messages.append(message)
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return messages
                else:
                    raise AssertionError(message.error())
    finally:
        consumer.close()
    raise AssertionError(f"{topic}[{partition}] did not reach its end")


def content(messages: list) -> list[Record]:
    return [(m.key(), m.value(), m.headers(), m.timestamp()[1]) for m in messages]


def sample_records(partition: int, count: int, *, start_ms: int = 1_600_000_000_000) -> list[Record]:
    return [
        (
            b"k%d-%d" % (partition, i) if i % 5 else None,
            b"v%d-%d" % (partition, i) if i % 7 else None,  # tombstones too
            [("h1", b"a%d" % i), ("h2", None), ("h1", b"b")] if i % 3 else None,
            start_ms + 10 * i,
        )
        for i in range(count)
    ]


def make_task(
    cluster_a: ClusterConfig,
    cluster_b: ClusterConfig,
    topics: list[str],
    *,
    store=None,
    metrics: MirrorMetrics | None = None,
    target: ClusterConfig | None = None,
    remote_partition_wait_s: float | None = None,
    partitions_per_producer: int = PARTITIONS_PER_PRODUCER,
    **flow_settings,
) -> MirrorSourceTask:
    flow = FlowConfig(source="A", target="B", enabled=True, topics=tuple(topics), **flow_settings)
    policy = DefaultReplicationPolicy(known_aliases=["A", "B"])
    return MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=store if store is not None else InMemoryPositionStore(),
        io=kafka_task_io(
            flow,
            source=cluster_a,
            target=target or cluster_b,
            policy=policy,
            task_index=0,
            partitions_per_producer=partitions_per_producer,
        ),
        metrics=metrics,
        **({} if remote_partition_wait_s is None else {"remote_partition_wait_s": remote_partition_wait_s}),
    )


def run_until(
    task: MirrorSourceTask, done: Callable[[], bool], *, timeout_s: float = 60
) -> list[SliceResult]:
    results = []
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"not done after {timeout_s}s; last results {results[-3:]}"
        results.append(task.run_slice(max_seconds=0.3))
    return results


def replicated(task: MirrorSourceTask, expected: dict[tuple[str, int], int]) -> Callable[[], bool]:
    """Done when every partition's persisted position reached its expected end offset."""

    def done() -> bool:
        positions = task.run_slice(max_seconds=0.3).positions
        return all(positions.get(key, -1) >= end for key, end in expected.items())

    return done


def test_topics_and_partitions_replicated_record_for_record_in_order(cluster_a, cluster_b, unique_name):
    topics = [f"{unique_name}-x", f"{unique_name}-y"]
    create_topics(cluster_a, topics, 3)
    create_topics(cluster_b, [f"A.{t}" for t in topics], 3)
    sent = {(t, p): sample_records(p, 40 + 10 * p) for t in topics for p in range(3)}
    for topic in topics:
        produce(cluster_a, topic, {p: sent[(topic, p)] for p in range(3)})
    metrics = MirrorMetrics()
    task = make_task(cluster_a, cluster_b, topics, metrics=metrics)
    task.assign(list(sent))
    run_until(task, replicated(task, {key: len(records) for key, records in sent.items()}))
    task.close()

    for (topic, partition), records in sent.items():
        assert content(read_partition(cluster_b, f"A.{topic}", partition)) == records
    snapshot = metrics.snapshot()
    assert snapshot.records == sum(len(r) for r in sent.values())
    x0 = snapshot.partition(f"A.{topics[0]}", 0)
    assert x0.record_count == 40 and x0.records_behind == 0 and x0.next_offset == 40
    assert x0.byte_count == sum(len(v or b"") for _, v, _, _ in sent[(topics[0], 0)])
    assert x0.record_age_ms > 0 and x0.replication_latency_ms > 0


def test_backpressure_with_a_tiny_producer_queue_loses_nothing(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    sent = {
        p: [(b"k%d" % i, b"v%d-%d" % (p, i), None, 1_700_000_000_000 + i) for i in range(3000)]
        for p in (0, 1)
    }
    produce(cluster_a, topic, sent)
    tiny = ClusterConfig(
        alias="B",
        bootstrap_servers=cluster_b.bootstrap_servers,
        producer={"queue.buffering.max.messages": "7", "linger.ms": "0"},
    )
    task = make_task(cluster_a, cluster_b, [topic], target=tiny)
    task.assign([(topic, 0), (topic, 1)])
    run_until(task, replicated(task, {(topic, 0): 3000, (topic, 1): 3000}))
    task.close()
    for partition, records in sent.items():
        assert content(read_partition(cluster_b, f"A.{topic}", partition)) == records


def test_restart_resumes_from_the_kafka_position_store_without_loss(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    first = [(None, b"first-%d" % i, None, 1_700_000_000_000 + i) for i in range(50)]
    produce(cluster_a, topic, {0: first})
    task = make_task(cluster_a, cluster_b, [topic], store=KafkaPositionStore(cluster_b, source_alias="A"))
    task.assign([(topic, 0)])
    run_until(task, replicated(task, {(topic, 0): 50}))
    task.close()

    second = [(None, b"second-%d" % i, None, 1_700_000_000_100 + i) for i in range(30)]
    produce(cluster_a, topic, {0: second})
    store = KafkaPositionStore(cluster_b, source_alias="A")  # a new process: positions read back
    assert store.load(flow="A->B", partitions=[(topic, 0)]) == {(topic, 0): 50}
    task = make_task(cluster_a, cluster_b, [topic], store=store)
    task.assign([(topic, 0)])
    run_until(task, replicated(task, {(topic, 0): 80}))
    task.close()
    assert content(read_partition(cluster_b, f"A.{topic}", 0)) == first + second


class StoreThatStopsPersisting(InMemoryPositionStore):
    frozen = False

    def save(self, *, flow, positions) -> None:
        if not self.frozen:
            super().save(flow=flow, positions=positions)


def test_exactly_once_after_an_abrupt_stop_writes_no_duplicates(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    sent = {
        p: [(b"k", b"v%d-%d" % (p, i), [("h", b"x")], 1_700_000_000_000 + i) for i in range(2000)]
        for p in (0, 1)
    }
    produce(cluster_a, topic, sent)
    store = StoreThatStopsPersisting()
    eos = DeliveryGuarantee.EXACTLY_ONCE
    crashed = make_task(cluster_a, cluster_b, [topic], store=store, delivery_guarantee=eos)
    crashed.assign([(topic, 0), (topic, 1)])
    crashed.run_slice(max_records=1500, max_seconds=5)
    # From here on no position is persisted, as if the process died before every commit; then the
    # task is dropped without close(): the target holds records the stored positions do not cover.
    store.frozen = True
    crashed.run_slice(max_records=1000, max_seconds=5)
    del crashed
    stored = store.load(flow="A->B", partitions=[(topic, 0), (topic, 1)])
    written = {p: len(read_partition(cluster_b, f"A.{topic}", p)) for p in (0, 1)}
    assert sum(stored.values()) < sum(written.values()) < 4000  # a crash with work in doubt

    restarted = make_task(cluster_a, cluster_b, [topic], store=store, delivery_guarantee=eos)
    restarted.assign([(topic, 0), (topic, 1)])
    run_until(restarted, replicated(restarted, {(topic, 0): 2000, (topic, 1): 2000}))
    restarted.close()
    for partition, records in sent.items():
        got = read_partition(cluster_b, f"A.{topic}", partition)
        assert [
            (k, v, [h for h in hs if h[0] != SOURCE_OFFSET_HEADER], t) for k, v, hs, t in content(got)
        ] == records
        assert source_offsets([m.headers() for m in got]) == list(range(2000))


def read_offset_syncs(
    cluster: ClusterConfig, topic: str, syncs_topic: str = "mm2-offset-syncs.B.internal"
) -> list[OffsetSync]:
    return [
        OffsetSync.decode(m.key(), m.value())
        for m in read_partition(cluster, syncs_topic, 0)
        if OffsetSync.decode(m.key(), m.value()).topic == topic
    ]


def translate(syncs: list[OffsetSync], upstream: int) -> int:
    """Exact translation from syncs at every change of (upstream - downstream) (test oracle)."""
    before = [s for s in syncs if s.upstream_offset <= upstream]
    latest = max(before, key=lambda s: (s.upstream_offset, s.downstream_offset))
    return latest.downstream_offset + (upstream - latest.upstream_offset)


@pytest.mark.parametrize(
    ("location", "guarantee"),
    [
        (OffsetSyncsTopicLocation.SOURCE, DeliveryGuarantee.AT_LEAST_ONCE),
        (OffsetSyncsTopicLocation.TARGET, DeliveryGuarantee.AT_LEAST_ONCE),
        (OffsetSyncsTopicLocation.TARGET, DeliveryGuarantee.EXACTLY_ONCE),
    ],
)
def test_offset_syncs_translate_exactly_across_a_transaction_marker_gap(
    cluster_a, cluster_b, unique_name, location, guarantee
):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    produce(cluster_a, topic, {0: [(None, b"plain-%d" % i, None, 1_700_000_000_000) for i in range(5)]})
    transactional = make_producer(cluster_a, overrides={"transactional.id": f"tx-{unique_name}"})
    transactional.init_transactions()
    transactional.begin_transaction()
    for i in range(3):
        transactional.produce(topic, value=b"tx-%d" % i, partition=0)
    transactional.commit_transaction()  # offsets 5..7 and a commit marker at 8
    produce(cluster_a, topic, {0: [(None, b"after-%d" % i, None, 1_700_000_000_000) for i in range(4)]})
    source_records = read_partition(cluster_a, topic, 0)
    upstream_offsets = [m.offset() for m in source_records]
    assert upstream_offsets[-1] + 1 - len(upstream_offsets) >= 1, "expected an offset gap (the marker)"

    task = make_task(
        cluster_a, cluster_b, [topic], offset_syncs_topic_location=location, delivery_guarantee=guarantee
    )
    task.assign([(topic, 0)])
    run_until(task, replicated(task, {(topic, 0): upstream_offsets[-1] + 1}))
    task.close()
    if guarantee == DeliveryGuarantee.EXACTLY_ONCE:  # in transactions: the header on run ends, and the gap
        remote = read_partition(cluster_b, f"A.{topic}", 0, isolation="read_committed")
        assert source_offsets([m.headers() for m in remote]) == upstream_offsets
        marked = [m for m in remote if source_offset_of(m.headers()) is not None]
        assert {7, 9} <= {source_offset_of(m.headers()) for m in marked}  # both sides of the marker at 8
    # As MM2 names it: after the cluster it does not live on.
    on_source = location == OffsetSyncsTopicLocation.SOURCE
    syncs_cluster, syncs_topic = (
        (cluster_a, "mm2-offset-syncs.B.internal")
        if on_source
        else (cluster_b, "mm2-offset-syncs.A.internal")
    )
    syncs = read_offset_syncs(syncs_cluster, topic, syncs_topic)
    remote = read_partition(cluster_b, f"A.{topic}", 0)
    assert [m.value() for m in remote] == [m.value() for m in source_records]
    copies = {m.offset(): m for m in remote}  # in transactions, commit markers hold offsets too
    for source_message in source_records:  # every record's offset translates to its own copy
        downstream = translate(syncs, source_message.offset())
        assert copies[downstream].value() == source_message.value()


def test_at_least_once_restart_duplicates_are_synced_so_translation_points_at_the_newest_copy(
    cluster_a, cluster_b, unique_name
):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    produce(cluster_a, topic, {0: [(None, b"r-%d" % i, None, 1_700_000_000_000) for i in range(20)]})
    store = InMemoryPositionStore()
    task = make_task(cluster_a, cluster_b, [topic], store=store)
    task.assign([(topic, 0)])
    run_until(task, replicated(task, {(topic, 0): 20}))
    task.close()
    store.save(flow="A->B", positions={(topic, 0): 12})  # as if the last 8 acks were never persisted
    again = make_task(cluster_a, cluster_b, [topic], store=store)
    again.assign([(topic, 0)])
    run_until(again, replicated(again, {(topic, 0): 20}))
    again.close()
    remote = read_partition(cluster_b, f"A.{topic}", 0)
    assert [m.value() for m in remote] == [b"r-%d" % i for i in range(20)] + [
        b"r-%d" % i for i in range(12, 20)
    ]
    syncs = read_offset_syncs(cluster_a, topic)
    assert OffsetSync(topic, 0, 12, 20) in syncs  # the rewind: upstream 12 is now at downstream 20
    assert translate(syncs, 15) == 23


def test_provenance_header_added_and_records_from_the_target_skipped(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    produce(
        cluster_a,
        topic,
        {
            0: [
                (None, b"local-1", [("app", b"1")], 1_700_000_000_000),
                (None, b"from-B", [(PROVENANCE_HEADER, b"B")], 1_700_000_000_001),  # mirrored B->A
                (None, b"local-2", None, 1_700_000_000_002),
            ]
        },
    )
    metrics = MirrorMetrics()
    task = make_task(cluster_a, cluster_b, [topic], metrics=metrics, provenance_header_enabled=True)
    task.assign([(topic, 0)])
    run_until(task, replicated(task, {(topic, 0): 3}))
    task.close()
    remote = read_partition(cluster_b, f"A.{topic}", 0)
    assert [(m.value(), m.headers()) for m in remote] == [
        (b"local-1", [("app", b"1"), (PROVENANCE_HEADER, b"A")]),
        (b"local-2", [(PROVENANCE_HEADER, b"A")]),
    ]
    assert metrics.snapshot().partition(f"A.{topic}", 0).skipped_count == 1


def test_partition_handed_back_resumes_from_the_store_not_a_stale_cache(cluster_a, cluster_b, unique_name):
    """A partition moves to another task and back (a rebalance): the first task must not replay it."""
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    batches = [
        [(None, b"%s-%d" % (name, i), None, 1_700_000_000_000 + i) for i in range(20)]
        for name in (b"a", b"b", b"c")
    ]
    store = InMemoryPositionStore()
    first, second = (make_task(cluster_a, cluster_b, [topic], store=store) for _ in range(2))

    produce(cluster_a, topic, {0: batches[0]})
    first.assign([(topic, 0), (topic, 1)])
    run_until(first, replicated(first, {(topic, 0): 20}))
    first.assign([(topic, 1)])
    first.run_slice(max_seconds=0.3)

    produce(cluster_a, topic, {0: batches[1]})
    second.assign([(topic, 0)])
    run_until(second, replicated(second, {(topic, 0): 40}))
    second.close()

    produce(cluster_a, topic, {0: batches[2]})
    first.assign([(topic, 0), (topic, 1)])
    run_until(first, replicated(first, {(topic, 0): 60}))
    first.close()
    assert content(read_partition(cluster_b, f"A.{topic}", 0)) == batches[0] + batches[1] + batches[2]


class RecordingStore(InMemoryPositionStore):
    def __init__(self) -> None:
        super().__init__()
        self.saved: list[int] = []

    def save(self, *, flow, positions) -> None:
        self.saved.extend(positions.values())
        super().save(flow=flow, positions=positions)


def test_slices_that_do_not_settle_keep_records_flowing_and_settle_completes_them(
    cluster_a, cluster_b, unique_name
):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    records = [(None, b"v-%d" % i + b"x" * 1000, None, 1_700_000_000_000 + i) for i in range(20_000)]
    produce(cluster_a, topic, {0: records})
    store = RecordingStore()
    task = make_task(cluster_a, cluster_b, [topic], store=store)
    task.assign([(topic, 0)])
    copied, deadline = 0, time.monotonic() + 60
    while copied < 20_000:
        assert time.monotonic() < deadline, f"{copied} records acknowledged"
        copied += task.run_slice(max_seconds=0.05, settle=False).records
    assert task.settle() == []
    assert store.load(flow="A->B", partitions=[(topic, 0)]) == {(topic, 0): 20_000}
    task.close()
    # Positions only ever advance, several were saved on the way, and every record arrived once, in order.
    assert store.saved == sorted(store.saved) and len(store.saved) > 1
    assert content(read_partition(cluster_b, f"A.{topic}", 0)) == records


def test_a_slice_returns_once_caught_up_with_every_record_acknowledged(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    records = {partition: sample_records(partition, 1500) for partition in (0, 1)}
    produce(cluster_a, topic, records)
    store = InMemoryPositionStore()
    task = make_task(cluster_a, cluster_b, [topic], store=store)
    task.assign([(topic, 0), (topic, 1)])
    # Long enough that a slice which ignored the caught-up state could not report it.
    result = task.run_slice(max_seconds=60, settle=False, return_when_caught_up=True)
    assert result.ok and result.caught_up
    assert result.records == 3000
    # Without asking for it, a slice runs its time and does not claim to be caught up.
    assert not task.run_slice(max_seconds=0.2, settle=False).caught_up
    task.close()
    # The positions: written when due (at most one record per partition per 5 s), every one at the close.
    assert store.load(flow=task.flow.name, partitions=[(topic, 0), (topic, 1)]) == {
        (topic, 0): 1500,
        (topic, 1): 1500,
    }
    for partition in (0, 1):
        assert content(read_partition(cluster_b, f"A.{topic}", partition)) == records[partition]


def test_exactly_once_waits_for_a_remote_topic_being_created_then_starts_it(
    cluster_a, cluster_b, unique_name, caplog
):
    """A demo's first slices: the task starts before the target knows the remote topic (its reader then
    caches that the topic does not exist); the partitions wait at INFO, no error, and start once it is
    there."""
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    records = {partition: sample_records(partition, 20) for partition in (0, 1)}
    produce(cluster_a, topic, records)
    task = make_task(cluster_a, cluster_b, [topic], delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    task.assign([(topic, 0), (topic, 1)])
    with caplog.at_level(logging.INFO, logger="replication.starting"):
        waiting = task.run_slice(max_seconds=0.3)
    assert waiting.ok and waiting.records == 0
    assert f"waiting for remote topic A.{topic} to be created (partitions 0, 1)" in caplog.text
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]
    create_topics(cluster_b, [f"A.{topic}"], 2)
    results = run_until(task, replicated(task, {(topic, 0): 20, (topic, 1): 20}))
    task.close()
    assert all(result.ok for result in results)
    for partition in (0, 1):
        got = read_partition(cluster_b, f"A.{topic}", partition)
        assert source_offsets([m.headers() for m in got]) == list(range(20))


def test_a_reader_tells_a_partition_the_cluster_does_not_know_from_a_cluster_that_does_not_answer(
    cluster_b, unique_name
):
    """Only the first waits for its topic (`waits_for_remote_partition`); the other is a start error."""
    alive = PartitionReader(cluster_b, timeout_s=5)
    dead = PartitionReader(ClusterConfig(alias="dead", bootstrap_servers="127.0.0.1:1"), timeout_s=1)
    try:
        known, unknown = alive.watermarks_all([(unique_name, 0)])
        _, down = dead.watermarks_all([(unique_name, 0)])
    finally:
        alive.close()
        dead.close()
    assert not known and unknown[(unique_name, 0)].unknown_partition
    assert not down[(unique_name, 0)].unknown_partition


def test_a_record_too_large_for_the_target_stalls_its_partition_alone_on_the_same_producer(
    cluster_a, cluster_b, unique_name
):
    """librdkafka refuses at produce() a record over the producer's message.max.bytes (MSG_SIZE_TOO_LARGE):
    its partition waits on it with an error every slice, the other partitions copy on, and the producer is
    kept (a refusal used to restart every partition on a new producer, every slice)."""
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    small = {p: sample_records(p, 30) for p in (0, 1)}
    produce(
        cluster_a,
        topic,
        {0: [*small[0][:5], (b"big", b"x" * 200_000, None, 1_600_000_000_500), *small[0][5:]]},
    )
    produce(cluster_a, topic, {1: small[1]})
    limited = ClusterConfig(
        alias="B", bootstrap_servers=cluster_b.bootstrap_servers, producer={"message.max.bytes": "100000"}
    )
    task = make_task(cluster_a, cluster_b, [topic], target=limited)
    task.assign([(topic, 0), (topic, 1)])
    results = run_until(task, replicated(task, {(topic, 1): 30}))
    producer = task._delivery.sink
    results += [task.run_slice(max_seconds=0.3) for _ in range(3)]
    assert task._delivery.sink is producer
    refused = [e for r in results for e in r.errors if e.partition == (topic, 0)]
    assert refused and all("offset 5" in e.message for e in results[-1].errors)
    assert any("too large" in e.message.lower() for e in refused), refused
    assert results[-1].positions[(topic, 0)] == 5
    task.close()
    # Its first 5 twice: sent in the refused record's batch, they asked for no report of their own (the
    # batch's last record would have vouched for them), so the partition restarted from them once, every
    # record asking for its own report from then on (docs/delivery-guarantees.md).
    assert content(read_partition(cluster_b, f"A.{topic}", 0)) == small[0][:5] * 2
    assert content(read_partition(cluster_b, f"A.{topic}", 1)) == small[1]


def test_partitions_joining_and_leaving_a_running_assignment_copy_exactly_on_the_same_consumer(
    cluster_a, cluster_b, unique_name
):
    """librdkafka's incremental assignment: partitions that join the task's assignment start while the
    others fetch on, and partitions that leave go; nothing is lost or written twice on either side of a
    change, on the same consumer."""
    early, late = f"{unique_name}-early", f"{unique_name}-late"
    create_topics(cluster_a, [early, late], 2)
    create_topics(cluster_b, [f"A.{early}", f"A.{late}"], 2)
    first = {p: sample_records(p, 20) for p in (0, 1)}
    produce(cluster_a, early, first)
    produce(cluster_a, late, first)
    task = make_task(cluster_a, cluster_b, [early, late])
    keys = [(topic, p) for topic in (early, late) for p in (0, 1)]
    task.assign(keys[:2])
    run_until(task, replicated(task, {(early, 0): 20, (early, 1): 20}))
    consumer = task._source._consumer
    assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == set(keys[:2])

    task.assign(keys)  # the late topic's partitions join
    second = {p: sample_records(p, 20, start_ms=1_600_000_100_000) for p in (0, 1)}
    produce(cluster_a, early, second)
    run_until(task, replicated(task, {key: 40 if key[0] == early else 20 for key in keys}))
    assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == set(keys)

    task.assign(keys[2:])  # the early topic's partitions leave
    produce(cluster_a, late, second)
    run_until(task, replicated(task, {(late, 0): 40, (late, 1): 40}))
    assert {(tp.topic, tp.partition) for tp in consumer.assignment()} == set(keys[2:])
    assert task._source._consumer is consumer
    task.close()
    for p in (0, 1):
        assert content(read_partition(cluster_b, f"A.{early}", p)) == first[p] + second[p]
        assert content(read_partition(cluster_b, f"A.{late}", p)) == first[p] + second[p]


def test_the_producer_never_creates_a_remote_topic_the_target_does_not_have_yet(
    cluster_a, cluster_b, unique_name
):
    """Apache Kafka creates a topic a client's metadata request names (auto.create.topics.enable, its
    default), with the broker's default partitions and configs. The task's producer asked for its remote
    topics' metadata before their first records, so a remote topic that topic sync had not created yet was
    created with one partition: its other partitions were refused as unknown, and topic sync found the
    topic there with the wrong partition count. The task's partitions now wait for topic sync's topic."""
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    records = {p: sample_records(p, 20) for p in (0, 1)}
    produce(cluster_a, topic, records)
    task = make_task(cluster_a, cluster_b, [topic])
    task.assign([(topic, 0), (topic, 1)])
    for _ in range(3):
        assert task.run_slice(max_seconds=0.3).ok
    assert f"A.{topic}" not in make_admin(cluster_b).list_topics(timeout=10).topics
    create_topics(cluster_b, [f"A.{topic}"], 2)  # as topic sync does, with the source's partitions
    run_until(task, replicated(task, {(topic, 0): 20, (topic, 1): 20}))
    task.close()
    for p in (0, 1):
        assert content(read_partition(cluster_b, f"A.{topic}", p)) == records[p]


def test_a_partition_added_to_a_written_remote_topic_is_copied_at_once_by_the_same_producer(
    cluster_a, cluster_b, unique_name
):
    """A topic grew: topic sync grew its remote topic and the task starts the new partition on the producer
    that already wrote the others. librdkafka refused it as an unknown partition (the count it last heard
    of) until its metadata refresh, every 5 minutes, each refusal restarting the partition with an error;
    the task now asks the topic's metadata again when a partition it did not show starts."""
    topic = unique_name
    create_topics(cluster_a, [topic], 2)
    create_topics(cluster_b, [f"A.{topic}"], 2)
    records = {p: sample_records(p, 20) for p in (0, 1, 2)}
    produce(cluster_a, topic, {p: records[p] for p in (0, 1)})
    task = make_task(cluster_a, cluster_b, [topic])
    task.assign([(topic, 0), (topic, 1)])
    run_until(task, replicated(task, {(topic, 0): 20, (topic, 1): 20}))
    TopicAdmin(cluster_a).create_partitions(topic, current=2, desired=3)
    TopicAdmin(cluster_b).create_partitions(f"A.{topic}", current=2, desired=3)
    produce(cluster_a, topic, {2: records[2]})
    task.assign([(topic, 0), (topic, 1), (topic, 2)])
    results = run_until(task, replicated(task, {(topic, p): 20 for p in (0, 1, 2)}))
    task.close()
    assert all(result.ok for result in results), [result.errors for result in results if not result.ok]
    for p in (0, 1, 2):
        assert content(read_partition(cluster_b, f"A.{topic}", p)) == records[p]


def test_a_remote_topic_the_target_stops_listing_restarts_its_partitions_alone_once_it_is_back(
    cluster_a, cluster_b, unique_name, caplog
):
    """librdkafka fails a partition's queued records as "Local: Unknown partition" once a metadata answer
    stops listing its topic: a deleted remote topic, or, on a cluster of several brokers, one that does not
    know a just-created topic yet (thousands of failures at the start of a 20,000-partition fleet). Each
    such failure restarted every partition of the task on a new producer. Now its partitions restart alone
    on the same producer, wait (at INFO) until the target lists the topic again, and go on from the failed
    record; the task's other topics copy on undisturbed."""
    gone, kept = f"{unique_name}-gone", f"{unique_name}-kept"
    create_topics(cluster_a, [gone, kept], 2)
    create_topics(cluster_b, [f"A.{gone}", f"A.{kept}"], 2)
    first = {p: sample_records(p, 20) for p in (0, 1)}
    later = {p: sample_records(p, 40)[20:] for p in (0, 1)}
    for topic in (gone, kept):
        produce(cluster_a, topic, first)
    # The producer gives up on a topic the cluster does not list after 1 s, not librdkafka's 30 s.
    target = ClusterConfig(
        alias="B",
        bootstrap_servers=cluster_b.bootstrap_servers,
        producer={"topic.metadata.propagation.max.ms": "1000"},
    )
    task = make_task(cluster_a, cluster_b, [gone, kept], target=target)
    keys = [(topic, p) for topic in (gone, kept) for p in (0, 1)]
    task.assign(keys)
    run_until(task, replicated(task, {key: 20 for key in keys}))
    producer = task._delivery.sink
    admin = make_admin(cluster_b)
    admin.delete_topics([f"A.{gone}"])[f"A.{gone}"].result(timeout=30)
    # The controller has deleted it; the (one) broker applies that a moment later, and a record written
    # meanwhile is acknowledged and then gone with the topic (seen once in CI at load 9: offset 20
    # missing). The broker that takes the writes says when it no longer has the topic.
    deadline = time.monotonic() + 30
    while f"A.{gone}" in admin.list_topics(timeout=5).topics:
        assert time.monotonic() < deadline, f"the target still lists A.{gone} 30 s after deleting it"
        time.sleep(0.1)
    for topic in (gone, kept):
        produce(cluster_a, topic, later)
    results: list[SliceResult] = []
    deadline = time.monotonic() + 60
    with caplog.at_level(logging.INFO, logger="replication.starting"):
        while not (
            results
            and any(e.partition[0] == gone for r in results for e in r.errors)
            and all(results[-1].positions.get((kept, p), -1) >= 40 for p in (0, 1))
        ):
            assert time.monotonic() < deadline, f"not done after 60s; last results {results[-3:]}"
            results.append(task.run_slice(max_seconds=0.3))
        results += [task.run_slice(max_seconds=0.3) for _ in range(3)]  # the failed partitions wait
    failed = [e for r in results for e in r.errors]
    assert failed and all(e.partition[0] == gone for e in failed), failed
    assert any(e.kind is SliceErrorKind.DELIVERY and "offset 20 " in e.message for e in failed), failed
    assert task._delivery.sink is producer
    assert any(f"waiting for remote topic A.{gone}" in r.message for r in caplog.records)
    create_topics(cluster_b, [f"A.{gone}"], 2)  # as topic sync does, on its next run
    run_until(task, replicated(task, {(gone, p): 40 for p in (0, 1)}))
    task.close()
    assert task._delivery.sink is producer
    for p in (0, 1):
        assert content(read_partition(cluster_b, f"A.{kept}", p)) == first[p] + later[p]
        assert content(read_partition(cluster_b, f"A.{gone}", p)) == later[p]


def test_the_failures_of_a_partition_the_target_stopped_listing_are_its_alone():
    """What librdkafka reports for a record of a partition whose topic went away: "Unknown partition", or,
    for what was left in the partition's queue when librdkafka freed it, "Broker handle destroyed" (the
    producer going on: the test above once restarted its whole task on that). A fatal error, or another
    refusal, still concerns the whole task."""
    for code in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._DESTROY):
        assert delivery_to_unknown_partition(KafkaError(code)), code
    assert not delivery_to_unknown_partition(KafkaError(KafkaError._DESTROY, fatal=True))
    assert not delivery_to_unknown_partition(KafkaError(KafkaError._MSG_TIMED_OUT))
    assert not delivery_to_unknown_partition(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))


def test_a_task_writing_to_many_partitions_shares_them_among_producers_each_partition_in_order(
    cluster_a, cluster_b, unique_name
):
    """librdkafka sends one partition per request, at most 5 requests in flight per broker with
    idempotence, so one producer writing to hundreds of partitions of one broker sends them a few at a time
    (head of line). At at_least_once the task shares its remote partitions among producers (`ShardedSink`,
    250 each by default, up to 4; 16 here): 40 partitions on 3 producers, every partition whole and in order
    on the producer it started on. A transactional task keeps one producer."""
    topics = [f"{unique_name}-x", f"{unique_name}-y"]
    create_topics(cluster_a, topics, 20)
    create_topics(cluster_b, [f"A.{t}" for t in topics], 20)
    sent = {(t, p): sample_records(p, 15 + p) for t in topics for p in range(20)}
    for topic in topics:
        produce(cluster_a, topic, {p: sent[(topic, p)] for p in range(20)})

    task = make_task(cluster_a, cluster_b, topics, partitions_per_producer=16)
    task.assign(list(sent))
    run_until(task, replicated(task, {key: len(records) for key, records in sent.items()}))
    assert len(task._delivery.sink.producers) == 3
    task.close()
    for (topic, partition), records in sent.items():
        assert content(read_partition(cluster_b, f"A.{topic}", partition)) == records

    transactional = make_task(
        cluster_a,
        cluster_b,
        topics,
        partitions_per_producer=16,
        delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE,
    )
    assert not hasattr(transactional._delivery.sink, "producers")  # one producer: the transaction's
    transactional.close()
