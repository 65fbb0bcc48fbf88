"""Failover as it runs in production: requested through the web served by gunicorn (its defaults, as the
Dockerfile starts it), run by Celery workers on the `operations` queue handed over by beat, with a drain
longer than gunicorn's 30 s worker timeout, a web restart, a kill -9 of the worker and a warm stop of
the next one in the middle."""

from __future__ import annotations

import re

import pytest

from controlplane import core, operations
from controlplane.core.models import AuditEvent
from controlplane.core.roles import Role
from controlplane.flows import services
from controlplane.flows.models import Flow, FlowState
from controlplane.operations.models import Operation
from harness.runtime import Gunicorn, create_topic, sign_in, wait_until
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_producer
from replication.kafka.groups import GroupOffsetsAdmin
from tests.failover.conftest import commit_after, next_records, read_partition

pytestmark = [pytest.mark.kafka, pytest.mark.slow, pytest.mark.django_db(transaction=True)]

PARTITIONS = 2
RECORDS = 60  # per partition
PASSWORD = "oncall-password-1"


def produce_one_per_batch(cluster, topic: str) -> None:
    """RECORDS per partition, each flushed alone (the embedded broker's end offsets are exact then)."""
    producer = make_producer(cluster, overrides={"linger.ms": 0})
    for index in range(RECORDS):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=f"r{index}-p{partition}".encode(), partition=partition)
            assert producer.flush(30) == 0


def test_a_failover_through_gunicorn_survives_a_web_restart_a_killed_worker_a_warm_stop_and_a_long_drain(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name, tmp_path
):
    celery_runtime.env["MIRRORPLANE_OPERATION_LEASE_S"] = "3"
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    create_topic(cluster_a, topic, PARTITIONS)
    flow = make_flow(topics=[topic], groups=[group], refresh_groups_interval_seconds=1)
    remote_topic = f"A.{topic}"
    core.user_create_with_role(username="oncall", role=Role.OPERATOR, password=PASSWORD)
    committed = {(topic, p): 10 for p in range(PARTITIONS)}
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, committed) == {}

    # Metadata runs (the remote topic exists on B), replication does not: every record waits.
    celery_runtime.start_worker("metadata", queues="metadata")
    celery_runtime.start_beat()
    target = TopicAdmin(cluster_b)  # one admin client for every check
    wait_until(
        lambda: remote_topic in target.partition_counts(),
        timeout_s=60,
        what="the remote topic",
    )
    produce_one_per_batch(cluster_a, topic)

    web = Gunicorn(env=celery_runtime.env, log=tmp_path / "gunicorn.log").start()
    session = sign_in(web.url, username="oncall", password=PASSWORD)
    response = session.post(
        f"{web.url}/flows/{flow.pk}/failover/execute/",
        data={"confirm": "A->B", "groups": [group]},
        headers={"X-CSRFToken": session.cookies["csrftoken"], "Referer": f"{web.url}/"},
        timeout=10,
    )
    assert response.status_code == 202, response.text[:2000]
    print(
        f"failover request through gunicorn answered 202 in {response.elapsed.total_seconds() * 1000:.0f} ms"
    )
    operation = Operation.objects.get(flow=flow)
    assert f"/flows/{flow.pk}/operations/{operation.pk}/" in response.text
    assert operation.active  # the request returned before anything ran
    web.kill()  # the web restarts: the operation is a row, nothing of it lived in the web process

    celery_runtime.start_worker("ops1", queues="operations", pool="threads", concurrency=2)

    def phase() -> str:
        operation.refresh_from_db()
        return operation.phase

    wait_until(
        lambda: phase() == "draining" and operation.drain_observed_at, timeout_s=60, what="ops1 to drain"
    )
    assert operation.attempts == 1 and operation.drain_records_remaining == RECORDS * PARTITIONS
    assert Flow.objects.get(pk=flow.pk).state == FlowState.FAILING_OVER
    celery_runtime.kill("ops1")  # kill -9 mid-drain
    celery_runtime.start_worker("ops2", queues="operations", pool="threads", concurrency=2)
    wait_until(
        lambda: phase() == "draining" and operation.attempts == 2, timeout_s=60, what="ops2 to resume it"
    )
    # A warm stop (a rolling upgrade) does not wait for the drain: ops2 hands the operation over.
    celery_runtime.stop("ops2", timeout_s=30)
    celery_runtime.start_worker("ops3", queues="operations", pool="threads", concurrency=2)
    wait_until(
        lambda: phase() == "draining" and operation.attempts == 3, timeout_s=60, what="ops3 to resume it"
    )
    # Still draining more than 35 s after it started (longer than gunicorn's 30 s worker timeout, over
    # ten operation leases), then replication comes back.
    wait_until(
        lambda: (
            (phase() == "draining")
            and (operation.heartbeat_at - operation.drain_started_at).total_seconds() > 35
        ),
        timeout_s=120,
        what="35 s of drain",
    )
    assert operation.drain_records_remaining == RECORDS * PARTITIONS
    celery_runtime.start_worker("replication", queues="replication")
    wait_until(lambda: not Operation.objects.get(pk=operation.pk).active, timeout_s=180, what="the end")

    operation.refresh_from_db()
    drained_s = (operation.finished_at - operation.drain_started_at).total_seconds()
    print(
        f"drain {drained_s:.0f} s over 3 workers; operation {operation.finished_at - operation.requested_at}"
    )
    assert (operation.outcome, operation.phase, operation.attempts) == ("succeeded", "done", 3), (
        operation.error,
        celery_runtime.log("ops3")[-3000:],
    )
    assert operation.drain_done and operation.drain_records_remaining == 0
    (result,) = operation.group_results.all()
    assert result.outcome == "written"
    assert result.written == {f"{remote_topic}[{p}]": 10 for p in range(PARTITIONS)}
    assert Flow.objects.get(pk=flow.pk).state == FlowState.FAILED_OVER
    # Every record on B exactly once, in order: nothing written twice across the kill.
    for partition in range(PARTITIONS):
        source = [value for _, value in read_partition(cluster_a, topic, partition)]
        assert [value for _, value in read_partition(cluster_b, remote_topic, partition)] == source
    audited = AuditEvent.objects.filter(action="failover", object_id=str(flow.pk), actor_name="oncall")
    assert sorted(audited.values_list("outcome", flat=True)) == ["accepted", "success"]

    # The restarted web shows it.
    web = Gunicorn(env=celery_runtime.env, log=tmp_path / "gunicorn.log").start()
    try:
        shown = session.get(f"{web.url}/api/v1/operations/{operation.pk}/", timeout=10).json()
        assert (shown["outcome"], shown["attempts"], shown["drain"]["done"]) == ("succeeded", 3, True)
    finally:
        web.kill()


