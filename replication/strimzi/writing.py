"""Writing a configuration as KafkaMirrorMaker2 resources (v1beta2): one per target cluster, whose
reading (`replication.strimzi.reading`) gives back the same clusters and flows; secrets are never
written, only references to Secrets the header lists."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import yaml

from replication.config import FLOW_PROPERTIES, ClusterConfig, FlowConfig, Mm2Config
from replication.flow_rules import CLIENT_ROLES
from replication.jaas import jaas_options
from replication.mm2file_writing import format_flow_value
from replication.secrets import MASK, is_secret_property
from replication.strimzi.resource import API_VERSION, CONNECTORS, KIND, SASL_LOGIN_MODULES

_CHECKPOINT_PROPERTIES = frozenset(
    {
        "emit.checkpoints.interval.seconds",
        "sync.group.offsets.enabled",
        "sync.group.offsets.interval.seconds",
        "refresh.groups.enabled",
        "refresh.groups.interval.seconds",
        "checkpoints.topic.replication.factor",
    }
)
_HEARTBEAT_PROPERTIES = frozenset({"emit.heartbeats.interval.seconds", "heartbeats.topic.replication.factor"})
_EVERY_CONNECTOR = frozenset(
    {
        "replication.policy.class",
        "replication.policy.separator",
        "replication.policy.internal.topic.separator.enabled",
        "offset-syncs.topic.location",
    }
)
# Written as mirror fields or as which connectors are listed.
_MIRROR_OWNED = frozenset(
    {
        "enabled",
        "topics",
        "topics.exclude",
        "groups",
        "groups.exclude",
        "tasks.max",
        "emit.checkpoints.enabled",
        "emit.heartbeats.enabled",
    }
)


@dataclass
class _SecretKeys:
    """The Secrets a written resource refers to: name -> key -> what it holds."""

    keys: dict[str, dict[str, str]]

    def refer(self, secret: str, key: str, holds: str) -> None:
        self.keys.setdefault(secret, {})[key] = holds


def _secret_name(prefix: str, alias: str) -> str:
    return re.sub(r"[^a-z0-9-]+", "-", f"{prefix}-{alias}".lower()).strip("-")


_TLS_MATERIAL = frozenset({"ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem"})


def _cluster_spec(
    cluster: ClusterConfig,
    *,
    prefix: str,
    secrets: _SecretKeys,
    omitted: list[str],
    secret_properties: frozenset[tuple[str, str]],
    usernames: bool,
) -> dict:
    client = dict(cluster.client)
    protocol = client.pop("security.protocol", "PLAINTEXT").upper()
    mechanism = client.pop("sasl.mechanism", "").upper()
    ca, certificate, key = (
        client.pop(name, None) for name in ("ssl.ca.pem", "ssl.certificate.pem", "ssl.key.pem")
    )
    jaas, username = client.pop("sasl.jaas.config", ""), client.pop("sasl.username", None)
    client.pop("sasl.password", None)
    secret = _secret_name(prefix, cluster.alias)
    spec: dict[str, Any] = {"alias": cluster.alias, "bootstrapServers": cluster.bootstrap_servers}
    if protocol.endswith("SSL"):
        spec["tls"] = {}
        if ca is not None:
            spec["tls"]["trustedCertificates"] = [{"secretName": secret, "certificate": "ca.crt"}]
            secrets.refer(secret, "ca.crt", f"{cluster.alias}'s CA certificates (PEM)")
    elif ca is not None:
        omitted.append(f"{cluster.alias}.ssl.ca.pem (security.protocol {protocol} uses no TLS)")
    kind = next((kind for kind, (name, _) in SASL_LOGIN_MODULES.items() if name == mechanism), None)
    username = jaas_options(jaas).get("username", username)
    if protocol.startswith("SASL") and kind is not None and username is not None:
        if not usernames:
            username = MASK
            omitted.append(f"{cluster.alias}'s SASL username (a credential: operators and admins export it)")
        spec["authentication"] = {
            "type": kind,
            "username": username,
            "passwordSecret": {"secretName": secret, "password": "password"},
        }
        secrets.refer(secret, "password", f"{cluster.alias}'s SASL password for {username}")
    elif protocol.startswith("SASL"):
        omitted.append(
            f"{cluster.alias}: SASL {mechanism or '(no mechanism)'} (set spec.clusters[].authentication)"
        )
    elif certificate is not None and key is not None and "tls" in spec:
        spec["authentication"] = {
            "type": "tls",
            "certificateAndKey": {"secretName": secret, "certificate": "user.crt", "key": "user.key"},
        }
        secrets.refer(secret, "user.crt", f"{cluster.alias}'s client certificate (PEM)")
        secrets.refer(secret, "user.key", f"{cluster.alias}'s client key (PEM)")
    if (certificate is not None or key is not None) and spec.get("authentication", {}).get("type") != "tls":
        omitted.append(
            f"{cluster.alias}: the TLS client certificate and key (a cluster authenticates one way)"
        )
    config = dict(client)
    scopes = {name: ("client", name) for name in client}
    for role in CLIENT_ROLES:
        config |= {f"{role}.{name}": value for name, value in getattr(cluster, role).items()}
        scopes |= {f"{role}.{name}": (role, name) for name in getattr(cluster, role)}
    for name in sorted(config):
        if (
            is_secret_property(name)
            or scopes[name] in secret_properties
            or name.partition(".")[2] in _TLS_MATERIAL
        ):
            omitted.append(
                f"{cluster.alias}.{name} (a secret: set it in the Connect cluster's config providers)"
            )
            del config[name]
    if config:
        spec["config"] = dict(sorted(config.items()))
    return spec


def _config_value(flow: FlowConfig, name: str) -> Any:
    prop = next(prop for prop in FLOW_PROPERTIES if prop.name == name)
    value = getattr(flow, prop.field)
    return value if prop.kind is int else format_flow_value(prop, value, flow=flow.name)


def _mirror_spec(flow: FlowConfig) -> dict:
    changed = [
        prop.name
        for prop in FLOW_PROPERTIES
        if prop.name not in _MIRROR_OWNED and getattr(flow, prop.field) != prop.default
    ]
    listed = {
        "checkpointConnector": flow.emit_checkpoints_enabled,
        "heartbeatConnector": flow.emit_heartbeats_enabled,
    }

    def connector_of(name: str) -> str:
        if name in _CHECKPOINT_PROPERTIES and listed["checkpointConnector"]:
            return "checkpointConnector"
        if name in _HEARTBEAT_PROPERTIES and listed["heartbeatConnector"]:
            return "heartbeatConnector"
        return "sourceConnector"

    configs: dict[str, dict[str, Any]] = {name: {} for name in CONNECTORS}
    for name in changed:
        holders = (
            [c for c in CONNECTORS if c == "sourceConnector" or listed[c]]
            if name in _EVERY_CONNECTOR
            else [connector_of(name)]
        )
        for holder in holders:
            configs[holder][name] = _config_value(flow, name)
    configs["sourceConnector"] |= dict(sorted(flow.extra.items()))
    mirror: dict[str, Any] = {"sourceCluster": flow.source, "targetCluster": flow.target}
    source: dict[str, Any] = {"tasksMax": flow.tasks_max}
    if not flow.enabled:
        source["state"] = "stopped"
    mirror["sourceConnector"] = source
    for name in CONNECTORS:
        if configs[name]:
            mirror.setdefault(name, {})["config"] = configs[name]
    for name, emits in listed.items():
        if emits:
            mirror.setdefault(name, {})
    for field_name, key in (
        ("topicsPattern", "topics"),
        ("topicsExcludePattern", "topics.exclude"),
        ("groupsPattern", "groups"),
        ("groupsExcludePattern", "groups.exclude"),
    ):
        prop = next(prop for prop in FLOW_PROPERTIES if prop.name == key)
        value = getattr(flow, prop.field)
        if field_name in ("topicsPattern", "groupsPattern") or value != prop.default:
            mirror[field_name] = format_flow_value(prop, value, flow=flow.name)
    return mirror


def write_strimzi(
    config: Mm2Config,
    *,
    name: str = "mirrorplane",
    secret_properties: Mapping[str, frozenset[tuple[str, str]]] | None = None,
    usernames: bool = True,
) -> str:
    """KafkaMirrorMaker2 resources for `config`: one per target cluster (`<name>-to-<target>`), the clusters
    that never appear in a flow with the first; parse_strimzi of it gives back the same clusters and flows.

    `config` may hold secret values: none is written. Passwords, client keys and CA certificates become
    references to Secrets (`<name>-<alias>`) the header lists with their keys; any other secret property
    is left out and named in the header, and so is every (scope, property) `secret_properties` names for a
    cluster alias whatever its name (the control plane's stored secrets). Strimzi takes a SASL username in
    clear in the resource (its password from a Secret); without `usernames` it is written masked, as
    mm2.properties never carries it either (a placeholder there).
    """
    targets = list(dict.fromkeys(flow.target for flow in config.flows)) or list(config.aliases[:1])
    secrets = _SecretKeys({})
    omitted: list[str] = []
    specs = {
        cluster.alias: _cluster_spec(
            cluster,
            prefix=name,
            secrets=secrets,
            omitted=omitted,
            secret_properties=(secret_properties or {}).get(cluster.alias, frozenset()),
            usernames=usernames,
        )
        for cluster in config.clusters
    }
    placed = {alias for flow in config.flows for alias in (flow.source, flow.target)}
    documents = []
    for index, target in enumerate(targets):
        flows = [flow for flow in config.flows if flow.target == target]
        aliases = [
            alias
            for alias in config.aliases
            if alias == target or any(flow.source == alias for flow in flows)
        ]
        if index == 0:
            aliases += [alias for alias in config.aliases if alias not in placed and alias not in aliases]
        documents.append(
            {
                "apiVersion": API_VERSION,
                "kind": KIND,
                "metadata": {"name": _secret_name(f"{name}-to", target)},
                "spec": {
                    "connectCluster": target,
                    "clusters": [specs[alias] for alias in aliases],
                    "mirrors": [_mirror_spec(flow) for flow in flows],
                },
            }
        )
    header = ["# KafkaMirrorMaker2 resources written by Mirrorplane (one per target cluster)"]
    for secret, keys in sorted(secrets.keys.items()):
        header.append(
            f"# Secret {secret}: " + "; ".join(f"{key} = {holds}" for key, holds in sorted(keys.items()))
        )
    header += [f"# Not written: {item}" for item in omitted]
    body = yaml.safe_dump_all(documents, sort_keys=False, default_flow_style=False, explicit_start=True)
    return "\n".join(header) + "\n" + body
