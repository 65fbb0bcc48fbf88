"""Take over from MM2 through the REST API and manage.py, on the embedded brokers: the dry run per
partition, roles, refusals audited with stored state unchanged, then apply (audited, positions stored)."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from controlplane import cluster_reads, services
from controlplane.models import AuditEvent, AuditOutcome
from replication.kafka.positions import KafkaPositionStore
from tests.replication.test_takeover import MM2_RESUMES, stopped_mm2
from tests.web.mirroring import stored_cluster

pytestmark = [pytest.mark.kafka, pytest.mark.django_db]


@pytest.fixture
def mm2_flow(admin_user, cluster_a, cluster_b, unique_name):
    """Flow A->B as imported from the MM2 file, and the stopped MM2's state (its own offsets topic name,
    as `offset.storage.topic` would set it)."""
    cluster_reads.reset_breakers()
    a, b = (stored_cluster(actor=admin_user, config=c) for c in (cluster_a, cluster_b))
    offsets_topic = f"mm2-offsets-{unique_name}"
    stopped_mm2(
        cluster_a, cluster_b, physical=(cluster_a, cluster_b), topic=unique_name, offsets_topic=offsets_topic
    )
    flow = services.flow_create(
        actor=admin_user, source=a, target=b, enabled=True, topics=[re.escape(unique_name)]
    )
    return flow, unique_name, offsets_topic


def stored_positions(cluster_b, topic: str) -> dict:
    store = KafkaPositionStore(cluster_b, source_alias="A")
    try:
        return store.load(flow="A->B", partitions=[(topic, p) for p in range(3)])
    finally:
        store.close()


def test_takeover_through_the_api_and_the_command_line(client_as, admin_user, mm2_flow, cluster_b):
    flow, topic, offsets_topic = mm2_flow
    url = f"/api/v1/flows/{flow.pk}/mm2-takeover/"
    assert client_as("viewer").post(url, {"offsets_topic": offsets_topic}, format="json").status_code == 403

    dry = client_as("operator").post(url, {"offsets_topic": offsets_topic}, format="json")
    assert dry.status_code == 200, dry.content
    body = dry.json()
    rows = {row["partition"]: (row["next_offset"], row["already_on_target"]) for row in body["partitions"]}
    assert (rows, body["dry_run"], body["applied"], body["checkpoint_groups"]) == (
        MM2_RESUMES,
        True,
        False,
        1,
    )
    assert body["observed_at"]
    out = StringIO()  # the same dry run from the command line
    call_command("takeover_mm2", "A->B", "--offsets-topic", offsets_topic, "--json", stdout=out)
    assert json.loads(out.getvalue())["partitions"] == body["partitions"]

    refused = client_as("operator").post(
        url, {"offsets_topic": offsets_topic, "dry_run": False}, format="json"
    )
    assert refused.status_code == 409 and "pause" in refused.json()["detail"]  # the flow replicates
    with pytest.raises(CommandError, match="pause"):
        call_command("takeover_mm2", "A->B", "--offsets-topic", offsets_topic, "--apply", stdout=StringIO())
    with pytest.raises(CommandError, match="does not exist"):
        call_command("takeover_mm2", "A->C", stdout=StringIO())
    services.flow_pause(actor=admin_user, flow=flow)
    missing = client_as("operator").post(
        url, {"offsets_topic": f"{offsets_topic}-x", "dry_run": False}, format="json"
    )
    assert missing.status_code == 400 and "offset.storage.topic" in missing.json()["offsets_topic"][0]
    assert stored_positions(cluster_b, topic) == {}
    assert AuditEvent.objects.filter(object_repr="A->B", outcome=AuditOutcome.REFUSED).count() == 3

    applied = client_as("operator").post(
        url, {"offsets_topic": offsets_topic, "dry_run": False}, format="json"
    )
    assert applied.status_code == 200, applied.content
    assert applied.json()["written"] == {f"{topic}[0]": 30, f"{topic}[1]": 25}
    assert stored_positions(cluster_b, topic) == {(topic, 0): 30, (topic, 1): 25}
    event = AuditEvent.objects.get(
        object_repr="A->B", outcome=AuditOutcome.SUCCESS, detail__startswith="take over"
    )
    assert (event.actor.username, event.after) == ("operator", {f"{topic}[0]": 30, f"{topic}[1]": 25})
