"""Schema sync between two real registries (Apicurio Registry's Confluent API, one per cluster):
rewrite-ids registers every version in order under the renamed subject and maps the IDs; keep-ids is
refused clearly where the target cannot hold the source IDs; the ID rewriter finds the target's IDs and
makes a record wait, never pass with a wrong ID, while its schema is missing on the target."""

from __future__ import annotations

import json

import pytest

from replication.config import FlowConfig, SchemaIdMode
from replication.policy import DefaultReplicationPolicy
from replication.schemas.flow import flow_subject_renamer
from replication.schemas.ids import SchemaIdRewriter
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.sync import id_conflict, sync_schemas
from replication.schemas.wire import schema_id_of, with_schema_id
from replication.task_io import SchemaWait


def record_schema(name: str, *fields: str) -> Schema:
    return Schema(
        json.dumps(
            {
                "type": "record",
                "name": name,
                "fields": [{"name": "id", "type": "long"}]
                + [{"name": field, "type": "string", "default": ""} for field in fields],
            }
        )
    )


@pytest.fixture
def registries(schema_registries):
    return (
        ConfluentRegistryClient(schema_registries["A"].url),
        ConfluentRegistryClient(schema_registries["B"].url),
    )


def flow_renamer(topic: str):
    return flow_subject_renamer(
        FlowConfig(source="A", target="B", topics=(topic,)),
        DefaultReplicationPolicy(known_aliases=["A", "B"]),
    )


def shift_target_ids(target: ConfluentRegistryClient, stem: str, count: int = 3) -> None:
    """Schemas of the target's own, so that its next IDs are not the source's."""
    for index in range(count):
        target.register(
            f"{stem}-local-value", record_schema(f"Local{index}", *(f"f{i}" for i in range(index)))
        )


def test_rewrite_ids_registers_every_version_in_order_and_maps_the_ids(registries, unique_name):
    source, target = registries
    topic = unique_name
    shift_target_ids(target, topic)
    v1, v2 = record_schema("Order"), record_schema("Order", "note")
    ids = [source.register(f"{topic}-value", v1), source.register(f"{topic}-value", v2)]
    key_id = source.register(f"{topic}-key", Schema('"string"'))
    source.set_compatibility(f"{topic}-value", "BACKWARD")
    rename = flow_renamer(topic)

    first = sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS)

    assert first.ok, first.errors
    assert first.subjects == {f"{topic}-key": f"A.{topic}-key", f"{topic}-value": f"A.{topic}-value"}
    assert first.registered == 3 and first.versions_behind == 0
    assert target.versions(f"A.{topic}-value") == [1, 2]
    for number, (source_id, schema) in enumerate(zip(ids, (v1, v2), strict=True), start=1):
        on_target = target.version(f"A.{topic}-value", number)
        assert on_target.schema.same_as(schema)
        assert first.id_map[source_id] == on_target.schema_id != source_id
    assert first.id_map[key_id] == target.version(f"A.{topic}-key", 1).schema_id
    assert target.compatibility(f"A.{topic}-value") == "BACKWARD"

    again = sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS)
    assert again.ok and again.registered == 0 and again.id_map == first.id_map
    assert target.versions(f"A.{topic}-value") == [1, 2]


def test_keep_ids_is_refused_clearly_by_a_target_without_import_mode(registries, unique_name):
    source, target = registries
    topic = unique_name
    source.register(f"{topic}-value", record_schema("Payment"))

    result = sync_schemas(
        source=source, target=target, rename=flow_renamer(topic), mode=SchemaIdMode.KEEP_IDS
    )

    assert not result.ok and result.versions_behind == 1 and result.registered == 0
    (error,) = result.errors
    assert f"A.{topic}-value" in error and "no IMPORT mode" in error and "use rewrite-ids" in error
    assert target.versions(f"A.{topic}-value") == []  # refused before registering anything


