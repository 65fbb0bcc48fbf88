"""Taking over from a stopped MM2, the operation's rules run as a worker runs it on the in-memory clusters
(`memory_clusters`), MM2's state seeded as MM2 writes it (`stopped_mm2_in_memory`): the dry run reads
where each partition resumes and writes nothing; apply is refused while the flow replicates, refused
naming the setting when the offsets topic does not exist, then stores the positions of its dry run;
refused, positions unchanged, once a remote partition grew since that dry run. The same on Apache Kafka
brokers: tests/controlplane/operations/test_mm2_takeover.py (marked kafka)."""

from __future__ import annotations

import re

import pytest

from controlplane import operations
from controlplane.flows import services
from controlplane.operations.models import Operation
from replication.memory.takeover import MemoryPositionStore
from tests.replication.test_takeover import MM2_RESUMES, stopped_mm2_in_memory
from tests.web.mirroring import MEMORY_A, MEMORY_B, stored_cluster

pytestmark = pytest.mark.django_db

OFFSETS_TOPIC = "mm2-offsets.A.internal"  # MM2's default in dedicated mode


@pytest.fixture
def mm2_flow(memory_clusters, admin_user, unique_name):
    """(flow A->B as imported from the MM2 file, its topic, cluster B), MM2's state on A and B."""
    a, b = (memory_clusters.cluster(config.bootstrap_servers) for config in (MEMORY_A, MEMORY_B))
    stopped_mm2_in_memory(a, b, topic=unique_name, offsets_topic=OFFSETS_TOPIC)
    source, target = (stored_cluster(actor=admin_user, config=config) for config in (MEMORY_A, MEMORY_B))
    flow = services.flow_create(
        actor=admin_user, source=source, target=target, enabled=True, topics=[re.escape(unique_name)]
    )
    return flow, unique_name, b


def stored_positions(cluster_b, topic: str) -> dict:
    store = MemoryPositionStore(cluster_b, target=MEMORY_B, source_alias="A")
    return store.load(flow="A->B", partitions=[(topic, p) for p in range(3)])


def requested(client, flow, **body):
    return client.post(f"/api/v1/flows/{flow.pk}/mm2-takeover/", body, format="json")


def run(response) -> Operation:
    """What an operations worker does with the queued operation; the operation then."""
    assert response.status_code == 202, response.content
    operation_id = response.json()["id"]
    assert operations.run_operation(operation_id=operation_id, worker="test-worker") is not None
    return Operation.objects.get(pk=operation_id)


def test_the_dry_run_reads_where_each_partition_resumes_then_apply_stores_it(mm2_flow, client_as, admin_user):
    flow, topic, b = mm2_flow
    operator = client_as("operator")

    dry = run(requested(operator, flow))
    assert (dry.outcome, dry.progress) == ("succeeded", 1.0), dry.error
    plan = dry.result["plan"]
    rows = {
        row["partition"]: (row["next_offset"], row["already_on_target"])
        for row in plan["partitions"]
        if row["topic"] == topic
    }
    assert (rows, plan["checkpoint_groups"], plan["problems"], plan["skipped_records"]) == (
        MM2_RESUMES,
        1,
        [],
        0,
    )
    assert "written" not in dry.result and stored_positions(b, topic) == {}

    apply = {"dry_run": False, "from_dry_run": dry.pk}
    replicating = requested(operator, flow, **apply)
    assert replicating.status_code == 409 and "pause" in replicating.json()["detail"]
    services.flow_pause(actor=admin_user, flow=flow)
    missing = run(requested(operator, flow, offsets_topic="mm2-offsets-elsewhere", dry_run=False))
    assert missing.outcome == "refused" and "offset.storage.topic" in missing.error, missing.error
    assert stored_positions(b, topic) == {}

    applied = run(requested(operator, flow, **apply))
    assert applied.outcome == "succeeded", applied.error
    assert applied.result["written"] == {f"{topic}[0]": 30, f"{topic}[1]": 25}
    assert stored_positions(b, topic) == {(topic, 0): 30, (topic, 1): 25}


def test_apply_is_refused_once_a_remote_partition_grew_since_its_dry_run(mm2_flow, client_as, admin_user):
    flow, topic, b = mm2_flow
    operator = client_as("operator")
    dry = run(requested(operator, flow))
    services.flow_pause(actor=admin_user, flow=flow)
    b.append(f"A.{topic}", 1, key=b"k", value=b"late")  # MM2 (or anything) still writes

    refused = run(requested(operator, flow, dry_run=False, from_dry_run=dry.pk))
    assert refused.outcome == "refused", refused.error
    assert f"{topic}[1] resumes at 25 -> 26, remote end 25 -> 26" in refused.error
    assert stored_positions(b, topic) == {}
