"""`python -m replication run mm2.properties` as a subprocess against the two embedded clusters."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

from harness.runtime import READ_TO_END, READ_TO_END_POLL_S
from replication.config import DeliveryGuarantee, FlowConfig
from replication.formats import Heartbeat
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_admin, make_consumer, make_producer
from replication.kafka.source_io import PartitionReader, mirror_producer
from replication.mirroring import source_offsets
from replication.policy import DefaultReplicationPolicy
from replication.remote import replication_hops

pytestmark = pytest.mark.kafka

REPO = Path(__file__).resolve().parents[2]
IDENTITY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

Record = tuple[bytes | None, bytes | None, tuple, int]  # key, value, headers, timestamp


# --- helpers shared with test_kill9 ------------------------------------------------------------------


def write_mm2(path: Path, clusters: Mapping[str, object], lines: Iterable[str]) -> Path:
    """An mm2.properties for the session clusters plus flow lines (fast intervals for tests)."""
    text = [f"clusters = {', '.join(clusters)}"]
    text += [
        f"{alias}.bootstrap.servers = {cluster.bootstrap_servers}" for alias, cluster in clusters.items()
    ]
    text += [
        "refresh.topics.interval.seconds = 1",
        "replication.factor = 1",
        "checkpoints.topic.replication.factor = 1",
        "heartbeats.topic.replication.factor = 1",
        "offset-syncs.topic.replication.factor = 1",
        *lines,
    ]
    path.write_text("\n".join(text) + "\n")
    return path


class RunProcess:
    """`python -m replication run FILE`, its output in a log file shown when a test fails."""

    def __init__(self, properties: Path, *extra: str) -> None:
        self.log_path = properties.with_suffix(f".{time.monotonic_ns()}.log")
        with self.log_path.open("w") as log:  # the child keeps its own descriptor
            self.process = subprocess.Popen(
                [sys.executable, "-m", "replication", "run", str(properties), *extra],
                cwd=REPO,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                # SIGABRT dumps every thread's stack to the log (a stop that hangs shows where)
                env={**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONFAULTHANDLER": "1"},
            )

    def output(self) -> str:
        return self.log_path.read_text()

    def stop(self, sig: int = signal.SIGTERM, timeout_s: float = 60.0) -> int:
        if self.process.poll() is None:
            self.process.send_signal(sig)
        try:
            return self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.process.send_signal(signal.SIGABRT)
            self.process.wait(timeout=30)
            raise AssertionError(
                f"still running {timeout_s:g} s after {signal.Signals(sig).name}; its threads:\n"
                f"{self.output()[-6000:]}"
            ) from None

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=30)


def create_topic(cluster, name: str, partitions: int) -> None:
    admin = make_admin(cluster)  # kept referenced until the result is in
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()


def produce_records(cluster, topic: str, *, partitions: int, count: int, origin: str = "") -> list[Record]:
    """Keyed records with headers and explicit timestamps, spread over partitions; what was sent."""
    producer = make_producer(cluster)
    sent: list[Record] = []
    base_ts = 1_600_000_000_000
    for index in range(count):
        key, value = f"{origin}k{index}".encode(), f"{origin}{topic}-v{index}".encode()
        headers = (("seq", str(index).encode()), ("origin", origin.encode() or b"-"))
        timestamp = base_ts + index
        producer.produce(
            topic,
            key=key,
            value=value,
            headers=list(headers),
            timestamp=timestamp,
            partition=index % partitions,
        )
        sent.append((key, value, headers, timestamp))
    assert producer.flush(30) == 0
    return sent


def read_partitions(
    cluster,
    topic: str,
    *,
    partitions: int,
    expected: int,
    timeout_s: float = 60.0,
    run: RunProcess | None = None,
):
    """Every record of `topic` per partition, once `expected` records are there (or the deadline passed,
    or `run` exited)."""
    consumer = make_consumer(cluster)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    by_partition: dict[int, list[Record]] = {p: [] for p in range(partitions)}
    deadline = time.monotonic() + timeout_s
    try:
        while sum(map(len, by_partition.values())) < expected and time.monotonic() < deadline:
            if run is not None and run.process.poll() is not None:
                break
            for message in consumer.consume(num_messages=5000, timeout=0.5):
                if message.error():
                    continue  # e.g. the topic does not exist yet
                headers = tuple(message.headers() or ())
                record = (message.key(), message.value(), headers, message.timestamp()[1])
                by_partition[message.partition()].append(record)
    finally:
        consumer.close()
    return by_partition


def expected_by_partition(sent: list[Record], partitions: int) -> dict[int, list[Record]]:
    return {p: sent[p::partitions] for p in range(partitions)}


def wait_for_heartbeat(
    cluster, topic: str, pair: tuple[str, str], *, after_ms: int, run: RunProcess, timeout_s: float = 30.0
) -> tuple[Heartbeat, int] | None:
    """The first heartbeat of `pair` (source, target) in `topic` newer than `after_ms`, with its record
    timestamp; None when none came before the deadline (or `run` exited)."""
    consumer = make_consumer(cluster)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and run.process.poll() is None:
            message = consumer.poll(0.5)
            if message is None or message.error():
                continue  # the topic may not exist yet
            heartbeat = Heartbeat.decode(message.key(), message.value())
            found = (heartbeat.source_cluster_alias, heartbeat.target_cluster_alias) == pair
            if found and heartbeat.timestamp_ms >= after_ms:
                return heartbeat, message.timestamp()[1]
    finally:
        consumer.close()
    return None


def topic_names(cluster) -> set[str]:
    return set(TopicAdmin(cluster).partition_counts())


# --- tests -------------------------------------------------------------------------------------------


def test_topics_replicate_record_for_record_in_order_then_sigterm_stops_cleanly(
    cluster_a, cluster_b, unique_name, tmp_path
):
    topics = {f"{unique_name}-t{i}": partitions for i, partitions in enumerate((1, 3, 4))}
    sent = {}
    for topic, partitions in topics.items():
        create_topic(cluster_a, topic, partitions)
        sent[topic] = produce_records(cluster_a, topic, partitions=partitions, count=200)
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        ["A->B.enabled = true", f"A->B.topics = {unique_name}.*", "A->B.tasks.max = 2"],
    )
    started_ms = int(time.time() * 1000)
    run = RunProcess(properties)
    try:
        for topic, partitions in topics.items():
            got = read_partitions(cluster_b, f"A.{topic}", partitions=partitions, expected=200, run=run)
            assert got == expected_by_partition(sent[topic], partitions), run.output()[-3000:]
        # B->A has no flow, yet emits heartbeats on A (MM2's cluster pairs), which A->B carries to B: B sees
        # A upstream. Each heartbeat record is stamped with the heartbeat's own time.
        carried = wait_for_heartbeat(cluster_b, "A.heartbeats", ("B", "A"), after_ms=started_ms, run=run)
        assert carried is not None, run.output()[-3000:]
        assert carried[1] == carried[0].timestamp_ms
        policy = DefaultReplicationPolicy(known_aliases=["A", "B"])
        assert replication_hops(topic_names(cluster_b), policy=policy, upstream_alias="A") == 1
        # A matching topic created while it runs is picked up and the partitions are reassigned.
        later = f"{unique_name}-later"
        create_topic(cluster_a, later, 2)
        sent_later = produce_records(cluster_a, later, partitions=2, count=60)
        got = read_partitions(cluster_b, f"A.{later}", partitions=2, expected=60, run=run)
        assert got == expected_by_partition(sent_later, 2), run.output()[-3000:]
        assert run.stop(signal.SIGTERM) == 0, run.output()[-3000:]
    finally:
        run.kill()
    assert "stopped cleanly" in run.output()


def test_include_exclude_and_renaming_with_a_custom_separator(cluster_a, cluster_b, unique_name, tmp_path):
    kept, skipped = f"{unique_name}-keep", f"{unique_name}-skip"
    for topic in (kept, skipped):
        create_topic(cluster_a, topic, 2)
    sent = produce_records(cluster_a, kept, partitions=2, count=50)
    produce_records(cluster_a, skipped, partitions=2, count=50)
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        [
            "A->B.enabled = true",
            f"A->B.topics = {unique_name}.*",
            "A->B.topics.exclude = .*-skip, __.*, .*[\\-\\.]internal",
            "A->B.replication.policy.separator = _",
        ],
    )
    run = RunProcess(properties, "--duration-s", "6")
    try:
        got = read_partitions(cluster_b, f"A_{kept}", partitions=2, expected=50, run=run)
        assert got == expected_by_partition(sent, 2), run.output()[-3000:]
        assert run.process.wait(timeout=60) == 0, run.output()[-3000:]  # --duration-s ends it by itself
    finally:
        run.kill()
    names = topic_names(cluster_b)
    assert f"A_{skipped}" not in names and f"A.{kept}" not in names


def test_clusters_with_only_heartbeat_pairs_targeting_them_emits_those_heartbeats(
    cluster_a, cluster_b, unique_name, tmp_path
):
    """MM2's dedicated mode with `--clusters A` and only A->B enabled runs the pair B->A's heartbeat
    connector: heartbeats on A, no replication to B."""
    topic = f"{unique_name}-t"
    create_topic(cluster_a, topic, 1)
    produce_records(cluster_a, topic, partitions=1, count=10)
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        ["A->B.enabled = true", f"A->B.topics = {unique_name}.*"],
    )
    started_ms = int(time.time() * 1000)
    run = RunProcess(properties, "--clusters", "A")
    try:
        emitted = wait_for_heartbeat(cluster_a, "heartbeats", ("B", "A"), after_ms=started_ms, run=run)
        assert emitted is not None, run.output()[-3000:]
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.kill()
    assert "running no flow; heartbeats of B->A" in run.output()
    assert "objects frozen out of the cycle collector's walks" in run.output()  # start-up done
    assert f"A.{topic}" not in topic_names(cluster_b)


def test_nothing_to_run_for_the_selected_clusters_exits_2(cluster_a, cluster_b, tmp_path):
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        ["A->B.enabled = true", "emit.heartbeats.enabled = false"],
    )
    run = RunProcess(properties, "--clusters", "A")
    try:
        assert run.process.wait(timeout=60) == 2, run.output()[-3000:]
    finally:
        run.kill()
    assert "no enabled flow and no heartbeat pair targeting A" in run.output()


def count_to_end(cluster, topic: str, *, partitions: int, timeout_s: float = 60.0) -> int:
    """How many records `topic` holds: every partition read until the broker says end of partition."""
    consumer = make_consumer(cluster, overrides=READ_TO_END)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    at_end: set[int] = set()
    count = 0
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, (
                f"{topic}: partitions {at_end} of {partitions} reached their end"
            )
            for message in consumer.consume(num_messages=5000, timeout=READ_TO_END_POLL_S):
                if message.error() is None:
                    count += 1
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition())
    finally:
        consumer.close()
    return count


def _assert_counts_stay(cluster_counts: Mapping[tuple[str, str], int], clusters, *, observe_s: float) -> None:
    """Counts unchanged over several refresh intervals: nothing keeps flowing in a loop."""
    time.sleep(observe_s)  # a negative check: nothing new may arrive during the observation window
    for (alias, topic), count in cluster_counts.items():
        assert count_to_end(clusters[alias], topic, partitions=2) == count, (alias, topic)


def test_active_active_default_policy_does_not_loop(cluster_a, cluster_b, unique_name, tmp_path):
    on_a, on_b = f"{unique_name}-a", f"{unique_name}-b"
    create_topic(cluster_a, on_a, 2)
    create_topic(cluster_b, on_b, 2)
    produce_records(cluster_a, on_a, partitions=2, count=40, origin="A")
    produce_records(cluster_b, on_b, partitions=2, count=30, origin="B")
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        ["A->B.enabled = true", "B->A.enabled = true", f"topics = .*{unique_name}.*"],
    )
    clusters = {"A": cluster_a, "B": cluster_b}
    run = RunProcess(properties)
    try:
        assert (
            sum(
                map(len, read_partitions(cluster_b, f"A.{on_a}", partitions=2, expected=40, run=run).values())
            )
            == 40
        )
        assert (
            sum(
                map(len, read_partitions(cluster_a, f"B.{on_b}", partitions=2, expected=30, run=run).values())
            )
            == 30
        )
        _assert_counts_stay(
            {("A", on_a): 40, ("B", f"A.{on_a}"): 40, ("B", on_b): 30, ("A", f"B.{on_b}"): 30},
            clusters,
            observe_s=3,
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.kill()
    assert not {name for name in topic_names(cluster_a) if name.startswith(f"B.A.{unique_name}")}
    assert not {name for name in topic_names(cluster_b) if name.startswith(f"A.B.{unique_name}")}


def test_active_active_identity_names_with_provenance_header_does_not_loop(
    cluster_a, cluster_b, unique_name, tmp_path
):
    shared = f"{unique_name}-shared"
    create_topic(cluster_a, shared, 2)
    create_topic(cluster_b, shared, 2)
    produce_records(cluster_a, shared, partitions=2, count=40, origin="A")
    produce_records(cluster_b, shared, partitions=2, count=30, origin="B")
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        [
            "A->B.enabled = true",
            "B->A.enabled = true",
            f"topics = {unique_name}.*",
            f"replication.policy.class = {IDENTITY}",
            "provenance.header.enabled = true",
        ],
    )
    run = RunProcess(properties)
    try:
        for cluster in (cluster_a, cluster_b):
            got = read_partitions(cluster, shared, partitions=2, expected=70, run=run)
            keys = sorted(record[0] for records in got.values() for record in records)
            assert len(keys) == 70 and len(set(keys)) == 70, run.output()[-3000:]
        _assert_counts_stay(
            {("A", shared): 70, ("B", shared): 70}, {"A": cluster_a, "B": cluster_b}, observe_s=3
        )
        assert run.stop() == 0, run.output()[-3000:]
    finally:
        run.kill()


def test_unreachable_cluster_fails_at_startup_naming_it(cluster_a, tmp_path, unique_name):
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": type("Dead", (), {"bootstrap_servers": "127.0.0.1:1"})()},
        ["A->B.enabled = true", f"A->B.topics = {unique_name}.*"],
    )
    run = RunProcess(properties)
    try:
        code = run.process.wait(timeout=120)
    finally:
        run.kill()
    output = run.output()
    assert code != 0
    assert "cluster B (127.0.0.1:1)" in output, output[-2000:]


def _committed_source_offsets(cluster, topic: str, partitions: int) -> dict[int, list[int | None]]:
    """Per partition, the source offsets a read_committed reader sees (None: a record without one)."""
    reader = PartitionReader(cluster, read_committed=True)
    try:
        records, failures = reader.read_all_to_end({(topic, p): 0 for p in range(partitions)})
    finally:
        reader.close()
    assert not failures, failures
    return {p: source_offsets([headers for _, headers in records[(topic, p)]]) for p in range(partitions)}


def test_a_run_fences_the_task_ids_of_an_earlier_run_before_its_tasks_write(
    cluster_a, cluster_b, unique_name, tmp_path
):
    source = f"S{unique_name[-8:]}"  # a flow of its own: its transactional ids are its own
    remote = f"{source}.{unique_name}"
    create_topic(cluster_a, unique_name, 2)
    produce_records(cluster_a, unique_name, partitions=2, count=200)
    create_topic(cluster_b, remote, 2)
    flow = FlowConfig(source=source, target="B", delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE)
    # A frozen process of an earlier run with tasks.max 4, whose task 3 held partition 1: a transaction open.
    zombie = mirror_producer(flow, cluster_b, task_index=3)
    zombie.init_transactions(30)
    zombie.begin_transaction()
    zombie.produce(remote, value=b"zombie", partition=1)
    assert zombie.flush(30) == 0
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {source: cluster_a, "B": cluster_b},
        [
            f"{source}->B.enabled = true",
            f"{source}->B.topics = {unique_name}",
            f"{source}->B.delivery.guarantee = exactly_once",
        ],
    )
    run = RunProcess(properties)
    try:
        deadline = time.monotonic() + 60
        while len(_committed_source_offsets(cluster_b, remote, 2)[0]) < 100:  # partition 0: not the zombie's
            assert time.monotonic() < deadline and run.process.poll() is None, run.output()[-3000:]
            time.sleep(0.2)
        with pytest.raises(KafkaException, match="fenced"):  # it wakes up: too late
            zombie.commit_transaction(30)
        assert "tasks 0..3 fenced before its tasks write" in run.output()
        assert _committed_source_offsets(cluster_b, remote, 2) == {0: list(range(100)), 1: list(range(100))}
        assert run.stop(signal.SIGTERM) == 0, run.output()[-3000:]
    finally:
        run.kill()
