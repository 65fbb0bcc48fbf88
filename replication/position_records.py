"""The records of Mirrorplane's position topic on a flow's target (`replication.kafka.positions` writes
and reads them on Apache Kafka, `replication.memory.takeover` on an in-memory cluster).

Topic `mirrorplane-positions.<source>.internal`, one partition, compacted; one record per flow and source
partition: key `["<flow>", {"partition": p, "topic": t}]`, value `{"next_offset": n}` (JSON, keys sorted
so compaction sees identical keys); a tombstone removes the position. Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from replication.formats import RecordFormatError

Position = tuple[str, str, int, int | None]  # (flow, topic, partition, next offset; None: removed)


def positions_topic(source_alias: str) -> str:
    return f"mirrorplane-positions.{source_alias}.internal"


def position_key(flow: str, topic: str, partition: int) -> bytes:
    return json.dumps([flow, {"partition": partition, "topic": topic}], sort_keys=True).encode()


def position_value(next_offset: int) -> bytes:
    return json.dumps({"next_offset": next_offset}).encode()


def decode_position(key: bytes, value: bytes | None) -> Position:
    """A position, or a tombstone (None: the position was removed)."""
    try:
        flow, where = json.loads(key)
        next_offset = None if value is None else int(json.loads(value)["next_offset"])
        return flow, where["topic"], int(where["partition"]), next_offset
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordFormatError(f"not a position record: {key!r} = {value!r}") from exc


def latest_positions(records: Iterable[Position | None]) -> dict[tuple[str, str, int], int]:
    """The positions the records leave, in the topic's order: a later record wins, a tombstone removes
    (None: a record that is not a position, skipped)."""
    positions: dict[tuple[str, str, int], int] = {}
    for record in records:
        if record is not None:
            flow, topic, partition, offset = record
            if offset is None:
                positions.pop((flow, topic, partition), None)
            else:
                positions[(flow, topic, partition)] = offset
    return positions