OUTAGE_RECORDS = 250  # per partition, written on B while A was away


def test_failback_on_the_workers_brings_home_everything_written_during_the_outage(
    celery_runtime, make_flow, cluster_a, cluster_b, unique_name
):
    """The active-active shape: B->A already replicates another topic. Failback adds the failed-over
    topic to it (keeping the other), waits until every record written on B during the outage is on A,
    and the group resumes on A at exactly the record it would have read next on B."""
    topic, other, group = f"orders-{unique_name}", f"inventory-{unique_name}", f"billing-{unique_name}"
    create_topic(cluster_a, topic, PARTITIONS)
    forward = make_flow(topics=[topic], groups=[group], refresh_groups_interval_seconds=1)
    reverse = services.flow_create(
        actor=None, source=forward.target, target=forward.source, enabled=True, topics=[other]
    )
    produce_one_per_batch(cluster_a, topic)
    assert (
        GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(topic, p): 10 for p in range(PARTITIONS)}) == {}
    )
    celery_runtime.start_worker("w1", queues="replication,metadata")
    celery_runtime.start_worker("ops", queues="operations", pool="threads", concurrency=2)
    celery_runtime.start_beat()
    remote_topic = f"A.{topic}"
    target = TopicAdmin(cluster_b)  # one admin client for every check

    def mirrored() -> bool:
        """The flow replicated everything (as an operator waits for, before failing over a flow)."""
        if remote_topic not in target.partition_counts():
            return False
        return (
            sum(len(read_partition(cluster_b, remote_topic, p)) for p in range(PARTITIONS))
            == PARTITIONS * RECORDS
        )

    wait_until(mirrored, timeout_s=120, what="the forward flow to replicate everything before the failover")

    def ended(operation: Operation) -> Operation:
        wait_until(lambda: not Operation.objects.get(pk=operation.pk).active, timeout_s=180, what="its end")
        operation.refresh_from_db()
        assert operation.outcome == "succeeded", (operation.error, celery_runtime.log("ops")[-3000:])
        return operation

    ended(
        operations.operation_request(
            actor=None, kind="failover", flow=forward, confirm="A->B", groups=[group]
        )
    )
    assert Flow.objects.get(pk=forward.pk).state == FlowState.FAILED_OVER

    # The outage: the group reads on on B; producers write B's own topic.
    read_on_b = {p: read_partition(cluster_b, remote_topic, p)[:25] for p in range(PARTITIONS)}
    commit_after(cluster_b, group, remote_topic, read_on_b)
    expected_next = next_records(cluster_b, group, remote_topic, PARTITIONS)
    create_topic(cluster_b, topic, PARTITIONS)
    producer = make_producer(cluster_b, overrides={"linger.ms": 0})
    for index in range(OUTAGE_RECORDS):
        for partition in range(PARTITIONS):
            producer.produce(topic, value=f"outage-{index}-p{partition}".encode(), partition=partition)
            assert producer.flush(30) == 0

    failback = ended(operations.operation_request(actor=None, kind="failback", flow=forward, confirm="A->B"))
    assert failback.topics_back == [topic] and failback.reverse_flow_id == reverse.pk
    assert failback.drain_done and failback.drain_records_at_start == OUTAGE_RECORDS * PARTITIONS
    reverse.refresh_from_db()
    assert reverse.topics == [other, re.escape(topic)]  # gained the topic, kept what it replicated
    for partition in range(PARTITIONS):
        written_on_b = [value for _, value in read_partition(cluster_b, topic, partition)]
        assert [value for _, value in read_partition(cluster_a, f"B.{topic}", partition)] == written_on_b
    assert next_records(cluster_a, group, topic, PARTITIONS) == expected_next
    assert Flow.objects.get(pk=forward.pk).state == FlowState.PAUSED
