"""MirrorCheckpointTask: pure decisions, the task's rules, and exact group resumption on real clusters
(with hand-written offset syncs, then end to end behind the real MirrorSourceTask)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from replication.checkpoint import (
    CheckpointTopic,
    CommittedOffset,
    MirrorCheckpointTask,
    checkpoint_topic,
    checkpoints_for_group,
    may_sync_group_offsets,
    offsets_to_sync,
)
from replication.config import DeliveryGuarantee, FlowConfig
from replication.filters import TopicFilter
from replication.formats import Checkpoint, OffsetSync
from replication.kafka.flow_tasks import checkpoint_task_for_flow
from replication.kafka.groups import GroupOffsetsAdmin
from replication.kafka.internal_topics import InternalTopicWriter
from replication.kafka.remote import latest_group_checkpoints, translate_offsets
from replication.kafka.source_io import kafka_task_io
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import DefaultReplicationPolicy, replication_policy_for
from replication.positions import InMemoryPositionStore
from replication.source import MirrorSourceTask

ALIASES = ("A", "B")


# -- pure decisions ---------------------------------------------------------------------------------------
def _store(*syncs: OffsetSync) -> OffsetSyncStore:
    store = OffsetSyncStore()
    store.update_all(syncs)
    return store


def test_checkpoints_cover_replicated_topics_with_remote_names_and_metadata():
    store = _store(
        OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 20, 10), OffsetSync("orders", 0, 30, 20)
    )
    translation = checkpoints_for_group(
        group="billing",
        committed={
            ("orders", 0): CommittedOffset(25, "app-meta"),
            ("payments", 0): CommittedOffset(5),  # not replicated by the flow
            ("orders", 1): CommittedOffset(3),  # no sync known for this partition
        },
        remote_topics={"orders": "A.orders"},
        store=store,
    )
    assert translation.checkpoints == (Checkpoint("billing", "A.orders", 0, 25, 15, "app-meta"),)
    assert translation.untranslatable == (("orders", 1),)


@pytest.mark.parametrize(
    ("topic", "expected"),
    [
        ("orders", CheckpointTopic("A.orders")),
        ("B.orders", CheckpointTopic("orders", from_target=True)),  # came from the target: MM2's rename
        ("B.C.orders", CheckpointTopic("C.orders", from_target=True)),  # its name on B, one hop up
        ("C.B.orders", None),  # a cycle through B: not replicated, not from B directly
        ("B.heartbeats", CheckpointTopic("heartbeats", from_target=True)),
        ("B.x.internal", None),  # internal topics never
        ("B.skipped", None),  # the topic filter applies to it, as MM2's shouldCheckpointTopic
    ],
)
def test_checkpoint_topic_renames_topics_that_came_from_the_target(topic, expected):
    flow = FlowConfig(source="A", target="B", topics_exclude=(r"B\.skipped",))
    policy = replication_policy_for(flow, known_aliases=("A", "B", "C"))
    found = checkpoint_topic(topic=topic, flow=flow, policy=policy, topic_filter=TopicFilter.for_flow(flow))
    assert found == expected


def test_topics_from_the_target_translate_back_with_the_reverse_flows_syncs():
    # Flow B->A mirrored B's `orders` to A's `B.orders` from downstream offset 2, with an upstream gap at 4.
    reverse = _store(
        OffsetSync("orders", 0, 0, 2), OffsetSync("orders", 0, 5, 6), OffsetSync("orders", 0, 9, 10)
    )
    committed = {("B.orders", 0): CommittedOffset(5, "m"), ("B.orders", 1): CommittedOffset(1)}
    translation = checkpoints_for_group(
        group="billing",
        committed=committed,
        remote_topics={},
        store=_store(),
        from_target_topics={"B.orders": "orders"},
        reverse_store=reverse,
    )
    assert translation.checkpoints == (Checkpoint("billing", "orders", 0, 5, 3, "m"),)
    assert translation.untranslatable == (("B.orders", 1),)
    # Without the reverse flow's syncs nothing proves where the group resumes: no checkpoint.
    without = checkpoints_for_group(
        group="billing",
        committed=committed,
        remote_topics={},
        store=_store(),
        from_target_topics={"B.orders": "orders"},
    )
    assert (without.checkpoints, without.untranslatable) == ((), (("B.orders", 0), ("B.orders", 1)))


def test_group_offsets_never_move_backwards():
    checkpoints = [
        Checkpoint("g", "A.t", 0, 10, 8),
        Checkpoint("g", "A.t", 1, 10, 8),
        Checkpoint("g", "A.t", 2, 1, 1),
    ]
    target = {("A.t", 0): CommittedOffset(9), ("A.t", 1): CommittedOffset(8)}
    assert offsets_to_sync(checkpoints=checkpoints, target_committed=target) == {("A.t", 2): 1}


@pytest.mark.parametrize(
    ("state", "allowed"),
    [("ABSENT", True), ("EMPTY", True), ("DEAD", True), ("STABLE", False), ("PREPARING_REBALANCE", False),
     ("COMPLETING_REBALANCE", False), ("UNKNOWN", False)],
)  # fmt: skip
def test_only_groups_without_consumers_on_the_target_are_synced(state: str, allowed: bool):
    assert may_sync_group_offsets(state) is allowed


def test_checkpoint_record_bytes_are_mm2s():
    checkpoint = Checkpoint("g", "A.t", 3, 42, 40, "m")
    assert checkpoint.key() == b"\x00\x01g\x00\x03A.t\x00\x00\x00\x03"
    assert (
        checkpoint.value() == b"\x00\x00" + (42).to_bytes(8, "big") + (40).to_bytes(8, "big") + b"\x00\x01m"
    )
    assert Checkpoint.decode(checkpoint.key(), checkpoint.value()) == checkpoint
    sync = OffsetSync("t", 3, 42, 40)
    assert sync.value() == (42).to_bytes(8, "big") + (40).to_bytes(8, "big")
    assert OffsetSync.decode(sync.key(), sync.value()) == sync


# -- the task's rules, over in-memory implementations of its Protocols ---------------------------------------
class MemoryGroups:
    """A cluster's consumer groups as the task's Protocols see them."""

    def __init__(self, committed: dict[str, dict[tuple[str, int], CommittedOffset]] | None = None) -> None:
        self.committed = committed or {}
        self.states: dict[str, str] = {}
        self.refuse: dict[tuple[str, int], str] = {}

    def list_groups(self) -> list[str]:
        return sorted(self.committed)

    def committed_offsets(self, group: str) -> dict[tuple[str, int], CommittedOffset]:
        return dict(self.committed.get(group, {}))

    def group_state(self, group: str) -> str:
        return self.states.get(group, "ABSENT" if group not in self.committed else "EMPTY")

    def alter_offsets(self, group: str, offsets: Mapping[tuple[str, int], int]) -> dict[tuple[str, int], str]:
        refused = {key: reason for key, reason in self.refuse.items() if key in offsets}
        for key, offset in offsets.items():
            if key not in refused:
                self.committed.setdefault(group, {})[key] = CommittedOffset(offset)
        return refused


class MemoryFeed:
    def __init__(self, syncs: Sequence[OffsetSync]) -> None:
        self.pending = list(syncs)

    def read_new(self) -> list[OffsetSync]:
        new, self.pending = self.pending, []
        return new

    def close(self) -> None:
        pass


class MemorySink:
    def __init__(self) -> None:
        self.emitted: list[Checkpoint] = []

    def emit(self, checkpoints: Sequence[Checkpoint]) -> None:
        self.emitted.extend(checkpoints)

    def close(self) -> None:
        pass


def _task(
    source: MemoryGroups,
    target: MemoryGroups,
    sink: MemorySink,
    reverse_syncs: Sequence[OffsetSync] = (),
    **flow_changes,
) -> MirrorCheckpointTask:
    flow = FlowConfig(source="A", target="B", enabled=True, sync_group_offsets_enabled=True).replace(
        emit_checkpoints_interval_seconds=60, sync_group_offsets_interval_seconds=60, **flow_changes
    )
    return MirrorCheckpointTask(
        flow=flow,
        policy=replication_policy_for(flow, known_aliases=ALIASES),
        source_groups=source,
        target_groups=target,
        offset_syncs=MemoryFeed(
            [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 20, 10), OffsetSync("orders", 0, 30, 20)]
        ),
        checkpoint_sink=sink,
        reverse_offset_syncs=MemoryFeed(reverse_syncs),
    )


def test_task_checkpoints_selected_groups_and_syncs_only_idle_ones_forward():
    source = MemoryGroups(
        {
            "billing": {("orders", 0): CommittedOffset(25)},
            "console-consumer-1": {("orders", 0): CommittedOffset(5)},  # groups.exclude default
            "busy": {("orders", 0): CommittedOffset(22)},
            "ahead": {("orders", 0): CommittedOffset(21)},
        }
    )
    target = MemoryGroups({"ahead": {("A.orders", 0): CommittedOffset(30)}})
    target.states["busy"] = "STABLE"
    sink = MemorySink()
    task = _task(source, target, sink)

    task.tick(now=1000.0)

    assert sorted((c.group, c.downstream_offset) for c in sink.emitted) == [
        ("ahead", 11),
        ("billing", 15),
        ("busy", 12),
    ]
    assert target.committed["billing"] == {("A.orders", 0): CommittedOffset(15)}
    assert target.committed["ahead"] == {("A.orders", 0): CommittedOffset(30)}  # never backwards
    assert "busy" not in target.committed
    metrics = task.metrics()
    assert metrics["busy"].sync_skipped_active == 1 and "STABLE" in metrics["busy"].last_skip_reason
    assert metrics["billing"].offsets_synced == 1 and metrics["billing"].checkpoint_latency_ms is not None

    # Not due again before the interval: nothing read, nothing emitted.
    source.committed["billing"][("orders", 0)] = CommittedOffset(27)
    task.tick(now=1030.0)
    assert len(sink.emitted) == 3
    # Due: only the checkpoint that changed is emitted.
    task.tick(now=1060.0)
    assert sink.emitted[3:] == [Checkpoint("billing", "A.orders", 0, 27, 17)]
    assert target.committed["billing"] == {("A.orders", 0): CommittedOffset(17)}


def test_task_checkpoints_topics_from_the_target_under_their_target_name():
    """A group that failed over from B to A reads `B.orders` there; its position goes back to B's `orders`."""
    source = MemoryGroups({"failed-over": {("B.orders", 0): CommittedOffset(7)}})
    target, sink = MemoryGroups(), MemorySink()
    task = _task(
        source, target, sink, reverse_syncs=[OffsetSync("orders", 0, 0, 2), OffsetSync("orders", 0, 9, 11)]
    )
    task.tick(now=0.0)
    assert sink.emitted == [Checkpoint("failed-over", "orders", 0, 7, 5)]
    assert target.committed["failed-over"] == {("orders", 0): CommittedOffset(5)}


