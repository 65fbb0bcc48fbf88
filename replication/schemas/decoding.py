"""Records in the Confluent wire format decoded with the writer's schema, for people to read (the message
browser): Avro, Protobuf and JSON Schema, each to pretty JSON.

`decode_record` takes a payload and a `SchemaSource` (the cluster's registry, looked up by ID and by
subject version for references) and never raises: a record is whatever any producer wrote, so a payload
that names an unknown ID, does not match its schema or is cut gives a `Decoded` with the reason, and the
browser shows the bytes as before with that note.

Protobuf: the payload starts with the message indexes (a zig-zag varint count, then each index; a single
0 means the first message) that say which message of the schema's file it is. The schema is read in the
form Confluent-compatible serializers register it with Apicurio (a base64 FileDescriptorProto, each import
a reference); a `.proto` text schema (Confluent Schema Registry's form) cannot be compiled here and is said.
"""

from __future__ import annotations

import base64
import binascii
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from replication.schemas.rest import Schema
from replication.schemas.wire import HEADER_SIZE, schema_id_of

MAX_REFERENCE_DEPTH = 16  # a schema importing itself through others is refused past this


class SchemaSource(Protocol):
    def schema_by_id(self, schema_id: int) -> Schema | None: ...

    def version(self, subject: str, version: int) -> Any: ...  # a SubjectVersion (its `.schema`)


@dataclass(frozen=True)
class Decoded:
    """A payload read with its schema: `text` (pretty JSON) and its `format` (avro, protobuf, json-schema),
    or `problem` why it could not be; `schema_id` None when the payload is not in the wire format."""

    schema_id: int | None
    format: str = ""
    text: str = ""
    problem: str = ""


def _pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, default=_jsonable, sort_keys=False)


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    return str(value)  # decimals, dates, UUIDs as Avro's logical types give them


def _references(source: SchemaSource, schema: Schema, depth: int = 0) -> list[Schema]:
    """The schemas `schema` references, each after its own references (dependency order)."""
    if depth > MAX_REFERENCE_DEPTH:
        raise ValueError(f"references nest deeper than {MAX_REFERENCE_DEPTH}")
    found: list[Schema] = []
    for reference in schema.references:
        referenced = source.version(reference.subject, reference.version).schema
        found += _references(source, referenced, depth + 1) + [referenced]
    return found


def _avro(source: SchemaSource, schema: Schema, body: bytes) -> str:
    import fastavro  # imported when an Avro record is shown

    named: dict[str, Any] = {}
    for referenced in _references(source, schema):
        fastavro.parse_schema(json.loads(referenced.schema), named_schemas=named)
    parsed = fastavro.parse_schema(json.loads(schema.schema), named_schemas=named)
    stream = io.BytesIO(body)
    value = fastavro.schemaless_reader(stream, parsed, None)
    if stream.tell() != len(body):
        raise ValueError(f"{len(body) - stream.tell()} byte(s) left after the record: not this schema")
    return _pretty(value)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zig-zag varint at `at`: (its value, the offset after it)."""
    shift = result = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("the message indexes are cut or malformed")
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def message_indexes(body: bytes) -> tuple[list[int], int]:
    """The Protobuf message indexes at the start of `body` and where the message starts."""
    count, at = _varint(body, 0)
    if count == 0:
        return [0], at
    if count < 0 or count > 100:
        raise ValueError(f"{count} message indexes: not a Protobuf record of this format")
    indexes = []
    for _ in range(count):
        index, at = _varint(body, at)
        indexes.append(index)
    return indexes, at


def _file_descriptor(schema: Schema):
    from google.protobuf import descriptor_pb2

    try:
        raw = base64.b64decode(schema.schema, validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "the schema is .proto text (Confluent Schema Registry's form): it cannot be compiled here"
        ) from None
    return descriptor_pb2.FileDescriptorProto.FromString(raw)


def _protobuf(source: SchemaSource, schema: Schema, body: bytes) -> str:
    from google.protobuf import descriptor_pool, json_format, message_factory

    pool = descriptor_pool.DescriptorPool()
    added: set[str] = set()
    for part in [*_references(source, schema), schema]:
        file = _file_descriptor(part)  # the last is the record's own file
        if file.name not in added:
            pool.Add(file)
            added.add(file.name)
    indexes, start = message_indexes(body)
    names, messages = [], file.message_type
    for index in indexes:
        if not 0 <= index < len(messages):
            raise ValueError(f"message index {index} is not in the schema")
        names.append(messages[index].name)
        messages = messages[index].nested_type
    full_name = ".".join([file.package, *names] if file.package else names)
    message = message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name)).FromString(body[start:])
    return _pretty(json_format.MessageToDict(message, preserving_proto_field_name=True))


def _json_schema(source: SchemaSource, schema: Schema, body: bytes) -> str:
    return _pretty(json.loads(body.decode("utf-8")))


_DECODERS: dict[str, tuple[str, Callable[[SchemaSource, Schema, bytes], str]]] = {
    "AVRO": ("avro", _avro),
    "PROTOBUF": ("protobuf", _protobuf),
    "JSON": ("json-schema", _json_schema),
}


def decode_record(payload: bytes | None, source: SchemaSource) -> Decoded:
    """`payload` read with the schema its wire-format ID names in `source`; never raises (see the module)."""
    schema_id = schema_id_of(payload)
    if schema_id is None or payload is None:
        return Decoded(None)
    try:
        schema = source.schema_by_id(schema_id)
    except Exception as exc:  # the registry: unreachable, refused, an answer that is not JSON, not asked
        return Decoded(schema_id, problem=f"schema ID {schema_id} was not read from the registry: {exc}")
    if schema is None:
        return Decoded(schema_id, problem=f"schema ID {schema_id} is not in this cluster's registry")
    kind, decode = _DECODERS.get(schema.schema_type.upper(), (schema.schema_type.lower(), None))
    if decode is None:
        return Decoded(schema_id, kind, problem=f"schema type {schema.schema_type} is not decoded here")
    try:
        return Decoded(schema_id, kind, decode(source, schema, payload[HEADER_SIZE:]))
    except RecursionError:
        return Decoded(schema_id, kind, problem="nested deeper than can be decoded")
    except Exception as exc:  # any producer may write any bytes after a valid header
        return Decoded(schema_id, kind, problem=f"does not decode with schema ID {schema_id}: {exc}")
