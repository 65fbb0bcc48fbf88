"""What a person browsing a topic sees: records rendered as text, JSON or hex, values masked by topic
pattern, and a source record beside its copy on the target, equal or not.

Pure: no I/O. The reads are `replication.kafka.browser`'s; the copy's offset comes from the offset syncs
(`OffsetSyncStore`), the same exact translation failover and checkpoints use.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from replication.java_regex import PatternError, compile_java_regex
from replication.offset_sync_store import OffsetSyncStore
from replication.schemas.decoding import Decoded
from replication.task_io import SourceRecord
from replication.verification import MirroredRecord, as_copied, record_differences, record_digest

# Bytes of a key, value or header shown at most (the rest is cut, with the full size said).
SHOWN_BYTES = 4096


class ValueFormat(StrEnum):
    AUTO = "auto"  # JSON when it parses, else text when it is UTF-8, else hex
    TEXT = "text"
    JSON = "json"
    HEX = "hex"


@dataclass(frozen=True)
class PartitionOffsets:
    partition: int
    earliest: int  # the log start offset
    end: int  # the high watermark: the offset the next record gets, as a fetch finds it
    # What the broker's ListOffsets answered when it was below `end` (None: it answered `end`): such a
    # broker's offset answers cannot be trusted (the embedded demo broker's).
    listed_end: int | None = None

    @property
    def records(self) -> int:
        return max(self.end - self.earliest, 0)


@dataclass(frozen=True)
class KafkaRecord:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    log_append_time: bool = False  # the broker stamped it: not the source's timestamp

    def as_mirrored(self) -> MirroredRecord:
        """The record as the verifier compares it (a CreateTime timestamp only)."""
        return MirroredRecord(
            offset=self.offset,
            key=self.key,
            value=self.value,
            headers=self.headers,
            timestamp_ms=None if self.log_append_time else self.timestamp_ms,
        )


CREATE_TIME, LOG_APPEND_TIME = 1, 2  # a record's timestamp type: its producer's, or the broker's


def record_of(message: SourceRecord) -> KafkaRecord:
    """A fetched record (confluent-kafka's `Message` or the in-memory cluster's) as a page shows it."""
    kind, stamp = message.timestamp()
    offset = message.offset()
    assert offset is not None  # a record (no error) has its offset
    return KafkaRecord(
        topic=message.topic() or "",
        partition=message.partition() or 0,
        offset=offset,
        timestamp_ms=stamp if kind and stamp >= 0 else None,
        key=message.key(),
        value=message.value(),
        headers=tuple((name, value) for name, value in (message.headers() or [])),
        log_append_time=kind == LOG_APPEND_TIME,
    )


def mirrored_record(message: SourceRecord) -> MirroredRecord:
    """A fetched record as compared (verification, drills): a CreateTime timestamp only."""
    kind, timestamp = message.timestamp()
    key, value, headers = message.key(), message.value(), tuple(message.headers() or ())
    size = len(key or b"") + len(value or b"") + sum(len(n) + len(v or b"") for n, v in headers)
    offset = message.offset()
    assert offset is not None  # a record (no error) has its offset
    return MirroredRecord(
        offset=offset,
        key=key,
        value=value,
        headers=headers,
        timestamp_ms=timestamp if kind == CREATE_TIME else None,
        size=size,
    )


@dataclass(frozen=True)
class Rendered:
    """Bytes as shown: `text` in `format`; `size` the real length (None: a null); `truncated` when cut."""

    text: str
    format: str
    size: int | None
    truncated: bool = False
    masked: bool = False
    note: str = ""

    @property
    def is_null(self) -> bool:
        return self.size is None

    def to_dict(self) -> dict:
        return {
            "text": self.text,
            "format": self.format,
            "size": self.size,
            "truncated": self.truncated,
            "masked": self.masked,
            "note": self.note,
        }


def _hex(data: bytes) -> str:
    return " ".join(f"{byte:02x}" for byte in data)


def _utf8(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    printable = all(ch.isprintable() or ch in "\t\r\n" for ch in text)
    return text if printable else None


def _json(text: str | None) -> str | None:
    if text is None or not text.strip() or text.strip()[0] not in '{["-0123456789tfn':
        return None
    try:
        return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
    except (ValueError, RecursionError):  # a producer may nest JSON deeper than the parser recurses
        return None


def render_bytes(data: bytes | None, fmt: ValueFormat = ValueFormat.AUTO) -> Rendered:
    """`data` as a person reads it in `fmt`; when it cannot be shown that way, hex with a note saying why."""
    if data is None:
        return Rendered(text="null", format="null", size=None)
    shown, truncated = data[:SHOWN_BYTES], len(data) > SHOWN_BYTES
    text = _utf8(shown)
    if fmt is ValueFormat.HEX:
        return Rendered(_hex(shown), "hex", len(data), truncated)
    if fmt in (ValueFormat.AUTO, ValueFormat.JSON):
        pretty = None if truncated else _json(text)
        if pretty is not None:
            return Rendered(pretty, "json", len(data))
        if fmt is ValueFormat.JSON:
            reason = "cut at 4096 bytes" if truncated else "not valid JSON"
            if text is not None:
                return Rendered(text, "text", len(data), truncated, note=f"{reason}: shown as text")
            return Rendered(_hex(shown), "hex", len(data), truncated, note=f"{reason}: shown as hex")
    if text is not None:
        return Rendered(text, "text", len(data), truncated)
    note = "" if fmt is ValueFormat.AUTO else "not UTF-8 text: shown as hex"
    return Rendered(_hex(shown), "hex", len(data), truncated, note=note)


def render_decoded(
    data: bytes | None, decoded: Decoded | None, fmt: ValueFormat = ValueFormat.AUTO
) -> Rendered:
    """`data` shown with its schema when it is in the wire format and `fmt` is auto: the decoded JSON (cut
    at SHOWN_BYTES characters), or the bytes as `render_bytes` shows them with why it did not decode."""
    rendered = render_bytes(data, fmt)
    if data is None or decoded is None or decoded.schema_id is None or fmt is not ValueFormat.AUTO:
        return rendered
    if decoded.problem:
        return replace(rendered, note=decoded.problem)
    text, truncated = decoded.text[:SHOWN_BYTES], len(decoded.text) > SHOWN_BYTES
    return Rendered(text, decoded.format, len(data), truncated, note=f"schema ID {decoded.schema_id}")


def masked_bytes(data: bytes | None) -> Rendered:
    if data is None:
        return Rendered(text="null", format="null", size=None)
    return Rendered(text=f"masked ({len(data)} bytes)", format="masked", size=len(data), masked=True)


class MaskPatterns:
    """Topics whose values are masked for viewers: Java regexes as MM2's filters read them (the same
    linear-time matcher), each matched against the whole name. A pattern that does not compile masks every
    topic (fail closed) and is reported by `errors`."""

    def __init__(self, patterns: Sequence[str]) -> None:
        self.patterns = tuple(p.strip() for p in patterns if p.strip())
        self.errors: list[str] = []
        compiled = []
        for pattern in self.patterns:
            try:
                compiled.append(compile_java_regex(pattern, property_name="MIRRORPLANE_BROWSE_MASKED_TOPICS"))
            except PatternError as exc:
                self.errors.append(str(exc))
        self._compiled = tuple(compiled)

    def masks(self, topic: str) -> bool:
        return bool(self.errors) or any(pattern.fullmatch(topic) for pattern in self._compiled)


# -- the copy on the target -------------------------------------------------------------------------------
class CopyState(StrEnum):
    EQUAL = "equal"  # the copy has the same key, value, headers and timestamp
    DIFFERENT = "different"  # a record sits at the translated offset, with other contents
    MISSING = "missing"  # the translated offset holds no record (deleted by retention, or never written)
    NOT_REPLICATED = "not_replicated"  # no offset sync covers this record yet: not (provably) copied
    UNTRANSLATABLE = "untranslatable"  # older than the oldest offset sync known


def copy_offset(
    store: OffsetSyncStore, topic: str, partition: int, offset: int
) -> tuple[int | None, CopyState | None]:
    """Where the copy of source record `offset` sits on the target, exactly, from the offset syncs:
    (offset, None), or (None, why not)."""
    newest = store.newest_sync(topic, partition)
    if newest is None or offset > newest.upstream_offset:
        return None, CopyState.NOT_REPLICATED
    translated = store.translate_downstream(topic, partition, offset)
    if translated is None:
        return None, CopyState.UNTRANSLATABLE
    return translated, None


def differences(
    source: KafkaRecord, copy: KafkaRecord, *, schema_ids: Mapping[int, int] | None = None
) -> tuple[str, ...]:
    """The fields in which the copy differs from the source record, by the verifier's one rule of the
    same record (`replication.verification.record_differences`): Mirrorplane's own headers (provenance,
    source offset) are not the record's, a broker-stamped timestamp is not the source's, and a schema ID a
    `rewrite-ids` flow rewrote (`schema_ids`, `as_copied`) is not a difference."""
    return record_differences(as_copied(source.as_mirrored(), schema_ids), copy.as_mirrored())


@dataclass(frozen=True)
class RecordCopy:
    """A source record, where its copy should be, and what is there."""

    source: KafkaRecord
    target_offset: int | None
    copy: KafkaRecord | None
    state: CopyState
    differences: tuple[str, ...] = ()
    located_by: str = "offset_sync"  # or "content": found reading forward from the newest sync


# Records past the newest offset sync have no translation yet (a mirror emits a sync every offset.lag.max
# records or so): their copies are found by reading the target forward from the newest sync, in order, by
# content. At most this many target records are read past it.
FORWARD_RECORDS = 2000


def _after_newest_sync(store: OffsetSyncStore, records: Sequence[KafkaRecord]) -> list[KafkaRecord]:
    after = []
    for record in records:
        newest = store.newest_sync(record.topic, record.partition)
        if newest is not None and record.offset > newest.upstream_offset:
            after.append(record)
    return after


def locate_forward(
    source_records: Sequence[KafkaRecord],
    target_records: Sequence[KafkaRecord],
    *,
    schema_ids: Mapping[int, int] | None = None,
) -> dict[int, KafkaRecord]:
    """Source offset -> its copy among `target_records` (those past the newest sync's downstream offset),
    matched in order by content (key, value, headers without ours): a mirror writes a partition's records
    in order, so each copy follows the previous one's; repeated identical records pair up in turn. A
    source record with no copy there (not replicated yet, or changed) is left out."""
    digests = [record_digest(record.as_mirrored()) for record in target_records]
    found: dict[int, KafkaRecord] = {}
    cursor = 0
    for record in sorted(source_records, key=lambda r: r.offset):
        digest = record_digest(as_copied(record.as_mirrored(), schema_ids))
        at = next((i for i in range(cursor, len(digests)) if digests[i] == digest), None)
        if at is not None:
            found[record.offset] = target_records[at]
            cursor = at + 1
    return found


def compare_copies(
    *,
    store: OffsetSyncStore,
    source_records: Sequence[KafkaRecord],
    target_records: Sequence[KafkaRecord],
    schema_ids: Mapping[int, int] | None = None,
) -> list[RecordCopy]:
    """Each source record beside the target record at its translated offset (source topic and partition
    as the syncs name them; the target records are those of the remote partition); records past the newest
    sync beside the copy found reading forward from it (`locate_forward`). `schema_ids`: a `rewrite-ids`
    flow's source -> target schema IDs."""
    by_offset = {record.offset: record for record in target_records}
    after = _after_newest_sync(store, source_records)
    located: dict[int, KafkaRecord] = {}
    if after:
        newest = store.newest_sync(after[0].topic, after[0].partition)
        assert newest is not None  # `after` holds only records past a sync
        forward = [r for r in target_records if r.offset > newest.downstream_offset]
        located = locate_forward(after, forward, schema_ids=schema_ids)
    result = []
    for record in source_records:
        if record.offset in located:
            result.append(_paired(record, located[record.offset], "content", schema_ids))
            continue
        target_offset, why_not = copy_offset(store, record.topic, record.partition, record.offset)
        if target_offset is None:
            result.append(RecordCopy(record, None, None, why_not or CopyState.NOT_REPLICATED))
            continue
        copy = by_offset.get(target_offset)
        if copy is None:
            result.append(RecordCopy(record, target_offset, None, CopyState.MISSING))
            continue
        result.append(_paired(record, copy, "offset_sync", schema_ids))
    return result


def _paired(
    record: KafkaRecord, copy: KafkaRecord, located_by: str, schema_ids: Mapping[int, int] | None
) -> RecordCopy:
    changed = differences(record, copy, schema_ids=schema_ids)
    state = CopyState.DIFFERENT if changed else CopyState.EQUAL
    return RecordCopy(record, copy.offset, copy, state, changed, located_by=located_by)


@dataclass(frozen=True)
class TargetRead:
    """The target records a side-by-side page reads: from offset `first`, at most `records`, before
    `stop_before` (None: forward past the newest offset sync, up to `records`)."""

    first: int
    records: int
    stop_before: int | None


def target_read(store: OffsetSyncStore, source_records: Sequence[KafkaRecord]) -> TargetRead | None:
    """What to read of the target for `source_records`: the offsets their copies occupy by the offset
    syncs, and past the newest sync enough to find the copies of the records after it (None: nothing)."""
    offsets = [
        offset
        for record in source_records
        if (offset := copy_offset(store, record.topic, record.partition, record.offset)[0]) is not None
    ]
    after = _after_newest_sync(store, source_records)
    if not after:
        return (
            TargetRead(min(offsets), max(offsets) - min(offsets) + 1, max(offsets) + 1) if offsets else None
        )
    newest = store.newest_sync(after[0].topic, after[0].partition)
    assert newest is not None
    first = min(offsets, default=newest.downstream_offset + 1)
    ahead = min(max(r.offset for r in after) - newest.upstream_offset, FORWARD_RECORDS)
    return TargetRead(first, newest.downstream_offset + 1 - first + ahead, None)
