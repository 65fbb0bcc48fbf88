"""Taking over from MM2: its Connect source offsets, offset syncs and checkpoints decide where each
source partition resumes (pure rules, then one run against the embedded brokers)."""

from __future__ import annotations

import json
import re
import uuid
import zlib

import pytest

from replication.cluster_ports import Mm2StillWriting, TakeoverError
from replication.config import ClusterConfig, FlowConfig
from replication.formats import Checkpoint, OffsetSync, RecordFormatError
from replication.kafka.clients import make_producer
from replication.kafka.internal_topics import InternalTopicWriter
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io
from replication.kafka.takeover_io import apply_takeover, read_takeover_plan
from replication.memory.task_io import MemoryCluster
from replication.policy import DefaultReplicationPolicy
from replication.source import MirrorSourceTask
from replication.takeover import (
    ConnectSourceOffset,
    PartitionFacts,
    mm2_committed_offsets,
    mm2_offsets_topic,
    parse_connect_offset,
    plan_takeover,
    resume_point,
)
from tests.replication.test_source_task import create_topics, produce, read_partition, replicated, run_until


def connect_key(topic: str, partition: int, *, cluster: str = "A", connector: str = "MirrorSourceConnector"):
    """As Connect's JsonConverter (schemas disabled) writes a MirrorSourceTask's source partition."""
    where = {"cluster": cluster, "partition": partition, "topic": topic}
    return json.dumps([connector, where], separators=(",", ":")).encode()


def test_mm2_dedicated_mode_keeps_its_positions_in_mm2_offsets_source_internal():
    assert mm2_offsets_topic("A") == "mm2-offsets.A.internal"


def test_a_connect_source_offset_record_parses_and_a_tombstone_resets():
    assert parse_connect_offset(connect_key("orders", 3), b'{"offset":41}') == ConnectSourceOffset(
        "MirrorSourceConnector", {"cluster": "A", "partition": 3, "topic": "orders"}, 41
    )
    assert parse_connect_offset(connect_key("orders", 3), None).offset is None


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (b"not json", b'{"offset":1}'),
        (b'{"cluster":"A"}', b'{"offset":1}'),
        (connect_key("orders", 0), b'{"position":1}'),
        (connect_key("orders", 0), b'{"offset":"1"}'),
        (connect_key("orders", 0), b"\xff"),
    ],
)
def test_what_is_not_a_connect_source_offset_is_a_format_error(key, value):
    with pytest.raises(RecordFormatError):
        parse_connect_offset(key, value)


def test_committed_offsets_are_the_source_connectors_of_the_flows_source_the_latest_winning():
    records = [
        parse_connect_offset(connect_key("orders", 0), b'{"offset":5}'),
        parse_connect_offset(connect_key("orders", 0), b'{"offset":9}'),
        parse_connect_offset(connect_key("orders", 1, cluster="other"), b'{"offset":7}'),
        parse_connect_offset(
            connect_key("orders", 2, connector="MirrorCheckpointConnector"), b'{"offset":0}'
        ),
        parse_connect_offset(
            json.dumps(["MirrorSourceConnector", {"cluster": "A"}]).encode(), b'{"offset":1}'
        ),
        parse_connect_offset(connect_key("payments", 0), b'{"offset":3}'),
        parse_connect_offset(connect_key("payments", 0), None),  # reset
    ]
    assert mm2_committed_offsets(records, source_alias="A") == {("orders", 0): 9}


def facts(*, end: int = 100, last: int | None = None, start: int = 0) -> PartitionFacts:
    return PartitionFacts("orders", 0, "A.orders", start, end, last, None if last is None else last + 1)


def test_it_resumes_after_mm2s_committed_offset():
    point = resume_point(facts(last=None), committed=41, sync=None)
    assert (point.next_offset, point.already_on_target, point.records_to_copy) == (42, 0, 58)


def test_records_mm2_copied_after_its_last_commit_are_not_copied_again():
    """Connect committed 19; the newest sync (0 at 0) and the target's last offset 29 prove 0..29 there."""
    point = resume_point(facts(last=29), committed=19, sync=OffsetSync("orders", 0, 0, 0))
    assert (point.next_offset, point.mm2_next_offset, point.already_on_target) == (30, 20, 10)
    assert "offset sync" in point.basis


def test_a_sync_older_than_the_committed_offset_never_moves_the_resume_point_back():
    point = resume_point(facts(last=24), committed=24, sync=OffsetSync("orders", 0, 10, 0))
    assert point.next_offset == 35  # 10 + (24 - 0) + 1: the target holds 25 copies from source offset 10 on
    assert resume_point(facts(last=24), committed=40, sync=OffsetSync("orders", 0, 10, 20)).next_offset == 41


