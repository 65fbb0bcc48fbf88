"""The Confluent wire format: byte 0 is the magic byte 0, bytes 1-4 the schema ID (a big-endian int32),
then the payload (Protobuf puts its message indexes first; they stay as they are). The same ID means
different schemas in two registries unless the IDs were synced, so a mirrored record either keeps IDs
that the target registry shares (`keep-ids`) or gets the target's ID (`rewrite-ids`, `with_schema_id`).
"""

from __future__ import annotations

MAGIC_BYTE = 0
HEADER_SIZE = 5  # the magic byte and the 4-byte schema ID


def schema_id_of(payload: bytes | None) -> int | None:
    """The schema ID a payload in the wire format names; None for any other payload (or none)."""
    if payload is None or len(payload) < HEADER_SIZE or payload[0] != MAGIC_BYTE:
        return None
    return int.from_bytes(payload[1:HEADER_SIZE], "big")


def with_schema_id(payload: bytes, schema_id: int) -> bytes:
    """`payload` (in the wire format) naming `schema_id` instead; every other byte unchanged."""
    return payload[:1] + schema_id.to_bytes(4, "big") + payload[HEADER_SIZE:]
