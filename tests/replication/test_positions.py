"""PersistCadence: when a running slice persists its positions (pure: time passed in); `PositionWriter`
without a task: offset syncs before positions, coalesced position records, one read per partition; the
Kafka position store."""

from __future__ import annotations

import pytest

from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.internal_topics import InternalTopicReader, InternalTopicWriter
from replication.kafka.positions import (
    POSITIONS_TOPIC_CONFIGS,
    KafkaPositionStore,
    legacy_positions_topic,
    position_key,
    positions_topic,
)
from replication.memory.task_io import MemoryEmitter
from replication.partition_state import Acknowledgements
from replication.positions import (
    POSITION_RECORD_INTERVAL_S,
    InMemoryPositionStore,
    PersistCadence,
    PositionWriter,
)
from replication.slices import SliceErrorKind
from tests.replication.states import partition_state


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


class CountingStore(InMemoryPositionStore):
    """An in-memory store that counts its requests, and fails its saves while `failing`."""

    def __init__(self) -> None:
        super().__init__()
        self.loads: list[list] = []
        self.saves: list[dict] = []
        self.failing = False

    def load(self, *, flow, partitions):
        self.loads.append(list(partitions))
        return super().load(flow=flow, partitions=partitions)

    def save(self, *, flow, positions):
        if self.failing:
            raise ConnectionError("positions topic unavailable")
        self.saves.append(dict(positions))
        super().save(flow=flow, positions=positions)


def writer_with(store: CountingStore, emitter: MemoryEmitter) -> tuple[PositionWriter, Acknowledgements]:
    acks = Acknowledgements()
    return PositionWriter(flow="A->B", store=store, offset_syncs=lambda: emitter, acks=acks), acks


def acknowledged(acks: Acknowledgements, partition: int, upstream_downstream: list[tuple[int, int]]):
    state = partition_state(partition, acks=acks)
    for upstream, downstream in upstream_downstream:
        state.syncs.on_ack(upstream, downstream)
    state.next_offset = upstream_downstream[-1][0] + 1
    return state


def test_offset_syncs_are_emitted_before_the_positions_they_cover_and_a_failed_emit_writes_no_position():
    store, emitter = CountingStore(), MemoryEmitter()
    writer, acks = writer_with(store, emitter)
    state = acknowledged(acks, 0, [(0, 0), (1, 1), (3, 2)])  # offset 2 was skipped: the mapping changes
    writer.dirty[state.key] = state
    emitter.failing = True
    error = writer.write(now=100.0)
    assert error.kind is SliceErrorKind.OFFSET_SYNC and "2 offset sync(s)" in error.message
    assert store.saves == [] and writer.last_offset_sync_at is None
    emitter.failing = False
    assert writer.write(now=100.1) is None
    assert emitter.emitted == [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 3, 2)]  # requeued first
    assert store.saves == [{("orders", 0): 4}] and writer.known == {("orders", 0): 4}
    assert writer.last_offset_sync_at == 100.1 and writer.dirty == {}  # nothing more to write or sync


def test_positions_wait_for_their_offset_syncs_to_be_acknowledged_without_holding_the_task():
    store, emitter = CountingStore(), MemoryEmitter()
    writer, acks = writer_with(store, emitter)
    state = acknowledged(acks, 0, [(0, 0), (1, 1), (3, 2)])
    writer.dirty[state.key] = state
    emitter.holding = True  # sent, not acknowledged yet
    assert writer.write(now=100.0) is None  # no wait for the cluster
    assert store.saves == [] and emitter.emitted == [] and writer.last_offset_sync_at is None
    state.syncs.on_ack(5, 3)  # another skip, decided meanwhile: not sent before the first ones are acked
    state.next_offset = 6
    assert writer.write(now=100.2) is None and store.saves == []
    emitter.holding = False
    assert writer.write(now=100.4) is None
    # The first syncs acknowledged: the position they cover (4, as when they were sent) is written, and
    # the next sync goes out (acknowledged at once here, so its position too).
    assert emitter.emitted == [
        OffsetSync("orders", 0, 0, 0),
        OffsetSync("orders", 0, 3, 2),
        OffsetSync("orders", 0, 5, 3),
    ]
    assert store.saves == [{("orders", 0): 6}] and writer.last_offset_sync_at == 100.4


