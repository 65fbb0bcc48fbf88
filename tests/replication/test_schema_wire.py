"""The Confluent wire format and the subject names a flow gives on the target: pure, no registry."""

from __future__ import annotations

import pytest

from replication.filters import SubjectFilter
from replication.policy import DefaultReplicationPolicy, IdentityReplicationPolicy
from replication.schemas.subjects import subject_renamer, subject_topic
from replication.schemas.wire import schema_id_of, with_schema_id


def test_schema_id_is_read_from_the_magic_byte_and_four_big_endian_bytes():
    assert schema_id_of(b"\x00\x00\x00\x01\x02payload") == 258
    assert schema_id_of(b"\x00\x7f\xff\xff\xff") == 2**31 - 1
    for not_wire_format in (None, b"", b"\x00\x00\x00\x01", b"\x01\x00\x00\x00\x01x", b"plain text"):
        assert schema_id_of(not_wire_format) is None


def test_with_schema_id_changes_only_the_id_bytes():
    payload = b"\x00\x00\x00\x00\x07\x02\x04avro-or-protobuf-indexes"
    rewritten = with_schema_id(payload, 70_000)
    assert schema_id_of(rewritten) == 70_000
    assert rewritten[5:] == payload[5:] and len(rewritten) == len(payload)
    assert with_schema_id(b"\x00\x00\x00\x00\x07", 9) == b"\x00\x00\x00\x00\x09"  # an empty payload


@pytest.mark.parametrize(
    ("subject", "expected"),
    [("orders-value", ("orders", "-value")), ("orders-key", ("orders", "-key")), ("com.acme.Order", None)],
)
def test_topic_subjects_are_told_apart_from_record_name_subjects(subject, expected):
    assert subject_topic(subject) == expected


def renamer(policy, **filters):
    return subject_renamer(
        policy=policy,
        source_alias="A",
        target_alias="B",
        subject_filter=SubjectFilter(**filters),
        topic_replicated=lambda topic: not topic.startswith("private"),
    )


def test_subjects_follow_their_topic_under_the_flow_policy():
    rename = renamer(DefaultReplicationPolicy(known_aliases=["A", "B"]))
    assert rename("orders-value") == "A.orders-value"
    assert rename("orders-key") == "A.orders-key"
    assert rename("com.acme.Order") == "com.acme.Order"  # RecordNameStrategy: tied to no topic
    identity = renamer(IdentityReplicationPolicy(known_aliases=["A", "B"]))
    assert identity("orders-value") == "orders-value"


def test_subjects_of_topics_not_replicated_filtered_out_or_cycles_are_not_synced():
    rename = renamer(DefaultReplicationPolicy(known_aliases=["A", "B"]), exclude=["audit-.*"])
    assert rename("private-payroll-value") is None  # the flow does not replicate the topic
    assert rename("audit-log-value") is None  # schema.subjects.exclude
    assert rename("B.orders-value") is None  # came from the target: no way back
    assert rename("C.orders-value") == "A.C.orders-value"
