"""What the message browser shows: bytes as JSON, text or hex, masking by topic pattern, and a source
record beside its copy at the exactly translated offset (gaps included), with no broker."""

from __future__ import annotations

import pytest

from replication.browse import (
    CopyState,
    KafkaRecord,
    MaskPatterns,
    ValueFormat,
    compare_copies,
    copy_range,
    render_bytes,
)
from replication.formats import OffsetSync
from replication.offset_sync_store import OffsetSyncStore


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


def _record(offset: int, value: bytes, *, topic: str = "orders", ts: int = 1000) -> KafkaRecord:
    return KafkaRecord(topic, 0, offset, ts, b"k", value, (("h", b"v"),))


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
    assert copy_range(store, source) == (13, 16)
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
