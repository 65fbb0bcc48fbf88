"""`KafkaPositionStore`: source task positions in a compacted topic on the target (dedicated mode).

Topic `mirrorplane-positions.<source>.internal` on the target, one partition, compacted, one record per
flow and source partition (`replication.position_records`). Like MM2's Connect offsets topic, it lives next to
the data it describes, so a target restored from backup brings its positions along.

Versions before 2026-11 wrote the same records to `mm2-offsets.<source>.internal`, which is the name of
MM2's own Connect offsets topic in dedicated mode: a Mirrorplane taking over from MM2 shared MM2's topic.
A partition with no position in the new topic takes the one it has in the old topic, and that position is
written to the new topic at once (read old, write new: once per partition, idempotent, as the values are
the same), so a deployment upgraded in place resumes exactly where it stood. The old topic is never
written again; MM2's own records in it are not positions and are ignored here (see `replication.takeover`).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping, Sequence

from replication.config import ClusterConfig
from replication.formats import RecordFormatError
from replication.kafka.internal_topics import (
    INTERNAL_TOPIC_CONFIGS,
    InternalTopic,
    InternalTopicReader,
    InternalTopicWriter,
)
from replication.position_records import (
    Position,
    decode_position,
    latest_positions,
    position_key,
    position_value,
    positions_topic,
)
from replication.takeover import mm2_offsets_topic
from replication.topic_partition import TopicPartition

log = logging.getLogger(__name__)

POSITIONS_REPLICATION_FACTOR = 3
# Positions are written up to 5 times a second per busy partition (at_least_once's 200 ms cadence), and a
# task taking over reads the topic from its start: roll segments every 10 minutes and clean them early,
# so compaction keeps the topic near one record per partition (it only compacts closed segments).
POSITIONS_TOPIC_CONFIGS = {
    **INTERNAL_TOPIC_CONFIGS,
    "segment.ms": "600000",
    "min.cleanable.dirty.ratio": "0.1",
}


def positions_internal_topic(target: ClusterConfig, *, source_alias: str) -> InternalTopic:
    """The positions topic of the flows from `source_alias` into `target`, as its writer creates it."""
    return InternalTopic(
        target,
        positions_topic(source_alias),
        replication_factor=POSITIONS_REPLICATION_FACTOR,
        configs=POSITIONS_TOPIC_CONFIGS,
    )


def legacy_positions_topic(source_alias: str) -> str:
    """Where versions before 2026-11 kept positions: MM2's Connect offsets topic name."""
    return mm2_offsets_topic(source_alias)


def _decode_legacy(key: bytes, value: bytes | None) -> Position | None:
    """As `decode_position`, and None for what else the legacy topic holds: it is MM2's Connect offsets topic's
    name, where MM2's records (`{"offset": n}`) are not errors, just not ours."""
    try:
        return decode_position(key, value)
    except RecordFormatError:
        return None


class KafkaPositionStore:
    """A PositionStore on the target cluster; safe to share between the tasks of a flow."""

    def __init__(self, target: ClusterConfig, *, source_alias: str) -> None:
        self.target = target
        self.topic = positions_topic(source_alias)
        self.legacy_topic = legacy_positions_topic(source_alias)
        self._legacy: dict[tuple[str, str, int], int] | None = None  # read once, on first need
        self._writer = InternalTopicWriter.of(positions_internal_topic(target, source_alias=source_alias))
        self._lock = threading.Lock()

    def load(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        positions = self._read(self.topic, flow=flow, partitions=partitions)
        missing = [key for key in partitions if key not in positions]
        if missing:
            migrated = self._migrate(flow=flow, partitions=missing)
            positions.update(migrated)
        return positions

    def _read(
        self, topic: str, *, flow: str, partitions: Sequence[TopicPartition]
    ) -> dict[TopicPartition, int]:
        wanted = set(partitions)
        return {
            (record_topic, partition): offset
            for (record_flow, record_topic, partition), offset in self._read_all(topic).items()
            if record_flow == flow and (record_topic, partition) in wanted
        }

    def _read_all(self, topic: str) -> dict[tuple[str, str, int], int]:
        decode = decode_position if topic == self.topic else _decode_legacy
        reader = InternalTopicReader(self.target, topic, decode=decode, tombstones=True)
        try:
            return latest_positions(reader.read_new())
        finally:
            reader.close()

    def _migrate(self, *, flow: str, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]:
        """The positions these partitions have in the legacy topic, written to the new topic first."""
        if self._legacy is None:
            self._legacy = self._read_all(self.legacy_topic)
        found = {key: self._legacy[(flow, *key)] for key in partitions if (flow, *key) in self._legacy}
        if found:
            self.save(flow=flow, positions=found)
            log.info(
                "flow %s: %d positions moved from %s to %s on cluster %s",
                flow,
                len(found),
                self.legacy_topic,
                self.topic,
                self.target.alias,
            )
        return found

    def save(self, *, flow: str, positions: Mapping[TopicPartition, int]) -> None:
        records = [
            (position_key(flow, topic, partition), position_value(offset))
            for (topic, partition), offset in positions.items()
        ]
        if records:
            with self._lock:
                self._writer.write(records)

    def forget(self, *, flow: str, partitions: Sequence[TopicPartition]) -> None:
        """Remove these partitions' positions (tombstones): they start as if never replicated."""
        records = [(position_key(flow, topic, partition), None) for topic, partition in partitions]
        if records:
            with self._lock:
                self._writer.write(records)

    def prepare(self) -> None:
        """Open the positions topic's writer now (`InternalTopicWriter.prepare`)."""
        self._writer.prepare()

    def close(self) -> None:
        self._writer.close()
