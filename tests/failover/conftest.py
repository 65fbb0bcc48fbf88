"""Failover end to end: stored clusters and flows on real embedded brokers, replication in a thread.

`Mirror` runs a flow the way a worker does: `MirrorSourceTask` slices and the flow's periodic tasks
(heartbeats, checkpoints) while the stored flow is runnable; pausing the flow stops it within a slice.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import KafkaError, TopicPartition
from django.db import connection

from controlplane import operations
from controlplane.core.models import AuditEvent
from controlplane.flows import services
from controlplane.flows.models import Flow, FlowState
from controlplane.status.runtime import runtime_flow_spec
from harness.runtime import READ_TO_END, READ_TO_END_POLL_S
from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.flow_tasks import periodic_tasks_for_flow
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io
from replication.policy import replication_policy_for
from replication.source import MirrorSourceTask, SliceError
from tests.controlplane.conftest import admin_user, client_as, tokens  # noqa: F401 - shared fixtures

Record = tuple[int, bytes]  # (offset, value)


def wait_for(condition: Callable[[], object], *, timeout_s: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = condition()
        if result:
            return result
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def create_topic(cluster: ClusterConfig, name: str, partitions: int) -> None:
    errors = TopicAdmin(cluster).create_topics([NewRemoteTopic(name, name, partitions, 1, {})])
    assert errors[name] is None, errors


def produce_transactions(
    cluster: ClusterConfig, topic: str, *, partitions: int, batches: int, tag: str
) -> None:
    """`batches` committed transactions of 2 records per partition: each commit marker leaves a gap."""
    producer = make_producer(cluster, overrides={"transactional.id": f"fo-{tag}-{topic}", "linger.ms": 0})
    producer.init_transactions(30)
    for batch in range(batches):
        producer.begin_transaction()
        for partition in range(partitions):
            for index in range(2):
                value = f"{tag}-p{partition}-b{batch}-r{index}".encode()
                producer.produce(topic, value=value, partition=partition)
        producer.commit_transaction(30)


def produce_plain(
    cluster: ClusterConfig, topic: str, *, partitions: int, count: int, tag: str, one_per_batch: bool = False
) -> None:
    """`count` records `{tag}-p{partition}-{index}` on each partition; `one_per_batch`: each sent alone (a
    flush after each round), for the embedded broker, whose end offset is exact only for those (DESIGN 4)."""
    producer = make_producer(cluster, overrides={"linger.ms": 0})
    for index in range(count):
        for partition in range(partitions):
            producer.produce(topic, value=f"{tag}-p{partition}-{index}".encode(), partition=partition)
        if one_per_batch:
            assert producer.flush(30) == 0
    assert producer.flush(30) == 0


def read_partition(cluster: ClusterConfig, topic: str, partition: int, *, start: int = 0) -> list[Record]:
    """Every record of the partition from `start`, read to its end."""
    consumer = make_consumer(cluster, overrides=READ_TO_END)
    consumer.assign([TopicPartition(topic, partition, start)])
    records: list[Record] = []
    deadline = time.monotonic() + 30
    try:
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, timeout=READ_TO_END_POLL_S):
                if message.error() is None:
                    records.append((message.offset(), message.value()))
                elif message.error().code() == KafkaError._PARTITION_EOF:
                    return records
    finally:
        consumer.close()
    raise AssertionError(f"{topic}[{partition}] did not reach its end")


def commit_after(cluster: ClusterConfig, group: str, topic: str, consumed: dict[int, list[Record]]) -> None:
    """Commit what a consumer of `group` commits after reading `consumed`: last offset + 1 per partition."""
    consumer = make_consumer(cluster, group_id=group)
    try:
        consumer.commit(
            offsets=[TopicPartition(topic, p, records[-1][0] + 1) for p, records in consumed.items()],
            asynchronous=False,
        )
    finally:
        consumer.close()


def next_records(cluster: ClusterConfig, group: str, topic: str, partitions: int) -> dict[int, bytes]:
    """What a consumer of `group` reads first on each partition, from the group's committed offsets."""
    consumer = make_consumer(cluster, group_id=group)
    try:
        committed = consumer.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=30)
        assert all(tp.offset >= 0 for tp in committed), committed
        consumer.assign(committed)
        first: dict[int, bytes] = {}
        deadline = time.monotonic() + 30
        while len(first) < partitions and time.monotonic() < deadline:
            for message in consumer.consume(100, timeout=READ_TO_END_POLL_S):
                if message.error() is None:
                    first.setdefault(message.partition(), message.value())
        return first
    finally:
        consumer.close()


def store_cluster(*, actor, config: ClusterConfig):
    return services.cluster_create(
        actor=actor, alias=config.alias, bootstrap_servers=config.bootstrap_servers
    )