def test_task_counts_partitions_the_target_refuses():
    source = MemoryGroups({"billing": {("orders", 0): CommittedOffset(25)}})
    target = MemoryGroups()
    target.refuse[("A.orders", 0)] = "Broker: Unknown member"
    task = _task(source, target, MemorySink())
    task.tick(now=0.0)
    metrics = task.metrics()["billing"]
    assert (metrics.sync_failed_partitions, metrics.offsets_synced) == (1, 0)
    assert metrics.last_skip_reason == "Broker: Unknown member"


def test_disabled_jobs_do_nothing():
    source = MemoryGroups({"billing": {("orders", 0): CommittedOffset(25)}})
    target, sink = MemoryGroups(), MemorySink()
    task = _task(source, target, sink, emit_checkpoints_enabled=False, sync_group_offsets_enabled=False)
    task.tick(now=0.0)
    assert sink.emitted == [] and target.committed == {}


# -- on the embedded clusters ----------------------------------------------------------------------------
def _create_topic(cluster, topic: str, *, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    for future in admin.create_topics([NewTopic(topic, partitions, 1)]).values():
        future.result()


def _commit(cluster, group: str, offsets: Mapping[tuple[str, int], int]) -> None:
    failures = GroupOffsetsAdmin(cluster).alter_offsets(group, offsets)
    assert failures == {}


def _read_from(cluster, topic: str, offset: int, *, count: int) -> list[tuple[int, bytes]]:
    """`count` records of partition 0 from `offset` on (fewer if the deadline passes)."""
    consumer = Consumer(
        {"bootstrap.servers": cluster.bootstrap_servers, "group.id": "reader", "log_level": 0}
    )
    consumer.assign([TopicPartition(topic, 0, offset)])
    records: list[tuple[int, bytes]] = []
    deadline = time.monotonic() + 15
    while len(records) < count and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            records.append((message.offset(), message.value()))
    consumer.close()
    return records


def _resumed_as_groups(cluster, groups: Sequence[str], topic: str, *, count: int) -> dict[str, bytes | None]:
    """The first record a consumer of each group reads from `topic` partition 0, resuming from its commit:
    the first record at or after the group's committed offset (None past the end), `topic` read once (its
    `count` records, `_read_from`) and the commits in one round (a consumer per group took 0.7-0.9 s to
    fetch its first record at load)."""
    records = _read_from(cluster, topic, 0, count=count)
    committed = GroupOffsetsAdmin(cluster).committed_offsets_of(groups)
    resumed: dict[str, bytes | None] = {}
    for group in groups:
        offset = committed[group].get((topic, 0))
        assert offset is not None, f"group {group} has no committed offset on {topic}"
        resumed[group] = next((value for at, value in records if at >= offset.offset), None)
    return resumed


@pytest.fixture
def mirrored_topic(cluster_a, cluster_b, unique_name):
    """A source topic with an upstream offset gap (a transaction's commit marker), its hand-made mirror on
    B, and the offset syncs MirrorSourceTask's rule emits for it. Returns (topic, upstream records)."""
    topic = unique_name
    _create_topic(cluster_a, topic)
    _create_topic(cluster_b, f"A.{topic}")
    transactional = Producer({"bootstrap.servers": cluster_a.bootstrap_servers, "transactional.id": topic})
    transactional.init_transactions(10)
    transactional.begin_transaction()
    for index in range(3):
        transactional.produce(topic, key=b"k", value=f"tx-{index}".encode(), partition=0)
    transactional.commit_transaction(10)
    # The commit returns once the coordinator logged it; the marker reaches the partition a moment later,
    # and a record produced before it would take offset 3. Wait for the marker (the end offset 4).
    watcher = Consumer({"bootstrap.servers": cluster_a.bootstrap_servers, "group.id": "watcher"})
    deadline = time.monotonic() + 30
    while watcher.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] < 4:
        assert time.monotonic() < deadline, "the commit marker never reached partition 0"
        time.sleep(0.05)
    watcher.close()
    plain = Producer({"bootstrap.servers": cluster_a.bootstrap_servers})
    for index in range(3, 9):
        plain.produce(topic, key=b"k", value=f"plain-{index}".encode(), partition=0)
        plain.flush(10)
    upstream = _read_from(cluster_a, topic, 0, count=9)
    assert [offset for offset, _ in upstream] == [0, 1, 2, 4, 5, 6, 7, 8, 9]  # offset 3: commit marker

    mirror = Producer({"bootstrap.servers": cluster_b.bootstrap_servers})
    for _, value in upstream:
        mirror.produce(f"A.{topic}", key=b"k", value=value, partition=0)
        mirror.flush(10)
    # First record, the gap, and the progress sync of the newest acknowledged pair.
    syncs = [OffsetSync(topic, 0, 0, 0), OffsetSync(topic, 0, 4, 3), OffsetSync(topic, 0, 9, 8)]
    writer = InternalTopicWriter(cluster_a, "mm2-offset-syncs.B.internal", replication_factor=1)
    writer.write([(sync.key(), sync.value()) for sync in syncs])
    writer.close()
    return topic, upstream


