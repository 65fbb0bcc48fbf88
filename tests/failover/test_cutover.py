"""Offset mapping and the migration cutover on one flow (embedded brokers, replication in a thread, the
API). Offsets translate both ways, in bulk, by content, with an error per item. The cutover is refused
while producers still write; a dry run changes nothing; then the cutover drains, verifies, writes exact
offsets for the flow's groups and marks the flow migrated: a consumer of the group resumes on the target
at exactly the copy of its next source record."""

from __future__ import annotations

import threading

import pytest
from django.test import Client

from controlplane import operations
from controlplane.core.models import AuditEvent
from controlplane.flows.models import Flow, FlowState
from replication.kafka.clients import make_producer
from replication.kafka.groups import GroupOffsetsAdmin
from tests.failover.conftest import (
    commit_after,
    create_topic,
    next_records,
    produce_transactions,
    read_partition,
    store_cluster,
    stored_flow,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

PARTITIONS = 3  # the last one stays empty
WRITTEN = 2  # partitions with records


class Producers:
    """An application still writing: one record every 0.1 s until stopped."""

    def __init__(self, cluster, topic: str) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(cluster, topic), daemon=True)

    def _run(self, cluster, topic: str) -> None:
        producer = make_producer(cluster, overrides={"linger.ms": 0})
        index = 0
        while not self._stop.wait(0.1):
            producer.produce(topic, value=f"live-{index}".encode(), partition=index % WRITTEN)
            producer.flush(10)
            index += 1

    def start(self) -> Producers:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)


def cutover(client, flow, **fields) -> dict:
    """Request a cutover through the API and run it here, as an operations worker does."""
    response = client.post(f"/api/v1/flows/{flow.pk}/cutover/", {"confirm": "A->B", **fields}, format="json")
    assert response.status_code == 202, response.content
    operations.run_operation(operation_id=response.json()["id"], worker="test-worker")
    return client.get(response["Location"]).json()


def steps(operation: dict) -> dict[str, dict]:
    return {s["step"]: s for s in operation["result"]["steps"]}


def check_offset_mapping(client_as, flow, clusters, topic: str, remote_topic: str, settings) -> None:
    source, target = clusters
    on_source = dict(read_partition(source, topic, 0))
    on_target = dict(read_partition(target, remote_topic, 0))
    viewer = client_as("viewer")
    url = f"/api/v1/flows/{flow.pk}/offsets/translate/"
    offsets = sorted(on_source)
    response = viewer.post(
        url,
        {
            "offsets": [{"topic": topic, "partition": 0, "offset": o} for o in offsets]
            + [
                {"topic": "no-such-topic", "partition": 0, "offset": 0},
                {"topic": topic, "partition": 7, "offset": 0},
                {"topic": topic, "partition": PARTITIONS - 1, "offset": 0},
            ]
        },
        format="json",
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["flow"], body["direction"], body["translated"], body["failed"]) == (
        "A->B",
        "source_to_target",
        len(offsets),
        3,
    )
    answers = body["offsets"]
    for answer in answers[: len(offsets)]:  # transaction markers: source and target offsets differ
        assert answer["exact"] and answer["translated"]["topic"] == remote_topic, answer
        assert on_target[answer["translated"]["offset"]] == on_source[answer["offset"]]
        assert answer["offset_sync"]["topic"] == topic
        assert answer["offset_sync"]["upstream_offset"] <= answer["offset"]
    assert [a["error"] for a in answers[len(offsets) :]] == [
        "unknown_topic",
        "unknown_partition",
        "no_offset_sync",
    ]
    back = viewer.post(
        url,
        {
            "direction": "target_to_source",
            "offsets": [{"topic": remote_topic, "partition": 0, "offset": o} for o in sorted(on_target)],
        },
        format="json",
    )
    assert back.status_code == 200, back.content
    for answer in back.json()["offsets"]:
        assert answer["translated"]["topic"] == topic
        assert on_source[answer["translated"]["offset"]] == on_target[answer["offset"]]

    settings.OFFSET_MAPPING_MAX_ITEMS = 2
    too_many = viewer.post(
        url, {"offsets": [{"topic": topic, "partition": 0, "offset": 0}] * 3}, format="json"
    )
    assert too_many.status_code == 400 and "at most 2 per request" in too_many.json()["offsets"][0]
    negative = viewer.post(url, {"offsets": [{"topic": topic, "partition": 0, "offset": -1}]}, format="json")
    assert negative.status_code == 400 and "offset" in negative.json()["offsets"]["0"]  # item 0, field offset
    wrong_way = viewer.post(url, {"direction": "sideways", "offsets": []}, format="json")
    assert wrong_way.status_code == 400 and "direction" in wrong_way.json()
    assert client_as("anonymous").post(url, {"offsets": []}, format="json").status_code == 401
    assert client_as("norole").post(url, {"offsets": []}, format="json").status_code == 403


