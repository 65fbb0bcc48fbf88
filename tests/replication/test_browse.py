"""What the message browser shows: bytes as JSON, text or hex, masking by topic pattern, and a source
record beside its copy at the exactly translated offset (gaps included), with no broker."""

from __future__ import annotations

import pytest

from replication.browse import (
    CopyState,
    KafkaRecord,
    MaskPatterns,
    TargetRead,
    ValueFormat,
    compare_copies,
    render_bytes,
    target_read,
)
from replication.formats import OffsetSync
from replication.offset_sync_store import OffsetSyncStore
from replication.policy import PROVENANCE_HEADER


@pytest.mark.parametrize(
    ("data", "fmt", "text", "shown_as", "note"),
    [
        (b'{"a": 1}', ValueFormat.AUTO, '{\n  "a": 1\n}', "json", ""),
        (b"plain words", ValueFormat.AUTO, "plain words", "text", ""),
        (b"\x00\xff", ValueFormat.AUTO, "00 ff", "hex", ""),
        (b'{"a": 1}', ValueFormat.TEXT, '{"a": 1}', "text", ""),
        (b"ab", ValueFormat.HEX, "61 62", "hex", ""),
        (b"not json", ValueFormat.JSON, "not json", "text", "not valid JSON: shown as text"),
        (b"\x00\xff", ValueFormat.TEXT, "00 ff", "hex", "not UTF-8 text: shown as hex"),
        (b"42", ValueFormat.AUTO, "42", "json", ""),
    ],
)
def test_render_bytes(data, fmt, text, shown_as, note):
    rendered = render_bytes(data, fmt)
    assert (rendered.text, rendered.format, rendered.note, rendered.size) == (text, shown_as, note, len(data))


def test_render_cuts_long_values_and_says_so():
    rendered = render_bytes(b"x" * 5000)
    assert rendered.truncated and rendered.size == 5000 and len(rendered.text) == 4096
    assert render_bytes(None).is_null


def test_mask_patterns_match_whole_names_and_fail_closed():
    patterns = MaskPatterns(["payments\\..*", "pii"])
    assert patterns.masks("payments.cards") and patterns.masks("pii")
    assert not patterns.masks("pii-free") and not patterns.masks("orders")
    broken = MaskPatterns(["("])
    assert broken.masks("orders") and broken.errors  # a pattern that does not compile masks everything


def _record(
    offset: int, value: bytes, *, topic: str = "orders", ts: int = 1000, ours: bool = False
) -> KafkaRecord:
    headers = (("h", b"v"), (PROVENANCE_HEADER, b"A")) if ours else (("h", b"v"),)
    return KafkaRecord(topic, 0, offset, ts, b"k", value, headers)


def test_copies_are_found_at_the_translated_offset_across_a_gap():
    # Upstream 0-4 went to 10-14; upstream 5-6 were compacted away; 7-8 went to 15-16.
    store = OffsetSyncStore()
    store.update_all(
        [OffsetSync("orders", 0, 0, 10), OffsetSync("orders", 0, 7, 15), OffsetSync("orders", 0, 8, 16)]
    )
    source = [
        _record(3, b"three"),
        _record(4, b"four"),
        _record(7, b"seven"),
        _record(8, b"eight"),
        _record(9, b"nine"),
    ]
    # Record 9 is past the newest sync (8 -> 16): the read goes on past 16 to find its copy.
    assert target_read(store, source) == TargetRead(first=13, records=5, stop_before=None)
    assert target_read(store, source[:4]) == TargetRead(first=13, records=4, stop_before=17)
    target = [
        _record(13, b"three", topic="A.orders"),
        _record(14, b"FOUR", topic="A.orders"),
        _record(15, b"seven", topic="A.orders", ts=2000),
    ]
    copies = compare_copies(store=store, source_records=source, target_records=target)
    assert [(c.source.offset, c.target_offset, c.state, c.differences) for c in copies] == [
        (3, 13, CopyState.EQUAL, ()),
        (4, 14, CopyState.DIFFERENT, ("value",)),
        (7, 15, CopyState.DIFFERENT, ("timestamp",)),
        (8, 16, CopyState.MISSING, ()),
        (9, None, CopyState.NOT_REPLICATED, ()),  # past the newest sync: not provably copied
    ]


def test_records_older_than_the_oldest_sync_have_no_translation():
    store = OffsetSyncStore()
    store.update(OffsetSync("orders", 0, 5, 0))
    (copy,) = compare_copies(store=store, source_records=[_record(2, b"old")], target_records=[])
    assert (copy.target_offset, copy.state) == (None, CopyState.UNTRANSLATABLE)


def test_a_copy_with_mirrorplanes_provenance_header_is_the_same_record():
    """The verifier's one rule of the same record: the headers the mirror adds are not the record's."""
    store = OffsetSyncStore()
    store.update(OffsetSync("orders", 0, 0, 0))
    store.update(OffsetSync("orders", 0, 5, 5))
    source = [_record(1, b"one"), _record(2, b"two")]
    target = [
        _record(1, b"one", topic="A.orders", ours=True),
        _record(2, b"TWO", topic="A.orders", ours=True),
    ]
    copies = compare_copies(store=store, source_records=source, target_records=target)
    assert [(c.state, c.differences) for c in copies] == [
        (CopyState.EQUAL, ()),
        (CopyState.DIFFERENT, ("value",)),  # a real difference is still named, and only it
    ]
    stamped = KafkaRecord("A.orders", 0, 1, 99_999, b"k", b"one", (("h", b"v"),), log_append_time=True)
    (copy,) = compare_copies(store=store, source_records=source[:1], target_records=[stamped])
    assert copy.state == CopyState.EQUAL  # a broker-stamped timestamp is not the source's


def test_records_past_the_newest_sync_are_found_reading_forward_by_content():
    # Newest sync: source 10 at target 40. Target 41 is a duplicate of 10 (an at-least-once restart);
    # 11, 12 and 12's twin 13 follow; 14 is not copied yet.
    store = OffsetSyncStore()
    store.update(OffsetSync("orders", 0, 10, 40))
    source = [
        _record(10, b"ten"),
        _record(11, b"eleven"),
        _record(12, b"x"),
        _record(13, b"x"),
        _record(14, b"y"),
    ]
    assert target_read(store, source) == TargetRead(first=40, records=5, stop_before=None)
    target = [
        _record(40, b"ten", topic="A.orders", ours=True),
        _record(41, b"ten", topic="A.orders", ours=True),
        _record(42, b"eleven", topic="A.orders", ours=True),
        _record(43, b"x", topic="A.orders", ours=True),
        _record(44, b"x", topic="A.orders", ours=True),
    ]
    copies = compare_copies(store=store, source_records=source, target_records=target)
    assert [(c.source.offset, c.target_offset, c.state, c.located_by) for c in copies] == [
        (10, 40, CopyState.EQUAL, "offset_sync"),
        (11, 42, CopyState.EQUAL, "content"),
        (12, 43, CopyState.EQUAL, "content"),
        (13, 44, CopyState.EQUAL, "content"),  # identical records pair up in turn
        (14, None, CopyState.NOT_REPLICATED, "offset_sync"),
    ]