def test_a_record_held_for_a_subject_the_sync_refuses_names_the_refusal(registries, unique_name):
    """Issue 36 item 4: the sync's refusal (here: keep-ids on a target without IMPORT mode) is kept per
    subject, and a record of that subject is held naming it, not "waiting for the schema sync"."""
    source, target = registries
    topic = unique_name
    source_id = source.register(f"{topic}-value", record_schema("Invoice"))
    rename = flow_renamer(topic)
    result = sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.KEEP_IDS)
    assert set(result.refused) == {f"{topic}-value"} and "no IMPORT mode" in result.refused[f"{topic}-value"]
    record = with_schema_id(b"\x00\x00\x00\x00\x00avro-bytes", source_id)

    unaware = SchemaIdRewriter(source=source, target=target, rename=rename, keep_ids=True)
    with pytest.raises(SchemaWait, match="waiting for the schema sync"):
        unaware.rewrite(record)
    checker = SchemaIdRewriter(
        source=source, target=target, rename=rename, keep_ids=True, refused=lambda: result.refused
    )
    with pytest.raises(SchemaWait) as waited:
        checker.rewrite(record)

    assert f"the schema sync refuses subject A.{topic}-value" in str(waited.value)
    assert "no IMPORT mode" in str(waited.value) and "waiting for the schema sync" not in str(waited.value)


def test_an_id_the_target_uses_for_another_schema_is_a_keep_ids_conflict(registries, unique_name):
    """Checked before each keep-ids registration (on a target with IMPORT mode, which Apicurio 2.6 lacks).
    The registries are shared by the session: the ID is one the target gave this test, whatever earlier
    tests registered (waiting for the target's IDs to reach the source's failed once they had passed it)."""
    _, target = registries
    topic = unique_name
    schema = record_schema("Invoice", "total")
    taken = target.register(f"{topic}-occupied-value", record_schema("SomethingElse", "x"))
    assert target.schema_by_id(taken) is not None

    conflict = id_conflict(target, taken, schema)

    assert conflict and f"already uses ID {taken} for another schema" in conflict
    assert id_conflict(target, taken, target.schema_by_id(taken)) is None  # the same schema: free
    assert id_conflict(target, 10**9, schema) is None  # unused


def test_the_rewriter_waits_for_a_missing_schema_then_rewrites_to_the_target_id(registries, unique_name):
    source, target = registries
    topic = unique_name
    shift_target_ids(target, topic)
    source_id = source.register(f"{topic}-value", record_schema("Shipment"))
    record = with_schema_id(b"\x00\x00\x00\x00\x00avro-bytes", source_id)
    rename = flow_renamer(topic)
    now = [0.0]
    rewriter = SchemaIdRewriter(source=source, target=target, rename=rename, clock=lambda: now[0])

    with pytest.raises(SchemaWait) as waited:
        rewriter.rewrite(record)
    assert waited.value.source_id == source_id and "not on the target registry yet" in str(waited.value)
    sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS)
    with pytest.raises(SchemaWait):  # asked again only after retry_s
        rewriter.rewrite(record)
    now[0] += 1.0
    rewritten = rewriter.rewrite(record)

    target_id = target.version(f"A.{topic}-value", 1).schema_id
    assert target_id != source_id and schema_id_of(rewritten) == target_id
    assert rewritten[5:] == b"avro-bytes" and rewriter.id_map == {source_id: target_id}
    assert rewriter.rewrite(b"plain key") == b"plain key"
    unknown = with_schema_id(record, 10**9)  # no such ID in the source registry: not a registry record
    assert rewriter.rewrite(unknown) == unknown


def test_keep_ids_holds_a_record_until_the_target_has_its_schema_under_the_same_id(registries, unique_name):
    """keep-ids copies IDs unchanged, so a record passes only when the target's ID names its schema: here
    the target holds the schema under an ID of its own (keep-ids refused), and the record waits."""
    source, target = registries
    topic = unique_name
    shift_target_ids(target, topic)
    schema = record_schema("Refund")
    source_id = source.register(f"{topic}-value", schema)
    target_id = target.register(f"A.{topic}-value", schema)
    assert target_id != source_id
    record = with_schema_id(b"\x00\x00\x00\x00\x00avro-bytes", source_id)
    checker = SchemaIdRewriter(source=source, target=target, rename=flow_renamer(topic), keep_ids=True)

    with pytest.raises(SchemaWait) as waited:
        checker.rewrite(record)

    assert f"under ID {target_id}, not its own (keep-ids)" in str(waited.value)