def _flow(topic: str, **changes) -> FlowConfig:
    return FlowConfig(
        source="A",
        target="B",
        enabled=True,
        topics=(topic,),
        sync_group_offsets_enabled=True,
        **changes,
    )


@pytest.mark.kafka
def test_groups_resume_on_the_target_at_exactly_the_next_record(cluster_a, cluster_b, mirrored_topic):
    topic, upstream = mirrored_topic
    remote_topic = f"A.{topic}"
    flow = _flow(topic)
    policy = replication_policy_for(flow, known_aliases=ALIASES)
    # Every committed position, including the gap (3), on its own group; and one that read everything.
    groups = {f"{topic}-at-{offset}": offset for offset in [*(offset for offset, _ in upstream), 3]}
    caught_up = f"{topic}-caught-up"
    for group, offset in [*groups.items(), (caught_up, 10)]:
        _commit(cluster_a, group, {(topic, 0): offset})
    task = checkpoint_task_for_flow(flow=flow, source=cluster_a, target=cluster_b, policy=policy)
    try:
        task.tick(now=time.time())
    finally:
        task.close()

    resumed = _resumed_as_groups(cluster_b, list(groups), remote_topic, count=len(upstream))
    for group, offset in groups.items():
        checkpoints = latest_group_checkpoints(target=cluster_b, source_alias="A", group=group, policy=policy)
        expected_next = next(value for at, value in upstream if at >= offset)
        assert (checkpoints[(remote_topic, 0)].upstream_offset, resumed[group]) == (offset, expected_next), (
            group
        )
    # Caught up: resumes at the end of the mirror (9 records on the target), to read what comes next.
    assert translate_offsets(target=cluster_b, source_alias="A", group=caught_up, policy=policy) == {
        (remote_topic, 0): 9
    }
    assert translate_offsets(target=cluster_b, source_alias="A", group=f"{topic}-at-3", policy=policy) == {
        (remote_topic, 0): 3
    }


