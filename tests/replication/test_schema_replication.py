"""Schemas travel with the data, end to end on Apache Kafka with two real registries (one per cluster):
producers serialize Avro with confluent-kafka's AvroSerializer against the source registry, the schema
sync registers the subjects on the target (`rewrite-ids`), MirrorSourceTask rewrites the schema IDs of
keys and values, and a consumer on the target deserializes every mirrored record with the target
registry into the same objects: across a schema evolution mid-stream and a restart of the task, each
record once (exactly_once), none sent while its schema was missing on the target."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from replication.config import DeliveryGuarantee, FlowConfig
from replication.filters import SubjectFilter
from replication.kafka.clients import make_producer
from replication.policy import DefaultReplicationPolicy
from replication.positions import InMemoryPositionStore
from replication.schemas.ids import SchemaIdRewriter
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.subjects import subject_renamer
from replication.schemas.sync import IdMode, sync_schemas
from replication.schemas.wire import schema_id_of
from replication.source import MirrorSourceTask
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
    rename = subject_renamer(
        policy=DefaultReplicationPolicy(known_aliases=["A", "B"]),
        source_alias="A",
        target_alias="B",
        subject_filter=SubjectFilter(),
        topic_replicated=lambda name: name == topic,
    )
    store = InMemoryPositionStore()

    def new_task() -> MirrorSourceTask:
        task = MirrorSourceTask(
            flow=FlowConfig(
                source="A",
                target="B",
                enabled=True,
                topics=(topic,),
                delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE,
            ),
            source=cluster_a,
            target=cluster_b,
            policy=DefaultReplicationPolicy(known_aliases=["A", "B"]),
            task_index=0,
            position_store=store,
            schema_ids=SchemaIdRewriter(source=source_api, target=target_api, rename=rename, retry_s=0.2),
        )
        task.assign([(topic, p) for p in PARTITIONS])
        return task

    def sync() -> None:
        result = sync_schemas(source=source_api, target=target_api, rename=rename, mode=IdMode.REWRITE_IDS)
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
    source_ids = {source_api.version(f"{topic}-value", v).schema_id for v in (1, 2)}
    expected = expected_per_partition(first + second)  # each decoded with its writer schema
    for partition in PARTITIONS:
        mirrored = read_partition(cluster_b, remote, partition)
        assert len(mirrored) == 60  # each record once
        assert not {schema_id_of(m.value()) for m in mirrored} & source_ids  # the target's IDs only
        decoded = [values(m.value(), SerializationContext(remote, MessageField.VALUE)) for m in mirrored]
        assert decoded == expected[partition]
        decoded_keys = [keys(m.key(), SerializationContext(remote, MessageField.KEY)) for m in mirrored]
        assert decoded_keys == [f"customer-{o['id'] % 7}" for o in expected[partition]]