class Mirror:
    """Replicates `topic` of a stored flow in a thread while the flow is runnable (a worker's semantics)."""

    def __init__(self, flow_id: int, topic: str, partitions: int) -> None:
        spec = runtime_flow_spec(flow_id=flow_id)
        self.flow_id = flow_id
        self.partitions = [(topic, p) for p in range(partitions)]
        self.policy = replication_policy_for(spec.flow, known_aliases=spec.known_aliases)
        self.remote_topic = self.policy.format_remote_topic(spec.flow.source, topic)
        if self.remote_topic not in TopicAdmin(spec.target).partition_counts():
            create_topic(spec.target, self.remote_topic, partitions)
        self._spec = spec
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"mirror-{spec.flow.name}", daemon=True)
        self.slices_while_paused = 0
        self.errors: list[SliceError] = []

    def start(self) -> Mirror:
        self._thread.start()
        return self

    def _run(self) -> None:
        spec = self._spec
        task = MirrorSourceTask(
            flow=spec.flow,
            policy=self.policy,
            task_index=0,
            position_store=KafkaPositionStore(spec.target, source_alias=spec.flow.source),
            io=kafka_task_io(
                spec.flow, source=spec.source, target=spec.target, policy=self.policy, task_index=0
            ),
        )
        task.assign(self.partitions)
        periodic = periodic_tasks_for_flow(
            flow=spec.flow, source=spec.source, target=spec.target, known_aliases=spec.known_aliases
        )
        try:
            while not self._stop.is_set():
                if not runtime_flow_spec(flow_id=self.flow_id).runnable:
                    time.sleep(0.1)
                    continue
                result = task.run_slice(max_seconds=0.3)
                self.errors.extend(result.errors)
                for job in periodic:
                    job.tick(now=time.time())
        finally:
            task.close()
            for job in periodic:
                job.close()
            connection.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(60)


@pytest.fixture
def mirrors():
    started: list[Mirror] = []

    def start(flow_id: int, topic: str, partitions: int) -> Mirror:
        started.append(Mirror(flow_id, topic, partitions).start())
        return started[-1]

    yield start
    for mirror in started:
        mirror.stop()


def flow_topics(topic: str) -> list[str]:
    return [re.escape(topic)]


def stored_flow(*, actor, source, target, topic: str, group: str, **settings):
    """An enabled flow replicating only `topic` and checkpointing only `group` (the clusters are shared)."""
    return services.flow_create(
        actor=actor,
        source=source,
        target=target,
        enabled=True,
        topics=flow_topics(topic),
        groups=[re.escape(group)],
        emit_checkpoints_interval_seconds=1,
        refresh_groups_interval_seconds=1,
        **settings,
    )


def run_queued(client, response) -> dict:
    """Run the queued operation here, as an operations worker does; its state as the API shows it."""
    operations.run_operation(operation_id=response.json()["id"], worker="test-worker")
    return client.get(response["Location"]).json()


def fail_over_with_the_source_gone(client_for, *, flow, group: str) -> dict:
    """The failover of `group` once the flow's source is gone, its workers' last report 4 records behind
    on partition 0: the plan (from the checkpoints, `source_reachable` a warning, `lag_zero` failed on the
    last measurement, with its age), the request refused unless forced, then forced; the forced run's
    state as the API shows it (`client_for(role)`: an API client of that role), with the checks a forced failover passes already made."""
    operator = client_for("operator")
    plan = client_for("viewer").get(f"/api/v1/flows/{flow.pk}/failover/plan/?groups={group}").json()
    checks = {item["check"]: item["status"] for item in plan["checklist"]}
    assert checks["source_reachable"] == "warn" and checks["lag_zero"] == "fail"
    assert plan["records_at_risk"] == 4 and not plan["source_reachable"]
    assert any("last measurement" in note for note in plan["notes"])  # the lag known, with its age
    assert {row["origin"] for row in plan["groups"][0]["partitions"]} == {"checkpoint"}

    url, body = f"/api/v1/flows/{flow.pk}/failover/", {"groups": [group], "confirm": "A->B"}
    refused = run_queued(operator, operator.post(url, body, format="json"))
    assert refused["outcome"] == "refused" and "fail over with force" in refused["error"]
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE
    forced = operator.post(url, {**body, "force": True}, format="json")
    assert forced.status_code == 202, forced.content
    result = run_queued(operator, forced)
    assert result["outcome"] == "succeeded" and not result["source_reachable"]
    assert result["records_at_risk"] == 4 and result["drain"] is None
    assert result["group_results"][0]["outcome"] == "written"
    assert Flow.objects.get(pk=flow.pk).state == FlowState.FAILED_OVER
    event = AuditEvent.objects.get(action="failover", outcome="success", object_id=str(flow.pk))
    assert event.after["operation"] == result["id"] and "forced past failed checks: lag_zero" in event.detail
    return result
