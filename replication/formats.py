"""MM2's internal-topic record formats (Kafka protocol struct encoding, big-endian).

STRING = int16 length + UTF-8 bytes. Byte-compatible with MirrorMaker 2 so MM2 tooling can read what we
write and we can read what MM2 wrote. Every malformed input (truncated, a bad length or version, a string
that is not UTF-8) raises `RecordFormatError`, nothing else.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

VERSION = 0


class RecordFormatError(ValueError):
    pass


class KeyedRecord(Protocol):
    """What a reader of an internal topic reads of a record (confluent-kafka's `Message`, the in-memory
    cluster's record)."""

    def key(self) -> bytes | None: ...

    def value(self) -> bytes | None: ...


T = TypeVar("T")
R = TypeVar("R", bound=KeyedRecord)


def decode_records(
    records: Iterable[R], decode: Callable[[bytes, Any], T], *, tombstones: bool = False
) -> tuple[list[tuple[R, T]], list[tuple[R, Exception]]]:
    """The records of an MM2 internal topic with their decoded values, in order, and those that did not
    decode with the decoder's error: the reader skips and counts them, one malformed record does not stop the topic's
    reading, whatever its decoder raises for it. A tombstone holds nothing to apply and is skipped, or
    decoded with a None value when `tombstones` (a Connect offsets topic, where one resets a position)."""
    decoded: list[tuple[R, T]] = []
    malformed: list[tuple[R, Exception]] = []
    for record in records:
        value = record.value()
        if value is None and not tombstones:
            continue
        try:
            decoded.append((record, decode(record.key() or b"", value)))
        except Exception as exc:
            malformed.append((record, exc))
    return decoded, malformed


class _Reader:
    def __init__(self, data: bytes, what: str) -> None:
        self.data, self.pos, self.what = data, 0, what

    def take(self, fmt: str) -> int:
        size = struct.calcsize(fmt)
        if self.pos + size > len(self.data):
            raise RecordFormatError(f"{self.what}: truncated at byte {self.pos}")
        (value,) = struct.unpack_from(fmt, self.data, self.pos)
        self.pos += size
        return value

    def string(self) -> str:
        length = self.take(">h")
        if length < 0 or self.pos + length > len(self.data):
            raise RecordFormatError(f"{self.what}: bad string length {length} at byte {self.pos}")
        try:
            value = self.data[self.pos : self.pos + length].decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(
                f"{self.what}: string at byte {self.pos} is not UTF-8 ({exc.reason})"
            ) from exc
        self.pos += length
        return value

    def version(self) -> None:
        version = self.take(">h")
        if version != VERSION:
            raise RecordFormatError(f"{self.what}: unsupported version {version}")


def _string(value: str) -> bytes:
    encoded = value.encode("utf-8")
    return struct.pack(">h", len(encoded)) + encoded


@dataclass(frozen=True)
class OffsetSync:
    """A record of the offset-syncs topic: source offset `upstream_offset` is at `downstream_offset`."""

    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int

    def key(self) -> bytes:
        return _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">qq", self.upstream_offset, self.downstream_offset)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> OffsetSync:
        k, v = _Reader(key, "offset sync key"), _Reader(value, "offset sync value")
        return cls(k.string(), k.take(">i"), v.take(">q"), v.take(">q"))


@dataclass(frozen=True)
class Checkpoint:
    """`<source>.checkpoints.internal` on the target: a group's offset translated to the remote topic."""

    group: str
    topic: str
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""

    def key(self) -> bytes:
        return _string(self.group) + _string(self.topic) + struct.pack(">i", self.partition)

    def value(self) -> bytes:
        return struct.pack(">hqq", VERSION, self.upstream_offset, self.downstream_offset) + _string(
            self.metadata
        )

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Checkpoint:
        k, v = _Reader(key, "checkpoint key"), _Reader(value, "checkpoint value")
        group, topic, partition = k.string(), k.string(), k.take(">i")
        v.version()
        return cls(group, topic, partition, v.take(">q"), v.take(">q"), v.string())


@dataclass(frozen=True)
class Heartbeat:
    """`heartbeats` on the target of each flow."""

    source_cluster_alias: str
    target_cluster_alias: str
    timestamp_ms: int

    def key(self) -> bytes:
        return _string(self.source_cluster_alias) + _string(self.target_cluster_alias)

    def value(self) -> bytes:
        return struct.pack(">hq", VERSION, self.timestamp_ms)

    @classmethod
    def decode(cls, key: bytes, value: bytes) -> Heartbeat:
        k, v = _Reader(key, "heartbeat key"), _Reader(value, "heartbeat value")
        source, target = k.string(), k.string()
        v.version()
        return cls(source, target, v.take(">q"))