def test_offsets_map_both_ways_then_a_cutover_refuses_while_producers_write_and_completes_exactly(
    cluster_a, cluster_b, admin_user, client_as, mirrors, unique_name, settings
):
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    source = store_cluster(actor=admin_user, config=cluster_a)
    target = store_cluster(actor=admin_user, config=cluster_b)
    flow = stored_flow(actor=admin_user, source=source, target=target, topic=topic, group=group)
    create_topic(cluster_a, topic, PARTITIONS)
    produce_transactions(cluster_a, topic, partitions=WRITTEN, batches=3, tag="m")  # gaps: markers
    records = {p: read_partition(cluster_a, topic, p) for p in range(PARTITIONS)}
    commit_after(cluster_a, group, topic, {0: records[0][:4], 1: records[1][:1]})
    expected_next = {0: records[0][4][1], 1: records[1][1][1]}
    mirrors(flow.pk, topic, PARTITIONS)
    remote_topic = f"A.{topic}"
    wait_for(
        lambda: all(
            len(read_partition(cluster_b, remote_topic, p)) == len(records[p]) for p in range(PARTITIONS)
        ),
        what="replication",
    )
    check_offset_mapping(client_as, flow, (cluster_a, cluster_b), topic, remote_topic, settings)
    operator = client_as("operator")

    writing = Producers(cluster_a, topic).start()
    try:
        # The fence waits fence_timeout_s, not the drain's hour (which would outlast the test's timeout).
        refused = cutover(operator, flow, fence_s=0.5, fence_timeout_s=2, drain_timeout_s=3600)
    finally:
        writing.stop()
    assert refused["outcome"] == "refused" and "producers still write" in refused["error"], refused["error"]
    fence = steps(refused)["fence"]
    assert fence["status"] == "fail" and sum(fence["evidence"]["appended_while_watched"].values()) > 0
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE

    dry = cutover(operator, flow, fence_s=0.5, dry_run=True)
    assert (dry["outcome"], dry["dry_run"]) == ("succeeded", True), dry["error"]
    assert list(steps(dry)) == ["lag", "fence", "drain", "verify", "offsets", "clients"]
    assert set(steps(dry)["offsets"]["evidence"]["groups"]) == {group}
    clients = steps(dry)["clients"]  # what the offsets step planned, not what only a real run writes
    assert clients["evidence"]["consumers"] == [{"group": group, "topics": [remote_topic]}]
    assert clients["summary"].startswith("would switch 1 consumer group(s)"), clients["summary"]
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE
    assert GroupOffsetsAdmin(cluster_b).committed_offsets(group) == {}  # nothing written

    done = cutover(operator, flow, fence_s=0.5, drain_timeout_s=60)
    assert (done["outcome"], done["phase"]) == ("succeeded", "done"), done["error"]
    shown = steps(done)
    assert all(s["status"] in ("pass", "warn") for s in shown.values()), shown
    verified = shown["verify"]["evidence"]["partitions"]
    assert sum(p["records"] for p in verified.values()) == sum(len(r) for r in records.values()) + sum(
        len(read_partition(cluster_a, topic, p)) - len(records[p]) for p in range(PARTITIONS)
    )  # every record on the source, the ones written during the refused attempt too
    assert all(p["source_digest"] == p["target_digest"] for p in verified.values() if p["records"])
    assert shown["clients"]["evidence"]["consumers"] == [{"group": group, "topics": [remote_topic]}]
    assert Flow.objects.get(pk=flow.pk).state == FlowState.MIGRATED
    assert next_records(cluster_b, group, remote_topic, WRITTEN) == expected_next
    audited = AuditEvent.objects.filter(action="cutover", object_id=str(flow.pk))
    assert sorted(audited.values_list("outcome", flat=True)) == [
        "accepted",
        "accepted",
        "accepted",
        "refused",
        "success",
        "success",
    ]
    web = Client()
    web.force_login(admin_user)
    page = web.get(f"/flows/{flow.pk}/cutover/").content.decode()
    assert 'id="cutover-steps"' in page and "cut over for good" in page
    assert "cutover-section" not in page  # migrated: nothing more to cut over
    assert (
        client_as("viewer").post(f"/api/v1/flows/{flow.pk}/cutover/", {"confirm": "A->B"}).status_code == 403
    )
