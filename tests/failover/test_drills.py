"""Failover drills on one flow (a private source broker, the shared target, replication in a thread):
a drill of two groups passes by content and leaves no shadow group; once the flow's offset syncs are
deleted, a drill fails with the reason; both are audited, and kept with their per-partition results."""

from __future__ import annotations

import re
import threading

import pytest
from django.db import connection
from django.test import Client

from controlplane import operations
from controlplane.core.models import AuditEvent
from controlplane.flows import services
from controlplane.operations.drills import DEFAULT_DRILL_DRAIN_TIMEOUT_S
from controlplane.operations.models import Operation, ShadowGroup
from replication import offset_syncs
from replication.config import ClusterConfig
from replication.drill import SHADOW_PREFIX
from replication.kafka.clients import make_admin
from replication.kafka.groups import GroupOffsetsAdmin
from tests.failover.conftest import (
    commit_after,
    create_topic,
    produce_transactions,
    read_partition,
    store_cluster,
    wait_for,
)

pytestmark = [pytest.mark.kafka, pytest.mark.django_db(transaction=True)]

PARTITIONS = 2


def drill(
    client,
    flow,
    groups: list[str],
    *,
    drain_timeout_s: float = DEFAULT_DRILL_DRAIN_TIMEOUT_S,
    record_wait_s: float = 3,
) -> dict:
    """Request a drill through the API and run it here, as an operations worker does; as the API shows it
    (the drain waits as long as the product's default: it ends when the offset syncs cover the source)."""
    waits = {"drain_timeout_s": drain_timeout_s, "record_wait_s": record_wait_s}
    response = client.post(f"/api/v1/flows/{flow.pk}/drills/", {"groups": groups, **waits}, format="json")
    assert response.status_code == 202, response.content
    operations.run_operation(operation_id=response.json()["id"], worker="test-worker")
    body = client.get(response["Location"]).json()
    return body


def shadow_groups_on(cluster) -> list[str]:
    return [g for g in GroupOffsetsAdmin(cluster).list_groups() if g.startswith(SHADOW_PREFIX)]


def mirrored(actor, cluster_a, cluster_b, mirrors, topic: str):
    """A flow of `topic` (3 transactions of 2 records per partition: gaps) from `cluster_a` to `cluster_b`,
    its mirror running, once the target holds the same records: (flow, mirror, the source's records)."""
    source = store_cluster(actor=actor, config=cluster_a)
    target = store_cluster(actor=actor, config=cluster_b)
    flow = services.flow_create(
        actor=actor, source=source, target=target, enabled=True, topics=[re.escape(topic)]
    )
    create_topic(cluster_a, topic, PARTITIONS)
    produce_transactions(cluster_a, topic, partitions=PARTITIONS, batches=3, tag="d")  # gaps: markers
    records = {p: read_partition(cluster_a, topic, p) for p in range(PARTITIONS)}
    mirror = mirrors(flow.pk, topic, PARTITIONS)
    wait_for(
        lambda: all(
            [v for _, v in read_partition(cluster_b, f"A.{topic}", p)] == [v for _, v in records[p]]
            for p in range(PARTITIONS)
        ),
        what="replication",
    )
    return flow, mirror, records


