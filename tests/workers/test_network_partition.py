"""A network partition between the clusters for 60 s in the middle of exactly_once replication under load.

The source cluster is a real Apache Kafka broker on a second host (a network namespace joined to ours by a
veth pair, `tests/netns.py`); producers on that host keep writing through the partition, while the workers,
the target and the control plane stay on this side. Taking the veth link down cuts every connection
between the two sides: the flow shows the outage with its age, nothing is lost or duplicated, and it
catches up by itself once the link is back."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from controlplane.flows.models import Flow, FlowState
from harness.runtime import (
    PARTITIONS,
    count_records,
    create_topic,
    mirrored_offsets,
    replication_started,
    wait_until,
)
from replication.config import ClusterConfig
from replication.kafka.apache import ApacheKafkaBroker
from tests.conftest import KAFKA_KIND
from tests.netns import IsolatedHost

pytestmark = [
    pytest.mark.kafka,
    pytest.mark.slow,
    pytest.mark.skipif(KAFKA_KIND != "apache", reason="runs an Apache Kafka broker on a second host"),
]

PARTITION_S = 60
RATE_PER_S = 100
# Produces RATE records/s round robin over the partitions for SECONDS on the isolated host; the producer
# retries through the partition (its own side of the link is never cut); prints how many it wrote.
LOAD = """
import sys, time
from confluent_kafka import Producer
bootstrap, topic, partitions, rate, seconds = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all"})
started, sent = time.monotonic(), 0
while time.monotonic() - started < seconds:
    while sent < int((time.monotonic() - started) * rate):
        producer.produce(topic, value=b"r%d" % sent, partition=sent % partitions)
        sent += 1
    producer.poll(0.01)
assert producer.flush(60) == 0
print(sent)
"""


@pytest.fixture(scope="module")
def isolated_source(tmp_path_factory):
    with IsolatedHost("src") as host:
        broker = ApacheKafkaBroker(
            name="isolated-source",
            host=host.address,
            netns=host.name,
            workdir=tmp_path_factory.mktemp("isolated-kafka"),
        )
        broker.start()
        try:
            yield host, broker
        finally:
            broker.stop()


@pytest.fixture
def cluster_a(isolated_source) -> ClusterConfig:
    """The flows of this module (make_flow) replicate from the isolated host's cluster."""
    return ClusterConfig(alias="A", bootstrap_servers=isolated_source[1].bootstrap_servers)


def _outage(client, flow_id: int) -> dict | None:
    """The status while it shows the outage: the flow faulted for its unreachable source, or a
    partition in error or stale; None while it looks normal."""
    status = client.get(f"/api/v1/flows/{flow_id}/status/").json()
    unreachable = status["state"] == FlowState.FAULTED and "cluster A unreachable" in status["state_reason"]
    failing = [p for p in status["partitions"]["results"] if p["state"] in ("ERR", "STALE")]
    return status if unreachable or failing else None


def test_a_60_s_partition_between_the_clusters_loses_nothing_and_catches_up(
    isolated_source, celery_runtime, make_flow, cluster_a, cluster_b, client_as, unique_name
):
    host, broker = isolated_source
    topic = unique_name
    create_topic(cluster_a, topic)
    flow = make_flow(topics=[topic], delivery_guarantee="exactly_once")
    celery_runtime.start_worker("w1", queues="replication")
    celery_runtime.start_worker("meta", queues="metadata")
    celery_runtime.start_beat()
    remote = f"A.{topic}"
    load_seconds = 20 + PARTITION_S + 10
    load = subprocess.Popen(
        host.command(
            sys.executable,
            "-c",
            LOAD,
            broker.bootstrap_servers,
            topic,
            str(PARTITIONS),
            str(RATE_PER_S),
            str(load_seconds),
        ),
        stdout=subprocess.PIPE,
        text=True,
    )
    viewer = client_as("viewer")
    try:
        wait_until(lambda: replication_started(cluster_b, remote), timeout_s=60, what="replication started")
        time.sleep(5)
        host.partition()
        cut_at = time.monotonic()
        try:
            shown = wait_until(
                lambda: _outage(viewer, flow.pk), timeout_s=PARTITION_S - 5, what="the outage in the status"
            )
            # It says since when: the partitions' last observations age while the source is unreachable.
            assert all(p["age_s"] is not None for p in shown["partitions"]["results"])
            time.sleep(max(0.0, PARTITION_S - (time.monotonic() - cut_at)))
            assert _outage(viewer, flow.pk) is not None, "the outage is still shown at its end"
        finally:
            host.heal()
        sent = int(load.communicate(timeout=load_seconds + 120)[0].strip())
    finally:
        host.heal()
        if load.poll() is None:
            load.kill()
    assert sent >= RATE_PER_S * (load_seconds - 2)

    wait_until(lambda: count_records(cluster_b, remote) >= sent, timeout_s=180, what="caught up")
    offsets = mirrored_offsets(cluster_b, remote)
    for partition in range(PARTITIONS):
        expected = len(range(partition, sent, PARTITIONS))
        assert offsets[partition] == list(range(expected)), f"partition {partition}: lost or duplicated"
    wait_until(
        lambda: Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE,
        timeout_s=60,
        what="the flow recovered",
    )
