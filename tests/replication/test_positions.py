"""PersistCadence: when a running slice persists its positions (pure: time passed in)."""

from __future__ import annotations

import pytest

from replication.kafka.admin import TopicAdmin
from replication.kafka.positions import POSITIONS_TOPIC_CONFIGS, KafkaPositionStore, positions_topic
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
