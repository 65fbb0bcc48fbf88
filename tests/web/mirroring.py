"""Stored clusters and flows on the session's embedded brokers, and a mirror run to completion in the
test's own thread (a worker's semantics: `MirrorSourceTask` slices, then close, which writes the final
offset syncs)."""

from __future__ import annotations

import re
import time

from controlplane.flows import services
from controlplane.flows.models import Cluster
from replication.config import ClusterConfig, FlowConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_producer
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io
from replication.memory.task_io import MemoryCluster, MemoryEmitter, MemoryIO
from replication.policy import ReplicationPolicy, replication_policy_for
from replication.positions import InMemoryPositionStore
from replication.source import MirrorSourceTask


def stored_cluster(*, actor, config: ClusterConfig) -> Cluster:
    existing = Cluster.objects.filter(alias=config.alias).first()
    return existing or services.cluster_create(
        actor=actor, alias=config.alias, bootstrap_servers=config.bootstrap_servers
    )


def create_topic(cluster: ClusterConfig, name: str, partitions: int) -> None:
    errors = TopicAdmin(cluster).create_topics([NewRemoteTopic(name, name, partitions, 1, {})])
    assert errors[name] is None, errors


def keyed_record(index: int) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """(key, value, headers) of the `index`-th keyed record: key `k<i>`, a JSON value, a header `trace: t-<i>`."""
    value = f'{{"order": {index}, "amount": {index * 10}}}'.encode()
    return f"k{index}".encode(), value, [("trace", f"t-{index}".encode())]


def produce_keyed(
    cluster: ClusterConfig, topic: str, *, count: int, partition: int = 0, first: int = 0
) -> None:
    """`count` keyed records (`keyed_record`, i from `first`), one per produce call (one record a batch)."""
    producer = make_producer(cluster, overrides={"linger.ms": 0})
    for index in range(first, first + count):
        key, value, headers = keyed_record(index)
        producer.produce(topic, key=key, value=value, headers=headers, partition=partition)
        producer.flush(10)


def keyed_around_a_moment(
    cluster: ClusterConfig, topic: str, *, partitions: int, before: int, after: int
) -> int:
    """A new topic with `before` keyed records (produce_keyed) in each partition, then a moment (returned,
    epoch ms), then `after` more, their keys and headers going on from `before`."""
    create_topic(cluster, topic, partitions)
    for partition in range(partitions):
        produce_keyed(cluster, topic, count=before, partition=partition)
    time.sleep(0.05)
    moment_ms = int(time.time() * 1000)
    time.sleep(0.05)
    for partition in range(partitions):
        produce_keyed(cluster, topic, count=after, partition=partition, first=before)
    return moment_ms


# -- the same on an in-memory cluster (the `memory_clusters` fixture) ---------------------------------------
MEMORY_A = ClusterConfig(alias="A", bootstrap_servers="memory-a:9092")
MEMORY_B = ClusterConfig(alias="B", bootstrap_servers="memory-b:9092")


def append_keyed(
    cluster: MemoryCluster, topic: str, *, count: int, partition: int = 0, first: int = 0
) -> None:
    """`produce_keyed` on an in-memory cluster (the records' timestamps: now)."""
    for index in range(first, first + count):
        key, value, headers = keyed_record(index)
        cluster.append(topic, partition, key=key, value=value, headers=headers, timestamp_ms=0)


def memory_keyed_around_a_moment(
    cluster: MemoryCluster, topic: str, *, partitions: int, before: int, after: int
) -> int:
    """`keyed_around_a_moment` on an in-memory cluster: the records before the moment are 1 s older than it."""
    cluster.create(topic, partitions)
    moment_ms = int(time.time() * 1000)
    for partition in range(partitions):
        for index in range(before + after):
            key, value, headers = keyed_record(index)
            stamp = moment_ms + (1000 if index >= before else -1000)
            cluster.append(topic, partition, key=key, value=value, headers=headers, timestamp_ms=stamp)
    return moment_ms


def mirrored_flow(*, actor, source: Cluster, target: Cluster, topic: str, group: str = ".*"):
    return services.flow_create(
        actor=actor,
        source=source,
        target=target,
        enabled=True,
        topics=[re.escape(topic)],
        groups=[group],
    )


def mirror_topic(
    source: ClusterConfig, target: ClusterConfig, topic: str, *, partitions: int, records: int
) -> str:
    """Replicate `topic` (flow source->target, MM2 defaults) until the target holds `records` copies;
    returns the remote topic. The task's close writes the final offset syncs: translation is exact."""
    flow, policy, remote_topic = _mirror_flow(source.alias, target.alias, topic)
    create_topic(target, remote_topic, partitions)
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=KafkaPositionStore(target, source_alias=source.alias),
        io=kafka_task_io(flow, source=source, target=target, policy=policy, task_index=0),
    )
    return _mirrored(task, topic, partitions=partitions, records=records, remote_topic=remote_topic)


def mirror_in_memory(
    source: MemoryCluster, target: MemoryCluster, topic: str, *, partitions: int, records: int
) -> str:
    """`mirror_topic` between in-memory clusters A and B (the `memory_clusters` fixture's): the engine's task
    on the in-memory task IO, its offset syncs written to the flow's offset-syncs topic on A."""
    flow, policy, remote_topic = _mirror_flow("A", "B", topic)
    target.create(remote_topic, partitions)
    emitter = MemoryEmitter(source, policy.flow_offset_syncs_topic(flow))
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=InMemoryPositionStore(),
        io=MemoryIO(source_cluster=source, target_cluster=target, emitter=emitter).task_io(),
    )
    return _mirrored(task, topic, partitions=partitions, records=records, remote_topic=remote_topic)


def _mirror_flow(source: str, target: str, topic: str) -> tuple[FlowConfig, ReplicationPolicy, str]:
    flow = FlowConfig(source=source, target=target, enabled=True, topics=(re.escape(topic),))
    policy = replication_policy_for(flow, known_aliases=[source, target])
    return flow, policy, policy.format_remote_topic(source, topic)


def _mirrored(task: MirrorSourceTask, topic: str, *, partitions: int, records: int, remote_topic: str) -> str:
    task.assign([(topic, p) for p in range(partitions)])
    copied = 0
    deadline = time.monotonic() + 60
    try:
        while copied < records and time.monotonic() < deadline:
            copied += task.run_slice(max_seconds=0.3, max_records=records - copied).records
    finally:
        task.close()
    assert copied >= records, f"only {copied} of {records} records mirrored"
    return remote_topic
