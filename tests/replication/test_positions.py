"""PersistCadence: when a running slice persists its positions (pure: time passed in)."""

from __future__ import annotations

import pytest

from replication.kafka.admin import TopicAdmin
from replication.kafka.internal_topics import InternalTopicReader, InternalTopicWriter
from replication.kafka.positions import (
    POSITIONS_TOPIC_CONFIGS,
    KafkaPositionStore,
    legacy_positions_topic,
    position_key,
    positions_topic,
)
from replication.positions import PersistCadence


def test_positions_are_due_after_the_interval_or_the_record_count_whichever_comes_first():
    cadence = PersistCadence(interval_s=0.2, records=10_000, now=100.0)
    assert not cadence.due(now=100.1, acked=9_999)
    assert cadence.due(now=100.2, acked=0)
    assert cadence.due(now=100.05, acked=10_000)
    cadence.persisted(now=100.05, acked=10_000)
    assert not cadence.due(now=100.2, acked=19_999)
    assert cadence.due(now=100.25, acked=10_000)
    assert cadence.due(now=100.06, acked=20_000)


@pytest.mark.kafka
def test_the_positions_topic_is_created_compacted_with_short_segments(cluster_b, unique_name):
    store = KafkaPositionStore(cluster_b, source_alias=unique_name)
    try:
        store.save(flow=f"{unique_name}->B", positions={("orders", 0): 7})
    finally:
        store.close()
    topic = positions_topic(unique_name)
    configs = TopicAdmin(cluster_b).describe_topics({topic: 1})[topic].configs
    assert configs["cleanup.policy"] == "compact"
    assert configs["segment.ms"] == POSITIONS_TOPIC_CONFIGS["segment.ms"]


def test_the_positions_topic_does_not_take_mm2s_connect_offsets_topic_name():
    assert positions_topic("A") == "mirrorplane-positions.A.internal"
    # MM2 dedicated mode's default offset.storage.topic
    assert legacy_positions_topic("A") == "mm2-offsets.A.internal"


@pytest.mark.kafka
def test_positions_stored_under_the_old_name_move_to_the_new_topic_once(cluster_b, unique_name):
    """An in-place upgrade resumes exactly: the old topic's positions (next to MM2's records, which are
    not positions) are read, written to the new topic, and the new topic wins from then on."""
    flow = f"{unique_name}->B"
    legacy = InternalTopicWriter(cluster_b, legacy_positions_topic(unique_name), replication_factor=1)
    try:
        legacy.write(
            [
                (position_key(flow, "orders", 0), b'{"next_offset": 5}'),
                (
                    b'["MirrorSourceConnector",{"cluster":"x","partition":0,"topic":"orders"}]',
                    b'{"offset":9}',
                ),
                (position_key(flow, "orders", 0), b'{"next_offset": 41}'),
                (position_key("other->B", "orders", 1), b'{"next_offset": 3}'),
            ]
        )
    finally:
        legacy.close()
    partitions = [("orders", 0), ("orders", 1)]
    for _ in range(2):  # the second store finds them in the new topic
        store = KafkaPositionStore(cluster_b, source_alias=unique_name)
        try:
            assert store.load(flow=flow, partitions=partitions) == {("orders", 0): 41}
        finally:
            store.close()
    reader = InternalTopicReader(cluster_b, positions_topic(unique_name), decode=lambda k, v: (k, v))
    try:
        assert reader.read_new() == [(position_key(flow, "orders", 0), b'{"next_offset": 41}')]
    finally:
        reader.close()
