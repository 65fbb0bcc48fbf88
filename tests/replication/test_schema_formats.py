"""Protobuf and JSON Schema records end to end, as Avro is in test_schema_replication: producers serialize
with confluent-kafka's ProtobufSerializer (a .proto that imports another) and JSONSerializer (a schema
whose `$ref` names another subject) against the source registry; the sync registers the referenced
subjects first and the records' subjects after them (`rewrite-ids`); MirrorSourceTask rewrites the IDs;
a consumer on the target decodes every mirrored record with the target registry alone: the Protobuf
message class is built from the target's schema and its imports, the JSON Schema deserializer validates
against the target's schema with its `$ref` resolved there."""

from __future__ import annotations

import base64
import json

import pytest
from confluent_kafka.schema_registry import Schema as ClientSchema
from confluent_kafka.schema_registry import SchemaReference, SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

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
from tests.replication.test_source_task import create_topics, read_partition, replicated, run_until

pytestmark = pytest.mark.kafka

FIELD = descriptor_pb2.FieldDescriptorProto
RECORDS = 24


def order_files(package: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """`<package>/money.proto` and `<package>/order.proto`, which imports it (Order.price is a Money)."""
    money = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/money.proto", package=package, syntax="proto3"
    )
    message = money.message_type.add(name="Money")
    message.field.add(name="cents", number=1, type=FIELD.TYPE_INT64, label=FIELD.LABEL_OPTIONAL)
    message.field.add(name="currency", number=2, type=FIELD.TYPE_STRING, label=FIELD.LABEL_OPTIONAL)
    order = descriptor_pb2.FileDescriptorProto(
        name=f"{package}/order.proto", package=package, syntax="proto3", dependency=[money.name]
    )
    message = order.message_type.add(name="Order")
    message.field.add(name="id", number=1, type=FIELD.TYPE_INT64, label=FIELD.LABEL_OPTIONAL)
    message.field.add(
        name="price",
        number=2,
        type=FIELD.TYPE_MESSAGE,
        type_name=f".{package}.Money",
        label=FIELD.LABEL_OPTIONAL,
    )
    return [money, order]


def message_class(files: list[descriptor_pb2.FileDescriptorProto], full_name: str):
    pool = descriptor_pool.DescriptorPool()
    for file in files:
        pool.Add(file)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))


def files_on_registry(
    registry: ConfluentRegistryClient, schema: Schema
) -> list[descriptor_pb2.FileDescriptorProto]:
    """The FileDescriptorProtos of a Protobuf schema and its imports, imports first, all from `registry`."""
    files = []
    for ref in schema.references:
        files += files_on_registry(registry, registry.version(ref.subject, ref.version).schema)
    files.append(descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(schema.schema)))
    return files


