"""Typed, immutable configuration for clusters and flows, with MirrorMaker 2's defaults.

`FLOW_PROPERTIES` is the one table of flow properties: the mm2.properties reader and writer, the
`validate` command and the control plane all derive from it, so a property is added in one place.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from replication.client_properties import not_applicable_reason
from replication.secrets import mask_secrets

DEFAULT_REPLICATION_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
IDENTITY_REPLICATION_POLICY = "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"

DEFAULT_TOPICS_EXCLUDE = (r".*[\-\.]internal", r".*\.replica", r"__.*")
DEFAULT_GROUPS_EXCLUDE = (r"console-consumer-.*", r"connect-.*", r"__.*")
DEFAULT_CONFIG_PROPERTIES_EXCLUDE = (
    "follower.replication.throttled.replicas",
    "leader.replication.throttled.replicas",
    "message.timestamp.difference.max.ms",
    "message.timestamp.type",
    "unclean.leader.election.enable",
    "min.insync.replicas",
)


class DeliveryGuarantee(StrEnum):
    AT_LEAST_ONCE = "at_least_once"
    EXACTLY_ONCE = "exactly_once"


class OffsetSyncsTopicLocation(StrEnum):
    SOURCE = "source"
    TARGET = "target"


class SchemaIdMode(StrEnum):
    """How a flow keeps the schema IDs of wire-format records right on the target (`replication.schemas`)."""

    NONE = "none"  # no schema sync: records are copied byte for byte, their IDs unchanged
    KEEP_IDS = "keep-ids"  # versions registered under their source IDs (the target subject in IMPORT mode)
    REWRITE_IDS = "rewrite-ids"  # versions registered where the target puts them; IDs rewritten in records


# A cluster's schema registry: its `schema.registry.*` properties (`A.schema.registry.url`,
# `A.schema.registry.basic.auth.user.info`, `A.schema.registry.bearer.auth.token`), kept with the cluster's
# client properties (and their secrets with its secrets) but never passed to a Kafka client.
SCHEMA_REGISTRY_PREFIX = "schema.registry."


class DataLossPolicy(StrEnum):
    """What a partition does when the next source offset no longer exists (retention, topic recreated)."""

    STOP = "stop"
    SKIP = "skip"


def _frozen_mapping(value: Mapping[str, str] | None) -> Mapping[str, str]:
    return MappingProxyType(dict(value or {}))


@dataclass(frozen=True)
class ClusterConfig:
    """One Kafka cluster as MM2 knows it: `<alias>.bootstrap.servers` plus client settings.

    `client` holds cluster-wide client properties (security.protocol, sasl.*, ssl.*, ...); `producer`,
    `consumer` and `admin` hold the `<alias>.producer.*` style overrides, without their prefix.
    """

    alias: str
    bootstrap_servers: str
    client: Mapping[str, str] = field(default_factory=dict)
    producer: Mapping[str, str] = field(default_factory=dict)
    consumer: Mapping[str, str] = field(default_factory=dict)
    admin: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("client", "producer", "consumer", "admin"):
            object.__setattr__(self, name, _frozen_mapping(getattr(self, name)))

    def __repr__(self) -> str:
        """Secrets (passwords, JAAS lines, keys) masked: a config may reach a log line or a traceback."""
        scopes = ", ".join(
            f"{name}={mask_secrets(getattr(self, name))!r}"
            for name in ("client", "producer", "consumer", "admin")
        )
        return f"ClusterConfig(alias={self.alias!r}, bootstrap_servers={self.bootstrap_servers!r}, {scopes})"

    def identity(self) -> tuple:
        """Every field, secrets included, as plain values: for change detection (hash it), never to show."""
        return (
            self.alias,
            self.bootstrap_servers,
            *(
                tuple(sorted(getattr(self, name).items()))
                for name in ("client", "producer", "consumer", "admin")
            ),
        )

    def client_properties(self, role: str) -> dict[str, str]:
        """librdkafka properties for a producer/consumer/admin client of this cluster.

        Cluster-wide Connect worker and MM2 connector properties (`not_applicable_reason`) are never
        passed to a client, however the config was built (the file reader and the services refuse or
        drop them already)."""
        overrides = {"producer": self.producer, "consumer": self.consumer, "admin": self.admin}[role]
        shared = {
            name: value
            for name, value in self.client.items()
            if not_applicable_reason(name) is None and not name.startswith(SCHEMA_REGISTRY_PREFIX)
        }
        return {"bootstrap.servers": self.bootstrap_servers, **shared, **overrides}

    def schema_registry(self) -> dict[str, str]:
        """The cluster's schema registry properties without their prefix (`url`, `basic.auth.user.info`,
        `bearer.auth.token`); empty when it has none."""
        return {
            name.removeprefix(SCHEMA_REGISTRY_PREFIX): value
            for name, value in self.client.items()
            if name.startswith(SCHEMA_REGISTRY_PREFIX)
        }


@dataclass(frozen=True)
class FlowConfig:
    """A replication flow `source->target` with every MM2 flow property (MM2's defaults)."""

    source: str
    target: str
    enabled: bool = False
    topics: tuple[str, ...] = (".*",)
    topics_exclude: tuple[str, ...] = DEFAULT_TOPICS_EXCLUDE
    groups: tuple[str, ...] = (".*",)
    groups_exclude: tuple[str, ...] = DEFAULT_GROUPS_EXCLUDE
    config_properties_exclude: tuple[str, ...] = DEFAULT_CONFIG_PROPERTIES_EXCLUDE
    replication_policy_class: str = DEFAULT_REPLICATION_POLICY
    replication_policy_separator: str = "."
    replication_policy_internal_topic_separator_enabled: bool = True
    replication_factor: int = 2
    refresh_topics_enabled: bool = True
    refresh_topics_interval_seconds: int = 600
    sync_topic_configs_enabled: bool = True
    sync_topic_configs_interval_seconds: int = 600
    sync_topic_acls_enabled: bool = True
    sync_topic_acls_interval_seconds: int = 600
    refresh_groups_enabled: bool = True
    refresh_groups_interval_seconds: int = 600
    emit_checkpoints_enabled: bool = True
    emit_checkpoints_interval_seconds: int = 60
    sync_group_offsets_enabled: bool = False
    sync_group_offsets_interval_seconds: int = 60
    emit_heartbeats_enabled: bool = True
    emit_heartbeats_interval_seconds: int = 1
    heartbeats_replication_enabled: bool = True
    offset_lag_max: int = 100
    offset_syncs_topic_location: OffsetSyncsTopicLocation = OffsetSyncsTopicLocation.SOURCE
    tasks_max: int = 1
    checkpoints_topic_replication_factor: int = 3
    heartbeats_topic_replication_factor: int = 3
    offset_syncs_topic_replication_factor: int = 3
    # Mirrorplane additions (documented in README "Beyond MM2").
    delivery_guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE
    # exactly_once writes in Kafka transactions (a zombie task is fenced, aborted writes are invisible to
    # read_committed consumers); false only for brokers whose transactions do not work (the embedded one).
    exactly_once_transactions: bool = True
    provenance_header_enabled: bool = False
    data_loss_policy: DataLossPolicy = DataLossPolicy.STOP
    schemas_sync_mode: SchemaIdMode = SchemaIdMode.NONE
    schemas_subjects: tuple[str, ...] = (".*",)
    schemas_subjects_exclude: tuple[str, ...] = ()
    schemas_sync_interval_seconds: int = 10
    # Flow-scoped client overrides (`A->B.producer.*`, `A->B.consumer.*`) and any property we pass through.
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "extra", _frozen_mapping(self.extra))

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"

    def replace(self, **changes: Any) -> FlowConfig:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class FlowProperty:
    """One row of MM2's flow property table: the properties-file name and the FlowConfig field."""

    name: str
    field: str
    kind: type
    deprecated_aliases: tuple[str, ...] = ()

    @property
    def default(self) -> Any:
        return FlowConfig.__dataclass_fields__[self.field].default


