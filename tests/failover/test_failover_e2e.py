"""Failover and failback end to end: real embedded clusters, replication running, PostgreSQL, the API.

The exactness claim: after a failover, a consumer of the same group on the target reads as its next
record exactly the copy of the record it would have read next on the source (compared by content),
on every partition, although the source offsets have gaps (transaction markers) and replication was
restarted in between; also when the source cluster is gone (offsets from the last checkpoints).
"""

from __future__ import annotations

import re
import threading

import pytest
from confluent_kafka import TopicPartition
from django.core.management import CommandError, call_command
from django.db import connection
from django.utils import timezone

from controlplane import operations
from controlplane.core.models import AuditEvent
from controlplane.flows import services
from controlplane.flows.models import Flow, FlowState
from replication.config import ClusterConfig
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.remote import latest_group_checkpoints
from tests.failover.conftest import (
    commit_after,
    create_topic,
    fail_over_with_the_source_gone,
    next_records,
    produce_plain,
    produce_transactions,
    read_partition,
    run_queued,
    store_cluster,
    stored_flow,
    wait_for,
)
from tests.status_reports import stored_report

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

PARTITIONS = 3
OUTAGE_RECORDS = 40


def replicated(cluster, remote_topic: str, expected: dict[int, list[bytes]]) -> bool:
    return all(
        [value for _, value in read_partition(cluster, remote_topic, p)] == values
        for p, values in expected.items()
    )


def consume_part(cluster, group: str, topic: str, *, first: dict[int, int]) -> dict[int, bytes]:
    """The group reads the first `first[p]` records of each partition and commits; returns what it
    would read next on each partition."""
    records = {p: read_partition(cluster, topic, p) for p in range(PARTITIONS)}
    commit_after(cluster, group, topic, {p: records[p][: first[p]] for p in range(PARTITIONS)})
    return {p: records[p][first[p]][1] for p in range(PARTITIONS)}


def failover_events(flow, outcome: str) -> int:
    return AuditEvent.objects.filter(
        action="failover", object_type="flow", object_id=str(flow.pk), outcome=outcome
    ).count()


