"""What a Strimzi `KafkaMirrorMaker2` resource is made of, for its reading and its writing: its kind
and API version, the connectors a mirror lists, the SASL types Strimzi's authentication names."""

from __future__ import annotations

import re

API_VERSION = "kafka.strimzi.io/v1beta2"
KIND = "KafkaMirrorMaker2"
# At the top level, or as an item of a `kind: List` (what `kubectl get kafkamirrormaker2 -o yaml` prints).
_RESOURCE = re.compile(
    rf"^[ \t-]*(kind:\s*['\"]?{KIND}['\"]?|apiVersion:\s*['\"]?kafka\.strimzi\.io/)", re.MULTILINE
)
# authentication.type -> (sasl.mechanism, the JAAS login module)
SASL_LOGIN_MODULES = {
    "scram-sha-256": ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    "scram-sha-512": ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    "plain": ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
}
CONNECTORS = ("sourceConnector", "checkpointConnector", "heartbeatConnector")


def is_strimzi_resource(text: str) -> bool:
    """Whether `text` is a Strimzi resource (YAML naming `kind: KafkaMirrorMaker2` or a kafka.strimzi.io
    apiVersion, at the top level or in a List's items) rather than an mm2.properties."""
    return _RESOURCE.search(text) is not None
