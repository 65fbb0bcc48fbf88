"""What only a real Apache Kafka broker can prove: the launcher (format once, restart keeps data, logs
kept), exact ListOffsets, aborted source transactions that never reach the target, and the internal
topics compacted as the docs claim. Each test fails on the embedded broker, which has none of these."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient

from replication.config import ClusterConfig, DeliveryGuarantee, FlowConfig
from replication.kafka import apache
from replication.kafka.admin import TopicAdmin
from replication.kafka.apache import (
    GC_OPTIONS,
    JVM_OPTIONS,
    ApacheKafkaBroker,
    class_data_archive,
    jvm_flags,
    kafka_version,
)
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.failover_io import FailoverReader
from replication.kafka.positions import KafkaPositionStore, positions_topic
from replication.kafka.source_io import PartitionReader, kafka_task_io
from replication.offset_mapping import Direction, MappedTopic, MappingError, OffsetQuery, map_offset
from replication.policy import DefaultReplicationPolicy
from replication.positions import InMemoryPositionStore
from replication.source import MirrorSourceTask
from tests.conftest import KAFKA_KIND
from tests.replication.test_source_task import (
    create_topics,
    make_task,
    produce,
    read_partition,
    replicated,
    run_until,
)

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.skipif(KAFKA_KIND != "apache", reason="Apache Kafka facts (MIRRORPLANE_TEST_KAFKA=embedded)"),
]


def _values(cluster: ClusterConfig, topic: str, partition: int, *, isolation: str) -> list[bytes]:
    return [m.value() for m in read_partition(cluster, topic, partition, isolation=isolation)]


def test_the_suites_brokers_map_the_class_data_archive_and_collect_with_the_serial_collector(kafka_brokers):
    """`make kafka` writes the archive and every broker JVM maps it (the archive's pages in its address
    space: a JVM that refused it, or a launcher that did not ask, maps nothing); the suite's
    KAFKA_JVM_PERFORMANCE_OPTS replaced Kafka's G1 on the command line."""
    archive = class_data_archive()
    assert archive.exists(), "make kafka builds it (replication.kafka.apache.build_class_data_archive)"
    pid = kafka_brokers["A"].process.pid
    assert str(archive.resolve()) in Path(f"/proc/{pid}/maps").read_text()
    command = Path(f"/proc/{pid}/cmdline").read_text().split("\0")
    assert "-XX:+UseSerialGC" in command and not set(GC_OPTIONS) & set(command)


def test_each_folder_of_jars_has_an_archive_of_its_own(tmp_path, monkeypatch):
    """The JVM maps no archive written for another class path, silently: a copied var/ builds its own."""
    archives = set()
    for checkout in ("one", "two"):
        monkeypatch.setenv("MIRRORPLANE_KAFKA_LIBS", str(tmp_path / checkout / "libs"))
        archive = class_data_archive()
        assert archive.parent == tmp_path / checkout and archive.suffix == ".jsa"
        archives.add(archive.name)
    assert len(archives) == 2


def test_jvm_flags_take_kafkas_performance_options_and_the_archive(tmp_path, monkeypatch):
    archive = tmp_path / "broker-classes.jsa"
    monkeypatch.setattr(apache, "class_data_archive", lambda: archive)
    monkeypatch.delenv("KAFKA_JVM_PERFORMANCE_OPTS", raising=False)
    assert jvm_flags(JVM_OPTIONS) == JVM_OPTIONS  # Kafka's own choice, no archive yet
    archive.write_bytes(b"")
    monkeypatch.setenv("KAFKA_JVM_PERFORMANCE_OPTS", "-XX:+UseSerialGC -XX:+AlwaysPreTouch")
    flags = jvm_flags(JVM_OPTIONS)
    assert not set(GC_OPTIONS) & set(flags) and "-Xmx1g" in flags
    assert flags[-3:] == ["-XX:+UseSerialGC", "-XX:+AlwaysPreTouch", f"-XX:SharedArchiveFile={archive}"]
    # The run that writes the archive does not read one.
    assert not any("SharedArchiveFile" in f for f in jvm_flags([*JVM_OPTIONS, "-XX:ArchiveClassesAtExit=x"]))


