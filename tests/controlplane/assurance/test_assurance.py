"""Live RPO and failover readiness on the database: the figures the workers and the verifier stored turn
into the flow's RPO per topic and its readiness score, the same in the API and /metrics; readiness drops
and alerts when offset syncs stop, when RPO exceeds the budget, and on its own below the threshold."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from controlplane import alerts, assurance
from controlplane.alerts.models import AlertRule
from controlplane.assurance.models import FlowAssurance, PartitionVerification
from controlplane.assurance.verification import verification_rows, verification_run_record
from controlplane.flows import services
from controlplane.flows.models import Flow
from controlplane.metrics import prometheus
from controlplane.status import rollup, runtime
from controlplane.status.models import FlowPartitionStatus, FlowSignals, FlowTaskStatus
from replication.verification import MirroredRecord, OffsetRange, PartitionOutcome, compare_range
from tests.status_reports import stored_report

HOUR = datetime.timedelta(hours=1)


@pytest.fixture
def ready_flow(two_clusters, admin_user):
    """A flow A->B that replicated topic t (2 partitions), verified, synced and checkpointed just now,
    with a reverse flow B->A that would bring t home."""
    a, b = two_clusters
    flow = services.flow_create(
        actor=admin_user, source=a, target=b, enabled=True, emit_heartbeats_enabled=False
    )
    services.flow_create(actor=admin_user, source=b, target=a, enabled=False)
    flow.state_changed_at = flow.created_at = timezone.now() - HOUR
    flow.save(update_fields=["state_changed_at", "created_at"])
    now = timezone.now()
    for partition in (0, 1):
        report(flow, partition, records_behind=10, seconds_behind=2.0)
        PartitionVerification.objects.create(
            flow=flow, topic="t", partition=partition, status="ok", verified_from=0, verified_up_to=90,
            sync_upstream=89, sync_downstream=89, checked_at=now, verified_at=now,
        )  # fmt: skip
    signals(flow, offset_sync=now, replicated=now, checkpoint=now)
    FlowAssurance.objects.create(flow=flow, observed_at=now)
    return flow


def report(flow, partition: int, *, records_behind: int, seconds_behind: float) -> None:
    stored_report(
        flow=flow,
        topic="t",
        partition=partition,
        remote_topic="A.t",
        records_behind=records_behind,
        seconds_behind=seconds_behind,
        replicated_offset=100,
        record_count=100,
        byte_count=5000,
        observed_at=timezone.now(),
    )


def signals(flow, *, offset_sync, replicated, checkpoint) -> None:
    FlowSignals.objects.update_or_create(
        flow=flow,
        defaults={
            "offset_sync_emitted_at": offset_sync,
            "records_replicated_at": replicated,
            "checkpoint_emitted_at": checkpoint,
        },
    )


def readiness(flow):
    return assurance.flow_readiness(rollup.flow_status(flow=flow))


def reason(flow, check: str):
    return next(r for r in readiness(flow).readiness.reasons if r.check == check)


def fired(flow) -> set[str]:
    alerts.alerts_evaluate()
    return set(flow.alerts.filter(state="firing").values_list("rule", flat=True))


def test_live_rpo_per_topic_in_the_api_and_metrics(ready_flow, client_as, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    answer = client_as("viewer").get(f"/api/v1/flows/{ready_flow.pk}/rpo/").json()
    assert (answer["records_behind"], answer["bytes_behind"], answer["seconds_behind"]) == (20, 1000, 2.0)
    assert answer["over_budget"] is False and answer["budget_seconds_behind"] == 60
    assert answer["age_s"] is not None and answer["stale"] is False
    assert answer["topics"] == [
        {**answer["topics"][0], "topic": "t", "records_behind": 20, "bytes_behind": 1000}
    ]
    exposition = prometheus.exposition().decode()
    assert 'mirrorplane_topic_bytes_behind{flow="A->B",topic="t"} 1000.0' in exposition
    assert 'mirrorplane_rpo_over_budget{flow="A->B",source="A",target="B"} 0.0' in exposition


def test_a_ready_flow_scores_100_in_the_api_and_metrics(ready_flow, client_as, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    answer = client_as("viewer").get(f"/api/v1/flows/{ready_flow.pk}/readiness/").json()
    assert answer["score"] == 100, answer["reasons"]
    assert {r["check"] for r in answer["reasons"]} >= {
        "offset_sync_coverage",
        "verification",
        "rpo",
        "reverse_flow",
    }
    assert 'mirrorplane_failover_readiness_score{flow="A->B",source="A",target="B"} 100.0' in (
        prometheus.exposition().decode()
    )
    assert fired(ready_flow) == set()


def test_readiness_drops_and_alerts_when_offset_syncs_stop(ready_flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    now = timezone.now()
    signals(ready_flow, offset_sync=now - datetime.timedelta(seconds=300), replicated=now, checkpoint=now)
    found = reason(ready_flow, "offset_sync_freshness")
    assert (found.status, found.points) == ("fail", 25) and "inexactly" in found.message
    assert readiness(ready_flow).score == 75
    assert AlertRule.OFFSET_SYNCS_STOPPED in fired(ready_flow)


def test_readiness_drops_and_alerts_when_rpo_exceeds_the_budget(ready_flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    report(ready_flow, 1, records_behind=500, seconds_behind=90.0)
    found = reason(ready_flow, "rpo")
    assert found.points == 25 and "over the RPO budget of 60 s" in found.message
    assert readiness(ready_flow).score == 75
    assert AlertRule.RPO_SECONDS in fired(ready_flow)


def test_readiness_low_fires_below_the_threshold_and_resolves(ready_flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    FlowAssurance.objects.filter(flow=ready_flow).update(
        groups_active_on_target=["billing", "audit"],
        partition_problems=["A.t: 1 partitions, 2 on the source"],
    )
    assert readiness(ready_flow).score == 60
    assert fired(ready_flow) == {AlertRule.READINESS_LOW}
    alert = ready_flow.alerts.get(rule=AlertRule.READINESS_LOW)
    assert alert.figure == 60 and "billing" in alert.message and "partition counts differ" in alert.message
    FlowAssurance.objects.filter(flow=ready_flow).update(groups_active_on_target=[], partition_problems=[])
    assert fired(ready_flow) == set()


def test_a_mismatch_costs_readiness_and_fires_its_own_alert(ready_flow, settings):
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    PartitionVerification.objects.filter(flow=ready_flow, partition=1).update(
        status="mismatch",
        reason="t[1] offset 42 differs from its copy at A.t[1] offset 42",
        mismatch_offset=42,
    )
    assert reason(ready_flow, "verification").points == 30
    assert fired(ready_flow) == {AlertRule.VERIFICATION_MISMATCH}
    assert "offset 42" in ready_flow.alerts.get(rule=AlertRule.VERIFICATION_MISMATCH).message


def test_with_every_worker_and_beat_stopped_readiness_falls_below_readiness_low(ready_flow, settings):
    """Nothing reports, verifies or emits any more: the score must fire readiness_low (it was 75)."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    stopped = timezone.now() - datetime.timedelta(minutes=10)
    FlowPartitionStatus.objects.filter(flow=ready_flow).update(observed_at=stopped)
    FlowTaskStatus.objects.filter(flow=ready_flow).update(observed_at=stopped, rows_current_at=stopped)
    PartitionVerification.objects.filter(flow=ready_flow).update(checked_at=stopped, verified_at=stopped)
    signals(ready_flow, offset_sync=stopped, replicated=stopped, checkpoint=stopped)
    found = reason(ready_flow, "replication_running")
    assert (found.status, found.points) == (
        "fail",
        35,
    ) and "no worker has reported for 600 s" in found.message
    score = readiness(ready_flow)
    assert score.score < settings.READINESS_ALERT_BELOW and score.below_threshold, score.readiness.problems
    paused = services.flow_pause(actor=None, flow=ready_flow)
    assert reason(paused, "replication_running").status == "ok"  # paused on purpose: not silent