@pytest.mark.kafka
def test_active_target_groups_are_skipped_and_offsets_never_move_back(cluster_a, cluster_b, mirrored_topic):
    topic, _ = mirrored_topic
    remote_topic = f"A.{topic}"
    flow = _flow(topic)
    active, ahead = f"{topic}-active", f"{topic}-ahead"
    _commit(cluster_a, active, {(topic, 0): 5})
    _commit(cluster_a, ahead, {(topic, 0): 5})
    _commit(cluster_b, ahead, {(remote_topic, 0): 8})
    consumer = Consumer(
        {
            "bootstrap.servers": cluster_b.bootstrap_servers,
            "group.id": active,
            "log_level": 0,
            "session.timeout.ms": 6000,  # joins in seconds rather than tens of seconds
        }
    )
    consumer.subscribe([remote_topic])
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(0.2)
    assert consumer.assignment(), "the active group did not join on the target"
    task = checkpoint_task_for_flow(
        flow=flow,
        source=cluster_a,
        target=cluster_b,
        policy=replication_policy_for(flow, known_aliases=ALIASES),
    )
    try:
        task.tick(now=time.time())
        consumer.poll(0)
        metrics = task.metrics()
    finally:
        task.close()
        consumer.close()

    target = GroupOffsetsAdmin(cluster_b)
    assert target.committed_offsets(active) == {}
    assert metrics[active].sync_skipped_active == 1
    assert target.committed_offsets(ahead)[(remote_topic, 0)].offset == 8
    # The checkpoint is still emitted: it says where the group would resume.
    checkpoints = latest_group_checkpoints(
        target=cluster_b,
        source_alias="A",
        group=ahead,
        policy=DefaultReplicationPolicy(known_aliases=ALIASES),
    )
    assert checkpoints[(remote_topic, 0)].downstream_offset == 4


