"""TopicMetadataSync against the two embedded clusters: create, pick up, sync configs, grow partitions."""

from __future__ import annotations

import logging
import time

import pytest
from confluent_kafka.admin import ConfigEntry, ConfigSource, NewTopic

from replication.config import FlowConfig
from replication.connector import (
    CREATE_RECORDS_PER_REQUEST,
    NewRemoteTopic,
    creation_batches,
    creation_records,
)
from replication.kafka.admin import TopicAdmin, topic_overrides
from replication.kafka.clients import make_admin
from replication.kafka.internal_topics import InternalTopic
from replication.kafka.source_io import task_internal_topics
from replication.kafka.topic_sync import RETRY_FIRST_S, TopicMetadataSync
from replication.policy import replication_policy_for
from replication.position_records import positions_topic
from tests.conftest import KAFKA_KIND

pytestmark = pytest.mark.kafka


def _create(cluster, name, partitions, configs=None):
    admin = make_admin(cluster)  # kept referenced until the result is in
    admin.create_topics([NewTopic(name, partitions, 1, config=configs or {})])[name].result()


def _sync(cluster_a, cluster_b, unique_name, **flow_changes) -> TopicMetadataSync:
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(f"{unique_name}.*",)).replace(
        **flow_changes
    )
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    return TopicMetadataSync(flow=flow, source=cluster_a, target=cluster_b, policy=policy)


def _describe(cluster, name):
    admin = TopicAdmin(cluster)
    return admin.describe_topics({name: admin.partition_counts()[name]})[name]


def _own(partitions, unique_name):
    """The replicated partitions of this test's topics: MM2 replicates `heartbeats` topics whatever the
    topic filter says, and earlier tests on the shared session cluster may have created one."""
    return sorted(p for p in partitions if p[0].startswith(unique_name))


def test_remote_topics_get_source_partitions_and_filtered_configs(cluster_a, cluster_b, unique_name):
    _create(cluster_a, f"{unique_name}-a", 3, {"retention.ms": "123456", "min.insync.replicas": "1"})
    _create(cluster_a, f"{unique_name}-b", 1)
    _create(cluster_a, "other-" + unique_name, 1)  # not matched by the flow's topics
    sync = _sync(cluster_a, cluster_b, unique_name)

    assert sync.tick(now=1000.0) is True
    assert sync.last_errors == ()
    remote = _describe(cluster_b, f"A.{unique_name}-a")
    assert remote.partitions == 3
    assert dict(remote.configs) == {"retention.ms": "123456"}  # min.insync.replicas is excluded
    assert _describe(cluster_b, f"A.{unique_name}-b").partitions == 1
    assert f"A.other-{unique_name}" not in TopicAdmin(cluster_b).partition_counts()
    assert _own(sync.replicated_partitions(), unique_name) == [
        (f"{unique_name}-a", 0),
        (f"{unique_name}-a", 1),
        (f"{unique_name}-a", 2),
        (f"{unique_name}-b", 0),
    ]


def test_topic_created_later_is_picked_up_at_the_refresh_interval(cluster_a, cluster_b, unique_name):
    _create(cluster_a, f"{unique_name}-first", 1)
    sync = _sync(cluster_a, cluster_b, unique_name, refresh_topics_interval_seconds=5)
    sync.tick(now=1000.0)
    _create(cluster_a, f"{unique_name}-later", 2)

    assert sync.tick(now=1004.0) is False  # not due yet
    assert f"A.{unique_name}-later" not in TopicAdmin(cluster_b).partition_counts()
    assert sync.tick(now=1005.0) is True
    assert _describe(cluster_b, f"A.{unique_name}-later").partitions == 2
    assert (f"{unique_name}-later", 1) in sync.replicated_partitions()


def test_source_config_change_propagates_and_keeps_target_override(cluster_a, cluster_b, unique_name):
    topic = f"{unique_name}-cfg"
    _create(cluster_a, topic, 1, {"retention.ms": "100000"})
    sync = _sync(cluster_a, cluster_b, unique_name, sync_topic_configs_interval_seconds=10)
    sync.tick(now=1000.0)
    TopicAdmin(cluster_b).set_topic_configs(f"A.{topic}", {"segment.ms": "3600000"}, current={})
    TopicAdmin(cluster_a).set_topic_configs(topic, {"retention.ms": "200000"}, current={})

    sync.tick(now=1010.0)

    assert sync.last_errors == ()
    assert dict(_describe(cluster_b, f"A.{topic}").configs) == {
        "retention.ms": "200000",
        "segment.ms": "3600000",
    }