def test_keep_ids_names_the_refusal_when_the_target_uses_the_id_for_another_schema(registries, unique_name):
    """Issue 36 item 4: a hold the sync can never end names why (the sync's refusal), not "waiting for the
    schema sync": here the target registry gives the source's ID to a schema of its own."""
    source, target = registries
    topic = unique_name
    target_next = target.register(f"{topic}-probe-value", record_schema("Probe")) + 1
    filler = 0
    while source.register(f"{topic}-fill-value", record_schema(f"Fill{filler}")) < target_next:
        filler += 1  # the source's IDs past the target's, so that the target can be made to reach them
    source_id = source.register(f"{topic}-value", record_schema("Claim"))
    while (taken := target.register(f"{topic}-local-value", record_schema(f"Local{filler}"))) < source_id:
        filler += 1
    assert taken == source_id, "the target's IDs skipped the source's: nothing to test"
    checker = SchemaIdRewriter(source=source, target=target, rename=flow_renamer(topic), keep_ids=True)

    with pytest.raises(SchemaWait) as waited:
        checker.rewrite(with_schema_id(b"\x00\x00\x00\x00\x00avro-bytes", source_id))

    assert f"the target registry uses ID {source_id} for another schema" in str(waited.value)
    assert "waiting for the schema sync" not in str(waited.value)


def test_soft_deletes_follow_the_source_and_the_deleted_ids_still_resolve(registries, unique_name):
    """A version soft-deleted on the source is soft-deleted on the target (registered first when the sync
    never saw it live), a subject soft-deleted whole is soft-deleted whole on the target, and the records
    naming a deleted version still get a target ID that resolves; a third pass changes nothing."""
    source, target = registries
    topic = unique_name
    shift_target_ids(target, topic)
    rename = flow_renamer(topic)
    value, key = f"{topic}-value", f"{topic}-key"
    ids = [source.register(value, record_schema("Order", *(f"f{i}" for i in range(n)))) for n in range(3)]
    key_id = source.register(key, Schema('"string"'))
    first = sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS)
    assert first.ok and first.deleted == 0, first.errors

    late_id = source.register(value, record_schema("Order", "f0", "f1", "f2"))  # version 4, deleted unseen
    source.soft_delete(value, 2)
    source.soft_delete(value, 4)
    source.soft_delete_subject(key)
    assert source.versions(value) == [1, 3] and source.versions(key) == []

    second = sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS)

    assert second.ok, second.errors
    assert (second.registered, second.deleted) == (
        1,
        3,
    )  # version 4 registered, then 2, 4 and the key deleted
    assert target.versions(f"A.{value}") == [1, 3]
    assert target.versions(f"A.{value}", deleted=True) == [1, 2, 3, 4]
    assert target.versions(f"A.{key}") == [] and f"A.{key}" not in target.subjects()
    assert target.schema_by_id(first.id_map[key_id]) is not None  # readable by ID still
    # Records written before the deletes name the deleted versions' IDs: they still map and resolve.
    rewriter = SchemaIdRewriter(source=source, target=target, rename=rename)
    for source_id in (ids[1], late_id):
        target_id = schema_id_of(rewriter.rewrite(with_schema_id(b"\0\0\0\0\0payload", source_id)))
        assert target_id == second.id_map[source_id]
        assert target.schema_by_id(target_id).same_as(source.schema_by_id(source_id))

    third = sync_schemas(source=source, target=target, rename=rename, mode=SchemaIdMode.REWRITE_IDS)
    assert third.ok and (third.registered, third.deleted, third.versions_behind) == (0, 0, 0), third
    assert target.versions(f"A.{value}", deleted=True) == [1, 2, 3, 4]