def test_a_broker_formats_once_keeps_its_data_across_restarts_and_kill_9_and_keeps_its_log(tmp_path):
    broker = ApacheKafkaBroker(name="restart", workdir=tmp_path)
    cluster = ClusterConfig(alias="R", bootstrap_servers="")
    try:
        broker.start()
        cluster = ClusterConfig(alias="R", bootstrap_servers=broker.bootstrap_servers)
        create_topics(cluster, ["kept"], 1)
        produce(cluster, "kept", {0: [(None, b"before-%d" % i, None, 1_700_000_000_000) for i in range(5)]})
        broker.stop()  # a controlled shutdown
        broker.start()
        produce(cluster, "kept", {0: [(None, b"after-stop", None, 1_700_000_000_000)]})
        broker.stop(kill=True)  # kill -9: the log is recovered at the next start
        broker.start()
        values = [m.value() for m in read_partition(cluster, "kept", 0)]
        assert values == [b"before-%d" % i for i in range(5)] + [b"after-stop"]
    finally:
        broker.stop()
    log = (tmp_path / "server.log").read_text()
    assert log.count("Kafka Server started") == 3, log[-2000:]
    assert kafka_version() in log


def test_a_cluster_of_two_nodes_leads_partitions_on_both_copies_from_both_and_stops_both(
    tmp_path, cluster_b, unique_name
):
    """`nodes=2`: a broker-only JVM joins the first node's quorum (the bench's clusters of 10,000+
    partitions, a broker's open files per partition); the engine reads partitions led by either node."""
    broker = ApacheKafkaBroker(name="pair", workdir=tmp_path, nodes=2)
    topic = unique_name
    try:
        broker.start()
        (follower,) = broker.followers
        assert (
            broker.bootstrap_servers == f"{broker.bootstrap_servers.split(',')[0]},127.0.0.1:{follower.port}"
        )
        source = ClusterConfig(alias="A", bootstrap_servers=broker.bootstrap_servers)
        create_topics(source, [topic], 4)
        create_topics(cluster_b, [f"A.{topic}"], 4)
        admin = AdminClient(broker.admin_client_properties())
        leaders = {p.leader for p in admin.list_topics(topic, timeout=10).topics[topic].partitions.values()}
        assert leaders == {1, 2}
        produce(
            source,
            topic,
            {p: [(None, b"%d-%d" % (p, i), None, 1_700_000_000_000) for i in range(5)] for p in range(4)},
        )
        task = make_task(source, cluster_b, [topic])
        task.assign([(topic, p) for p in range(4)])
        run_until(task, replicated(task, {(topic, p): 5 for p in range(4)}))
        task.close()
        for p in range(4):
            assert _values(cluster_b, f"A.{topic}", p, isolation="read_committed") == [
                b"%d-%d" % (p, i) for i in range(5)
            ]
        pids = [broker.process.pid, follower.process.pid]
    finally:
        broker.stop()
        broker.remove_data()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    assert "Kafka Server started" in (tmp_path / "node-2" / "server.log").read_text()
    assert not (tmp_path / "node-2" / "data").exists()