def test_a_drill_passes_by_content_then_fails_with_the_reason_once_the_offset_syncs_are_gone(
    cluster_b, admin_user, client_as, mirrors, unique_name, start_broker, monkeypatch
):
    # The mirror writes its progress sync every second, not every 5 s: the first drill's drain waits for it.
    monkeypatch.setattr(offset_syncs, "PROGRESS_SYNC_INTERVAL_S", 1.0)
    broker = start_broker("drill-source")
    try:
        cluster_a = ClusterConfig(alias="A", bootstrap_servers=broker.bootstrap_servers)
        topic, mid, done = f"orders-{unique_name}", f"billing-{unique_name}", f"audit-{unique_name}"
        flow, mirror, records = mirrored(admin_user, cluster_a, cluster_b, mirrors, topic)
        commit_after(cluster_a, mid, topic, {0: records[0][:3], 1: records[1][:1]})  # mid-way, after a gap
        commit_after(cluster_a, done, topic, records)  # caught up: no next record anywhere

        operator, viewer = client_as("operator"), client_as("viewer")
        assert (
            viewer.post(f"/api/v1/flows/{flow.pk}/drills/", {"groups": [mid]}, format="json").status_code
            == 403
        )
        # Caught up by content, but the offset syncs cover the last records only once the mirror writes
        # its progress sync (PROGRESS_SYNC_INTERVAL_S after the last sync). The drill's drain waits for
        # that sync; with a short drain the test passed only when its reads, the planning and the drain
        # together outlasted the interval (the slow reads did; with the fast ones it was a race).
        passed = drill(operator, flow, [mid, done])
        assert (passed["kind"], passed["outcome"], passed["phase"]) == ("drill", "succeeded", "done"), passed[
            "error"
        ]
        assert passed["drain"]["done"] and passed["drain"]["records_remaining"] == 0, passed["drain"]
        results = {(r["group"], r["partition"]): r for r in passed["drill_results"]}
        assert set(results) == {(g, p) for g in (mid, done) for p in range(PARTITIONS)}
        assert all(r["outcome"] == "passed" for r in results.values()), results
        for partition, consumed in ((0, 3), (1, 1)):
            row = results[(mid, partition)]
            assert row["source_offset"] == records[partition][consumed][0]
            assert row["source_record"]["digest"] == row["target_record"]["digest"]
            assert row["offset_sync"]["upstream_offset"] <= row["source_offset"]
        assert results[(done, 0)]["reason"].startswith("caught up")
        assert set(passed["result"]["rpo"]) == {"records", "seconds", "observed_at"}  # the plan's own
        assert (
            passed["result"]["rto"]["total_s"] is not None and passed["result"]["partitions"]["failed"] == 0
        )
        assert shadow_groups_on(cluster_b) == []
        assert not ShadowGroup.objects.filter(deleted_at__isnull=True).exists()
        assert ShadowGroup.objects.count() == 2  # one per group, recorded before it existed

        # The flow's offset syncs are deleted (compaction, retention, an operator): nothing proves where
        # the group's records went on the target, and the drill says so.
        mirror.stop()
        admin = make_admin(cluster_a)
        (future,) = admin.delete_topics(["mm2-offset-syncs.B.internal"]).values()
        future.result(30)
        # Nothing to wait for: the drain cannot end; it gives up after drain_timeout_s, not the record wait.
        failed = drill(operator, flow, [mid], drain_timeout_s=1, record_wait_s=600)
        assert failed["outcome"] == "failed", failed
        assert "a failover could not place the group here" in failed["error"]
        assert {r["outcome"] for r in failed["drill_results"]} == {"failed"}
        assert shadow_groups_on(cluster_b) == []
        audited = AuditEvent.objects.filter(action="drill", object_id=str(flow.pk))
        assert sorted(audited.values_list("outcome", flat=True)) == [
            "accepted",
            "accepted",
            "failure",
            "refused",
            "success",
        ]
        web = Client()
        web.force_login(admin_user)
        page = web.get(f"/flows/{flow.pk}/drills/").content.decode()
        assert 'id="drill-history"' in page and page.count('href="/flows/') >= 2
        assert f"/flows/{flow.pk}/drills/" in page  # the form: a failover is possible
        card = web.get(f"/flows/{flow.pk}/operations/{failed['id']}/").content.decode()
        assert 'id="drill-results"' in card and "a failover could not place the group here" in card
        assert 'id="last-drill"' in web.get(f"/flows/{flow.pk}/").content.decode()
    finally:
        broker.stop()


def test_a_drill_waits_for_the_sync_of_the_flows_newest_records_and_says_so_when_none_comes(
    cluster_a, cluster_b, admin_user, client_as, mirrors, unique_name, monkeypatch
):
    """A drill does not stop the flow: a group caught up past the newest offset sync would be placed one
    record early (a re-read) until the mirror writes the sync of its newest records (every
    PROGRESS_SYNC_INTERVAL_S, and when it stops). Here the interval is out of reach: the drill fails
    naming that, not as a duplicate a failover would make; then it waits for the sync the mirror writes
    as it stops, and passes."""
    monkeypatch.setattr(offset_syncs, "PROGRESS_SYNC_INTERVAL_S", 3600.0)
    topic, group = f"orders-{unique_name}", f"audit-{unique_name}"
    flow, mirror, records = mirrored(admin_user, cluster_a, cluster_b, mirrors, topic)
    commit_after(cluster_a, group, topic, records)  # after the last marker: no next record
    operator = client_as("operator")

    early = drill(operator, flow, [group], drain_timeout_s=0, record_wait_s=1)
    assert early["outcome"] == "failed" and len(early["drill_results"]) == PARTITIONS, early
    for row in early["drill_results"]:
        last = records[row["partition"]][-1][0]
        assert row["offset_sync"]["upstream_offset"] < last  # the newest record's sync is not written
        assert f"only up to source offset {last}" in row["reason"] and "never had" not in row["reason"]

    def stop_the_mirror_once_the_drill_waits() -> None:
        try:
            wait_for(
                lambda: Operation.objects.filter(
                    flow=flow, message__startswith="waiting for the offset syncs"
                ).exists(),
                what="the drill waiting for the offset syncs",
            )
            mirror.stop()  # its task writes the progress sync as it closes
        finally:
            connection.close()

    stopper = threading.Thread(target=stop_the_mirror_once_the_drill_waits)
    stopper.start()
    try:
        waited = drill(operator, flow, [group], drain_timeout_s=0, record_wait_s=60)
    finally:
        stopper.join(90)
    assert waited["outcome"] == "succeeded", waited["error"]
    assert {row["reason"] for row in waited["drill_results"]} == {"caught up: no next record on either side"}
