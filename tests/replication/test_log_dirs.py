"""A topic's size on disk from DescribeLogDirs on real Apache Kafka: it grows by at least the bytes written,
is read over PLAINTEXT and SASL_SSL (SCRAM, the test CA) with the cluster's librdkafka properties, and a
principal without DESCRIBE on the cluster, a cluster that does not answer or settings the reader cannot
map are `SizesUnread` with the reason, never another exception."""

from __future__ import annotations

import time

import pytest

from replication.config import ClusterConfig
from replication.kafka.clients import make_producer
from replication.kafka.log_dirs import SizesUnread, TopicSizes, kafka_python_config, read_topic_sizes
from tests.replication.test_source_task import create_topics

pytestmark = pytest.mark.kafka

VALUE_BYTES = 1000


def _write(cluster: ClusterConfig, topic: str, *, partition: int, count: int) -> int:
    """`count` records of VALUE_BYTES incompressible-enough bytes each; the value bytes written."""
    producer = make_producer(cluster, overrides={"compression.type": "none"})
    for index in range(count):
        value = (f"{index:08d}".encode() * (VALUE_BYTES // 8 + 1))[:VALUE_BYTES]
        producer.produce(topic, value=value, partition=partition)
    assert producer.flush(30) == 0
    return count * VALUE_BYTES


def _sizes(cluster: ClusterConfig, topic: str, partitions: int = 2, timeout_s: float = 10) -> TopicSizes:
    leaders = {topic: {p: 1 for p in range(partitions)}}
    return read_topic_sizes(cluster, leaders=leaders, brokers=[1], timeout_s=timeout_s)[topic]


def test_sizes_grow_by_at_least_the_bytes_written_per_partition(cluster_a, unique_name, kafka_brokers):
    create_topics(cluster_a, [unique_name], 2)
    empty = _sizes(cluster_a, unique_name)
    assert [p.partition for p in empty.partitions] == [0, 1] and empty.total_bytes == 0

    written = _write(cluster_a, unique_name, partition=1, count=200)
    grown = _sizes(cluster_a, unique_name)
    one = grown.partition(1)
    assert one is not None and one.leader_bytes == one.total_bytes == grown.total_bytes
    # each record adds its batch framing (at most ~100 bytes here), never less than its value
    assert written < grown.total_bytes < written * 1.2
    assert grown.partition(0).total_bytes == 0 and [r.broker for r in one.replicas] == [1]

    with_offline = read_topic_sizes(cluster_a, leaders={unique_name: {1: 1}}, brokers=[1, 7], timeout_s=10)
    assert with_offline[unique_name].unreported_brokers == (7,)  # not in the metadata: not asked
    assert with_offline[unique_name].total_bytes == one.total_bytes

    every = read_topic_sizes(cluster_a, leaders=None, brokers=None, timeout_s=10)  # the topic list's read
    assert every[unique_name].total_bytes == grown.total_bytes
    assert every[unique_name].partition(1).leader == -1  # leaders not asked: only the replicas' sizes


def test_sizes_are_read_over_sasl_ssl_and_a_principal_without_cluster_describe_is_named(
    secure_clusters, unique_name
):
    admin = secure_clusters.config("A")
    create_topics(admin, [unique_name], 1)
    written = _write(admin, unique_name, partition=0, count=50)
    assert _sizes(admin, unique_name, partitions=1).total_bytes > written

    with pytest.raises(SizesUnread, match="broker 1 refused DescribeLogDirs: CLUSTER_AUTHORIZATION_FAILED"):
        _sizes(secure_clusters.config("A", user="mirror"), unique_name, partitions=1)
    started = time.monotonic()
    with pytest.raises(SizesUnread, match="DescribeLogDirs failed within 2s"):
        _sizes(secure_clusters.config("A", password="wrong"), unique_name, partitions=1, timeout_s=2)
    assert time.monotonic() - started < 10


def test_a_cluster_that_does_not_answer_is_named_within_the_timeout():
    gone = ClusterConfig(alias="gone", bootstrap_servers="127.0.0.1:1")
    started = time.monotonic()
    with pytest.raises(SizesUnread, match=r"cluster gone \(127.0.0.1:1\): DescribeLogDirs failed within 1s"):
        _sizes(gone, "t", timeout_s=1)
    assert time.monotonic() - started < 5


@pytest.mark.parametrize(
    ("client", "reason"),
    [
        ({"security.protocol": "SASL_SSL", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism GSSAPI"),
        ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12"}, "ssl.keystore.location"),
        ({"security.protocol": "SSL", "ssl.ca.pem": "not a certificate"}, "TLS settings could not be loaded"),
        ({"security.protocol": "WHAT"}, "security.protocol WHAT"),
    ],
)
def test_settings_the_reader_cannot_map_are_named(client, reason):
    with pytest.raises(SizesUnread, match=reason):
        kafka_python_config(ClusterConfig(alias="x", bootstrap_servers="h:1", client=client))


def test_librdkafka_settings_map_to_kafka_pythons():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";'
    config = kafka_python_config(
        ClusterConfig(
            alias="x",
            bootstrap_servers="h1:9093,h2:9093",
            client={
                "security.protocol": "sasl_ssl",
                "sasl.mechanism": "SCRAM-SHA-256",
                "sasl.jaas.config": jaas,
                "ssl.endpoint.identification.algorithm": "none",
            },
        )
    )
    assert config["bootstrap_servers"] == ["h1:9093", "h2:9093"]
    assert (config["security_protocol"], config["sasl_mechanism"]) == ("SASL_SSL", "SCRAM-SHA-256")
    assert (config["sasl_plain_username"], config["sasl_plain_password"]) == ("u", "p")
    assert config["ssl_context"].check_hostname is False
