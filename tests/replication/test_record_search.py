"""Message-browser search filters and scan ranges, with known answers; hostile records never raise."""

from __future__ import annotations

import pytest

from replication.browse import KafkaRecord, PartitionOffsets
from replication.record_search import (
    JSON_MATCH_MAX_BYTES,
    RecordFilter,
    SearchInputError,
    json_expectation,
    parse_json_path,
    scan_ranges,
    tail_ranges,
)


def _record(value: bytes | None, *, key: bytes | None = b"k1", headers=(), timestamp_ms: int | None = 1000):
    return KafkaRecord("t", 0, 5, timestamp_ms, key, value, tuple(headers))


ORDER = _record(b'{"order": {"id": 7, "items": [{"sku": "a-1"}]}, "paid": true}', headers=[("trace", b"t-1")])
HOSTILE = [
    _record(b"\xff\xfe\x00binary"),  # not UTF-8
    _record(b'{"order": '),  # bad JSON
    _record(b"[" * 100_000 + b"]" * 100_000),  # nested past the recursion limit
    _record(b'{"order": {"id": 7}}' + b" " * JSON_MATCH_MAX_BYTES),  # huge
    _record(None, key=None, headers=[("trace", None)], timestamp_ms=None),  # a tombstone without a time
]


def test_json_paths_parse_to_names_and_indexes():
    assert parse_json_path("$.order.items[0].sku") == ("order", "items", 0, "sku")
    assert parse_json_path("order.id") == ("order", "id")
    assert parse_json_path('$["a.b"][2]') == ("a.b", 2)
    for bad in ("$..", "$.a[x]", "$", ""):
        with pytest.raises(SearchInputError) as error:
            parse_json_path(bad)
        assert error.value.field == "json_path"


@pytest.mark.parametrize(
    ("flt", "keeps"),
    [
        (RecordFilter(), True),
        (RecordFilter(key=b"k1"), True),
        (RecordFilter(key=b"k2"), False),
        (RecordFilter(value=b'"sku": "a-1"'), True),
        (RecordFilter(json_path=("order", "id"), json_value=7), True),
        (RecordFilter(json_path=("order", "id"), json_value="7"), False),  # JSON equality: 7 is not "7"
        (RecordFilter(json_path=("order", "items", 0, "sku"), json_value=json_expectation("a-1")), True),
        (RecordFilter(json_path=("order", "items", 1)), False),
        (RecordFilter(json_path=("paid",), json_value=json_expectation("true")), True),
        (RecordFilter(header="trace"), True),
        (RecordFilter(header="trace", header_value=b"t-1"), True),
        (RecordFilter(header="trace", header_value=b"t-2"), False),
        (RecordFilter(since_ms=1000, until_ms=1001), True),
        (RecordFilter(since_ms=1001), False),
        (RecordFilter(until_ms=1000), False),
        (RecordFilter(key=b"k1", value=b"nope"), False),
    ],
)
def test_every_condition_given_must_hold(flt, keeps):
    assert flt.matches(ORDER) is keeps


def test_hostile_records_never_raise_and_match_no_json_path():
    by_path = RecordFilter(json_path=("order", "id"))
    every = RecordFilter(key=b"k", value=b"o", header="trace", header_value=b"x", since_ms=0, until_ms=10**18)
    for record in HOSTILE:
        assert not by_path.matches(record)
        assert not every.matches(record)
    assert RecordFilter(value=b"binary").matches(HOSTILE[0])  # bytes are searched as bytes


def test_only_value_conditions_read_values():
    assert not RecordFilter(key=b"k", header="trace", since_ms=1).reads_values
    assert all(
        f.reads_values
        for f in (
            RecordFilter(value=b"x"),
            RecordFilter(json_path=("a",)),
            RecordFilter(header="h", header_value=b"v"),
        )
    )


PARTITIONS = [PartitionOffsets(0, 0, 100), PartitionOffsets(1, 40, 50), PartitionOffsets(2, 0, 0)]


def test_the_newest_records_share_the_budget_between_partitions():
    ranges = scan_ranges(PARTITIONS, max_scanned=60)
    assert [(r.partition, r.start, r.stop, r.budget) for r in ranges] == [
        (0, 80, 100, 20),
        (1, 40, 50, 20),
        (2, 0, 0, 20),
    ]
    assert [r.empty for r in ranges] == [False, False, True]


def test_a_time_range_reads_from_the_first_offset_at_since_to_the_first_at_until():
    ranges = scan_ranges(PARTITIONS, max_scanned=30, since={0: 10, 1: -1, 2: -1}, until={0: 60, 1: -1, 2: -1})
    assert [(r.start, r.stop) for r in ranges] == [(10, 60), (50, 50), (0, 0)]
    newest_before = scan_ranges(PARTITIONS, max_scanned=30, until={0: 60, 1: 45})
    assert [(r.start, r.stop) for r in newest_before] == [(50, 60), (40, 45), (0, 0)]


def test_a_tail_reads_what_came_after_its_positions_and_skips_past_its_budget():
    first = tail_ranges(PARTITIONS, positions=None, max_scanned=60)
    assert [(r.start, r.stop) for r in first] == [(100, 100), (50, 50), (0, 0)] and all(
        r.empty for r in first
    )
    nxt = tail_ranges(PARTITIONS, positions={0: 90, 1: 10}, max_scanned=60)
    assert [(r.start, r.stop, r.skipped) for r in nxt] == [(90, 100, 0), (40, 50, 0), (0, 0, 0)]
    behind = tail_ranges(PARTITIONS, positions={0: 10, 1: 45, 2: 0}, max_scanned=60)
    assert [(r.start, r.stop, r.skipped) for r in behind] == [(80, 100, 70), (45, 50, 0), (0, 0, 0)]