@pytest.mark.slow
def test_failover_is_exact_across_gaps_and_a_restart_then_fails_back(
    cluster_a, cluster_b, admin_user, client_as, mirrors, unique_name
):
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    source = store_cluster(actor=admin_user, config=cluster_a)
    target = store_cluster(actor=admin_user, config=cluster_b)
    flow = stored_flow(actor=admin_user, source=source, target=target, topic=topic, group=group)
    create_topic(cluster_a, topic, PARTITIONS)
    remote_topic = f"A.{topic}"

    produce_transactions(cluster_a, topic, partitions=PARTITIONS, batches=3, tag="first")
    mirror = mirrors(flow.pk, topic, PARTITIONS)
    source_values = {p: [v for _, v in read_partition(cluster_a, topic, p)] for p in range(PARTITIONS)}
    wait_for(lambda: replicated(cluster_b, remote_topic, source_values), what="first replication")
    mirror.stop()  # replication restarts in between: a new task resumes from the stored positions
    produce_transactions(cluster_a, topic, partitions=PARTITIONS, batches=3, tag="second")
    mirrors(flow.pk, topic, PARTITIONS)
    # Offsets 0,1 records, 2 marker, 3,4 records, 5 marker...: cut after a record and after a marker.
    expected_next = consume_part(cluster_a, group, topic, first={0: 3, 1: 4, 2: 7})

    viewer, operator = client_as("viewer"), client_as("operator")
    plan = viewer.get(f"/api/v1/flows/{flow.pk}/failover/plan/?groups={group}")
    assert plan.status_code == 200, plan.content
    body = plan.json()
    assert [item["check"] for item in body["checklist"]] == [
        "source_reachable",
        "lag_zero",
        "groups_inactive_on_target",
        "producers_stopped",
        "target_healthy",
    ]
    (group_plan,) = body["groups"]
    assert {row["partition"] for row in group_plan["partitions"]} == set(range(PARTITIONS))
    assert {p["partition"] for p in body["partitions"]} == set(range(PARTITIONS))

    # A consumer of the group running on the target: the operation is refused (and audited) by its
    # checks without writing anything.
    active = make_consumer(cluster_b, group_id=group, overrides={"session.timeout.ms": 6000})
    active.subscribe([remote_topic])
    wait_for(lambda: active.poll(0.2) is not None or active.assignment(), what="consumer joined on B")
    queued = operator.post(
        f"/api/v1/flows/{flow.pk}/failover/", {"groups": [group], "confirm": "A->B"}, format="json"
    )
    assert queued.status_code == 202, queued.content
    refused = run_queued(viewer, queued)
    active.close()
    assert refused["outcome"] == "refused" and "groups_inactive_on_target" in refused["error"]
    failed = {item["check"]: item["status"] for item in refused["plan"]["checklist"]}
    assert failed["groups_inactive_on_target"] == "fail"
    assert failover_events(flow, "refused") == 1
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE

    wait_for(lambda: group_state(cluster_b, group) == "EMPTY", what="the group to leave B")
    # Produced just before the failover: the drain must bring them over before the groups move.
    produce_transactions(cluster_a, topic, partitions=PARTITIONS, batches=1, tag="late")
    response = operator.post(
        f"/api/v1/flows/{flow.pk}/failover/",
        {"groups": [group], "confirm": "A->B", "drain_timeout_s": 60},
        format="json",
    )
    assert response.status_code == 202, response.content
    assert response["Location"] == response.json()["url"]
    assert response.json()["phase"] == "queued"
    result = run_queued(viewer, response)
    assert result["outcome"] == "succeeded" and result["phase"] == "done", result
    assert result["drain"]["done"] and result["drain"]["records_remaining"] == 0
    (outcome,) = result["group_results"]
    assert outcome["outcome"] == "written" and len(outcome["written"]) == PARTITIONS
    assert outcome["topics"] == [topic]
    assert Flow.objects.get(pk=flow.pk).state == FlowState.FAILED_OVER
    late_values = {p: [v for _, v in read_partition(cluster_a, topic, p)] for p in range(PARTITIONS)}
    assert replicated(cluster_b, remote_topic, late_values)  # everything produced before it is on B
    assert next_records(cluster_b, group, remote_topic, PARTITIONS) == expected_next

    # Running it again (a worker that takes over a finished operation) changes nothing.
    assert operations.run_operation(operation_id=result["id"], worker="another") is None
    again = operator.post(
        f"/api/v1/flows/{flow.pk}/failover/", {"groups": [group], "confirm": "A->B"}, format="json"
    )
    assert again.status_code == 409 and "failed_over" in again.json()["detail"]
    assert next_records(cluster_b, group, remote_topic, PARTITIONS) == expected_next
    assert failover_events(flow, "success") == 1

    # -- failback: consumers moved on on B, producers wrote to B's own topic during the outage, and B->A
    # already exists, replicating another topic: it gains the failed-over topic, loses nothing.
    other = f"inventory-{unique_name}"
    reverse = stored_flow(actor=admin_user, source=target, target=source, topic=other, group=group)
    unread_on_b = {
        p: read_partition(cluster_b, remote_topic, p, start=next_offset(cluster_b, group, remote_topic, p))
        for p in range(PARTITIONS)
    }
    commit_after(cluster_b, group, remote_topic, {p: unread_on_b[p][:2] for p in range(PARTITIONS)})
    expected_back = {p: unread_on_b[p][2][1] for p in range(PARTITIONS)}
    create_topic(cluster_b, topic, PARTITIONS)
    produce_plain(
        cluster_b, topic, partitions=PARTITIONS, count=OUTAGE_RECORDS, tag="outage", one_per_batch=True
    )

    viewer_back = viewer.post(f"/api/v1/flows/{flow.pk}/failback/", {"confirm": "A->B"}, format="json")
    assert viewer_back.status_code == 403
    back = operator.post(f"/api/v1/flows/{flow.pk}/failback/", {"confirm": "A->B"}, format="json")
    assert back.status_code == 202, back.content
    assert back.json()["groups"] == [group]
    worker = threading.Thread(target=run_in_thread, args=(back.json()["id"],))
    worker.start()
    # The operation resumes B->A (already enabled here) and waits for what B has: replication of the
    # reverse flow starts while it drains.
    wait_for(
        lambda: Flow.objects.get(pk=reverse.pk).topics != [re.escape(other)], what="B->A to gain the topic"
    )
    mirrors(reverse.pk, topic, PARTITIONS)
    worker.join(120)
    failback = viewer.get(back["Location"]).json()
    assert failback["outcome"] == "succeeded", failback
    assert failback["topics_back"] == [topic] and failback["reverse_flow_name"] == "B->A"
    assert not failback["reverse_flow_created"] and failback["drain"]["done"]
    assert failback["drain"]["records_at_start"] == OUTAGE_RECORDS * PARTITIONS
    assert failback["group_results"][0]["outcome"] == "written"
    assert Flow.objects.get(pk=reverse.pk).topics == [re.escape(other), re.escape(topic)]
    assert r"A\..*" in Flow.objects.get(pk=reverse.pk).topics_exclude
    outage = {p: [f"outage-p{p}-{i}".encode() for i in range(OUTAGE_RECORDS)] for p in range(PARTITIONS)}
    assert replicated(cluster_a, f"B.{topic}", outage)  # every record written on B during the outage
    assert next_records(cluster_a, group, topic, PARTITIONS) == expected_back
    assert f"B.A.{topic}" not in TopicAdmin(cluster_a).partition_counts()  # mirrored topics stay on B
    assert Flow.objects.get(pk=flow.pk).state == FlowState.PAUSED
    assert (
        AuditEvent.objects.filter(action="failback", outcome="success", object_id=str(flow.pk)).count() == 1
    )
    assert AuditEvent.objects.filter(action="failback", outcome="refused", actor_name="viewer").count() == 1