def test_partition_growth_is_done_or_clearly_reported(cluster_a, cluster_b, unique_name, caplog):
    topic = f"{unique_name}-grow"
    _create(cluster_a, topic, 3)
    _create(cluster_b, f"A.{topic}", 1)
    sync = _sync(cluster_a, cluster_b, unique_name)

    with caplog.at_level(logging.ERROR, logger="replication.kafka.topic_sync"):
        sync.tick(now=1000.0)

    grown = TopicAdmin(cluster_b).partition_counts()[f"A.{topic}"]
    if KAFKA_KIND == "apache":
        assert grown == 3
    if grown == 3:  # a broker with CreatePartitions (Apache Kafka)
        assert sync.last_errors == ()
        assert len(_own(sync.replicated_partitions(), unique_name)) == 3
        return
    # The embedded broker lacks CreatePartitions: an ERROR names the topic, both counts and the reason,
    # and the partition that exists keeps replicating.
    assert len(sync.last_errors) == 1
    message = sync.last_errors[0]
    assert f"A.{topic}" in message and "from 1 to 3 partitions" in message and "not supported" in message
    assert any(message in record.getMessage() for record in caplog.records)
    assert _own(sync.replicated_partitions(), unique_name) == [(topic, 0)]


def test_overrides_are_the_topic_level_entries_only():
    def entry(name, source, **flags):
        return ConfigEntry(name, "v", source=source, **flags)

    full = {f"filler.{i}": entry(f"filler.{i}", ConfigSource.DEFAULT_CONFIG) for i in range(30)}
    full["retention.ms"] = entry("retention.ms", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    full["segment.bytes"] = entry("segment.bytes", ConfigSource.STATIC_BROKER_CONFIG)
    full["log.x"] = entry("log.x", ConfigSource.DYNAMIC_BROKER_CONFIG)
    full["secret"] = entry("secret", ConfigSource.DYNAMIC_TOPIC_CONFIG, is_sensitive=True)
    assert topic_overrides(full) == {"retention.ms": "v"}
    # A full description without any topic override: nothing is an override.
    del full["retention.ms"]
    assert topic_overrides(full) == {}
    # A broker that lists only the topic's own configs, labelled DEFAULT_CONFIG (tansu).
    short = {"retention.ms": entry("retention.ms", ConfigSource.DEFAULT_CONFIG, is_default=True)}
    assert topic_overrides(short) == {"retention.ms": "v"}


def test_source_config_reset_deletes_the_synced_target_override_only(cluster_a, cluster_b, unique_name):
    """MM2's incremental config sync: a synced property back at its default on the source is deleted on
    the target; a target-only override and an excluded property stay."""
    topic = f"{unique_name}-reset"
    _create(cluster_a, topic, 1, {"retention.ms": "100000", "min.insync.replicas": "1"})
    sync = _sync(cluster_a, cluster_b, unique_name, sync_topic_configs_interval_seconds=10)
    sync.tick(now=1000.0)
    target = TopicAdmin(cluster_b)
    target.set_topic_configs(f"A.{topic}", {"segment.ms": "3600000", "min.insync.replicas": "1"}, current={})
    source = TopicAdmin(cluster_a)
    source.set_topic_configs(topic, {}, current={}, resets=("retention.ms", "min.insync.replicas"))
    assert dict(_describe(cluster_a, topic).configs) == {}

    sync.tick(now=1010.0)

    assert sync.last_errors == ()
    assert dict(_describe(cluster_b, f"A.{topic}").configs) == {
        "segment.ms": "3600000",
        "min.insync.replicas": "1",
    }


def test_the_run_that_creates_remote_topics_plans_their_partitions_at_once(cluster_a, cluster_b, unique_name):
    """Apache Kafka acknowledges CreateTopics before every broker's metadata lists the topic: the plan takes
    the acknowledged counts, or a new flow's topics would wait for the next refresh to replicate."""
    for index in range(5):
        _create(cluster_a, f"{unique_name}-new{index}", 3)
    source = TopicAdmin(cluster_a)
    deadline = time.monotonic() + 30  # the source's own metadata lists them (its lag is not the point)
    while len(_own([(t, 0) for t in source.partition_counts()], unique_name)) < 5:
        assert time.monotonic() < deadline
        time.sleep(0.1)
    sync = _sync(cluster_a, cluster_b, unique_name)

    sync.tick(now=1000.0)

    assert sync.last_errors == ()
    assert _own(sync.replicated_partitions(), unique_name) == sorted(
        (f"{unique_name}-new{index}", partition) for index in range(5) for partition in range(3)
    )


def test_the_tasks_internal_topics_are_created_before_the_first_remote_topic_and_once(
    cluster_a, cluster_b, unique_name, monkeypatch
):
    """A broker creates partitions in order: an internal topic created behind thousands of new remote
    partitions was not writable for 60 s, and every position write held the task's fetch loop meanwhile.
    The create requests are recorded (Apache Kafka still creates every topic)."""
    requested: list[str] = []
    create = TopicAdmin.create_topics

    def recorded(admin, topics):
        topics = list(topics)
        requested.extend(topic.name for topic in topics)
        return create(admin, topics)

    monkeypatch.setattr(TopicAdmin, "create_topics", recorded)
    internal = (
        InternalTopic(cluster_b, f"{unique_name}-positions.internal", replication_factor=1),
        InternalTopic(cluster_a, f"{unique_name}-offset-syncs.internal", replication_factor=1),
    )
    _create(cluster_a, f"{unique_name}-first", 2)
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(f"{unique_name}-(first|later)",))
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    sync = TopicMetadataSync(
        flow=flow, source=cluster_a, target=cluster_b, policy=policy, internal_topics=internal
    )
    requested.clear()

    sync.tick(now=1000.0)
    # The next pass reads the target's listing: on a loaded machine the broker lists a topic it created a
    # moment after answering the create (CI at load 9 saw the pass ask for A.first again, then refused).
    deadline = time.monotonic() + 30
    while f"A.{unique_name}-first" not in TopicAdmin(cluster_b).partition_counts():
        assert time.monotonic() < deadline, "the target does not list the remote topic it created"
        time.sleep(0.1)
    _create(cluster_a, f"{unique_name}-later", 1)
    sync.tick(now=1000.0 + flow.refresh_topics_interval_seconds)

    assert requested == [
        f"{unique_name}-positions.internal",
        f"{unique_name}-offset-syncs.internal",
        f"A.{unique_name}-first",
        f"A.{unique_name}-later",
    ]
    assert sync.last_errors == ()
    assert f"{unique_name}-positions.internal" in TopicAdmin(cluster_b).partition_counts()
    assert f"{unique_name}-offset-syncs.internal" in TopicAdmin(cluster_a).partition_counts()


