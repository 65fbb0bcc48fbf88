"""Wire-format records read with their schema for the message browser (replication.schemas.decoding): the
message indexes of Protobuf, and every way a record a producer wrote can fail to decode said, never
raised. The registry here is an in-memory table of the schemas (a pure function's input); the browser
test in tests/controlplane/browse/test_record_decoding.py decodes through a real registry."""

from __future__ import annotations

import json

import fastavro

from replication.browse import ValueFormat, render_decoded
from replication.schemas.decoding import decode_record, message_indexes
from replication.schemas.rest import Schema

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]}


class Schemas:
    def __init__(self, by_id: dict[int, Schema], *, down: bool = False) -> None:
        self.by_id, self.down = by_id, down

    def schema_by_id(self, schema_id: int) -> Schema | None:
        if self.down:
            raise ConnectionError("connection refused")
        return self.by_id.get(schema_id)

    def version(self, subject: str, version: int):
        raise LookupError(subject)


def wire(schema_id: int, body: bytes) -> bytes:
    return b"\x00" + schema_id.to_bytes(4, "big") + body


def avro(value: dict) -> bytes:
    import io

    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(ORDER), value)
    return out.getvalue()


def test_protobuf_message_indexes_as_the_serializers_write_them():
    assert message_indexes(b"\x00rest") == ([0], 1)  # the first message: one 0 byte
    assert message_indexes(b"\x04\x02\x06rest") == ([1, 3], 3)  # count 2 (zig-zag 4), then 1 and 3


def test_an_avro_record_decodes_to_json_with_its_schema_id():
    source = Schemas({7: Schema(json.dumps(ORDER))})
    decoded = decode_record(wire(7, avro({"id": 42})), source)
    assert (decoded.schema_id, decoded.format, json.loads(decoded.text)) == (7, "avro", {"id": 42})
    shown = render_decoded(wire(7, avro({"id": 42})), decoded)
    assert (shown.format, shown.note) == ("avro", "schema ID 7")
    assert render_decoded(wire(7, avro({"id": 42})), decoded, ValueFormat.HEX).format == "hex"  # as asked


def test_what_does_not_decode_says_why_and_shows_the_bytes():
    source = Schemas({7: Schema(json.dumps(ORDER)), 8: Schema("{}", "JSON"), 9: Schema("x", "PROTOBUF")})
    cases = {
        "unknown id": (wire(99, b"\x02"), "schema ID 99 is not in this cluster's registry"),
        "cut avro": (wire(7, b""), "does not decode with schema ID 7"),
        "trailing bytes": (wire(7, avro({"id": 1}) + b"junk"), "byte(s) left after the record"),
        "bad json": (wire(8, b"\xff{"), "does not decode with schema ID 8"),
        ".proto text": (wire(9, b"\x00\x08\x01"), ".proto text"),
        "bad indexes": (wire(9, b"\xff\xff\xff"), "does not decode"),
    }
    for name, (payload, problem) in cases.items():
        decoded = decode_record(payload, source)
        assert problem in decoded.problem, (name, decoded)
        shown = render_decoded(payload, decoded)
        assert shown.format in ("hex", "text") and problem in shown.note, (name, shown)
    down = decode_record(wire(7, avro({"id": 1})), Schemas({}, down=True))
    assert "schema ID 7 was not read from the registry: connection refused" in down.problem
    assert decode_record(b"plain text", source).schema_id is None  # not the wire format: untouched
    assert decode_record(None, source).schema_id is None