FLOW_PROPERTIES: tuple[FlowProperty, ...] = (
    FlowProperty("enabled", "enabled", bool),
    FlowProperty("topics", "topics", tuple),
    FlowProperty("topics.exclude", "topics_exclude", tuple, ("topics.blacklist",)),
    FlowProperty("groups", "groups", tuple),
    FlowProperty("groups.exclude", "groups_exclude", tuple, ("groups.blacklist",)),
    FlowProperty(
        "config.properties.exclude", "config_properties_exclude", tuple, ("config.properties.blacklist",)
    ),
    FlowProperty("replication.policy.class", "replication_policy_class", str),
    FlowProperty("replication.policy.separator", "replication_policy_separator", str),
    FlowProperty(
        "replication.policy.internal.topic.separator.enabled",
        "replication_policy_internal_topic_separator_enabled",
        bool,
    ),
    FlowProperty("replication.factor", "replication_factor", int),
    FlowProperty("refresh.topics.enabled", "refresh_topics_enabled", bool),
    FlowProperty("refresh.topics.interval.seconds", "refresh_topics_interval_seconds", int),
    FlowProperty("sync.topic.configs.enabled", "sync_topic_configs_enabled", bool),
    FlowProperty("sync.topic.configs.interval.seconds", "sync_topic_configs_interval_seconds", int),
    FlowProperty("sync.topic.acls.enabled", "sync_topic_acls_enabled", bool),
    FlowProperty("sync.topic.acls.interval.seconds", "sync_topic_acls_interval_seconds", int),
    FlowProperty("refresh.groups.enabled", "refresh_groups_enabled", bool),
    FlowProperty("refresh.groups.interval.seconds", "refresh_groups_interval_seconds", int),
    FlowProperty("emit.checkpoints.enabled", "emit_checkpoints_enabled", bool),
    FlowProperty("emit.checkpoints.interval.seconds", "emit_checkpoints_interval_seconds", int),
    FlowProperty("sync.group.offsets.enabled", "sync_group_offsets_enabled", bool),
    FlowProperty("sync.group.offsets.interval.seconds", "sync_group_offsets_interval_seconds", int),
    FlowProperty("emit.heartbeats.enabled", "emit_heartbeats_enabled", bool),
    FlowProperty("emit.heartbeats.interval.seconds", "emit_heartbeats_interval_seconds", int),
    FlowProperty("heartbeats.replication.enabled", "heartbeats_replication_enabled", bool),
    FlowProperty("offset.lag.max", "offset_lag_max", int),
    FlowProperty("offset-syncs.topic.location", "offset_syncs_topic_location", OffsetSyncsTopicLocation),
    FlowProperty("tasks.max", "tasks_max", int),
    FlowProperty("checkpoints.topic.replication.factor", "checkpoints_topic_replication_factor", int),
    FlowProperty("heartbeats.topic.replication.factor", "heartbeats_topic_replication_factor", int),
    FlowProperty("offset-syncs.topic.replication.factor", "offset_syncs_topic_replication_factor", int),
    FlowProperty("delivery.guarantee", "delivery_guarantee", DeliveryGuarantee),
    FlowProperty("exactly.once.transactions", "exactly_once_transactions", bool),
    FlowProperty("provenance.header.enabled", "provenance_header_enabled", bool),
    FlowProperty("data.loss.policy", "data_loss_policy", DataLossPolicy),
    FlowProperty("schemas.sync.mode", "schemas_sync_mode", SchemaIdMode),
    FlowProperty("schemas.subjects", "schemas_subjects", tuple),
    FlowProperty("schemas.subjects.exclude", "schemas_subjects_exclude", tuple),
    FlowProperty("schemas.sync.interval.seconds", "schemas_sync_interval_seconds", int),
)

