"""Schema sync on the Celery runtime, the shape that ships: real worker and beat processes, Apache Kafka,
two real registries. A flow stored through the services with `rewrite-ids` and its clusters' registries:
the metadata task syncs the subjects, the slices rewrite the schema IDs, and a consumer on the target
decodes every mirrored record with the target registry, across a schema evolution and a worker killed
mid-stream (exactly_once: each record once). The flow's status shows the sync's latest pass (subjects,
versions behind); a subject the target refuses is a flow error event, and a record of it is held naming
the refusal."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext
from prometheus_client.parser import text_string_to_metric_families

from controlplane import operations
from controlplane.assurance.models import PartitionVerification, VerificationStatus
from controlplane.flows import services
from controlplane.flows.models import Flow
from controlplane.metrics.prometheus import exposition
from controlplane.operations.models import Operation
from controlplane.status.models import FlowEvent, FlowEventKind, FlowPartitionStatus
from harness.runtime import wait_until
from replication.kafka.groups import GroupOffsetsAdmin
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.wire import schema_id_of
from tests.replication.test_schema_replication import (
    ORDER_V1,
    ORDER_V2,
    PARTITIONS,
    expected_per_partition,
    produce_orders,
)
from tests.replication.test_source_task import create_topics, read_partition

pytestmark = pytest.mark.kafka


def test_celery_workers_sync_schemas_and_rewrite_ids_across_a_killed_worker(
    celery_runtime, cluster_a, cluster_b, schema_registries, unique_name, client_as
):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topics(cluster_a, [topic], len(PARTITIONS))
    target_api = ConfluentRegistryClient(schema_registries["B"].url)
    for index in range(3):  # the target's own schemas: its IDs are not the source's
        target_api.register(f"{topic}-local-value", Schema(json.dumps({**ORDER_V1, "name": f"Mine{index}"})))
    # A subject the target refuses: it holds a version under that name that the source's is incompatible with.
    target_api.register(f"A.{topic}-clash-value", Schema('"string"'))
    target_api.set_compatibility(f"A.{topic}-clash-value", "BACKWARD")
    source_api = ConfluentRegistryClient(schema_registries["A"].url)
    clash = {**ORDER_V1, "name": "Clash"}  # a schema of its own (the same schema would resolve through the
    # other subject, synced: the record would pass, rightly)
    source_api.register(f"{topic}-clash-value", Schema(json.dumps(clash)))
    clusters = {
        alias: services.cluster_create(
            actor=None,
            alias=alias,
            bootstrap_servers=cluster.bootstrap_servers,
            client_properties={"client": {"schema.registry.url": schema_registries[alias].url}},
        )
        for alias, cluster in (("A", cluster_a), ("B", cluster_b))
    }
    flow = services.flow_create(
        actor=None,
        source=clusters["A"],
        target=clusters["B"],
        enabled=True,
        topics=[f"{topic}(-clash)?"],
        delivery_guarantee="exactly_once",
        schemas_sync_mode="rewrite-ids",
        schemas_sync_interval_seconds=1,
    )
    source_registry = SchemaRegistryClient({"url": schema_registries["A"].url})
    first = [{"id": i, "item": f"item-{i}"} for i in range(40)]
    second = [{"id": i, "item": f"item-{i}", "quantity": i % 4} for i in range(40, 80)]

    def mirrored(count: int):
        """Each partition holds `count` committed records (the kill below must not abort records seen
        uncommitted: they would stay in the log beside their copies)."""

        def check():
            try:
                return all(
                    len(read_partition(cluster_b, remote, p, isolation="read_committed")) >= count
                    for p in PARTITIONS
                )
            except Exception:  # the remote topic is not created yet
                return False

        return check

    produce_orders(cluster_a, source_registry, topic, ORDER_V1, first)
    # A record of the refused subject: held (never copied naming no schema), the hold naming the refusal.
    create_topics(cluster_a, [f"{topic}-clash"], len(PARTITIONS))
    produce_orders(cluster_a, source_registry, f"{topic}-clash", clash, first[:1])
    # The hold is an error after 5 s here (30 s by default): the refusal it names is what is tested.
    celery_runtime.env["MIRRORPLANE_SCHEMA_WAIT_ERROR_S"] = "5"
    celery_runtime.start_worker("w1")
    celery_runtime.start_beat()
    try:
        wait_until(mirrored(20), timeout_s=120, what="the first records mirrored")
        celery_runtime.kill("w1")  # mid-stream
        produce_orders(cluster_a, source_registry, topic, ORDER_V2, second)  # an evolution meanwhile
        celery_runtime.start_worker("w2")
        wait_until(mirrored(40), timeout_s=120, what="every record mirrored")
    except BaseException:
        print(celery_runtime.log("w2" if "w2" in celery_runtime.processes else "w1"))
        raise

    values = AvroDeserializer(SchemaRegistryClient({"url": schema_registries["B"].url}))
    expected = expected_per_partition(first + second)
    for partition in PARTITIONS:
        records = read_partition(cluster_b, remote, partition)
        assert len(records) == 40  # each record once
        decoded = [values(r.value(), SerializationContext(remote, MessageField.VALUE)) for r in records]
        assert decoded == expected[partition]

    def schema_status() -> dict | None:
        response = client_as("viewer").get(f"/api/v1/flows/{flow.pk}/status/")
        assert response.status_code == 200, response.content
        return response.json()["schemas"]

    status = wait_until(
        lambda: (status := schema_status())["observed_at"] and status, timeout_s=30, what="the sync's status"
    )
    assert status["mode"] == "rewrite-ids" and status["age_s"] < 30
    # value and key of the topic and of the clash topic; the refused subject's version behind
    assert status["subjects_synced"] == 4 and status["versions_behind"] == 1
    errors = FlowEvent.objects.filter(flow=flow, kind=FlowEventKind.ERROR).values_list("message", flat=True)
    assert any(f"schema sync: subject {topic}-clash-value -> A.{topic}-clash-value" in e for e in errors), (
        list(errors)
    )

    # The refusal reaches the replication worker (through the metadata worker's record of the latest
    # pass): the held record's error names it, not a wait for the sync (issue 36 item 4).
    refusal = f"the schema sync refuses subject A.{topic}-clash-value"

    def held_error() -> str:
        row = FlowPartitionStatus.objects.filter(
            flow=flow, remote_topic=f"A.{topic}-clash", partition=PARTITIONS[0]
        ).first()
        return row.last_error if row is not None else ""

    try:
        wait_until(lambda: refusal in held_error(), timeout_s=90, what="the held record naming the refusal")
    except AssertionError:
        print("held partition's error:", held_error())
        print(list(FlowEvent.objects.filter(flow=flow).values_list("message", flat=True)))
        raise
    assert f"{topic}-clash[{PARTITIONS[0]}] has waited" in held_error()
    assert read_partition(cluster_b, f"A.{topic}-clash", PARTITIONS[0]) == []

    # Continuous verification reads the copies as the flow wrote them (the target's IDs): verified, no
    # mismatch (before: every partition "differs" at offset 0).
    def verified() -> list[tuple[str, int]]:
        rows = PartitionVerification.objects.filter(flow=flow, topic=topic)
        assert not [r.reason for r in rows if r.status == VerificationStatus.MISMATCH]
        return [(r.status, r.records_verified) for r in rows if r.records_verified > 0]

    wait_until(lambda: len(verified()) == len(PARTITIONS), timeout_s=90, what="every partition verified")
    assert all(status == VerificationStatus.OK for status, _ in verified()), verified()

    # The latest pass's ID mapping and errors, in the status, on the flow page and as metrics.
    assert status["errors"] == 1
    id_map = {
        source_api.version(f"{topic}-value", n).schema_id: target_api.version(f"A.{topic}-value", n).schema_id
        for n in (1, 2)
    }
    assert {int(s): t for s, t in status["id_map"].items()}.items() >= id_map.items()
    page = client_as("viewer").get(f"/flows/{flow.pk}/live/")
    assert page.status_code == 200
    section = page.content.decode().split('id="flow-schemas"', 1)[1].split("</section>", 1)[0]
    assert "rewrite-ids" in section and 'id="schemas-errors"' in section and "ago" in section
    for source_id, target_id in id_map.items():
        assert f'<td class="num">{source_id}</td><td class="num">{target_id}</td>' in section
    samples = {
        (sample.name, sample.labels.get("flow")): sample.value
        for family in text_string_to_metric_families(exposition().decode())
        for sample in family.samples
    }
    assert samples[("mirrorplane_flow_schema_sync_errors", flow.name)] == 1
    assert samples[("mirrorplane_flow_schema_versions_behind", flow.name)] == 1
    assert samples[("mirrorplane_flow_schema_sync_age_seconds", flow.name)] >= 0


def test_failback_syncs_the_schemas_written_on_the_target_back_to_the_source(
    celery_runtime, cluster_a, cluster_b, schema_registries, unique_name
):
    """A flow that syncs schemas fails over; producers on B write Avro records against B's registry (an
    evolved schema, registered on B only); the failback's reverse flow syncs B's subjects to A's registry
    (`B.<topic>-value`) and rewrites the IDs, so every record it brings home decodes with A's registry."""
    topic, group = f"orders-{unique_name}", f"billing-{unique_name}"
    create_topics(cluster_a, [topic], len(PARTITIONS))
    clusters = {
        alias: services.cluster_create(
            actor=None,
            alias=alias,
            bootstrap_servers=cluster.bootstrap_servers,
            client_properties={"client": {"schema.registry.url": schema_registries[alias].url}},
        )
        for alias, cluster in (("A", cluster_a), ("B", cluster_b))
    }
    forward = services.flow_create(
        actor=None,
        source=clusters["A"],
        target=clusters["B"],
        enabled=True,
        topics=[topic],
        groups=[group],
        refresh_groups_interval_seconds=1,
        schemas_sync_mode="rewrite-ids",
        schemas_sync_interval_seconds=1,
    )
    source_api = ConfluentRegistryClient(schema_registries["A"].url)
    for index in range(3):  # A's own schemas: the IDs the reverse flow gets on A are not B's
        source_api.register(f"{topic}-mine-value", Schema(json.dumps({**ORDER_V1, "name": f"Home{index}"})))
    before = [{"id": i, "item": f"item-{i}"} for i in range(20)]
    produce_orders(
        cluster_a, SchemaRegistryClient({"url": schema_registries["A"].url}), topic, ORDER_V1, before
    )
    assert GroupOffsetsAdmin(cluster_a).alter_offsets(group, {(topic, p): 5 for p in PARTITIONS}) == {}
    celery_runtime.start_worker("w1", queues="replication,metadata")
    celery_runtime.start_worker("ops", queues="operations", pool="threads", concurrency=2)
    celery_runtime.start_beat()

    def mirrored(cluster, name: str, count: int):
        def check():
            try:
                return sum(len(read_partition(cluster, name, p)) for p in PARTITIONS) == count
            except Exception:  # the remote topic is not created yet
                return False

        return check

    def ended(operation: Operation) -> Operation:
        wait_until(lambda: not Operation.objects.get(pk=operation.pk).active, timeout_s=180, what="its end")
        operation.refresh_from_db()
        assert operation.outcome == "succeeded", (operation.error, celery_runtime.log("ops")[-3000:])
        return operation

    wait_until(mirrored(cluster_b, f"A.{topic}", len(before)), timeout_s=120, what="the forward flow")
    ended(
        operations.operation_request(
            actor=None, kind="failover", flow=forward, confirm=forward.name, groups=[group]
        )
    )

    # The outage: producers write B's own topic, against B's registry, with a schema A's registry lacks.
    create_topics(cluster_b, [topic], len(PARTITIONS))
    outage = [{"id": i, "item": f"item-{i}", "quantity": i % 3} for i in range(100, 130)]
    produce_orders(
        cluster_b, SchemaRegistryClient({"url": schema_registries["B"].url}), topic, ORDER_V2, outage
    )

    failback = ended(
        operations.operation_request(actor=None, kind="failback", flow=forward, confirm=forward.name)
    )
    reverse = Flow.objects.get(pk=failback.reverse_flow_id)
    assert reverse.schemas_sync_mode == "rewrite-ids"
    home_version = source_api.version(f"B.{topic}-value", 1)  # B's subject, synced back under its remote name
    assert home_version.schema.same_as(Schema(json.dumps(ORDER_V2)))
    values = AvroDeserializer(SchemaRegistryClient({"url": schema_registries["A"].url}))
    expected = expected_per_partition(outage)
    for partition in PARTITIONS:
        records = read_partition(cluster_a, f"B.{topic}", partition)
        assert {schema_id_of(r.value()) for r in records} == {home_version.schema_id}  # A's ID, not B's
        decoded = [values(r.value(), SerializationContext(f"B.{topic}", MessageField.VALUE)) for r in records]
        assert decoded == expected[partition]
