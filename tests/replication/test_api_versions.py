"""The Kafka version from ApiVersions: the request's bytes, a response's metadata.version levels (pure),
and what a real broker of the suite answers."""

from __future__ import annotations

import struct

import pytest

from replication.kafka.apache import kafka_version
from replication.kafka.api_versions import (
    METADATA_VERSIONS,
    KafkaVersion,
    VersionUnread,
    api_versions_request,
    parse_api_versions,
    read_kafka_version,
)


def _feature(name: bytes, first: int, second: int) -> bytes:
    return bytes([len(name) + 1]) + name + struct.pack(">hh", first, second) + b"\x00"


def _response(*, error: int = 0, supported: tuple[int, int] = (7, 27), finalized: tuple[int, int] = (27, 27)):
    api_keys = bytes([2]) + struct.pack(">hhh", 18, 0, 4) + b"\x00"
    tags = [
        (0, bytes([2]) + _feature(b"metadata.version", *supported)),  # min, max
        (1, struct.pack(">q", 5)),
        (2, bytes([2]) + _feature(b"metadata.version", *finalized)),  # max, min
    ]
    tagged = bytes([len(tags)]) + b"".join(bytes([tag, len(data)]) + data for tag, data in tags)
    return struct.pack(">h", error) + api_keys + struct.pack(">i", 0) + tagged


def test_the_request_is_api_versions_v3_framed():
    request = api_versions_request(correlation_id=7)
    size, key, version, correlation = struct.unpack(">ihhi", request[:12])
    assert (size, key, version, correlation) == (len(request) - 4, 18, 3, 7)


def test_a_response_names_the_supported_and_finalized_metadata_version():
    version = parse_api_versions(_response(supported=(7, 27), finalized=(25, 20)))
    assert version == KafkaVersion(supported_level=27, finalized_level=25)
    assert (version.release, version.name(version.finalized_level)) == ("4.1", "4.0-IV3")
    assert KafkaVersion(supported_level=99, finalized_level=None).release is None
    assert KafkaVersion.name(99) == "level 99"
    with pytest.raises(VersionUnread, match="error code 35"):
        parse_api_versions(_response(error=35))
    with pytest.raises(VersionUnread, match="cut short"):
        parse_api_versions(_response()[:-3])


@pytest.mark.kafka
def test_a_broker_of_the_suite_says_its_release(cluster_a, kafka_brokers):
    if not hasattr(kafka_brokers["A"], "cluster_id"):
        pytest.skip("the embedded broker answers no metadata.version")
    version = read_kafka_version(cluster_a, timeout_s=10)
    assert version.release == ".".join(kafka_version().split(".")[:2])
    assert METADATA_VERSIONS[version.supported_level].startswith(version.release)
    assert version.finalized_level is not None