def test_a_target_holding_more_than_the_source_has_is_not_trusted():
    point = resume_point(facts(end=30, last=99), committed=19, sync=OffsetSync("orders", 0, 0, 0))
    assert point.next_offset == 20


def test_a_sync_past_the_targets_end_is_ignored():
    assert resume_point(facts(last=5), committed=3, sync=OffsetSync("orders", 0, 50, 60)).next_offset == 4


def test_without_mm2_state_a_partition_starts_as_a_new_flow():
    point = resume_point(facts(start=7), committed=None, sync=None)
    assert (point.next_offset, point.records_to_copy) == (None, 93)


def test_records_retention_deleted_before_anyone_copied_them_are_counted():
    assert resume_point(facts(start=50), committed=19, sync=None).records_lost == 30


MM2_COPIED = {0: 30, 1: 25, 2: 0}  # what the stopped MM2 wrote to the target, per source partition
MM2_RESUMES = {0: (30, 10), 1: (25, 0), 2: (None, 0)}  # (resume point, copied past the last commit)
RECORDS = 40


def mm2_sent() -> dict[int, list]:
    """The records of each of the 3 partitions of the topic MM2 replicated: (key, value, headers, timestamp)."""
    return {
        p: [(b"k%d" % i, b"%d-%d" % (p, i), None, 1_700_000_000_000 + i) for i in range(RECORDS)]
        for p in range(3)
    }


def mm2_connect_offsets(topic: str, *, source_alias: str) -> list[tuple[bytes, bytes | None]]:
    """The stopped MM2's Connect offsets, in the order it wrote them: it committed past 9 then 19 on
    partition 0, 24 on partition 1; partition 2's was reset (a tombstone); its heartbeat connector's."""
    return [
        (connect_key(topic, 0, cluster=source_alias), b'{"offset":9}'),
        (connect_key(topic, 0, cluster=source_alias), b'{"offset":19}'),  # committed 60 s before the stop
        (connect_key(topic, 1, cluster=source_alias), b'{"offset":24}'),
        (connect_key(topic, 2, cluster=source_alias), b'{"offset":3}'),
        (connect_key(topic, 2, cluster=source_alias), None),  # reset through the Connect REST API
        (
            json.dumps(["MirrorHeartbeatConnector", {"sourceClusterAlias": source_alias}]).encode(),
            b'{"offset":0}',
        ),
    ]


def mm2_syncs_and_checkpoints(topic: str, remote: str) -> tuple[list[OffsetSync], list[Checkpoint]]:
    """The stopped MM2's offset syncs (on the source) and its one checkpoint (on the target)."""
    return [OffsetSync(topic, 0, 0, 0), OffsetSync(topic, 1, 0, 0)], [
        Checkpoint(f"{topic}-g", remote, 0, 15, 15)
    ]


def stopped_mm2(
    source: ClusterConfig,
    target: ClusterConfig,
    *,
    physical: tuple[ClusterConfig, ClusterConfig],
    topic: str,
    offsets_topic: str,
) -> dict[int, list]:
    """A 3-partition topic of `source` that a stopped MM2 (dedicated mode, flow source->target, MM2
    defaults) half copied, its state written as MM2 writes it: Connect offsets in a 5-partition offsets
    topic (murmur2 keys, as the Java producer), offset syncs on the source, a checkpoint. MM2 copied past
    its last commit on partition 0, exactly to it on partition 1, never touched partition 2 (whose offset
    was reset). Returns the records sent per partition."""
    cluster_a, cluster_b = physical
    remote = f"{source.alias}.{topic}"
    create_topics(cluster_a, [topic], 3)
    create_topics(cluster_b, [remote], 3)
    sent = mm2_sent()
    produce(cluster_a, topic, sent)
    produce(cluster_b, remote, {p: sent[p][:n] for p, n in MM2_COPIED.items() if n})
    create_topics(cluster_b, [offsets_topic], 5)
    connect = make_producer(cluster_b, overrides={"partitioner": "murmur2_random"})
    for key, value in mm2_connect_offsets(topic, source_alias=source.alias):
        connect.produce(offsets_topic, key=key, value=value)
    assert connect.flush(10) == 0
    syncs = InternalTopicWriter(cluster_a, f"mm2-offset-syncs.{target.alias}.internal", replication_factor=1)
    checkpoints = InternalTopicWriter(cluster_b, f"{source.alias}.checkpoints.internal", replication_factor=1)
    offset_syncs, mm2_checkpoints = mm2_syncs_and_checkpoints(topic, remote)
    try:
        syncs.write([(s.key(), s.value()) for s in offset_syncs])
        checkpoints.write([(c.key(), c.value()) for c in mm2_checkpoints])
    finally:
        syncs.close()
        checkpoints.close()
    return sent