FLOW_PROPERTIES_BY_NAME: Mapping[str, FlowProperty] = MappingProxyType(
    {prop.name: prop for prop in FLOW_PROPERTIES}
)


@dataclass(frozen=True)
class Mm2Config:
    """Everything an mm2.properties file describes: the clusters and every flow between them.

    `flow_defaults` holds the top-level flow settings (FlowConfig field -> value): the settings of every
    pair of clusters no `A->B.*` key mentions, which MM2 still runs heartbeats for (`pair`).
    """

    clusters: tuple[ClusterConfig, ...]
    flows: tuple[FlowConfig, ...]
    flow_defaults: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "flow_defaults", MappingProxyType(dict(self.flow_defaults)))

    def cluster(self, alias: str) -> ClusterConfig:
        for cluster in self.clusters:
            if cluster.alias == alias:
                return cluster
        raise KeyError(f"unknown cluster alias {alias!r}; known: {', '.join(self.aliases)}")

    @property
    def aliases(self) -> tuple[str, ...]:
        return tuple(cluster.alias for cluster in self.clusters)

    def enabled_flows(self, targets: tuple[str, ...] | None = None) -> tuple[FlowConfig, ...]:
        return tuple(flow for flow in self.flows if flow.enabled and (not targets or flow.target in targets))

    def pair(self, source: str, target: str) -> FlowConfig:
        """The flow `source->target` as configured, or the top-level settings when no key mentions it."""
        for flow in self.flows:
            if (flow.source, flow.target) == (source, target):
                return flow
        return FlowConfig(source=source, target=target, **self.flow_defaults)

    def heartbeat_pairs(self, targets: tuple[str, ...] | None = None) -> tuple[FlowConfig, ...]:
        """Every ordered pair of clusters (targeting `targets`, or all) that emits heartbeats, enabled or
        not: MM2's dedicated mode runs a MirrorHeartbeatConnector for each pair unless
        `emit.heartbeats.enabled = false`, so that for a flow A->B the pair B->A writes heartbeats on A that
        A->B replicates to B, where `upstream_clusters` and `replication_hops` find A."""
        pairs = (
            self.pair(source, target)
            for target in self.aliases
            for source in self.aliases
            if source != target and (not targets or target in targets)
        )
        return tuple(flow for flow in pairs if flow.emit_heartbeats_enabled)


def offset_syncs_cluster(flow: FlowConfig, *, source: ClusterConfig, target: ClusterConfig) -> ClusterConfig:
    """Where `offset-syncs.topic.location` puts the flow's offset-syncs topic."""
    return target if flow.offset_syncs_topic_location == OffsetSyncsTopicLocation.TARGET else source