def test_writing_every_position_waits_for_the_syncs_and_unacknowledged_ones_are_sent_again():
    store, emitter = CountingStore(), MemoryEmitter()
    writer, acks = writer_with(store, emitter)
    state = acknowledged(acks, 0, [(0, 0), (2, 1)])
    writer.dirty[state.key] = state
    emitter.holding = True
    assert writer.write(now=100.0) is None
    error = writer.write(now=100.1, every_position=True)  # still not acknowledged after the wait
    assert error.kind is SliceErrorKind.OFFSET_SYNC and "2 offset sync(s)" in error.message
    assert store.saves == []
    emitter.holding = False
    assert writer.write(now=100.2, every_position=True) is None
    assert emitter.emitted[-2:] == [OffsetSync("orders", 0, 0, 0), OffsetSync("orders", 0, 2, 1)]
    assert store.saves == [{("orders", 0): 3}] and writer.dirty == {}


def test_a_moving_position_is_written_once_per_interval_unless_every_position_is_asked():
    store, emitter = CountingStore(), MemoryEmitter()
    writer, acks = writer_with(store, emitter)
    state = acknowledged(acks, 0, [(0, 0)])
    writer.dirty[state.key] = state
    assert writer.write(now=100.0) is None and store.saves == [{("orders", 0): 1}]
    state.next_offset = 50  # moved, by far less than POSITION_RECORD_OFFSETS
    writer.dirty[state.key] = state  # as the task marks a partition that moved
    assert writer.write(now=101.0) is None and len(store.saves) == 1  # coalesced
    assert writer.dirty == {state.key: state}  # kept until written
    assert writer.write(now=101.0, every_position=True) is None  # before its partitions may move
    assert store.saves[-1] == {("orders", 0): 50}
    state.next_offset = 60
    writer.dirty[state.key] = state
    assert writer.write(now=102.0) is None and store.saves[-1] == {("orders", 0): 50}
    assert writer.write(now=101.0 + POSITION_RECORD_INTERVAL_S) is None and store.saves[-1] == {
        ("orders", 0): 60
    }


def test_stored_positions_are_read_once_per_partition_until_it_leaves_the_task():
    store = CountingStore()
    store.save(flow="A->B", positions={("orders", 0): 7})
    writer, _ = writer_with(store, MemoryEmitter())
    assert writer.load([("orders", 0), ("orders", 1)]) == {("orders", 0): 7}
    assert writer.load([("orders", 0), ("orders", 1)]) == {("orders", 0): 7}
    assert store.loads == [[("orders", 0), ("orders", 1)]]
    writer.forget(("orders", 0))  # another task may advance it meanwhile
    store.save(flow="A->B", positions={("orders", 0): 9})
    assert writer.load([("orders", 0)]) == {("orders", 0): 9} and store.loads[-1] == [("orders", 0)]


def test_a_failed_save_is_a_persist_error_and_the_position_is_written_next_time():
    store, emitter = CountingStore(), MemoryEmitter()
    writer, acks = writer_with(store, emitter)
    state = acknowledged(acks, 0, [(0, 0), (1, 1)])
    writer.dirty[state.key] = state
    store.failing = True
    error = writer.write(now=100.0)
    assert error.kind is SliceErrorKind.PERSIST and state.persisted is None
    assert emitter.emitted == [OffsetSync("orders", 0, 0, 0)]  # the syncs went first all the same
    store.failing = False
    assert writer.write(now=100.1) is None and store.saves == [{("orders", 0): 2}] and state.persisted == 2
