"""Internal-topic records that do not decode (invalid UTF-8, truncated, foreign) are skipped and counted;
a reader does not ask the broker for records between its reads."""

from __future__ import annotations

import dataclasses
import json
import time

import pytest

from replication.formats import Checkpoint, Heartbeat, OffsetSync, RecordFormatError, decode_records
from replication.kafka.internal_topics import InternalTopicReader, InternalTopicWriter

INVALID_UTF8 = b"\x00\x02\xc3\x28"  # STRING of length 2 whose bytes are not UTF-8


@pytest.mark.parametrize(
    ("decode", "key", "value"),
    [
        (OffsetSync.decode, INVALID_UTF8 + b"\x00\x00\x00\x00", OffsetSync("t", 0, 1, 1).value()),
        (
            Checkpoint.decode,
            INVALID_UTF8 + b"\x00\x01t\x00\x00\x00\x00",
            Checkpoint("g", "t", 0, 1, 1).value(),
        ),
        (Checkpoint.decode, Checkpoint("g", "t", 0, 1, 1).key(), b"\x00\x00" + bytes(16) + INVALID_UTF8),
        (Heartbeat.decode, b"\x00\x01A" + INVALID_UTF8, Heartbeat("A", "B", 5).value()),
    ],
)
def test_invalid_utf8_is_a_record_format_error(decode, key, value):
    with pytest.raises(RecordFormatError, match="not UTF-8"):
        decode(key, value)


@dataclasses.dataclass(frozen=True)
class Stored:
    _key: bytes | None
    _value: bytes | None

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value


def test_decoding_skips_tombstones_and_counts_malformed_records_without_stopping():
    """The one rule both readers (Kafka's InternalTopicReader, the in-memory cluster's) apply."""
    first, second = OffsetSync("t", 0, 1, 1), OffsetSync("t", 0, 5, 3)
    tombstone, truncated = Stored(first.key(), None), Stored(first.key(), b"\x00")
    records = [Stored(first.key(), first.value()), tombstone, truncated, Stored(second.key(), second.value())]
    decoded, malformed = decode_records(records, OffsetSync.decode)
    assert [value for _, value in decoded] == [first, second]
    assert [(record, type(exc)) for record, exc in malformed] == [(truncated, RecordFormatError)]
    decoded, _ = decode_records(records, lambda key, value: value, tombstones=True)
    assert [value for _, value in decoded] == [first.value(), None, b"\x00", second.value()]


@pytest.mark.kafka
def test_reader_skips_and_counts_malformed_records(cluster_a, unique_name):
    topic = f"{unique_name}.offset-syncs"
    good = [OffsetSync("t", 0, 10, 5), OffsetSync("t", 0, 20, 15)]
    writer = InternalTopicWriter(cluster_a, topic, replication_factor=1)
    try:
        writer.write(
            [
                (good[0].key(), good[0].value()),
                (INVALID_UTF8 + b"\x00\x00\x00\x00", good[0].value()),  # invalid UTF-8 topic name
                (good[0].key(), b"\x00\x01"),  # truncated value
                (b"", b"not an offset sync"),  # foreign writer
                (good[1].key(), good[1].value()),
            ]
        )
    finally:
        writer.close()

    reader = InternalTopicReader(cluster_a, topic, decode=OffsetSync.decode)
    try:
        assert reader.read_new() == good
        assert reader.skipped_records == 3 and reader.reached_end
    finally:
        reader.close()

    def failing_decoder(key: bytes, value: bytes):
        raise KeyError("a decoder bug or an unexpected shape")

    reader = InternalTopicReader(cluster_a, topic, decode=failing_decoder)
    try:
        assert reader.read_new() == []
        assert reader.skipped_records == 5
    finally:
        reader.close()


def test_a_reader_of_a_topic_not_created_yet_has_read_all_there_is(cluster_a, unique_name):
    reader = InternalTopicReader(cluster_a, f"{unique_name}.checkpoints.internal", decode=OffsetSync.decode)
    try:
        assert reader.read_new(timeout_s=2) == [] and reader.reached_end
    finally:
        reader.close()


@pytest.mark.kafka
def test_an_idle_reader_sends_no_fetches_between_reads_and_misses_nothing(cluster_a, unique_name):
    """Long-lived readers (checkpoint task, verifier, failover) idle between reads: an assigned consumer
    would ask the broker every fetch.wait.max.ms (10 ms) meanwhile."""
    topic = f"{unique_name}.offset-syncs"
    syncs = [OffsetSync("t", 0, offset, offset) for offset in range(6)]
    fetches: list[int] = []

    def on_stats(text: str) -> None:
        brokers = json.loads(text)["brokers"].values()
        fetches.append(sum(b["req"].get("Fetch", 0) for b in brokers if b.get("nodeid", -1) >= 0))

    counted = dataclasses.replace(cluster_a, consumer={"statistics.interval.ms": 100, "stats_cb": on_stats})
    writer = InternalTopicWriter(cluster_a, topic, replication_factor=1)
    writer.write([(sync.key(), sync.value()) for sync in syncs[:3]])  # a topic made later is another test's
    reader = InternalTopicReader(counted, topic, decode=OffsetSync.decode)
    try:
        assert reader.read_new() == syncs[:3] and reader.reached_end
        fetches.clear()
        while len(fetches) < 5:  # serves the statistics only: nothing is consumed
            reader._consumer.poll(0.1)
        assert fetches[-1] - fetches[0] <= 1, fetches  # at most the fetch in flight when the read ended

        writer.write([(sync.key(), sync.value()) for sync in syncs[3:]])  # one batch
        assert reader.read_new() == syncs[3:] and reader.reached_end
        assert reader.read_new() == []
    finally:
        reader.close()
        writer.close()


@pytest.mark.kafka
def test_a_reader_made_before_its_topic_exists_reads_it_once_created(cluster_a, unique_name):
    """The checkpoint task opens its offset-syncs reader before the source task created the topic: a read
    then finds nothing (and says it reached the end), and once the topic is written the next read gets
    every record."""
    topic = f"{unique_name}.offset-syncs"
    syncs = [OffsetSync("t", 0, offset, offset) for offset in range(3)]
    reader = InternalTopicReader(cluster_a, topic, decode=OffsetSync.decode, timeout_s=5)
    writer = InternalTopicWriter(cluster_a, topic, replication_factor=1)
    try:
        assert reader.read_new() == [] and reader.reached_end  # no topic yet: nothing to read
        time.sleep(1)  # the reader's client has looked the topic up and found it missing
        writer.write([(sync.key(), sync.value()) for sync in syncs])
        assert reader.read_new() == syncs and reader.reached_end
    finally:
        reader.close()
        writer.close()


@pytest.mark.kafka
def test_records_sent_without_waiting_are_delivered_once_acknowledged(cluster_a, unique_name):
    topic = f"mm2-offset-syncs.{unique_name}.internal"
    writer = InternalTopicWriter(cluster_a, topic, replication_factor=1)
    syncs = [OffsetSync("orders", 0, upstream, upstream) for upstream in (0, 100, 200)]
    reader = InternalTopicReader(cluster_a, topic, decode=OffsetSync.decode)
    try:
        writer.send([(sync.key(), sync.value()) for sync in syncs])
        assert writer.delivered(timeout_s=30)  # waits for the acknowledgements
        assert writer.delivered(timeout_s=0)  # nothing outstanding: a look says so
        assert reader.read_new(timeout_s=10) == syncs
    finally:
        reader.close()
        writer.close()
