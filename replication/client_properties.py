"""Client properties of an MM2 file, judged before any client is built: pure, no Kafka.

- `not_applicable_reason`: Kafka Connect worker properties and MM2 connector plumbing that MM2 files carry
  (`status.storage.replication.factor`, `key.converter`, `forwarding.admin.class`, ...). They are accepted,
  reported as not applicable, and never passed to a librdkafka client (which refuses unknown names).
- `client_property_problem`: the enumerated client properties (`security.protocol`, `sasl.mechanism`,
  `acks`, ...) checked against the values Kafka's Java clients accept and librdkafka supports, so a typo
  fails `validate` and the import, not the first client built by a worker.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

# Kafka Connect worker properties (WorkerConfig, DistributedConfig, MirrorMakerConfig's dedicated mode).
CONNECT_WORKER_PROPERTIES = frozenset(
    {
        "group.id",
        "key.converter",
        "value.converter",
        "header.converter",
        "internal.key.converter",
        "internal.value.converter",
        "config.storage.topic",
        "config.storage.replication.factor",
        "offset.storage.topic",
        "offset.storage.replication.factor",
        "offset.storage.partitions",
        "offset.storage.file.filename",
        "status.storage.topic",
        "status.storage.replication.factor",
        "status.storage.partitions",
        "offset.flush.interval.ms",
        "offset.flush.timeout.ms",
        "task.shutdown.graceful.timeout.ms",
        "plugin.path",
        "plugin.discovery",
        "listeners",
        "admin.listeners",
        "rest.host.name",
        "rest.port",
        "rest.advertised.host.name",
        "rest.advertised.port",
        "rest.advertised.listener",
        "rest.extension.classes",
        "access.control.allow.origin",
        "access.control.allow.methods",
        "response.http.headers.config",
        "connector.client.config.override.policy",
        "exactly.once.source.support",
        "worker.sync.timeout.ms",
        "worker.unsync.backoff.ms",
        "scheduled.rebalance.max.delay.ms",
        "connect.protocol",
        "topic.creation.enable",
        "topic.tracking.enable",
        "topic.tracking.allow.reset",
        "task.assignor.class",
        "dedicated.mode.enable.internal.rest",
    }
)
CONNECT_WORKER_PREFIXES = (
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "inter.worker.",
    "listeners.https.",
    "admin.listeners.https.",
)
# MirrorConnectorConfig plumbing: Java classes and switches with no counterpart here.
MM2_CONNECTOR_PLUMBING = frozenset(
    {
        "forwarding.admin.class",
        "topic.filter.class",
        "group.filter.class",
        "config.property.filter.class",
        "use.incremental.alter.configs",
        "admin.timeout.ms",
        "connector.class",
        "source.cluster.alias",
        "target.cluster.alias",
        "exactly.once.support",
        "transaction.boundary",
    }
)


def not_applicable_reason(name: str) -> str | None:
    """Why property `name` (without its cluster or flow scope) does not apply here; None if it may."""
    if name in CONNECT_WORKER_PROPERTIES or name.startswith(CONNECT_WORKER_PREFIXES):
        return "a Kafka Connect worker property, not applicable (Mirrorplane runs no Connect workers)"
    if name in MM2_CONNECTOR_PLUMBING:
        return "an MM2 connector setting with no counterpart in Mirrorplane, not applicable"
    return None


@dataclass(frozen=True)
class _Choice:
    values: tuple[str, ...]
    case_sensitive: bool = False

    def accepts(self, value: str) -> bool:
        if self.case_sensitive:
            return value in self.values
        return value.lower() in (allowed.lower() for allowed in self.values)


# Values Kafka's Java clients accept, limited to what librdkafka supports (AWS_MSK_IAM, a Java-only
# callback, is not; librdkafka's own aliases such as auto.offset.reset=smallest are accepted too).
ENUMERATED_CLIENT_PROPERTIES: Mapping[str, _Choice] = {
    "security.protocol": _Choice(("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    "sasl.mechanism": _Choice(("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI"), True),
    "acks": _Choice(("all", "-1", "0", "1")),
    "compression.type": _Choice(("none", "gzip", "snappy", "lz4", "zstd")),
    "isolation.level": _Choice(("read_committed", "read_uncommitted")),
    "auto.offset.reset": _Choice(("earliest", "latest", "none", "smallest", "largest", "error")),
    "ssl.endpoint.identification.algorithm": _Choice(("https", "", "none")),
    "client.dns.lookup": _Choice(("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
}


def client_property_problem(name: str, value: str, *, shown: str | None = None) -> tuple[str, str] | None:
    """(reason, fix) when `value` is not a value client property `name` takes; None when it is. The
    reason quotes `shown` instead of the value when given: a secret's value is never repeated."""
    choice = ENUMERATED_CLIENT_PROPERTIES.get(name)
    if choice is None or choice.accepts(value):
        return None
    allowed_values = ", ".join(allowed or repr(allowed) for allowed in choice.values)
    return (
        f"'{value if shown is None else shown}' is not a valid {name}",
        f"set {name} to one of {allowed_values}" + (" (exactly as written)" if choice.case_sensitive else ""),
    )
