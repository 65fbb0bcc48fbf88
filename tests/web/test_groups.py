"""Consumer group pages and the offset reset through the real views, on the embedded brokers: offsets,
end offsets and lag; what a checkpointing flow knows; the reset's dry run, roles, audit, refusal for an
active group, and errors that name the field."""

from __future__ import annotations

import time

import pytest
from django.urls import reverse

from controlplane.core.models import AuditEvent
from controlplane.flows import cluster_reads
from replication.config import FlowConfig
from replication.kafka.flow_tasks import periodic_tasks_for_flow
from replication.kafka.groups import GroupOffsetsAdmin
from tests.web.mirroring import create_topic, mirror_topic, mirrored_flow, produce_keyed, stored_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]

RECORDS = 10
COMMITTED = 4


@pytest.fixture(scope="module")
def mirrored(cluster_a, cluster_b):
    """A topic of A mirrored to B, and a group `billing` that committed COMMITTED on partition 0, with
    its checkpoint emitted on B."""
    topic, group = "groups-orders", "groups-billing"
    create_topic(cluster_a, topic, 1)
    produce_keyed(cluster_a, topic, count=RECORDS)
    remote_topic = mirror_topic(cluster_a, cluster_b, topic, partitions=1, records=RECORDS)
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(topic, 0): COMMITTED}) == {}
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(topic,), groups=(group,))
    for job in periodic_tasks_for_flow(
        flow=flow, source=cluster_a, target=cluster_b, known_aliases=["A", "B"]
    ):
        job.tick(now=time.time())
        job.close()
    return topic, remote_topic, group


@pytest.fixture
def flow(users, cluster_a, cluster_b, mirrored):
    cluster_reads.reset_breakers()
    admin = users["admin"]
    a = stored_cluster(actor=admin, config=cluster_a)
    b = stored_cluster(actor=admin, config=cluster_b)
    return mirrored_flow(actor=admin, source=a, target=b, topic=mirrored[0], group=mirrored[2])


def test_group_page_shows_offsets_lag_and_what_failover_writes(client_as, flow, mirrored):
    topic, remote_topic, group = mirrored
    response = client_as("viewer").get(reverse("web:group", args=["A", group]))
    assert response.status_code == 200, response.content.decode()
    detail = response.context["detail"]
    assert detail.description.state == "EMPTY"
    (row,) = detail.partitions
    assert (row.topic, row.partition, row.committed) == (topic, 0, COMMITTED)
    assert row.lag == max(row.end - COMMITTED, 0)
    (checkpoints,) = detail.flows
    assert checkpoints.flow == flow and not checkpoints.problem and checkpoints.offset_syncs_complete
    (cp,) = checkpoints.rows
    assert (cp.remote_topic, cp.source_offset, cp.translated_offset) == (remote_topic, COMMITTED, COMMITTED)
    assert cp.checkpoint_offset == COMMITTED and cp.checkpoint_age_s is not None and not cp.checkpoint_stale
    assert cp.write  # the group has no offset on B yet: a failover writes the translation
    assert "Read from A at" in response.content.decode()

    listing = client_as("viewer").get(reverse("web:groups"), {"cluster": "A"})
    rows = {g.group: g for g in listing.context["listings"][0].groups}
    assert rows[group].state == "EMPTY" and rows[group].flows == (flow,)
    assert (rows[group].partitions, rows[group].lag) == (1, row.lag)


def test_reset_dry_run_changes_nothing_and_the_reset_is_audited(client_as, flow, mirrored, cluster_a):
    topic, _, group = mirrored
    url = reverse("web:group-reset", args=["A", group])
    operator = client_as("operator")
    dry = operator.post(url, {"strategy": "earliest", "dry_run": "1"})
    result = dry.context["result"]
    assert result.dry_run and [(r.current, r.new) for r in result.rows] == [(COMMITTED, 0)]
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(group)[(topic, 0)].offset == COMMITTED
    assert not AuditEvent.objects.filter(object_type="consumer_group").exists()

    applied = operator.post(url, {"strategy": "earliest", "apply": "1"}).context["result"]
    try:
        assert applied.applied and not applied.refused
        assert GroupOffsetsAdmin(cluster_a).committed_offsets(group)[(topic, 0)].offset == 0
        event = AuditEvent.objects.get(object_type="consumer_group")
        assert (event.actor_name, event.outcome, event.after) == ("operator", "success", {f"{topic}[0]": 0})
        assert event.before == {f"{topic}[0]": COMMITTED}
    finally:
        GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(topic, 0): COMMITTED})

    viewer = client_as("viewer").post(url, {"strategy": "earliest", "apply": "1"})
    assert viewer.status_code == 403 and "operator" in viewer.content.decode()
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(group)[(topic, 0)].offset == COMMITTED


def test_translated_reset_on_the_target_uses_the_flows_exact_translation(client_as, flow, mirrored):
    _, remote_topic, group = mirrored
    url = reverse("web:group-reset", args=["B", group])
    result = client_as("operator").post(url, {"strategy": "translated", "flow": flow.pk}).context["result"]
    assert [(r.topic, r.partition, r.current, r.new) for r in result.rows] == [
        (remote_topic, 0, None, COMMITTED)
    ]


BAD_FORMS = [
    ({"strategy": "yesterday"}, "strategy", "use earliest, latest, timestamp, shift, offset or translated"),
    ({"strategy": "timestamp", "timestamp": "soon"}, "timestamp", "is not a time"),
    ({"strategy": "timestamp"}, "timestamp", "give the moment"),
    ({"strategy": "translated", "flow": "999"}, "flow", "flows into A that checkpoint"),
    ({"strategy": "latest", "topic": "bad topic!"}, "topic", "is not a Kafka topic name"),
]


def test_bad_reset_input_names_the_field(client_as, flow, mirrored, cluster_a):
    operator = client_as("operator")
    for form, field, words in BAD_FORMS:
        response = operator.post(reverse("web:group-reset", args=["A", mirrored[2]]), form | {"apply": "1"})
        errors = response.context["errors"]
        assert any(e.startswith(f"{field}: ") and words in e for e in errors), (form, errors)
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(mirrored[2])[(mirrored[0], 0)].offset == COMMITTED


def test_the_api_reads_groups_and_resets_for_operators_only(client_as, flow, mirrored, cluster_a):
    topic, _, group = mirrored
    a = flow.source_id
    listing = client_as("viewer").get(f"/api/v1/clusters/{a}/groups/")
    assert listing.status_code == 200 and group in [g["group"] for g in listing.json()["groups"]]
    detail = client_as("viewer").get(f"/api/v1/clusters/{a}/groups/{group}/").json()
    assert detail["partitions"][0]["committed"] == COMMITTED and detail["flows"][0]["partitions"][0]["write"]

    url = f"/api/v1/clusters/{a}/groups/{group}/reset/"
    refused = client_as("viewer").post(
        url, {"strategy": "latest", "dry_run": False}, content_type="application/json"
    )
    assert refused.status_code == 403 and "operator role" in refused.json()["detail"]
    assert AuditEvent.objects.get(object_type="consumer_group").outcome == "refused"
    dry = client_as("operator").post(url, {"strategy": "latest"}, content_type="application/json")
    assert dry.status_code == 200 and dry.json()["dry_run"] and not dry.json()["applied"]
    bad = client_as("operator").post(
        url, {"strategy": "timestamp", "timestamp": "later"}, content_type="application/json"
    )
    assert bad.status_code == 400 and "is not a time" in bad.json()["timestamp"][0]
    assert GroupOffsetsAdmin(cluster_a).committed_offsets(group)[(topic, 0)].offset == COMMITTED
