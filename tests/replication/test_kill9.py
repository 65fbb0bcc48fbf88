"""kill -9 the `run` process repeatedly while records flow: nothing lost; in exactly_once nothing duplicated."""

from __future__ import annotations

import random
import signal
import threading
import time
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from harness.runtime import wait_until
from replication.fetching import CONSUME_BATCH
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.source_io import PartitionReader
from replication.positions import PERSIST_RECORDS
from replication.source import MAX_IN_FLIGHT
from tests.replication.test_run_cli import RunProcess, create_topic, write_mm2
from tests.replication.test_source_task import produce_backlog

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

RECORDS = 100_000
PARTITIONS = 4
KILLS = 4


class PacedProducer(threading.Thread):
    """Produces RECORDS keyed records over ~15 s, so the kills land while traffic flows."""

    def __init__(self, cluster, topic: str) -> None:
        super().__init__(daemon=True)
        self.cluster, self.topic = cluster, topic
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            producer = make_producer(self.cluster)
            chunk = 2_000
            for start in range(0, RECORDS, chunk):
                for index in range(start, start + chunk):
                    producer.produce(
                        self.topic, key=b"k%d" % index, value=b"v%d" % index, partition=index % PARTITIONS
                    )
                producer.poll(0)
                time.sleep(0.3)
            assert producer.flush(60) == 0
        except BaseException as exc:
            self.error = exc


def read_values(cluster, topic: str, *, until_unique: int, timeout_s: float) -> dict[int, list[bytes]]:
    """Values per partition in log order (read_committed), once `until_unique` distinct keys arrived."""
    consumer = make_consumer(cluster, overrides={"isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    values: dict[int, list[bytes]] = {p: [] for p in range(PARTITIONS)}
    seen: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(seen) < until_unique and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error():
                    continue
                values[message.partition()].append(message.value())
                seen.add(message.value())
        # Anything written after the last distinct key (a duplicate at the tail) is read too.
        for message in consumer.consume(num_messages=10_000, timeout=2.0):
            if not message.error():
                values[message.partition()].append(message.value())
    finally:
        consumer.close()
    return values


def final_copy(
    properties: Path, cluster, remote: str, *, until_unique: int
) -> tuple[dict[int, list[bytes]], str]:
    """A last run after the kills: read every record of `remote` (`read_values`), then stop cleanly; what
    was read and the run's log."""
    final = RunProcess(properties)
    try:
        got = read_values(cluster, remote, until_unique=until_unique, timeout_s=120)
        assert final.stop() == 0, final.output()[-3000:]
    finally:
        final.kill()
    return got, final.output()


def lost_or_out_of_order(expected: list[bytes], got: list[bytes]) -> str | None:
    """None when `got` is `expected` in order with only replays of already written records."""
    position = {value: index for index, value in enumerate(expected)}
    next_index = 0
    for value in got:
        index = position.get(value)
        if index is None:
            return f"unexpected record {value!r}"
        if index > next_index:
            return f"record {expected[next_index]!r} missing before {value!r}"
        if index == next_index:
            next_index += 1
    if next_index < len(expected):
        return f"{len(expected) - next_index} records missing from {expected[next_index]!r}"
    return None


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_repeated_kill9_loses_nothing(cluster_a, cluster_b, unique_name, tmp_path, guarantee):
    topic = f"{unique_name}-k9"
    create_topic(cluster_a, topic, PARTITIONS)
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        [
            "A->B.enabled = true",
            f"A->B.topics = {topic}",
            "A->B.tasks.max = 2",
            f"A->B.delivery.guarantee = {guarantee}",
        ],
    )
    seed = random.randrange(1 << 30)
    rng = random.Random(seed)
    producer = PacedProducer(cluster_a, topic)
    producer.start()
    for _ in range(KILLS):
        run = RunProcess(properties)
        time.sleep(rng.uniform(1.5, 4.0))  # a random moment: startup, catching up, or steady state
        run.kill()
        assert run.process.returncode == -signal.SIGKILL
    producer.join(timeout=120)
    assert producer.error is None, producer.error

    got, log = final_copy(properties, cluster_b, f"A.{topic}", until_unique=RECORDS)
    context = f"seed {seed}; last log:\n{log[-2000:]}"
    for partition in range(PARTITIONS):
        expected = [b"v%d" % index for index in range(partition, RECORDS, PARTITIONS)]
        if guarantee == "exactly_once":
            assert len(got[partition]) == len(expected), (
                f"partition {partition}: {len(got[partition])} records; {context}"
            )
            assert got[partition] == expected, f"partition {partition} differs; {context}"
        else:
            problem = lost_or_out_of_order(expected, got[partition])
            assert problem is None, f"partition {partition}: {problem}; {context}"


def test_kill9_in_a_transaction_grown_past_a_persist_cadence_duplicates_nothing(
    cluster_a, cluster_b, unique_name, tmp_path
):
    """A backlog lets a transaction run past the persist cadence (`TransactionSpan`); a kill -9 while one
    holds more records than a transaction at the cadence could (a cadence's records, a fetch and the
    records in flight): the next process aborts it and a read_committed reader sees every record once,
    in order."""
    topic, records = f"{unique_name}-span", 300_000
    create_topic(cluster_a, topic, PARTITIONS)
    produce_backlog(cluster_a, topic, records=records, partitions=PARTITIONS)
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        ["A->B.enabled = true", f"A->B.topics = {topic}", "A->B.delivery.guarantee = exactly_once"],
    )
    keys = [(f"A.{topic}", partition) for partition in range(PARTITIONS)]
    written, committed = PartitionReader(cluster_b), PartitionReader(cluster_b, read_committed=True)
    held = PERSIST_RECORDS + CONSUME_BATCH + MAX_IN_FLIGHT

    def open_transaction_holds_more_than_a_cadence() -> bool:
        ends, _ = written.watermarks_all(keys)
        stable, _ = committed.watermarks_all(keys)
        return sum(ends[key][1] - stable[key][1] for key in keys if key in ends and key in stable) > held

    run = RunProcess(properties)
    try:
        wait_until(open_transaction_holds_more_than_a_cadence, timeout_s=120, what="a grown transaction")
    finally:
        run.kill()
        written.close()
        committed.close()
    got, _ = final_copy(properties, cluster_b, f"A.{topic}", until_unique=records)
    for partition in range(PARTITIONS):
        expected = [b"v%d" % index for index in range(partition, records, PARTITIONS)]
        assert got[partition] == expected, f"partition {partition}: {len(got[partition])} records"