def test_protobuf_and_json_schema_records_with_references_decode_with_the_target_registry(
    cluster_a, cluster_b, schema_registries, unique_name
):
    pb_topic, json_topic = f"{unique_name}-pb", f"{unique_name}-json"
    create_topics(cluster_a, [pb_topic, json_topic], 1)
    create_topics(cluster_b, [f"A.{pb_topic}", f"A.{json_topic}"], 1)
    source_api = ConfluentRegistryClient(schema_registries["A"].url)
    target_api = ConfluentRegistryClient(schema_registries["B"].url)
    tag = unique_name.replace("-", "_")
    for index in range(3):  # the target's own schemas: its IDs are not the source's
        target_api.register(
            f"{unique_name}-local",
            Schema(json.dumps({"type": "record", "name": f"Local{tag}{index}", "fields": []})),
        )
    source_registry = SchemaRegistryClient({"url": schema_registries["A"].url})
    target_registry = SchemaRegistryClient({"url": schema_registries["B"].url})

    # Protobuf: the serializer registers the import as subject `<package>/money.proto` (a reference).
    package = f"shop_{tag}"
    order_type = message_class(order_files(package), f"{package}.Order")
    money_type = order_type.DESCRIPTOR.fields_by_name["price"].message_type._concrete_class
    pb_values = ProtobufSerializer(order_type, source_registry, {"use.deprecated.format": False})
    orders = [order_type(id=i, price=money_type(cents=100 + i, currency="EUR")) for i in range(RECORDS)]
    # JSON Schema: `price` is a $ref to the schema of subject `<unique>-money`, a reference.
    money_url = f"https://example.com/{unique_name}/money.json"
    money_subject = f"{unique_name}-money"
    money_schema = {
        "$id": money_url,
        "type": "object",
        "properties": {"cents": {"type": "integer"}, "currency": {"type": "string"}},
        "required": ["cents", "currency"],
    }
    source_registry.register_schema(money_subject, ClientSchema(json.dumps(money_schema), "JSON"))
    order_schema = {
        "type": "object",
        "title": f"Order{tag}",
        "properties": {"id": {"type": "integer"}, "price": {"$ref": money_url}},
        "required": ["id", "price"],
    }
    json_values = JSONSerializer(
        ClientSchema(json.dumps(order_schema), "JSON", [SchemaReference(money_url, money_subject, 1)]),
        source_registry,
    )
    documents = [{"id": i, "price": {"cents": 100 + i, "currency": "USD"}} for i in range(RECORDS)]

    producer = make_producer(cluster_a)
    for order, document in zip(orders, documents, strict=True):
        producer.produce(pb_topic, value=pb_values(order, SerializationContext(pb_topic, MessageField.VALUE)))
        producer.produce(
            json_topic, value=json_values(document, SerializationContext(json_topic, MessageField.VALUE))
        )
    assert producer.flush(30) == 0
    pb_source_version = source_api.version(f"{pb_topic}-value", 1)
    assert [ref.subject for ref in pb_source_version.schema.references] == [f"{package}/money.proto"]

    flow = FlowConfig(
        source="A",
        target="B",
        enabled=True,
        topics=(pb_topic, json_topic),
        delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE,
    )
    policy = DefaultReplicationPolicy(known_aliases=["A", "B"])
    rename = flow_subject_renamer(flow, policy)
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=InMemoryPositionStore(),
        io=kafka_task_io(flow, source=cluster_a, target=cluster_b, policy=policy, task_index=0),
        schema_ids=SchemaIdRewriter(source=source_api, target=target_api, rename=rename, retry_s=0.2),
    )
    task.assign([(pb_topic, 0), (json_topic, 0)])
    result = task.run_slice(max_seconds=0.5)  # no schema on the target yet: both partitions hold
    assert result.records == 0 and result.ok, result

    synced = sync_schemas(source=source_api, target=target_api, rename=rename, mode=SchemaIdMode.REWRITE_IDS)
    assert synced.ok, synced.errors
    assert synced.subjects[f"{pb_topic}-value"] == f"A.{pb_topic}-value"
    assert synced.subjects[f"{package}/money.proto"] == f"{package}/money.proto"  # not a topic's: kept
    run_until(task, replicated(task, {(pb_topic, 0): RECORDS, (json_topic, 0): RECORDS}))
    task.close()

    # Dependency order: each referenced subject was registered on the target before the subject naming it.
    for source_subject, referenced in (
        (f"{pb_topic}-value", f"{package}/money.proto"),
        (f"{json_topic}-value", money_subject),
    ):
        target_version = target_api.version(f"A.{source_subject}", 1)
        assert [ref.subject for ref in target_version.schema.references] == [referenced]
        assert target_api.version(referenced, 1).schema_id < target_version.schema_id

    pb_mirrored = read_partition(cluster_b, f"A.{pb_topic}", 0)
    json_mirrored = read_partition(cluster_b, f"A.{json_topic}", 0)
    assert len(pb_mirrored) == len(json_mirrored) == RECORDS  # each record once
    for topic, mirrored in ((pb_topic, pb_mirrored), (json_topic, json_mirrored)):
        ids = {schema_id_of(m.value()) for m in mirrored}  # the target's ID of the schema, in every record
        assert ids == {target_api.version(f"A.{topic}-value", 1).schema_id}, topic

    # Protobuf, decoded by a class built from the target registry's schema and its import only.
    target_schema = target_api.schema_by_id(schema_id_of(pb_mirrored[0].value()))
    target_order_type = message_class(files_on_registry(target_api, target_schema), f"{package}.Order")
    pb_decode = ProtobufDeserializer(target_order_type, {"use.deprecated.format": False}, target_registry)
    pb_context = SerializationContext(f"A.{pb_topic}", MessageField.VALUE)
    decoded = [pb_decode(m.value(), pb_context) for m in pb_mirrored]
    assert [(o.id, o.price.cents, o.price.currency) for o in decoded] == [
        (o.id, o.price.cents, o.price.currency) for o in orders
    ]

    # JSON Schema, validated against the target's schema with its $ref resolved on the target.
    json_decode = JSONDeserializer(None, schema_registry_client=target_registry)
    json_context = SerializationContext(f"A.{json_topic}", MessageField.VALUE)
    assert [json_decode(m.value(), json_context) for m in json_mirrored] == documents