def stopped_mm2_in_memory(
    source: MemoryCluster, target: MemoryCluster, *, topic: str, offsets_topic: str
) -> None:
    """`stopped_mm2` on in-memory clusters A and B (a key's Connect offsets in one partition of the
    offsets topic, as the Java producer's partitioner puts them)."""
    remote = f"A.{topic}"
    source.create(topic, 3)
    target.create(remote, 3)
    for p, records in mm2_sent().items():
        for index, (key, value, headers, stamp) in enumerate(records):
            source.append(topic, p, key=key, value=value, headers=headers, timestamp_ms=stamp)
            if index < MM2_COPIED[p]:
                target.append(remote, p, key=key, value=value, headers=headers, timestamp_ms=stamp)
    target.create(offsets_topic, 5)
    for key, value in mm2_connect_offsets(topic, source_alias="A"):
        target.append(offsets_topic, zlib.crc32(key) % 5, key=key, value=value)
    offset_syncs, mm2_checkpoints = mm2_syncs_and_checkpoints(topic, remote)
    for cluster, internal, records in (
        (source, "mm2-offset-syncs.B.internal", offset_syncs),
        (target, "A.checkpoints.internal", mm2_checkpoints),
    ):
        cluster.create(internal, 1)
        for record in records:
            cluster.append(internal, 0, key=record.key(), value=record.value())


@pytest.mark.kafka
def test_taking_over_from_mm2_copies_no_record_twice_and_skips_none(cluster_a, cluster_b, unique_name):
    tag = uuid.uuid4().hex[:8]
    source = ClusterConfig(alias=f"m-{tag}", bootstrap_servers=cluster_a.bootstrap_servers)
    target = ClusterConfig(alias=f"t-{tag}", bootstrap_servers=cluster_b.bootstrap_servers)
    aliases = [source.alias, target.alias]
    topic, remote = unique_name, f"{source.alias}.{unique_name}"
    flow = FlowConfig(source=source.alias, target=target.alias, enabled=True, topics=(topic,))
    sent = stopped_mm2(
        source,
        target,
        physical=(cluster_a, cluster_b),
        topic=topic,
        offsets_topic=mm2_offsets_topic(source.alias),
    )

    plan = read_takeover_plan(flow, source=source, target=target, known_aliases=aliases)
    rows = {point.partition: point for point in plan.partitions}
    assert {p: (rows[p].next_offset, rows[p].already_on_target) for p in rows} == MM2_RESUMES
    assert (plan.mm2_positions, plan.offset_syncs, plan.checkpoint_groups, plan.problems()) == (2, 2, 1, [])
    produce(cluster_b, remote, {0: [sent[0][30]]})  # MM2 was not stopped yet: it copied one more record
    with pytest.raises(Mm2StillWriting, match=rf"{re.escape(remote)}\[0\] 30 -> 31"):
        apply_takeover(plan, target=target, source_alias=source.alias)
    plan = read_takeover_plan(flow, source=source, target=target, known_aliases=aliases)  # now it is stopped
    assert apply_takeover(plan, target=target, source_alias=source.alias) == {(topic, 0): 31, (topic, 1): 25}

    store = KafkaPositionStore(target, source_alias=source.alias)
    policy = DefaultReplicationPolicy(known_aliases=aliases)
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=store,
        io=kafka_task_io(flow, source=source, target=target, policy=policy, task_index=0),
    )
    try:
        task.assign([(topic, p) for p in range(3)])
        run_until(task, replicated(task, {(topic, p): RECORDS for p in range(3)}))
    finally:
        task.close()
        store.close()
    for partition in range(3):
        assert [m.value() for m in read_partition(cluster_b, remote, partition)] == [
            value for _, value, _, _ in sent[partition]
        ]


@pytest.mark.kafka
def test_a_missing_offsets_topic_is_refused_naming_the_setting(cluster_a, cluster_b, unique_name):
    flow = FlowConfig(source="A", target="B", enabled=True, topics=(unique_name,))
    with pytest.raises(TakeoverError, match="offset.storage.topic") as caught:
        read_takeover_plan(
            flow,
            source=cluster_a,
            target=cluster_b,
            known_aliases=["A", "B"],
            offsets_topic=f"{unique_name}-x",
        )
    assert caught.value.field == "offsets_topic"


def test_a_plan_without_any_mm2_position_cannot_be_applied_and_says_what_to_check():
    plan = plan_takeover(
        flow="A->B",
        facts=[facts()],
        committed={},
        syncs={},
        current={},
        offsets_topic="mm2-offsets.A.internal",
        connector="MirrorSourceConnector",
        offset_syncs_topic="mm2-offset-syncs.B.internal on A",
        checkpoints_topic="A.checkpoints.internal",
        checkpoint_groups=0,
    )
    assert plan.positions() == {}
    (problem,) = plan.problems()
    assert "offset.storage.topic" in problem and "connector" in problem