def test_a_failed_over_flow_is_not_judged_as_replicating(ready_flow, client_as, settings):
    """After a failover replication is stopped on purpose: no score, no stale-worker verdict, the reason."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    ready_flow.state = "failed_over"
    ready_flow.save(update_fields=["state"])
    viewer = client_as("viewer")
    answer = viewer.get(f"/api/v1/flows/{ready_flow.pk}/readiness/").json()
    assert answer["applies"] is False and answer["below_threshold"] is False
    assert "has failed over: B serves the moved groups" in answer["not_applicable"]
    assert "mirrorplane_failover_readiness_score{" not in prometheus.exposition().decode()
    browser = Client()
    browser.force_login(get_user_model().objects.get(username="operator"))  # client_as's API user
    answer = browser.get(f"/flows/{ready_flow.pk}/failover/")
    assert answer.status_code == 200, answer
    page = answer.content.decode()
    assert 'Failover readiness: <span class="badge">n/a</span>' in page and "has failed over" in page
    assert "no worker has reported" not in page
    ready_flow.state = "active"
    ready_flow.save(update_fields=["state"])
    assert viewer.get(f"/api/v1/flows/{ready_flow.pk}/readiness/").json()["applies"] is True


def test_a_rewrite_ids_mismatch_shows_the_source_record_as_on_the_source(two_clusters, admin_user):
    """The mismatch page of a `rewrite-ids` flow: the source record with its own schema ID (the bytes the
    source holds, not the copy the verifier built), and a line saying it was compared as copied."""
    a, b = two_clusters
    flow = services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    source = [MirroredRecord(0, None, b"\x00\x00\x00\x00\x05order-0")]
    copy = [MirroredRecord(0, None, b"\x00\x00\x00\x00\x69order-X")]  # the target's ID 105, changed
    verdict = compare_range(
        offsets=OffsetRange(0, 1), source=source, target=copy, translate=lambda o: o, schema_ids={5: 105}
    )
    verification_run_record(
        flow_id=flow.pk,
        stored=verification_rows(flow_id=flow.pk),
        outcomes=[
            PartitionOutcome(
                topic="t",
                partition=0,
                remote_topic="A.t",
                status="mismatch",
                recheck=verdict.range,
                mismatch=verdict.mismatch,
            )
        ],  # fmt: skip
        partitions={("t", 0)},
        at=timezone.now(),
    )
    event = flow.events.get(kind="data_mismatch")
    assert event.detail["source"]["value"] == "0x0000000005" + b"order-0".hex()
    assert event.detail["compared_as_copied"] == [[5, 105]]
    assert "(compared as copied: schema ID 5 -> 105 rewritten)" in event.message
    browser = Client()
    browser.force_login(admin_user)
    page = browser.get(f"/flows/{flow.pk}/events/{event.pk}/").content.decode()
    assert "compared as copied, with schema ID 5 rewritten to 105" in page
    assert "0x0000000005" + b"order-0".hex() in page


def test_only_a_rewrite_ids_flow_compares_copies_with_rewritten_schema_ids(
    two_clusters, admin_user, django_assert_num_queries
):
    """`rewritten_schema_ids`, the one rule verification, the compare page and drills ask: the schema
    sync's map for a `rewrite-ids` flow, None (no query) for one whose copies keep the source's IDs."""
    a, b = two_clusters
    flow = services.flow_create(actor=admin_user, source=a, target=b, enabled=True)
    FlowSignals.objects.create(flow=flow, schemas_id_map={"5": 105})
    assert runtime.rewritten_schema_ids(flow_id=flow.pk, mode="rewrite-ids") == {5: 105}
    for mode in ("keep-ids", "none"):
        with django_assert_num_queries(0):
            assert runtime.rewritten_schema_ids(flow_id=flow.pk, mode=mode) is None


def test_the_reverse_flow_check_reads_the_flows_topics_from_its_tasks_not_its_partition_rows(
    ready_flow, settings
):
    """A reverse flow's verdict names the flow's topics it does not bring home: the topics are its tasks'
    roll-ups' (no partition row read, whatever the flow's size), or those a flow page hands it."""
    settings.MIRRORPLANE_STALE_AFTER_S = 60
    reverse = Flow.objects.get(source=ready_flow.target, target=ready_flow.source)
    reverse.topics = ["other"]
    reverse.save()
    status, now = rollup.flow_status(flow=ready_flow), timezone.now()
    assert status.topics == ("t",)
    assurance.flow_readiness(status, now=now)  # the reverse flow's topic filter built (once per process)
    with CaptureQueriesContext(connection) as reading:
        read = assurance.flow_readiness(status, now=now)
    with CaptureQueriesContext(connection) as handed:
        given = assurance.flow_readiness(status, now=now, topics=["t"])
    assert given.readiness == read.readiness and len(handed) == len(reading)
    assert not [q for q in reading.captured_queries if '"controlplane_flowpartitionstatus"' in q["sql"]]
    found = [
        r for readiness in (read, given) for r in readiness.readiness.reasons if r.check == "reverse_flow"
    ]
    assert len(found) == 2
    assert all(r.points == 5 and "does not replicate t " in r.message for r in found)
