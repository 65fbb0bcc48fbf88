"""Take over from MM2 through the REST API and manage.py, on the embedded brokers: the dry run and the
apply are operations (202 and their URL; run here as a worker runs them), the dry run per partition,
roles, one operation per flow, refusals audited with stored state unchanged, then apply (audited,
positions stored), refused once the remote partitions changed since its dry run."""

from __future__ import annotations

import json
import re
from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from controlplane import operations
from controlplane.core.models import AuditEvent, AuditOutcome
from controlplane.flows import cluster_reads, services
from controlplane.operations import takeover
from controlplane.operations.models import Operation
from replication.kafka.positions import KafkaPositionStore
from tests.replication.test_source_task import produce
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


def run(operation_id: int) -> dict:
    """What an operations worker does with the queued operation (in process, as the other operations'
    control-plane tests do); the operation as the API shows it then."""
    assert operations.run_operation(operation_id=operation_id, worker="test-worker") is not None
    return Operation.objects.get(pk=operation_id)


def test_takeover_through_the_api_and_the_command_line(client_as, admin_user, mm2_flow, cluster_a, cluster_b):
    flow, topic, offsets_topic = mm2_flow
    url = f"/api/v1/flows/{flow.pk}/mm2-takeover/"
    assert client_as("viewer").post(url, {"offsets_topic": offsets_topic}, format="json").status_code == 403

    dry = client_as("operator").post(url, {"offsets_topic": offsets_topic}, format="json")
    assert dry.status_code == 202, dry.content  # queued: nothing was read in the request
    queued = dry.json()
    assert (
        queued["kind"],
        queued["dry_run"],
        queued["active"],
        queued["result"].get("plan"),
    ) == ("takeover", True, True, None)
    assert dry["Location"] == queued["url"]
    busy = client_as("operator").post(url, {"offsets_topic": offsets_topic}, format="json")
    assert busy.status_code == 409 and busy.json()["operation"]["id"] == queued["id"]  # one per flow

    run(queued["id"])
    shown = client_as("viewer").get(dry["Location"]).json()
    assert (shown["outcome"], shown["phase"], shown["progress"]) == ("succeeded", "done", 1.0), shown["error"]
    plan = shown["result"]["plan"]
    # Only the test's topic: MM2 replicates a heartbeats topic whatever the filter, and an earlier test of
    # the session may have left one on A (its rows and positions are the takeover's too).
    rows = {
        row["partition"]: (row["next_offset"], row["already_on_target"])
        for row in plan["partitions"]
        if row["topic"] == topic
    }
    assert (rows, plan["checkpoint_groups"], plan["problems"]) == (MM2_RESUMES, 1, [])
    assert shown["result"]["observed_at"] and "written" not in shown["result"]
    out = StringIO()  # the same dry run from the command line, run in the command
    call_command(
        "takeover_mm2", "A->B", "--offsets-topic", offsets_topic, "--json", stdout=out, stderr=StringIO()
    )
    assert json.loads(out.getvalue())["partitions"] == plan["partitions"]

    apply = {"dry_run": False, "from_dry_run": queued["id"]}
    refused = client_as("operator").post(url, apply, format="json")
    assert refused.status_code == 409 and "pause" in refused.json()["detail"]  # the flow replicates
    with pytest.raises(CommandError, match="pause"):
        call_command("takeover_mm2", "A->B", "--offsets-topic", offsets_topic, "--apply", stdout=StringIO())
    with pytest.raises(CommandError, match="does not exist"):
        call_command("takeover_mm2", "A->C", stdout=StringIO())
    services.flow_pause(actor=admin_user, flow=flow)
    missing = client_as("operator").post(
        url, {"offsets_topic": f"{offsets_topic}-x", "dry_run": False}, format="json"
    )
    assert missing.status_code == 202
    ended = run(missing.json()["id"])
    assert (
        ended.outcome == "refused"
        and "offsets_topic" in ended.error
        and "offset.storage.topic" in ended.error
    )
    assert stored_positions(cluster_b, topic) == {}
    not_a_dry_run = client_as("operator").post(url, {**apply, "from_dry_run": ended.pk}, format="json")
    assert not_a_dry_run.status_code == 400 and "run the dry run" in not_a_dry_run.json()["from_dry_run"][0]
    refusals = AuditEvent.objects.filter(object_repr="A->B", action="takeover", outcome=AuditOutcome.REFUSED)
    assert (
        refusals.count() == 6
    )  # viewer, one at a time, replicating (API, command), no such topic, not a dry run

    applied = client_as("operator").post(url, apply, format="json")
    assert applied.status_code == 202, applied.content
    ended = run(applied.json()["id"])
    assert ended.outcome == "succeeded", ended.error
    written = {f"{topic}[0]": 30, f"{topic}[1]": 25}
    assert {key: at for key, at in ended.result["written"].items() if key.startswith(f"{topic}[")} == written
    assert stored_positions(cluster_b, topic) == {(topic, 0): 30, (topic, 1): 25}
    event = AuditEvent.objects.get(
        object_repr="A->B", action="takeover", outcome=AuditOutcome.SUCCESS, after__operation=ended.pk
    )
    assert event.actor.username == "operator"
    assert event.after["result"]["written"] == ended.result["written"]

    # MM2 (or anything) wrote to a remote partition since that dry run: applying it again is refused.
    produce(cluster_b, f"A.{topic}", {1: [(b"k", b"late", None, 1_700_000_000_000)]})
    again = run(client_as("operator").post(url, apply, format="json").json()["id"])
    assert again.outcome == "refused", again.error
    assert f"{topic}[1] resumes at 25 -> 26, remote end 25 -> 26" in again.error
    assert stored_positions(cluster_b, topic) == {(topic, 0): 30, (topic, 1): 25}  # unchanged


def test_a_worker_stopping_warm_hands_the_dry_run_over_mid_read(mm2_flow):
    flow, topic, offsets_topic = mm2_flow
    operation = takeover.takeover_request(actor=None, flow=flow, offsets_topic=offsets_topic)

    def stop_once_reading(current: Operation) -> None:
        if current.phase == "planning":
            operations.STOPPING.set()  # what a warm shutdown of the worker does (workers.operations)

    try:
        assert (
            operations.run_operation(operation_id=operation.pk, worker="w1", echo=stop_once_reading) is None
        )
    finally:
        operations.STOPPING.clear()
    operation.refresh_from_db()
    assert (operation.active, operation.phase, operation.worker) == (True, "planning", "")  # handed over
    assert "plan" not in operation.result
    ended = run(operation.pk)
    partitions = [row for row in ended.result["plan"]["partitions"] if row["topic"] == topic]  # no heartbeats
    assert (ended.outcome, ended.attempts, len(partitions)) == ("succeeded", 2, 3)
