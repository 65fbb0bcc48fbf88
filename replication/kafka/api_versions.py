"""The Kafka version a cluster runs, from the one request that tells: ApiVersions (v3, Kafka 2.4+), which
KRaft brokers answer with the `metadata.version` feature, the highest level their software supports and
the level the cluster is finalized at. confluent-kafka does not expose ApiVersions, so this sends it on a
socket of its own: only over PLAINTEXT and SASL_PLAINTEXT (ApiVersions comes before SASL authentication);
over TLS it is not read (`VersionUnread`).

`metadata.version` levels name a release and an IV (`4.1-IV1`); `METADATA_VERSIONS` holds the levels read
from Apache Kafka 4.1.1's `org.apache.kafka.server.common.MetadataVersion` (7 = 3.3-IV3 to 29 = 4.2-IV1);
a level outside it is shown as its number. A ZooKeeper-mode broker (before 4.0) reports no
`metadata.version`.
"""

from __future__ import annotations

import socket
import struct
from dataclasses import dataclass

from replication.config import ClusterConfig

API_VERSIONS_KEY, API_VERSIONS_VERSION = 18, 3
_CLIENT = b"mirrorplane"
METADATA_VERSION = "metadata.version"
METADATA_VERSIONS = {
    7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0", 13: "3.6-IV1",
    14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3", 19: "3.7-IV4", 20: "3.8-IV0",
    21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2", 25: "4.0-IV3", 26: "4.1-IV0", 27: "4.1-IV1",
    28: "4.2-IV0", 29: "4.2-IV1",
}  # fmt: skip
_READABLE_PROTOCOLS = ("PLAINTEXT", "SASL_PLAINTEXT")


class VersionUnread(RuntimeError):
    """Why the version was not read (a protocol this reader does not speak, a broker that did not answer
    or answered an error)."""


@dataclass(frozen=True)
class KafkaVersion:
    supported_level: int | None  # the highest metadata.version the brokers' software supports
    finalized_level: int | None  # the metadata.version the cluster runs at

    @staticmethod
    def name(level: int | None) -> str | None:
        return None if level is None else METADATA_VERSIONS.get(level, f"level {level}")

    @property
    def release(self) -> str | None:
        """The release line the software is (`4.1`), from its highest supported level."""
        name = METADATA_VERSIONS.get(self.supported_level or -1)
        return name.split("-", 1)[0] if name else None


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _compact_string(value: bytes) -> bytes:
    return _uvarint(len(value) + 1) + value


def api_versions_request(correlation_id: int) -> bytes:
    """An ApiVersions v3 request, framed (request header v2)."""
    header = struct.pack(">hhih", API_VERSIONS_KEY, API_VERSIONS_VERSION, correlation_id, len(_CLIENT))
    body = _CLIENT + b"\x00" + _compact_string(_CLIENT) + _compact_string(b"1") + b"\x00"
    payload = header + body
    return struct.pack(">i", len(payload)) + payload


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise VersionUnread("ApiVersions answer cut short")
        chunk, self.at = self.data[self.at : self.at + size], self.at + size
        return chunk

    def int16(self) -> int:
        return struct.unpack(">h", self.take(2))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def compact_string(self) -> str:
        return self.take(self.uvarint() - 1).decode("utf-8", errors="replace")

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def _features(reader: _Reader, *, max_first: bool) -> dict[str, int]:
    """A compact array of features: name, two levels (min then max, or max then min), tags."""
    features = {}
    for _ in range(reader.uvarint() - 1):
        name, first, second = reader.compact_string(), reader.int16(), reader.int16()
        reader.skip_tags()
        features[name] = first if max_first else second
    return features


def parse_api_versions(body: bytes) -> KafkaVersion:
    """The metadata.version levels of an ApiVersions v3 response body (after the correlation id)."""
    reader = _Reader(body)
    if error := reader.int16():
        raise VersionUnread(f"ApiVersions answered error code {error}")
    for _ in range(reader.uvarint() - 1):
        reader.take(6)
        reader.skip_tags()
    reader.take(4)  # throttle time
    supported = finalized = None
    for _ in range(reader.uvarint()):
        tag, size = reader.uvarint(), reader.uvarint()
        field = _Reader(reader.take(size))
        if tag == 0:  # SupportedFeatures: name, min_version, max_version
            supported = _features(field, max_first=False).get(METADATA_VERSION)
        elif tag == 2:  # FinalizedFeatures: name, max_version_level, min_version_level
            finalized = _features(field, max_first=True).get(METADATA_VERSION)
    return KafkaVersion(supported_level=supported, finalized_level=finalized)


def read_kafka_version(cluster: ClusterConfig, *, timeout_s: float) -> KafkaVersion:
    """Asks the first bootstrap server for its ApiVersions, within `timeout_s`."""
    protocol = str(cluster.client.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in _READABLE_PROTOCOLS:
        raise VersionUnread(
            f"not read over {protocol} (ApiVersions is asked over PLAINTEXT or SASL_PLAINTEXT)"
        )
    host, _, port = cluster.bootstrap_servers.split(",")[0].strip().rpartition("://")[2].rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s) as conn:
            conn.settimeout(timeout_s)
            conn.sendall(api_versions_request(correlation_id=1))
            size = struct.unpack(">i", _receive(conn, 4))[0]
            response = _receive(conn, size)
    except (OSError, ValueError, struct.error) as exc:
        raise VersionUnread(f"ApiVersions to {host}:{port} failed: {exc}") from exc
    return parse_api_versions(response[4:])


def _receive(conn: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = conn.recv(size - len(data))
        if not chunk:
            raise OSError("connection closed")
        data.extend(chunk)
    return bytes(data)