def run_in_thread(operation_id: int) -> None:
    try:
        operations.run_operation(operation_id=operation_id, worker="test-thread")
    finally:
        connection.close()


def group_state(cluster, group: str) -> str:
    return GroupOffsetsAdmin(cluster).group_state(group)


def next_offset(cluster, group: str, topic: str, partition: int) -> int:
    consumer = make_consumer(cluster, group_id=group)
    try:
        (committed,) = consumer.committed([TopicPartition(topic, partition)], timeout=30)
        return committed.offset
    finally:
        consumer.close()


@pytest.mark.slow
def test_failover_with_the_source_cluster_stopped_uses_the_checkpoints(
    cluster_b, admin_user, client_as, mirrors, unique_name, start_broker
):
    broker = start_broker("failover-source")
    try:
        source_config = ClusterConfig(alias="A", bootstrap_servers=broker.bootstrap_servers)
        topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
        source = store_cluster(actor=admin_user, config=source_config)
        target = store_cluster(actor=admin_user, config=cluster_b)
        flow = stored_flow(actor=admin_user, source=source, target=target, topic=topic, group=group)
        create_topic(source_config, topic, PARTITIONS)
        produce_transactions(source_config, topic, partitions=PARTITIONS, batches=3, tag="only")
        expected_next = consume_part(source_config, group, topic, first={0: 1, 1: 2, 2: 5})
        mirror = mirrors(flow.pk, topic, PARTITIONS)
        values = {p: [v for _, v in read_partition(source_config, topic, p)] for p in range(PARTITIONS)}
        wait_for(lambda: replicated(cluster_b, f"A.{topic}", values), what="replication")
        committed = {p: next_offset(source_config, group, topic, p) for p in range(PARTITIONS)}
        wait_for(
            lambda: (
                {
                    key[1]: cp.upstream_offset
                    for key, cp in latest_group_checkpoints(
                        target=cluster_b, source_alias="A", group=group, policy=mirror.policy
                    ).items()
                }
                == committed
            ),
            what="checkpoints of the group",
        )
        mirror.stop()
        # The workers' last stored status: 4 records of partition 0 were not replicated yet.
        produce_plain(source_config, topic, partitions=1, count=4, tag="lost")
        stored_report(
            flow=flow,
            topic=topic,
            partition=0,
            remote_topic=f"A.{topic}",
            records_behind=4,
            observed_at=timezone.now(),
        )
    finally:
        broker.stop()

    fail_over_with_the_source_gone(client_as, flow=flow, group=group)
    assert next_records(cluster_b, group, f"A.{topic}", PARTITIONS) == expected_next


def test_only_operators_may_fail_over_and_every_attempt_is_audited(admin_user, client_as):
    source = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers="a.invalid:9092")
    target = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="b.invalid:9092")
    flow = services.flow_create(actor=admin_user, source=source, target=target)
    url = f"/api/v1/flows/{flow.pk}/failover/"
    body = {"groups": ["g"], "confirm": "A->B"}
    assert client_as("anonymous").post(url, body, format="json").status_code == 401
    for role in ("viewer", "norole"):
        response = client_as(role).post(url, body, format="json")
        assert response.status_code == 403, response.content
        assert "operator role" in response.json()["detail"]
    wrong = client_as("operator").post(url, {"groups": ["g"], "confirm": "A -> B"}, format="json")
    assert wrong.status_code == 400 and "confirm" in wrong.json()
    refusals = AuditEvent.objects.filter(action="failover", outcome="refused", object_id=str(flow.pk))
    assert sorted(refusals.values_list("actor_name", flat=True)) == ["norole", "operator", "viewer"]
    assert Flow.objects.get(pk=flow.pk).state == FlowState.DISABLED
    assert (
        client_as("operator")
        .post(f"/api/v1/flows/{flow.pk}/failback/", {"confirm": "x"}, format="json")
        .status_code
        == 400
    )


def test_command_line_refuses_without_the_confirmation_and_audits_it(admin_user):
    source = services.cluster_create(actor=admin_user, alias="A", bootstrap_servers="a.invalid:9092")
    target = services.cluster_create(actor=admin_user, alias="B", bootstrap_servers="b.invalid:9092")
    flow = services.flow_create(actor=admin_user, source=source, target=target)
    with pytest.raises(CommandError, match="confirm"):
        call_command("failover", "A->B", "--groups", "g")  # stdin is no terminal: no confirmation
    with pytest.raises(CommandError, match="no flow"):
        call_command("failback", "B->A", "--confirm", "B->A")
    refusal = AuditEvent.objects.get(action="failover", object_id=str(flow.pk))
    assert (refusal.outcome, refusal.actor_name) == ("refused", "system")