def test_a_task_writes_the_internal_topics_the_topic_sync_creates_first(cluster_a, cluster_b):
    """`task_internal_topics` names the topics the task's writers write: its positions and offset syncs."""
    flow = FlowConfig(source="A", target="B", enabled=True, topics=("t",))
    policy = replication_policy_for(flow, known_aliases=("A", "B"))
    positions, offset_syncs = task_internal_topics(flow, source=cluster_a, target=cluster_b, policy=policy)

    assert (positions.cluster, positions.name) == (cluster_b, positions_topic("A"))
    assert (offset_syncs.cluster, offset_syncs.name) == (cluster_a, policy.flow_offset_syncs_topic(flow))


def test_creation_requests_stay_under_the_controllers_records_bound_in_order():
    """KRaft refuses a whole request of more than 10,000 metadata records: a topic costs one, one per
    partition and one per config; the requests keep the plan's order (internal topics first)."""
    topics = [
        NewRemoteTopic("positions", "positions", 1, 1, {"cleanup.policy": "compact"}),
        *(NewRemoteTopic(f"A.t{n}", f"t{n}", 1_000, 1, {}) for n in range(12)),
        NewRemoteTopic("A.huge", "huge", 12_000, 1, {}),
        NewRemoteTopic("A.last", "last", 3, 1, {}),
    ]

    batches = creation_batches(topics)

    assert [topic.name for batch in batches for topic in batch] == [topic.name for topic in topics]
    assert all(sum(map(creation_records, batch)) <= CREATE_RECORDS_PER_REQUEST for batch in batches[:-2])
    assert [len(batch) for batch in batches] == [5, 4, 4, 1, 1]  # 3 + 4 x 1,001 ... then the huge one alone
    assert creation_batches([]) == []
    assert creation_records(topics[0]) == 3