def test_list_offsets_is_exact_whatever_the_batch_sizes(cluster_a, unique_name):
    """The embedded broker answers ListOffsets(latest) too low by (records in the last batch - 1)."""
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    producer = make_producer(cluster_a, overrides={"linger.ms": 50})
    produced = 0
    admin = TopicAdmin(cluster_a)
    for batch in (1, 7, 250, 3):
        for i in range(batch):
            producer.produce(topic, value=b"x", partition=0, timestamp=1_700_000_000_000 + produced + i)
        assert producer.flush(30) == 0
        produced += batch
        consumer = make_consumer(cluster_a)
        try:
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
            # A time lookup names the first record at or after the time: here the record's own offset
            # (one lookup per request: librdkafka keeps one timestamp per partition in a request).
            found = [
                consumer.offsets_for_times(
                    [TopicPartition(topic, 0, 1_700_000_000_000 + offset)], timeout=10
                )[0].offset
                for offset in sorted({0, produced - batch, produced // 2, produced - 1})
            ]
        finally:
            consumer.close()
        assert (low, high) == (0, produced)
        assert found == sorted({0, produced - batch, produced // 2, produced - 1})
    assert admin.partition_counts()[topic] == 1


def test_aborted_source_transactions_never_reach_the_target(cluster_a, cluster_b, unique_name):
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)
    transactional = make_producer(cluster_a, overrides={"transactional.id": f"tx-{unique_name}"})
    transactional.init_transactions()
    committed: list[bytes] = []
    for round_ in range(6):
        transactional.begin_transaction()
        values = [b"t%d-%d" % (round_, i) for i in range(10)]
        for value in values:
            transactional.produce(topic, value=value, partition=0)
        assert transactional.flush(30) == 0  # written to the log before the abort, not purged unsent
        if round_ % 2:
            transactional.abort_transaction()
        else:
            transactional.commit_transaction()
            committed.extend(values)
        produce(cluster_a, topic, {0: [(None, b"plain-%d" % round_, None, 1_700_000_000_000)]})
        committed.append(b"plain-%d" % round_)
    # The source holds the aborted records physically (read_uncommitted shows them), not for read_committed.
    assert len(_values(cluster_a, topic, 0, isolation="read_uncommitted")) == 6 * 10 + 6
    assert _values(cluster_a, topic, 0, isolation="read_committed") == committed

    task = make_task(cluster_a, cluster_b, [topic], delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    task.assign([(topic, 0)])
    source_end = read_partition(cluster_a, topic, 0)[-1].offset() + 1  # the last record is a plain one
    run_until(task, replicated(task, {(topic, 0): source_end}))
    task.close()

    # Whatever a target consumer's isolation level, the aborted records are not there.
    assert _values(cluster_b, f"A.{topic}", 0, isolation="read_committed") == committed
    assert _values(cluster_b, f"A.{topic}", 0, isolation="read_uncommitted") == committed


def test_the_positions_topic_is_compacted_to_the_latest_position_per_partition(cluster_b, unique_name):
    """Kafka compacts only closed segments: with the topic's segments rolled quickly (the docs' own
    `kafka-configs --alter` advice for a topic that grew), the broker's cleaner keeps one record per key
    and the store still loads each partition's latest position."""
    alias = unique_name.replace("-", "")[:30]
    store = KafkaPositionStore(cluster_b, source_alias=alias)
    topic = positions_topic(alias)
    flow = f"{alias}->B"
    try:
        store.save(flow=flow, positions={("orders", 0): 0})
        TopicAdmin(cluster_b).set_topic_configs(
            topic, {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.01"}, current={}
        )
        for position in range(1, 301):
            store.save(flow=flow, positions={("orders", 0): position, ("orders", 1): 2 * position})
            if position % 100 == 0:
                time.sleep(0.3)  # let a segment roll between bursts
    finally:
        store.close()
    # Records written to partition 0: its end offset (the cleaner may have compacted some already: on a
    # loaded machine it did, down to 16, before they could be counted).
    reader = PartitionReader(cluster_b, timeout_s=10)
    try:
        written = reader.watermarks(topic, 0)[1]
    finally:
        reader.close()
    assert written > 300

    deadline = time.monotonic() + 60
    remaining = written
    while time.monotonic() < deadline and remaining > 50:
        # A record appended after segment.ms rolls the active segment so the cleaner can take it.
        writer = KafkaPositionStore(cluster_b, source_alias=alias)
        try:
            writer.save(flow=flow, positions={("orders", 0): 300, ("orders", 1): 600})
        finally:
            writer.close()
        time.sleep(1)
        remaining = len(read_partition(cluster_b, topic, 0))
    assert remaining <= 50, f"still {remaining} of {written} records after 60 s: not compacted"

    reader = KafkaPositionStore(cluster_b, source_alias=alias)
    try:
        assert reader.load(flow=flow, partitions=[("orders", 0), ("orders", 1)]) == {
            ("orders", 0): 300,
            ("orders", 1): 600,
        }
    finally:
        reader.close()


def test_the_offset_syncs_topic_is_compacted_and_translation_says_from_which_offset_it_is_exact(
    cluster_a, cluster_b, unique_name
):
    """The offset-syncs topic is compacted as MM2's is (docs/api.md `before_first_sync`): once the cleaner
    kept only the newest syncs, an offset older than the oldest sync held is refused with the offset from
    which translation is exact, and an offset from there on still translates to the copy of its record."""
    alias = (
        "C" + unique_name.replace("-", "")[:24]
    )  # a target alias of its own: the syncs topic is this test's
    target = ClusterConfig(alias=alias, bootstrap_servers=cluster_b.bootstrap_servers)
    topic = unique_name
    create_topics(cluster_a, [topic], 1)
    create_topics(cluster_b, [f"A.{topic}"], 1)  # as topic sync would (the task's producer never does)
    flow = FlowConfig(source="A", target=alias, enabled=True, topics=(topic,))
    policy = DefaultReplicationPolicy(known_aliases=["A", alias])
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=InMemoryPositionStore(),
        io=kafka_task_io(flow, source=cluster_a, target=target, policy=policy, task_index=0),
    )
    task.assign([(topic, 0)])
    syncs_topic = policy.flow_offset_syncs_topic(flow)
    written = 0

    def copy_more(count: int) -> None:
        nonlocal written
        produce(cluster_a, topic, {0: [(b"k%d" % i, b"v", [], 0) for i in range(written, written + count)]})
        written += count
        run_until(task, replicated(task, {(topic, 0): written}))

    try:
        copy_more(500)  # a sync every offset.lag.max (100) records
        TopicAdmin(cluster_a).set_topic_configs(
            syncs_topic, {"segment.ms": "200", "min.cleanable.dirty.ratio": "0.01"}, current={}
        )
        deadline = time.monotonic() + 60
        while True:  # more syncs roll segments; the cleaner keeps the newest per partition key
            copy_more(100)
            time.sleep(0.5)
            reader = FailoverReader(flow=flow, source=cluster_a, target=target, known_aliases=["A", alias])
            try:
                store = reader.refresh_offset_syncs()
            finally:
                reader.close()
            oldest = store.oldest_upstream_offset(topic, 0)
            if oldest is not None and oldest >= 500:
                break
            assert time.monotonic() < deadline, f"syncs from {oldest} still held after 60 s: not compacted"
    finally:
        task.close()

    topics = {topic: MappedTopic(topic, f"A.{topic}", 1)}
    refused = map_offset(
        OffsetQuery(topic, 0, 7), direction=Direction.SOURCE_TO_TARGET, topics=topics, store=store
    )
    assert refused.error == MappingError.BEFORE_FIRST_SYNC
    assert f"offsets from {oldest} on translate exactly" in refused.message
    query = OffsetQuery(topic, 0, oldest + 3)
    mapped = map_offset(query, direction=Direction.SOURCE_TO_TARGET, topics=topics, store=store)
    assert mapped.error is None and mapped.exact
    copy = read_partition(cluster_b, f"A.{topic}", 0)[mapped.offset]
    assert copy.key() == b"k%d" % query.offset


def test_cli_runs_apache_kafka_clusters_until_sigterm():
    """What `make demo KAFKA=apache` starts (Procfile.demo's kafka line)."""
    import subprocess
    import sys

    process = subprocess.Popen(
        [sys.executable, "-m", "replication", "apache-kafka", "--clusters", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        lines = [process.stdout.readline() for _ in range(2)]
        assert lines[0].startswith("dc1.bootstrap.servers = 127.0.0.1:")
        assert lines[1].startswith("dc2.bootstrap.servers = 127.0.0.1:")
        bootstrap = lines[0].split(" = ")[1].strip()
        assert TopicAdmin(ClusterConfig(alias="dc1", bootstrap_servers=bootstrap)).broker_count() == 1
    finally:
        process.terminate()
    assert process.wait(timeout=60) == 0


def test_a_reader_that_met_a_partition_before_it_existed_reads_it_once_it_does(cluster_b, unique_name):
    """A task's reader asks for the offsets of a remote partition that topic sync has not created yet (a
    grown source topic; a fresh target). librdkafka then keeps the partition unknown until its periodic
    metadata refresh, 5 minutes later: in `make demo` a task could not start for minutes. The reader
    answers from the broker as soon as the partition exists."""
    create_topics(cluster_b, [unique_name], 2)
    reader = PartitionReader(cluster_b, timeout_s=10)
    try:
        deadline = time.monotonic() + 20
        while reader.watermarks_all([(unique_name, 0)])[1]:  # the new topic reaches the client's metadata
            assert time.monotonic() < deadline, "the topic's partition 0 stayed unreadable"
            time.sleep(0.5)
        found, failed = reader.watermarks_all([(unique_name, 3)])
        assert failed[(unique_name, 3)].unknown_partition
        TopicAdmin(cluster_b).create_partitions(unique_name, current=2, desired=4)
        deadline = time.monotonic() + 20
        while True:  # the broker itself knows the new partitions within a second or two
            found, failed = reader.watermarks_all([(unique_name, 3)])
            if not failed:
                break
            assert time.monotonic() < deadline, f"still {failed[(unique_name, 3)]} after 20 s"
            time.sleep(0.5)
        assert found == {(unique_name, 3): (0, 0)}
    finally:
        reader.close()