class SteppingClock:
    """Wall-clock time that moves 6 s per reading, so the source task's 5 s progress syncs are due."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        self.now += 6.0
        return self.now


@pytest.mark.kafka
@pytest.mark.parametrize("delivery", [DeliveryGuarantee.AT_LEAST_ONCE, DeliveryGuarantee.EXACTLY_ONCE])
def test_end_to_end_with_the_source_task(cluster_a, cluster_b, unique_name, delivery):
    """MirrorSourceTask mirrors a topic with transaction markers (and, in exactly_once, writes its own
    markers on the target); every committed source position resumes on the target at its next record."""
    topic, remote_topic = unique_name, f"A.{unique_name}"
    _create_topic(cluster_a, topic)
    _create_topic(cluster_b, remote_topic)
    transactional = Producer({"bootstrap.servers": cluster_a.bootstrap_servers, "transactional.id": topic})
    transactional.init_transactions(10)
    plain = Producer({"bootstrap.servers": cluster_a.bootstrap_servers})
    for batch in range(3):
        transactional.begin_transaction()
        for index in range(2 + batch):
            transactional.produce(topic, value=f"tx-{batch}-{index}".encode(), partition=0)
        transactional.commit_transaction(10)
        for index in range(3):
            plain.produce(topic, value=f"plain-{batch}-{index}".encode(), partition=0)
            plain.flush(10)
    upstream = _read_from(cluster_a, topic, 0, count=18)
    end = upstream[-1][0] + 1
    assert end > len(upstream)  # the commit markers left offset gaps

    flow = _flow(topic, delivery_guarantee=delivery)
    policy = replication_policy_for(flow, known_aliases=ALIASES)
    source_task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=InMemoryPositionStore(),
        io=kafka_task_io(flow, source=cluster_a, target=cluster_b, policy=policy, task_index=0),
        clock=SteppingClock(),
    )
    source_task.assign([(topic, 0)])
    deadline = time.monotonic() + 60
    while source_task.run_slice(max_seconds=0.3).positions.get((topic, 0), -1) < end:
        assert time.monotonic() < deadline, "the source task did not mirror the topic"
    source_task.run_slice(max_seconds=0.1)  # a slice after the last ack emits the progress sync
    source_task.close()

    groups = {f"{topic}-at-{offset}": offset for offset in range(upstream[0][0], end + 1)}
    for group, offset in groups.items():
        _commit(cluster_a, group, {(topic, 0): offset})
    task = checkpoint_task_for_flow(flow=flow, source=cluster_a, target=cluster_b, policy=policy)
    try:
        task.tick(now=time.time())
    finally:
        task.close()

    resumed = _resumed_as_groups(cluster_b, list(groups), remote_topic, count=len(upstream))
    for group, offset in groups.items():
        following = [value for at, value in upstream if at >= offset]
        if following:
            assert resumed[group] == following[0], group
    # The group that read everything resumes after the last mirrored record.
    caught_up = translate_offsets(
        target=cluster_b, source_alias="A", group=f"{topic}-at-{end}", policy=policy
    )
    last_mirrored = _read_from(cluster_b, remote_topic, 0, count=len(upstream))[-1][0]
    assert last_mirrored < caught_up[(remote_topic, 0)] <= last_mirrored + 2  # + a transaction marker


@pytest.mark.kafka
def test_a_group_failed_over_to_the_source_gets_its_position_back_on_the_target(
    cluster_a, cluster_b, unique_name
):
    """Flow B->A mirrored B's topic to A's `B.<topic>` from downstream offset 2 (hand-written syncs, as its
    source task writes them); flow A->B's checkpoint task puts the group's A position back on B's topic."""
    topic = unique_name
    _create_topic(cluster_b, topic)
    _create_topic(cluster_a, f"B.{topic}")
    syncs = [OffsetSync(topic, 0, 0, 2), OffsetSync(topic, 0, 5, 8), OffsetSync(topic, 0, 9, 12)]
    writer = InternalTopicWriter(cluster_b, "mm2-offset-syncs.A.internal", replication_factor=1)
    writer.write([(sync.key(), sync.value()) for sync in syncs])
    writer.close()
    group = f"{topic}-failed-over"
    _commit(cluster_a, group, {(f"B.{topic}", 0): 10})
    flow = _flow(f"B\\.{topic}")
    policy = replication_policy_for(flow, known_aliases=ALIASES)
    task = checkpoint_task_for_flow(flow=flow, source=cluster_a, target=cluster_b, policy=policy)
    try:
        task.tick(now=time.time())
    finally:
        task.close()

    checkpoints = latest_group_checkpoints(target=cluster_b, source_alias="A", group=group, policy=policy)
    assert checkpoints == {(topic, 0): Checkpoint(group, topic, 0, 10, 7)}
    assert GroupOffsetsAdmin(cluster_b).committed_offsets(group)[(topic, 0)].offset == 7