def test_a_request_over_the_bound_is_refused_whole_and_the_adapter_creates_the_same_topics_in_steps(
    cluster_a, unique_name, monkeypatch
):
    """Apache Kafka 4's controller refuses one CreateTopics of 10,002 partitions outright (nothing
    created): the adapter sends requests under the bound (here made small: one topic per request) and
    answers for every topic across them."""
    if KAFKA_KIND != "apache":
        pytest.skip("the records bound is the KRaft controller's")
    admin = TopicAdmin(cluster_a)
    too_large = [NewRemoteTopic(f"{unique_name}-big{n}", "s", 5_001, 1, {}) for n in range(2)]

    refused = admin.create_topics(too_large, records_per_request=20_000)

    assert {name: "excessively large" in str(error).lower() for name, error in refused.items()} == {
        topic.name: True for topic in too_large
    }
    assert not any(topic.name in admin.partition_counts() for topic in too_large)

    requests: list[list[str]] = []
    send = admin._admin.create_topics

    def counted(new_topics, **options):  # the real AdminClient's request, counted
        requests.append([topic.topic for topic in new_topics])
        return send(new_topics, **options)

    monkeypatch.setattr(admin._admin, "create_topics", counted)
    small = [NewRemoteTopic(f"{unique_name}-s{n}", "s", 2, 1, {}) for n in range(3)]
    _create(cluster_a, small[1].name, 2)  # a concurrent creator: counts as created

    outcome = admin.create_topics(small, records_per_request=3)

    assert requests == [[topic.name] for topic in small]
    assert outcome == {topic.name: None for topic in small}
    assert all(admin.partition_counts()[topic.name] == 2 for topic in small)


def test_a_remote_topic_whose_create_failed_is_tried_again_long_before_the_next_refresh(
    cluster_a, cluster_b, unique_name
):
    """At 20,000 partitions a busy target answered one flow's 100 creates "Local: Timed out" and its 5,000
    partitions waited for the next refresh (10 minutes) to replicate. Here the target refuses the create for
    real: another topic's name collides with it (Kafka treats '.' and '_' alike) until that one is gone."""
    topic = f"{unique_name}-x.y"
    colliding = f"A.{unique_name}-x_y"
    _create(cluster_a, topic, 2)
    _create(cluster_b, colliding, 1)
    sync = _sync(cluster_a, cluster_b, unique_name)

    sync.tick(now=1000.0)
    assert len(sync.last_errors) == 1 and "collides" in sync.last_errors[0]
    assert _own(sync.replicated_partitions(), unique_name) == []
    admin = make_admin(cluster_b)  # kept referenced until the result is in
    admin.delete_topics([colliding])[colliding].result()
    deadline = time.monotonic() + 60
    while colliding in TopicAdmin(cluster_b).partition_counts():
        assert time.monotonic() < deadline, "the colliding topic was not deleted"
        time.sleep(0.2)

    assert sync.tick(now=1001.0) is False  # not yet: a retry waits RETRY_FIRST_S
    deadline = time.monotonic() + 60
    now = 1000.0 + RETRY_FIRST_S
    while _own(sync.replicated_partitions(), unique_name) != [(topic, 0), (topic, 1)]:
        assert time.monotonic() < deadline, sync.last_errors  # the broker may still hold the deleted name
        sync.tick(now=now)
        now += 2 * RETRY_FIRST_S
        time.sleep(0.5)
    assert sync.last_errors == ()
    assert now < 1000.0 + 600  # long before refresh.topics.interval.seconds
    assert TopicAdmin(cluster_b).partition_counts()[f"A.{topic}"] == 2
