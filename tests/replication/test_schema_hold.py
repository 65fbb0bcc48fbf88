"""MirrorSourceTask with `rewrite-ids` on the in-memory clusters (replication/memory/task_io.py) and two real
registries: a partition holds exactly at the first record whose schema the target lacks (nothing after it
is sent, the other partitions go on), reports a `schema` error once it held SCHEMA_WAIT_ERROR_S, and goes on
in order once the sync registered the schema."""

from __future__ import annotations

import json

from replication.config import DeliveryGuarantee, FlowConfig, SchemaIdMode
from replication.memory.task_io import MemoryIO
from replication.policy import replication_policy_for
from replication.positions import InMemoryPositionStore
from replication.schema_hold import SCHEMA_WAIT_ERROR_S, SchemaHold
from replication.schemas.flow import flow_subject_renamer
from replication.schemas.ids import SchemaIdRewriter
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.sync import sync_schemas
from replication.schemas.wire import schema_id_of, with_schema_id
from replication.source import MirrorSourceTask, SliceErrorKind
from replication.task_io import SchemaWait
from tests.replication.states import partition_state


def test_a_partition_holds_at_a_record_whose_schema_is_missing_then_goes_on(schema_registries, unique_name):
    topic, remote = unique_name, f"A.{unique_name}"
    source = ConfluentRegistryClient(schema_registries["A"].url)
    target = ConfluentRegistryClient(schema_registries["B"].url)
    for index in range(3):  # the target's own schemas: its IDs are not the source's
        target.register(
            f"{topic}-local-value",
            Schema(json.dumps({"type": "enum", "name": f"E{index}", "symbols": ["A"]})),
        )
    early = source.register(f"{topic}-value", Schema('{"type": "record", "name": "T", "fields": []}'))
    policy_flow = FlowConfig(
        source="A",
        target="B",
        enabled=True,
        topics=(topic,),
        delivery_guarantee=DeliveryGuarantee.EXACTLY_ONCE,
    )
    policy = replication_policy_for(policy_flow, known_aliases=("A", "B"))
    rename = flow_subject_renamer(policy_flow, policy)
    assert sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS).ok
    late = source.register(
        f"{topic}-value",
        Schema('{"type": "record", "name": "T", "fields": [{"name": "a", "type": "int", "default": 0}]}'),
    )

    io = MemoryIO()
    io.source_cluster.create(topic, 2)
    io.target_cluster.create(remote, 2)
    payloads = [with_schema_id(b"\x00\x00\x00\x00\x00r%d" % i, late if i >= 3 else early) for i in range(6)]
    for payload in payloads:
        io.source_cluster.append(topic, 0, key=b"plain key", value=payload)
        io.source_cluster.append(topic, 1, key=None, value=b"not in the wire format")
    now = [1_000.0]
    task = MirrorSourceTask(
        flow=policy_flow,
        policy=policy,
        task_index=0,
        position_store=InMemoryPositionStore(),
        io=io.task_io(),
        clock=lambda: now[0],
        schema_ids=SchemaIdRewriter(source=source, target=target, rename=rename, retry_s=0.0),
    )
    task.assign([(topic, 0), (topic, 1)])

    first = task.run_slice(max_seconds=1, return_when_caught_up=True)
    assert first.ok and first.positions == {(topic, 0): 3, (topic, 1): 6}
    assert len(io.target_cluster.read(remote, 0)) == 3
    # Held is behind (issue 36 item 4): the three held records count from the first slice on, although
    # the consumer fetched past them (it read 0 records behind before).
    behind = task.metrics.snapshot(now=now[0]).partition(remote, 0)
    assert (behind.records_behind, behind.next_offset) == (3, 3)
    # The report comes SCHEMA_WAIT_ERROR_S after the hold began, whatever the slices in between.
    for _ in range(3):
        now[0] += SCHEMA_WAIT_ERROR_S / 4
        assert task.run_slice(max_seconds=0.2).ok
        assert task.metrics.snapshot(now=now[0]).partition(remote, 0).records_behind == 3
    now[0] += SCHEMA_WAIT_ERROR_S / 4
    held = task.run_slice(max_seconds=0.5)
    (error,) = held.errors
    assert error.kind == SliceErrorKind.SCHEMA and error.partition == (topic, 0)
    assert f"schema ID {late}" in error.message and "offset 3" in error.message
    assert held.positions[(topic, 0)] == 3 and len(io.target_cluster.read(remote, 0)) == 3

    assert sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS).ok
    for _ in range(5):
        result = task.run_slice(max_seconds=1, return_when_caught_up=True)
        if result.positions[(topic, 0)] == 6:
            break
    assert result.ok and result.positions == {(topic, 0): 6, (topic, 1): 6}
    mirrored = io.target_cluster.read(remote, 0)
    target_ids = [target.version(f"A.{topic}-value", v).schema_id for v in (1, 2)]
    assert [schema_id_of(r.value()) for r in mirrored] == [target_ids[0]] * 3 + [target_ids[1]] * 3
    assert [r.value()[5:] for r in mirrored] == [p[5:] for p in payloads]
    assert all(r.key() == b"plain key" for r in mirrored)
    assert [r.value() for r in io.target_cluster.read(remote, 1)] == [b"not in the wire format"] * 6


def test_a_hold_without_a_task_is_released_once_its_record_is_sent_and_an_error_only_after_its_wait():
    """`SchemaHold` alone (no registry): the hold keeps its clock across slices that did not fetch the
    partition again, reports a `schema` error from SCHEMA_WAIT_ERROR_S on, and ends when the position
    passes the held offset."""
    now = [1_000.0]
    hold = SchemaHold(clock=lambda: now[0], label="flow A->B task 0")
    state = partition_state()
    state.next_offset = 9
    wait = SchemaWait(12, "not on the target registry yet (waiting for the schema sync)")
    hold.hold(state, 4, wait)
    assert (state.next_offset, state.held, state.schema_wait_since) == (4, (4, wait), 1_000.0)
    assert hold.held == {("orders", 0): state} and hold.reseek == {("orders", 0)}  # fetched again alone
    now[0] += SCHEMA_WAIT_ERROR_S - 1
    hold.retry()  # a new slice tries the record again; the partition was not fetched again
    assert state.schema_wait is None and hold.check(now=now[0]) == []
    hold.hold(state, 4, wait)  # held again: the clock goes on from the first hold
    now[0] += 1
    (error,) = hold.check(now=now[0])
    assert error.kind is SliceErrorKind.SCHEMA and error.partition == ("orders", 0)
    assert error.message == f"orders[0] has waited {SCHEMA_WAIT_ERROR_S:.0f}s at offset 4: {wait}"
    hold.retry()
    state.next_offset = 5  # the sync registered the schema: the held record was sent
    assert hold.check(now=now[0]) == [] and hold.held == {}
    assert (state.held, state.schema_wait_since) == (None, None)
