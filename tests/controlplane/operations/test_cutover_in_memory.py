"""The cutover's rules, run as a worker runs it (`operations.run_operation`) on the in-memory clusters
(`memory_clusters`), the flow mirrored there by the engine's task: refused while producers still write
(nothing changed); a dry run writes nothing; the cutover verifies every drained record against its copy
(counts and digests), writes each group's exact offset on the target and marks the flow migrated; a copy
that differs fails it, named, and the flow is back where it was. tests/failover/test_cutover.py runs the
same on Apache Kafka brokers, with transactions' gaps and replication in a thread (marked kafka)."""

from __future__ import annotations

import dataclasses
import threading

import pytest

from controlplane import operations
from controlplane.flows.models import Flow, FlowState
from tests.failover.conftest import stored_flow
from tests.web.mirroring import MEMORY_A, MEMORY_B, append_keyed, mirror_in_memory, stored_cluster

pytestmark = pytest.mark.django_db

PARTITIONS = 3  # the last one stays empty
RECORDS = 6  # on each of partitions 0 and 1
CONSUMED = {0: 4, 1: 1}  # the group's committed offsets on the source


@pytest.fixture
def mirrored(memory_clusters, admin_user, unique_name):
    """(flow, source cluster, target cluster, topic, remote topic, group): `topic` mirrored A -> B."""
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    a, b = (memory_clusters.cluster(config.bootstrap_servers) for config in (MEMORY_A, MEMORY_B))
    source, target = (stored_cluster(actor=admin_user, config=config) for config in (MEMORY_A, MEMORY_B))
    flow = stored_flow(actor=admin_user, source=source, target=target, topic=topic, group=group)
    a.create(topic, PARTITIONS)
    for partition in range(2):
        append_keyed(a, topic, count=RECORDS, partition=partition)
    remote = mirror_in_memory(a, b, topic, partitions=PARTITIONS, records=2 * RECORDS)
    a.commit(group, {(topic, p): offset for p, offset in CONSUMED.items()})
    return flow, a, b, topic, remote, group


def cutover(client, flow, **fields) -> dict:
    """Request a cutover through the API and run it here, as an operations worker does."""
    body = {"confirm": "A->B", "fence_s": 0.1, **fields}
    response = client.post(f"/api/v1/flows/{flow.pk}/cutover/", body, format="json")
    assert response.status_code == 202, response.content
    operations.run_operation(operation_id=response.json()["id"], worker="test-worker")
    return client.get(response["Location"]).json()


def steps(operation: dict) -> dict[str, dict]:
    return {s["step"]: s for s in operation["result"]["steps"]}


def test_a_dry_run_writes_nothing_then_the_cutover_verifies_moves_the_groups_and_migrates(
    mirrored, client_as
):
    flow, _, b, _, remote, group = mirrored
    operator = client_as("operator")

    dry = cutover(operator, flow, dry_run=True)
    assert (dry["outcome"], dry["dry_run"]) == ("succeeded", True), dry["error"]
    assert list(steps(dry)) == ["lag", "fence", "drain", "verify", "offsets", "clients"]
    assert steps(dry)["offsets"]["evidence"]["groups"] == {group: {f"{remote}[0]": 4, f"{remote}[1]": 1}}
    assert steps(dry)["clients"]["summary"].startswith("would switch 1 consumer group(s)")
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE and group not in b.groups

    done = cutover(operator, flow)
    assert (done["outcome"], done["phase"]) == ("succeeded", "done"), done["error"]
    shown = steps(done)
    verified = shown["verify"]["evidence"]["partitions"]
    assert sum(p["records"] for p in verified.values()) == 2 * RECORDS
    assert all(p["source_digest"] == p["target_digest"] for p in verified.values() if p["records"])
    assert shown["clients"]["evidence"]["consumers"] == [{"group": group, "topics": [remote]}]
    assert {key: c.offset for key, c in b.groups[group].committed.items()} == {
        (remote, p): offset for p, offset in CONSUMED.items()
    }
    assert Flow.objects.get(pk=flow.pk).state == FlowState.MIGRATED


def test_the_cutover_is_refused_while_producers_write_and_nothing_changes(mirrored, client_as):
    flow, a, b, topic, _, group = mirrored
    stop = threading.Event()

    def produce() -> None:
        while not stop.wait(0.05):
            append_keyed(a, topic, count=1, partition=0)

    writing = threading.Thread(target=produce, daemon=True)
    writing.start()
    try:
        refused = cutover(client_as("operator"), flow, fence_s=0.5, fence_timeout_s=1)
    finally:
        stop.set()
        writing.join(5)
    assert refused["outcome"] == "refused" and "producers still write" in refused["error"], refused["error"]
    fence = steps(refused)["fence"]
    assert fence["status"] == "fail" and sum(fence["evidence"]["appended_while_watched"].values()) > 0
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE and group not in b.groups


@pytest.mark.django_db(transaction=True)  # a failed operation's runner closes the connection
def test_a_copy_that_differs_fails_the_cutover_named_and_the_flow_is_back_where_it_was(mirrored, client_as):
    flow, _, b, topic, remote, group = mirrored
    copies = b.partitions[(remote, 1)].records
    copies[3] = dataclasses.replace(copies[3], _value=b"not what the source holds")

    failed = cutover(client_as("operator"), flow)
    assert failed["outcome"] == "failed" and "the copy differs" in failed["error"], failed["error"]
    assert f"{topic}[1]" in failed["error"] and "offset 3" in failed["error"]
    assert steps(failed)["drain"]["status"] == "pass" and "verify" not in steps(failed)
    assert Flow.objects.get(pk=flow.pk).state == FlowState.ACTIVE and group not in b.groups
