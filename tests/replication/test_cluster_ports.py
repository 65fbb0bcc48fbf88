"""The control plane's ports (`replication.cluster_ports`) answer the same on both implementations: the
same assertions run on the suite's Apache Kafka broker (`replication.kafka.clusters.KAFKA`) and on the
in-memory cluster (`replication.memory.clusters.MemoryClusters`), so a control-plane test that runs on the
in-memory one tests what Kafka would answer. Offsets (earliest, end, by time), records from offsets,
an unknown topic, topic sizes, consumer groups (commit, describe, list, delete), a group with members
refusing both, which failures are the cluster's, and a flow's two clusters as its operations read them
(replicated partitions, MM2's internal topics, the first record not replicated), and its verifier (ranges
compared over the offset syncs, the groups active on the target, the remote topics' parity)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

import pytest

from replication.checkpoint import ABSENT
from replication.cluster_ports import BrowseError, Clusters, GroupNotEmpty, RangeNotReadable, UnknownTopic
from replication.config import ClusterConfig, FlowConfig
from replication.connector import NewRemoteTopic
from replication.consumer_groups import GroupMember
from replication.failover import UnreplicatedRecord
from replication.formats import Checkpoint, Heartbeat, OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.clusters import KAFKA
from replication.memory.clusters import MemoryClusters
from replication.verification import OffsetRange, VerificationLimits

GONE = {ABSENT, "DEAD"}  # how a cluster describes a group it does not know
T0 = 1_700_000_000_000  # records' timestamps: T0 + 1000 * offset


@dataclass
class Implementation:
    clusters: Clusters
    config: ClusterConfig
    seed: Callable[[str, int, int], None]  # (topic, partitions, records per partition)
    member_of: Callable[[str, str], AbstractContextManager[None]]  # (group, topic): a member while inside


def _memory() -> Implementation:
    memory = MemoryClusters()
    config = ClusterConfig(alias="m", bootstrap_servers="memory-m:9092")
    cluster = memory.cluster(config.bootstrap_servers)

    def seed(topic: str, partitions: int, records: int) -> None:
        cluster.create(topic, partitions)
        for partition in range(partitions):
            for index in range(records):
                cluster.append(
                    topic, partition, key=b"k", value=b"%d" % index, timestamp_ms=T0 + 1000 * index
                )

    @contextmanager
    def member_of(group: str, topic: str) -> Iterator[None]:
        cluster.join(group, GroupMember("m-1", "rdkafka", "/127.0.0.1", ((topic, 0),)))
        yield
        cluster.leave(group)

    return Implementation(memory, config, seed, member_of)


def _kafka(config: ClusterConfig) -> Implementation:
    def seed(topic: str, partitions: int, records: int) -> None:
        assert (
            TopicAdmin(config).create_topics([NewRemoteTopic(topic, topic, partitions, 1, {})])[topic] is None
        )
        producer = make_producer(config, overrides={"linger.ms": 0})
        for partition in range(partitions):
            for index in range(records):
                producer.produce(
                    topic, key=b"k", value=b"%d" % index, partition=partition, timestamp=T0 + 1000 * index
                )
        assert producer.flush(30) == 0

    @contextmanager
    def member_of(group: str, topic: str) -> Iterator[None]:
        consumer = make_consumer(config, group_id=group, overrides={"session.timeout.ms": 6000})
        consumer.subscribe([topic])
        try:
            deadline = time.monotonic() + 30
            while not consumer.assignment() and time.monotonic() < deadline:
                consumer.poll(0.2)
            assert consumer.assignment(), "the consumer never joined its group"
            yield
        finally:
            consumer.close()

    return Implementation(KAFKA, config, seed, member_of)


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka), "memory"])
def on(request) -> Implementation:
    if request.param == "memory":
        return _memory()
    return _kafka(request.getfixturevalue("cluster_a"))


def test_topic_reads_answer_offsets_by_position_and_time_and_records_from_an_offset(on, unique_name):
    on.seed(unique_name, 2, 5)
    reads = on.clusters.topic_reads(on.config, timeout_s=10)
    assert (unique_name, 2) in {(t.name, t.partitions) for t in reads.topics()}
    assert reads.partition_count(unique_name) == 2
    keys = [(unique_name, 0), (unique_name, 1)]
    assert reads.earliest_offsets(keys) == dict.fromkeys(keys, 0)
    assert reads.end_offsets(keys) == dict.fromkeys(keys, 5)
    assert reads.offsets_at(keys, T0 + 2500) == dict.fromkeys(keys, 3)
    assert reads.offsets_at(keys, T0 + 10_000) == dict.fromkeys(keys, -1)  # no record is that late
    assert [(p.partition, p.earliest, p.end) for p in reads.partition_offsets(unique_name)] == [
        (0, 0, 5),
        (1, 0, 5),
    ]
    page = reads.read(unique_name, 1, start=1, max_records=2)
    assert [(r.offset, r.value, r.timestamp_ms) for r in page.records] == [
        (1, b"1", T0 + 1000),
        (2, b"2", T0 + 2000),
    ]
    assert page.position == 3 and page.scanned == 2
    to_end = reads.read(unique_name, 0, start=3, max_records=10)
    assert [r.offset for r in to_end.records] == [3, 4] and to_end.complete
    assert [r.offset for r in reads.read(unique_name, 0, start=0, max_records=10, stop_before=2).records] == [
        0,
        1,
    ]
    keys = {(unique_name, 0): 1, (unique_name, 1): 0}
    searched = reads.read_many(
        keys, max_records=3, stop_before={(unique_name, 1): 2}, keep=lambda r: r.value != b"1"
    )
    assert {key: [r.offset for r in page.records] for key, page in searched.items()} == {
        (unique_name, 0): [2, 3],  # offset 1's value is b"1": scanned, not kept
        (unique_name, 1): [0],
    }
    assert [(page.scanned, page.position, page.complete) for page in searched.values()] == [
        (3, 4, True),
        (2, 2, True),
    ]
    bounded = reads.read_many({(unique_name, 0): 0}, max_records=5, max_kept=2)[(unique_name, 0)]
    assert [r.offset for r in bounded.records] == [0, 1] and not bounded.complete
    with pytest.raises(UnknownTopic, match=f"cluster {on.config.alias} has no topic 'missing-{unique_name}'"):
        reads.partition_count(f"missing-{unique_name}")


def test_a_cluster_and_its_topics_are_described_counted_and_checked(on, unique_name):
    on.seed(unique_name, 2, 1)
    described = on.clusters.cluster_descriptions(on.config, timeout_s=10)
    info = described.describe_cluster()
    assert info.cluster_id and info.cluster_id == described.cluster_id() and info.brokers
    assert info.controller_id in {broker.id for broker in info.brokers}
    topic = described.describe_topic(unique_name)
    assert [p.partition for p in topic.partitions] == [0, 1] and topic.replication_factor == 1
    assert topic.under_replicated == 0 and topic.partitions[0].leader in {b.id for b in info.brokers}
    with pytest.raises(UnknownTopic):
        described.describe_topic(f"missing-{unique_name}")
    assert on.clusters.partition_counts(on.config, timeout_s=10)[unique_name] == 2
    check = on.clusters.check(on.config, timeout_s=10)
    assert check.ok and check.brokers == len(info.brokers) and check.topic_count >= 1


def test_topic_sizes_name_every_partition_of_the_topics_asked(on, unique_name):
    on.seed(unique_name, 2, 5)
    sizes = on.clusters.topic_sizes(
        on.config, leaders={unique_name: {0: -1, 1: -1}}, brokers=None, timeout_s=10
    )
    (topic,) = sizes.values()
    assert [p.partition for p in topic.partitions] == [0, 1]
    assert all(
        p.total_bytes >= 5 * len(b"k" + b"0") for p in topic.partitions
    )  # 5 records' keys and values at least


def test_groups_commit_describe_list_and_delete(on, unique_name):
    on.seed(unique_name, 2, 5)
    admin = on.clusters.group_admin(on.config, timeout_s=10)
    group = f"g-{unique_name}"
    assert admin.describe([group])[group].state in GONE and admin.committed_offsets(group) == {}
    assert admin.alter_offsets(group, {(unique_name, 0): 3, (unique_name, 1): 4}) == {}
    assert {key: c.offset for key, c in admin.committed_offsets(group).items()} == {
        (unique_name, 0): 3,
        (unique_name, 1): 4,
    }
    assert admin.describe([group])[group].state == "EMPTY" and not admin.describe([group])[group].active
    assert group in admin.list_groups() and group in {g.group for g in admin.list_group_states()}
    assert admin.committed_offsets_of([group, f"none-{group}"])[f"none-{group}"] == {}
    admin.delete_group(group)
    admin.delete_group(group)  # already gone: fine
    assert group not in admin.list_groups() and admin.committed_offsets(group) == {}


def test_a_group_with_members_refuses_offset_commits_and_its_deletion(on, unique_name):
    on.seed(unique_name, 1, 3)
    admin = on.clusters.group_admin(on.config, timeout_s=10)
    group = f"g-{unique_name}"
    with on.member_of(group, unique_name):
        described = admin.describe([group])[group]
        assert described.active and len(described.members) == 1
        assert (unique_name, 0) in admin.alter_offsets(group, {(unique_name, 0): 1})
        with pytest.raises(GroupNotEmpty, match=f"cluster {on.config.alias}: group {group} has members"):
            admin.delete_group(group)


def test_an_unreachable_cluster_is_a_cluster_failure_and_a_refused_request_is_an_answer(on, unique_name):
    on.seed(unique_name, 1, 1)
    reads = on.clusters.topic_reads(on.config, timeout_s=5)
    with pytest.raises(BrowseError) as answered:
        reads.end_offsets([(unique_name, 7)])  # no such partition: the cluster answers that
    assert not on.clusters.is_cluster_failure(answered.value)
    assert on.clusters.unreachable(on.config, timeout_s=1) is None
    silent = ClusterConfig(alias="gone", bootstrap_servers="127.0.0.1:1")
    if isinstance(on.clusters, MemoryClusters):
        on.clusters.cluster(silent.bootstrap_servers).unreachable = "Connection refused"
    assert "refused" in (on.clusters.unreachable(silent, timeout_s=1) or "").lower()
    assert on.clusters.check(silent, timeout_s=1).failure == "refused"
    with pytest.raises(BrowseError) as failed:
        on.clusters.topic_reads(silent, timeout_s=1).topics()
    assert on.clusters.is_cluster_failure(failed.value) and "cluster gone" in str(failed.value)


# -- a flow's two clusters --------------------------------------------------------------------------------
@dataclass
class TwoClusters:
    clusters: Clusters
    source: ClusterConfig
    target: ClusterConfig
    write: Callable[[ClusterConfig, str, int, list[tuple[int, bytes, bytes, int]]], None]


def _memory_two() -> TwoClusters:
    memory = MemoryClusters()

    def write(config: ClusterConfig, topic: str, partitions: int, records) -> None:
        cluster = memory.cluster(config.bootstrap_servers)
        cluster.create(topic, partitions)
        for partition, key, value, stamp in records:
            cluster.append(topic, partition, key=key, value=value, timestamp_ms=stamp)

    source, target = (ClusterConfig(alias=a, bootstrap_servers=f"memory-{a}:9092") for a in "AB")
    return TwoClusters(memory, source, target, write)


def _kafka_two(source: ClusterConfig, target: ClusterConfig) -> TwoClusters:
    def write(config: ClusterConfig, topic: str, partitions: int, records) -> None:
        (error,) = (
            TopicAdmin(config).create_topics([NewRemoteTopic(topic, topic, partitions, 1, {})]).values()
        )
        assert error is None or "already exists" in str(error), error
        producer = make_producer(config, overrides={"linger.ms": 0})
        for partition, key, value, stamp in records:
            producer.produce(topic, key=key, value=value, partition=partition, timestamp=stamp)
        assert producer.flush(30) == 0

    return TwoClusters(KAFKA, source, target, write)


@pytest.fixture(params=[pytest.param("kafka", marks=pytest.mark.kafka), "memory"])
def two(request) -> TwoClusters:
    if request.param == "memory":
        return _memory_two()
    return _kafka_two(request.getfixturevalue("cluster_a"), request.getfixturevalue("cluster_b"))


def test_flow_clusters_read_what_the_flow_mirrored_and_commit_groups(two, unique_name):
    topic, group, now_ms = unique_name, f"g-{unique_name}", int(time.time() * 1000)
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(unique_name,), groups=(group,))
    reader = two.clusters.flow_clusters(
        flow=flow, source=two.source, target=two.target, known_aliases=["A", "B"], timeout_s=10
    )
    remote = reader.policy.format_remote_topic("A", topic)
    two.write(two.source, topic, 2, [(p, b"k", b"%d" % i, T0 + 1000 * i) for p in (0, 1) for i in range(5)])
    two.write(two.target, remote, 2, [(p, b"k", b"%d" % i, T0 + 1000 * i) for p in (0, 1) for i in range(3)])
    syncs = [OffsetSync(topic, p, 2, 2) for p in (0, 1)]
    two.write(
        two.source,
        reader.policy.flow_offset_syncs_topic(flow),
        1,
        [(0, s.key(), s.value(), 0) for s in syncs],
    )
    checkpoint = Checkpoint(group, remote, 0, 3, 3)
    two.write(
        two.target,
        reader.policy.checkpoints_topic("A"),
        1,
        [(0, checkpoint.key(), checkpoint.value(), now_ms)],
    )
    beat = Heartbeat("A", "B", now_ms)
    two.write(two.target, reader.policy.heartbeats_topic(), 1, [(0, beat.key(), beat.value(), now_ms)])
    admin = two.clusters.group_admin(two.source, timeout_s=10)
    assert admin.alter_offsets(group, {(topic, 0): 3, (topic, 1): 1}) == {}

    assert reader.reachable(two.source)[0] and reader.reachable(two.target)[0]
    assert reader.replicated_partitions() == {(topic, 0): remote, (topic, 1): remote}
    assert reader.end_offsets(two.source, [(topic, 0), (topic, 1)]) == {(topic, 0): 5, (topic, 1): 5}
    assert reader.source_groups() == [group]
    committed = reader.committed_offsets(two.source, [group])[group]
    assert {key: c.offset for key, c in committed.items()} == {(topic, 0): 3, (topic, 1): 1}
    states = reader.group_states(two.source, [group, f"none-{group}"])
    assert states[group] == "EMPTY" and states[f"none-{group}"] in GONE
    store = reader.refresh_offset_syncs()
    assert reader.offset_syncs_complete and store.newest_sync(topic, 1).downstream_offset == 2
    assert reader.latest_checkpoints([group])[group][(remote, 0)].downstream_offset == 3
    newest, complete = two.clusters.group_admin(two.target).newest_checkpoints(
        reader.policy.checkpoints_topic("A"), group=group
    )
    assert complete and newest == {(remote, 0): (checkpoint, now_ms)}  # with its record's timestamp
    assert reader.newest_heartbeat_ms() >= now_ms
    found, unsettled = reader.first_unreplicated({(topic, 0): 3, (topic, 1): None})
    assert found == {(topic, 0): UnreplicatedRecord(3, T0 + 3000), (topic, 1): UnreplicatedRecord(0, T0)}
    assert not unsettled and reader.first_unreplicated({(topic, 0): 5}) == ({}, set())
    nxt = reader.next_records(two.source, starts={(topic, 0): 3, (topic, 1): 5})
    assert {key: r and (r.offset, r.value, r.timestamp_ms) for key, r in nxt.items()} == {
        (topic, 0): (3, b"3", T0 + 3000),
        (topic, 1): None,  # at its end
    }
    by_group = reader.next_records(two.source, group=group, partitions=[(topic, 0), (topic, 1)])
    assert {key: r.offset for key, r in by_group.items()} == {(topic, 0): 3, (topic, 1): 1}
    assert reader.alter_offsets(two.target, group, {(remote, 0): 3}) == {}
    assert {k: c.offset for k, c in reader.committed_offsets(two.target, [group])[group].items()} == {
        (remote, 0): 3
    }
    reader.close()


def test_a_flow_verifier_compares_ranges_over_the_offset_syncs_and_observes_readiness(two, unique_name):
    topic, new = unique_name, f"{unique_name}-new"
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(f"{unique_name}.*",))
    verifier = two.clusters.flow_verifier(
        flow=flow, source=two.source, target=two.target, known_aliases=["A", "B"], timeout_s=10
    )
    remote = f"A.{topic}"
    records = [(p, b"k", b"%d" % i, T0 + 1000 * i) for p in (0, 1) for i in range(3)]
    two.write(two.source, topic, 2, records)
    two.write(two.source, new, 1, [])  # not on the target yet
    copies = [(p, k, b"other" if (p, v) == (1, b"1") else v, stamp) for p, k, v, stamp in records]
    two.write(two.target, remote, 2, copies)
    syncs = [OffsetSync(topic, p, i, i) for p in (0, 1) for i in range(3)]  # every record: exact
    two.write(two.source, "mm2-offset-syncs.B.internal", 1, [(0, s.key(), s.value(), 0) for s in syncs])

    verifier.refresh_syncs()
    assert verifier.store.newest_sync(topic, 1).downstream_offset == 2
    ends = verifier.partition_ends([(topic, p, remote) for p in (0, 1)])
    assert {key: (e.log_start, e.source_end, e.target_end) for key, e in ends.items()} == {
        (topic, 0): (0, 3, 3),
        (topic, 1): (0, 3, 3),
    }
    limits = VerificationLimits()
    clean = verifier.verify_range(topic, 0, remote, OffsetRange(0, 3), limits=limits)
    assert clean.mismatch is None and (clean.source_count, clean.target_count) == (3, 3)
    assert clean.source_digest == clean.target_digest
    differs = verifier.verify_range(topic, 1, remote, OffsetRange(0, 3), limits=limits)
    assert differs.mismatch is not None and differs.mismatch.source_offset == 1
    with pytest.raises(RangeNotReadable):  # past the partition's end: later, not a mismatch
        verifier.verify_range(topic, 0, remote, OffsetRange(0, 5), limits=limits)
    assert verifier.groups_active_on_target() == []
    assert verifier.topic_parity() == ([f"A.{new} missing on B"], [])
    verifier.close()
