"""Schemas travel with the data, end to end on Apache Kafka with two real registries (one per cluster):
producers serialize Avro with confluent-kafka's AvroSerializer against the source registry, the schema
sync registers the subjects on the target (`rewrite-ids`), MirrorSourceTask rewrites the schema IDs of
keys and values, and a consumer on the target deserializes every mirrored record with the target
registry into the same objects: across a schema evolution mid-stream and a restart of the task, each
record once (exactly_once), none sent while its schema was missing on the target; and the same through
`python -m replication run` configured by an mm2.properties file."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from replication.config import DeliveryGuarantee, FlowConfig, SchemaIdMode
from replication.kafka.clients import make_producer
from replication.kafka.source_io import kafka_task_io
from replication.policy import DefaultReplicationPolicy
from replication.positions import InMemoryPositionStore
from replication.schemas.flow import flow_subject_renamer
from replication.schemas.ids import SchemaIdRewriter
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.sync import sync_schemas
from replication.schemas.wire import schema_id_of
from replication.source import MirrorSourceTask
from tests.replication.test_run_cli import RunProcess, write_mm2
from tests.replication.test_source_task import create_topics, read_partition, replicated, run_until

pytestmark = pytest.mark.kafka

ORDER_V1 = {
    "type": "record",
    "name": "Order",
    "namespace": "com.example",
    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}],
}
ORDER_V2 = {  # evolved: a field with a default (BACKWARD compatible)
    **ORDER_V1,
    "fields": [*ORDER_V1["fields"], {"name": "quantity", "type": "int", "default": 1}],
}
PARTITIONS = (0, 1)


def produce_orders(cluster, registry: SchemaRegistryClient, topic: str, schema: dict, orders: list) -> None:
    values = AvroSerializer(registry, json.dumps(schema))
    keys = AvroSerializer(registry, '"string"')
    producer = make_producer(cluster)
    for index, order in enumerate(orders):
        producer.produce(
            topic,
            key=keys(f"customer-{order['id'] % 7}", SerializationContext(topic, MessageField.KEY)),
            value=values(order, SerializationContext(topic, MessageField.VALUE)),
            partition=PARTITIONS[index % len(PARTITIONS)],
        )
    assert producer.flush(30) == 0


def expected_per_partition(orders: list) -> dict[int, list]:
    return {p: [o for i, o in enumerate(orders) if PARTITIONS[i % len(PARTITIONS)] == p] for p in PARTITIONS}


def test_rewrite_ids_mirrors_avro_records_that_decode_with_the_target_registry(
    cluster_a, cluster_b, schema_registries, unique_name
):
    topic, remote = unique_name, f"A.{unique_name}"
    create_topics(cluster_a, [topic], len(PARTITIONS))
    create_topics(cluster_b, [remote], len(PARTITIONS))
    source_api = ConfluentRegistryClient(schema_registries["A"].url)
    target_api = ConfluentRegistryClient(schema_registries["B"].url)
    for index in range(4):  # the target's own schemas: its IDs are not the source's
        target_api.register(f"{topic}-local-value", Schema(json.dumps({**ORDER_V1, "name": f"Local{index}"})))
    source_registry = SchemaRegistryClient({"url": schema_registries["A"].url})
    target_registry = SchemaRegistryClient({"url": schema_registries["B"].url})
    flow = FlowConfig(
        source="A", target="B", topics=(topic,), delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE
    )
    policy = DefaultReplicationPolicy(known_aliases=["A", "B"])
    rename = flow_subject_renamer(flow, policy)
    store = InMemoryPositionStore()

    def new_task() -> MirrorSourceTask:
        task = MirrorSourceTask(
            flow=flow,
            policy=policy,
            task_index=0,
            position_store=store,
            io=kafka_task_io(flow, source=cluster_a, target=cluster_b, policy=policy, task_index=0),
            schema_ids=SchemaIdRewriter(source=source_api, target=target_api, rename=rename, retry_s=0.2),
        )
        task.assign([(topic, p) for p in PARTITIONS])
        return task

    def sync() -> None:
        result = sync_schemas(
            source=source_api, target=target_api, rename=rename, mode=SchemaIdMode.REWRITE_IDS
        )
        assert result.ok, result.errors

    first = [{"id": i, "item": f"item-{i}"} for i in range(60)]
    produce_orders(cluster_a, source_registry, topic, ORDER_V1, first)
    task = new_task()
    for _ in range(3):  # the schemas are not on the target yet: every record waits
        result = task.run_slice(max_seconds=0.5)
        assert result.records == 0 and result.ok, result
    assert all(len(read_partition(cluster_b, remote, p)) == 0 for p in PARTITIONS)

    sync()
    run_until(task, replicated(task, {(topic, p): 30 for p in PARTITIONS}))

    # Evolution mid-stream: version 2 gets a new source ID, unknown to the target until the next sync.
    second = [{"id": i, "item": f"item-{i}", "quantity": i % 5} for i in range(60, 120)]
    produce_orders(cluster_a, source_registry, topic, ORDER_V2, second)
    for _ in range(3):
        result = task.run_slice(max_seconds=0.5)
        assert result.records == 0, result
    assert result.positions == {(topic, p): 30 for p in PARTITIONS}
    del task  # a restart mid-stream, without close(): the new task rebuilds the ID mapping

    sync()
    restarted = new_task()
    run_until(restarted, replicated(restarted, {(topic, p): 60 for p in PARTITIONS}))
    restarted.close()

    values = AvroDeserializer(target_registry)
    keys = AvroDeserializer(target_registry)
    # The registries serve the whole session: a target ID may equal a source ID by chance, so each record
    # must carry the ID the target gave the remote subject's version (not merely "not a source ID").
    target_ids = {target_api.version(rename(f"{topic}-value"), v).schema_id for v in (1, 2)}
    expected = expected_per_partition(first + second)  # each decoded with its writer schema
    for partition in PARTITIONS:
        mirrored = read_partition(cluster_b, remote, partition)
        assert len(mirrored) == 60  # each record once
        assert {schema_id_of(m.value()) for m in mirrored} <= target_ids  # the target's IDs only
        decoded = [values(m.value(), SerializationContext(remote, MessageField.VALUE)) for m in mirrored]
        assert decoded == expected[partition]
        decoded_keys = [keys(m.key(), SerializationContext(remote, MessageField.KEY)) for m in mirrored]
        assert decoded_keys == [f"customer-{o['id'] % 7}" for o in expected[partition]]


def wait_for_records(cluster, topic: str, counts: dict[int, int], *, timeout_s: float = 90) -> None:
    """Until each partition holds `counts` committed records: a kill -9 right after records were seen
    uncommitted would leave them aborted in the log, physically there beside their copies."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = {p: len(read_partition(cluster, topic, p, isolation="read_committed")) for p in counts}
        if got == counts:
            return
        assert time.monotonic() < deadline, f"{topic}: {got}, expected {counts}"
        time.sleep(0.5)


