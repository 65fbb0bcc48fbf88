"""Reads that wait only for what is not fetched yet (`replication.kafka.clients.consume_available`), on the
suite's Apache Kafka broker: a verification range that ends in transaction markers, the newest heartbeat
and the first record not replicated (a failover's plan and a drill ask both).

Counted, not timed: a `consume(num_messages=n, timeout=t)` that returns some messages but fewer than n
has waited out its whole timeout for a batch to fill, with records there to hand over (confluent-kafka
returns only with n messages or at t). Each of these reads asked for a batch so before: 0.2-0.5 s per
read with what it needed fetched already, a whole poll per verified range. A wait for records not
fetched yet (a `poll` that finds none) is not counted: a busy broker may take that long."""

from __future__ import annotations

import time

import pytest

from replication.config import ClusterConfig, FlowConfig
from replication.connector import NewRemoteTopic
from replication.formats import Heartbeat
from replication.kafka import failover_io, verification_io
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.clusters import KAFKA

pytestmark = pytest.mark.kafka


class CountingConsumer:
    """A real consumer that counts the calls that waited out their timeout for a batch to fill
    (`batch_waits`)."""

    def __init__(self, consumer) -> None:
        self._consumer, self.batch_waits = consumer, 0

    def consume(self, num_messages: int = 1, timeout: float = -1):
        messages = self._consumer.consume(num_messages, timeout)
        if timeout > 0 and 0 < len(messages) < num_messages:
            self.batch_waits += 1
        return messages

    def __getattr__(self, name: str):
        return getattr(self._consumer, name)


@pytest.fixture
def counted(monkeypatch) -> list[CountingConsumer]:
    """Every consumer the verifier's and the failover's reads make, counting."""
    made: list[CountingConsumer] = []

    def counting(*args, **kwargs) -> CountingConsumer:
        made.append(CountingConsumer(make_consumer(*args, **kwargs)))
        return made[-1]

    for module in (verification_io, failover_io):
        monkeypatch.setattr(module, "make_consumer", counting)
    return made


def _create(cluster: ClusterConfig, topic: str, partitions: int) -> None:
    (error,) = TopicAdmin(cluster).create_topics([NewRemoteTopic(topic, topic, partitions, 1, {})]).values()
    assert error is None, error


def test_a_range_ending_in_transaction_markers_is_read_without_waiting_out_a_poll(
    cluster_a, unique_name, counted
):
    topic = unique_name
    _create(cluster_a, topic, 2)
    producer = make_producer(cluster_a, overrides={"transactional.id": f"tx-{unique_name}"})
    producer.init_transactions(30)
    for partitions in ((0, 1), (0,)):
        producer.begin_transaction()
        for partition in partitions:
            for index in range(5):
                producer.produce(topic, value=b"%d" % index, partition=partition)
        producer.commit_transaction(30)
    # Partition 0: records 0-4, a commit marker at 5, records 6-10, a marker at 11. Partition 1: records
    # 0-4 and a marker at 5, its end. Both ranges [0, 6) end in a marker.
    reader = verification_io.RangeReader(cluster_a, timeout_s=10)
    try:
        for _ in range(2):  # the second read: a reused consumer, assigned again
            found = reader.read_ranges({(topic, 0): (0, 6, None), (topic, 1): (0, 6, None)})
            assert {key: [record.offset for record in records] for key, records in found.items()} == {
                (topic, 0): [0, 1, 2, 3, 4],
                (topic, 1): [0, 1, 2, 3, 4],
            }
    finally:
        reader.close()
    assert [consumer.batch_waits for consumer in counted] == [0]


def test_the_newest_heartbeat_and_the_first_records_not_replicated_are_read_without_waiting_out_a_poll(
    cluster_a, cluster_b, unique_name, counted
):
    topic, now_ms = unique_name, int(time.time() * 1000)
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(topic,))
    reader = KAFKA.flow_clusters(
        flow=flow, source=cluster_a, target=cluster_b, known_aliases=["A", "B"], timeout_s=10
    )
    _create(cluster_a, topic, 2)
    producer = make_producer(cluster_a, overrides={"linger.ms": 0})
    for partition in (0, 1):
        for index in range(5):
            producer.produce(topic, value=b"%d" % index, partition=partition)
    assert producer.flush(30) == 0
    beat = Heartbeat("A", "B", now_ms)
    heartbeats = make_producer(cluster_b, overrides={"linger.ms": 0})
    heartbeats.produce(reader.policy.heartbeats_topic(), key=beat.key(), value=beat.value(), timestamp=now_ms)
    assert heartbeats.flush(30) == 0
    try:
        assert reader.newest_heartbeat_ms() >= now_ms
        found, unsettled = reader.first_unreplicated({(topic, 0): 3, (topic, 1): None})
        assert {key: record.offset for key, record in found.items()} == {(topic, 0): 3, (topic, 1): 0}
        assert not unsettled
    finally:
        reader.close()
    assert [consumer.batch_waits for consumer in counted] == [0, 0]
