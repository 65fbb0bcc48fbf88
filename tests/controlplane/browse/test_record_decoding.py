"""The message browser decodes Avro, Protobuf (with an import) and JSON Schema records with the cluster's
registry (a real Apicurio registry, records written by confluent-kafka's serializers to Apache Kafka);
a masked value stays masked, and a cluster without a registry shows the bytes as before."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema as ClientSchema
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from replication.kafka.clients import make_producer
from tests.replication.test_schema_formats import message_class, order_files
from tests.replication.test_source_task import create_topics

pytestmark = pytest.mark.kafka


def _records(client, cluster_id: int, topic: str) -> list[dict]:
    answer = client.get(f"/api/v1/clusters/{cluster_id}/topics/{topic}/records/?partition=0&offset=0")
    assert answer.status_code == 200, answer.content
    return answer.json()["records"]


def test_the_browser_decodes_avro_protobuf_and_json_schema_with_the_clusters_registry(
    admin_client, client_as, cluster_a, schema_registries, unique_name, settings
):
    url = schema_registries["A"].url
    created = admin_client.post(
        "/api/v1/clusters/",
        {
            "alias": "A",
            "bootstrap_servers": cluster_a.bootstrap_servers,
            "client_properties": {"client": {"schema.registry.url": url}},
        },
        format="json",
    )
    assert created.status_code == 201, created.content
    cluster_id = created.json()["id"]
    avro_topic, pb_topic, json_topic = (f"{unique_name}-{kind}" for kind in ("avro", "pb", "json"))
    create_topics(cluster_a, [avro_topic, pb_topic, json_topic], 1)
    registry = SchemaRegistryClient({"url": url})
    tag = unique_name.replace("-", "_")
    avro = AvroSerializer(
        registry,
        json.dumps({"type": "record", "name": f"Order{tag}", "fields": [{"name": "id", "type": "long"}]}),
    )
    package = f"shop_{tag}"
    order_type = message_class(order_files(package), f"{package}.Order")
    money_type = order_type.DESCRIPTOR.fields_by_name["price"].message_type._concrete_class
    protobuf = ProtobufSerializer(order_type, registry, {"use.deprecated.format": False})
    schema = {"type": "object", "title": f"Order{tag}", "properties": {"id": {"type": "integer"}}}
    json_schema = JSONSerializer(ClientSchema(json.dumps(schema), "JSON"), registry)
    producer = make_producer(cluster_a)

    def context(topic: str) -> SerializationContext:
        return SerializationContext(topic, MessageField.VALUE)

    producer.produce(avro_topic, value=avro({"id": 42}, context(avro_topic)))
    producer.produce(avro_topic, value=b"\x00\x7f\xff\xff\xffnot a record")  # an ID nobody registered
    order = order_type(id=7, price=money_type(cents=250, currency="EUR"))
    producer.produce(pb_topic, value=protobuf(order, context(pb_topic)))
    producer.produce(json_topic, value=json_schema({"id": 9}, context(json_topic)))
    assert producer.flush(30) == 0

    viewer = client_as("viewer")
    decoded, unknown = _records(viewer, cluster_id, avro_topic)
    assert (decoded["value"]["format"], json.loads(decoded["value"]["text"])) == ("avro", {"id": 42})
    assert decoded["value"]["note"].startswith("schema ID ")
    assert unknown["value"]["format"] in ("hex", "text")
    assert "is not in this cluster's registry" in unknown["value"]["note"]
    (pb,) = _records(viewer, cluster_id, pb_topic)
    assert pb["value"]["format"] == "protobuf"
    assert json.loads(pb["value"]["text"]) == {"id": "7", "price": {"cents": "250", "currency": "EUR"}}
    (document,) = _records(viewer, cluster_id, json_topic)
    assert (document["value"]["format"], json.loads(document["value"]["text"])) == ("json-schema", {"id": 9})

    # The raw bytes stay a format away, and a masked value is never decoded.
    raw = viewer.get(
        f"/api/v1/clusters/{cluster_id}/topics/{avro_topic}/records/?partition=0&offset=0&format=hex"
    )
    assert raw.json()["records"][0]["value"]["format"] == "hex"
    settings.MIRRORPLANE_BROWSE_MASKED_TOPICS = [avro_topic]
    masked = _records(viewer, cluster_id, avro_topic)[0]["value"]
    assert masked["masked"] is True and "42" not in masked["text"]