def test_dedicated_mode_syncs_schemas_and_rewrites_ids_from_the_mm2_file_across_a_kill(
    cluster_a, cluster_b, schema_registries, unique_name, tmp_path
):
    """`python -m replication run` with the clusters' registries and the flow's mode in mm2.properties:
    the flow's metadata tasks sync the subjects, its source tasks rewrite the IDs; a kill -9 mid-stream
    and a new process lose nothing and copy nothing twice (exactly_once)."""
    topic, remote = unique_name, f"A.{unique_name}"
    create_topics(cluster_a, [topic], len(PARTITIONS))
    target_api = ConfluentRegistryClient(schema_registries["B"].url)
    for index in range(2):  # the target's own schemas: its IDs are not the source's
        target_api.register(f"{topic}-local-value", Schema(json.dumps({**ORDER_V1, "name": f"Own{index}"})))
    properties = write_mm2(
        tmp_path / "mm2.properties",
        {"A": cluster_a, "B": cluster_b},
        [
            f"A.schema.registry.url = {schema_registries['A'].url}",
            f"B.schema.registry.url = {schema_registries['B'].url}",
            "A->B.enabled = true",
            f"A->B.topics = {topic}",
            "A->B.delivery.guarantee = exactly_once",
            "A->B.schemas.sync.mode = rewrite-ids",
            "A->B.schemas.sync.interval.seconds = 1",
            "A->B.emit.checkpoints.enabled = false",
        ],
    )
    source_registry = SchemaRegistryClient({"url": schema_registries["A"].url})
    first = [{"id": i, "item": f"item-{i}"} for i in range(40)]
    second = [{"id": i, "item": f"item-{i}", "quantity": i % 3} for i in range(40, 80)]
    produce_orders(cluster_a, source_registry, topic, ORDER_V1, first)
    runner = RunProcess(properties)
    try:
        wait_for_records(cluster_b, remote, {p: 20 for p in PARTITIONS})
        runner.kill()  # kill -9 mid-stream
        produce_orders(cluster_a, source_registry, topic, ORDER_V2, second)  # evolution while it is down
        runner = RunProcess(properties)
        wait_for_records(cluster_b, remote, {p: 40 for p in PARTITIONS})
    except BaseException:
        print(runner.output())
        raise
    finally:
        runner.stop()

    target_registry = SchemaRegistryClient({"url": schema_registries["B"].url})
    values = AvroDeserializer(target_registry)
    expected = expected_per_partition(first + second)
    for partition in PARTITIONS:
        mirrored = read_partition(cluster_b, remote, partition)
        decoded = [values(m.value(), SerializationContext(remote, MessageField.VALUE)) for m in mirrored]
        assert decoded == expected[partition]
    assert [
        v.schema.same_as(Schema(json.dumps(s)))
        for v, s in zip(
            (target_api.version(f"{remote}-value", n) for n in (1, 2)), (ORDER_V1, ORDER_V2), strict=True
        )
    ] == [True, True]
