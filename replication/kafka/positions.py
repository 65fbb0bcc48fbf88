"""`KafkaPositionStore`: source task positions in a compacted topic on the target (dedicated mode).

Topic `mm2-offsets.<source>.internal` on the target, one partition, compacted; one record per flow and
source partition: key `["<flow>", {"partition": p, "topic": t}]`, value `{"next_offset": n}` (JSON,
keys sorted so compaction sees identical keys). Like MM2's Connect offsets topic, it lives next to the
data it describes, so a target restored from backup brings its positions along.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence

from replication.config import ClusterConfig
from replication.formats import RecordFormatError
from replication.kafka.internal_topics import (
    INTERNAL_TOPIC_CONFIGS,
    InternalTopicReader,
    InternalTopicWriter,
)
from replication.positions import TopicPartition

POSITIONS_REPLICATION_FACTOR = 3
# Positions are written up to 5 times a second per busy partition (at_least_once's 200 ms cadence), and a
# task taking over reads the topic from its start: roll segments every 10 minutes and clean them early,
# so compaction keeps the topic near one record per partition (it only compacts closed segments).
POSITIONS_TOPIC_CONFIGS = {
    **INTERNAL_TOPIC_CONFIGS,
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}


def positions_topic(source_alias: str) -> str:
    return f"mm2-offsets.{source_alias}.internal"


def position_key(flow: str, topic: str, partition: int) -> bytes:
    return json.dumps([flow, {"partition": partition, "topic": topic}], sort_keys=True).encode()


def _decode(key: bytes, value: bytes) -> tuple[str, str, int, int]:
    try:
        flow, where = json.loads(key)
        return flow, where["topic"], int(where["partition"]), int(json.loads(value)["next_offset"])
    except (ValueError, KeyError, TypeError) as exc:
        raise RecordFormatError(f"not a position record: {key!r} = {value!r}") from exc


class KafkaPositionStore:
    """A PositionStore on the target cluster; safe to share between the tasks of a flow."""

    def __init__(self, target: ClusterConfig, *, source_alias: str) -> None:
        self.target = target
        self.topic = positions_topic(source_alias)
        self._writer = InternalTopicWriter(
            target,
            self.topic,
            replication_factor=POSITIONS_REPLICATION_FACTOR,
            configs=POSITIONS_TOPIC_CONFIGS,
        )
        self._lock = threading.Lock()

    def load(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        wanted = set(partitions)
        reader = InternalTopicReader(self.target, self.topic, decode=_decode)
        try:
            records = reader.read_new()
        finally:
            reader.close()
        positions: dict[TopicPartition, int] = {}
        for record_flow, topic, partition, next_offset in records:  # later records win
            if record_flow == flow and (topic, partition) in wanted:
                positions[(topic, partition)] = next_offset
        return positions

    def save(self, *, flow: str, positions: Mapping[TopicPartition, int]) -> None:
        records = [
            (position_key(flow, topic, partition), json.dumps({"next_offset": offset}).encode())
            for (topic, partition), offset in positions.items()
        ]
        if records:
            with self._lock:
                self._writer.write(records)

    def close(self) -> None:
        self._writer.close()
