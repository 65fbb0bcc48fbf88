"""Which records a message-browser search keeps: key or value containing some bytes, a JSON path holding
a value, a header, a time range; and where in each partition a bounded search reads.

Pure: no I/O (`controlplane.browse.record_search` reads). A record is whatever a producer wrote: binary,
huge, not UTF-8, not JSON, JSON nested past Python's recursion limit. A filter never raises on one; it
does not match it (a JSON path never matches a value that does not parse, or is larger than
JSON_MATCH_MAX_BYTES).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from replication.browse import KafkaRecord, PartitionOffsets

JSON_MATCH_MAX_BYTES = 1 << 20  # values larger than 1 MiB are not parsed for a JSON path
_PATH_STEP = re.compile(r"\.([^.\[\]]+)|\[(\d+)\]|\[\"([^\"]*)\"\]")
_MISSING = object()


class SearchInputError(ValueError):
    """A search input that cannot be used; `field` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def parse_json_path(path: str) -> tuple[str | int, ...]:
    """`$.order.items[0].sku` (the `$` optional) as its steps: names and list indexes."""
    text = path.strip()
    text = text[1:] if text.startswith("$") else text
    text = text if text.startswith((".", "[")) else f".{text}"
    steps: list[str | int] = []
    position = 0
    while position < len(text):
        step = _PATH_STEP.match(text, position)
        if step is None:
            raise SearchInputError(
                "json_path",
                f"'{path}' is not a JSON path: give names and indexes like $.order.items[0].sku",
            )
        name, index, quoted = step.groups()
        steps.append(int(index) if index is not None else name if name is not None else quoted)
        position = step.end()
    if not steps:
        raise SearchInputError("json_path", "give a JSON path like $.order.id")
    return tuple(steps)


def _json_at(document: object, steps: Sequence[str | int]) -> object:
    for step in steps:
        if isinstance(document, list) and isinstance(step, int) and step < len(document):
            document = document[step]
            continue
        if isinstance(document, dict) and isinstance(step, str) and step in document:
            document = document[step]
            continue
        return _MISSING
    return document


def _parsed(value: bytes) -> object:
    if len(value) > JSON_MATCH_MAX_BYTES:
        return _MISSING
    try:
        return json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return _MISSING


def json_expectation(raw: str) -> object:
    """What `json_value` means: a JSON literal when it is one (42, true, "x", null), else the text."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return raw


@dataclass(frozen=True)
class RecordFilter:
    """Every condition given must hold; none given keeps every record."""

    key: bytes | None = None  # the key contains these bytes
    value: bytes | None = None  # the value contains these bytes
    json_path: tuple[str | int, ...] = ()  # the value is JSON with something at this path ...
    json_value: object = _MISSING  # ... equal to this (JSON equality), when given
    header: str | None = None  # a header of this name ...
    header_value: bytes | None = None  # ... with exactly this value, when given
    since_ms: int | None = None  # timestamp at or after
    until_ms: int | None = None  # timestamp before

    @property
    def any(self) -> bool:
        return self != RecordFilter()

    @property
    def reads_values(self) -> bool:
        """It looks into values or header values (which masking hides from viewers)."""
        return self.value is not None or bool(self.json_path) or self.header_value is not None

    def matches(self, record: KafkaRecord) -> bool:
        if self.since_ms is not None and (record.timestamp_ms is None or record.timestamp_ms < self.since_ms):
            return False
        if self.until_ms is not None and (
            record.timestamp_ms is None or record.timestamp_ms >= self.until_ms
        ):
            return False
        if self.key is not None and (record.key is None or self.key not in record.key):
            return False
        if self.value is not None and (record.value is None or self.value not in record.value):
            return False
        if self.header is not None and not any(
            name == self.header and (self.header_value is None or data == self.header_value)
            for name, data in record.headers
        ):
            return False
        if self.json_path:
            found = _MISSING if record.value is None else _json_at(_parsed(record.value), self.json_path)
            if found is _MISSING or (self.json_value is not _MISSING and found != self.json_value):
                return False
        return True


@dataclass(frozen=True)
class ScanRange:
    """Where a search reads one partition: from `start`, before `stop`, at most `budget` records."""

    partition: int
    start: int
    stop: int
    budget: int
    skipped: int = 0  # a live tail's records after its position left unread (more than its budget came)

    @property
    def empty(self) -> bool:
        return self.start >= self.stop or self.budget <= 0


def scan_ranges(
    partitions: Sequence[PartitionOffsets],
    *,
    max_scanned: int,
    since: Mapping[int, int] | None = None,
    until: Mapping[int, int] | None = None,
) -> list[ScanRange]:
    """Each partition's share of `max_scanned` records: from the offset of `since` (per partition, -1: no
    record that new) forward, else the newest records; before the offset of `until` (-1: the end)."""
    share = max(max_scanned // max(len(partitions), 1), 1)
    ranges = []
    for p in partitions:
        stop = p.end
        if until is not None and 0 <= until.get(p.partition, -1) < stop:
            stop = max(until[p.partition], p.earliest)
        if since is not None:
            found = since.get(p.partition, -1)
            start = stop if found < 0 else max(found, p.earliest)
        else:
            start = max(stop - share, p.earliest)
        ranges.append(ScanRange(p.partition, start, stop, share))
    return ranges


def tail_ranges(
    partitions: Sequence[PartitionOffsets], *, positions: Mapping[int, int] | None, max_scanned: int
) -> list[ScanRange]:
    """A live tail's next read: each partition from its position (the next offset the tail has not read)
    to the end; without positions (its first read), or for a partition it did not know, the end (nothing
    is read: the tail shows what comes). When more than a partition's share of `max_scanned` came, its
    newest share is read and the rest counted as skipped, so a tail stays bounded and current."""
    share = max(max_scanned // max(len(partitions), 1), 1)
    ranges = []
    for p in partitions:
        known = None if positions is None else positions.get(p.partition)
        start = p.end if known is None else min(max(known, p.earliest), p.end)
        skipped = max(p.end - start - share, 0)
        ranges.append(ScanRange(p.partition, start + skipped, p.end, share, skipped))
    return ranges
