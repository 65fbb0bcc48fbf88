"""The one bridge between stored rows and the replication engine's config objects.

- `cluster_to_config` / `flow_to_config`: rows -> `ClusterConfig` / `FlowConfig` (what workers and the
  MM2 writer consume);
- `cluster_fields_from_config` / `flow_fields_from_config`: the reverse, for MM2 import;
- `flow_config_errors`: a flow checked by the engine's rules (`replication.flow_rules`), the ones the
  mm2.properties reader applies, so the control plane accepts exactly what `python -m replication run`
  accepts (regexes, ranges, policies, separators).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Literal

from django.conf import settings

from controlplane.core import crypto
from controlplane.core.errors import NON_FIELD
from controlplane.flows.clusters import clusters
from controlplane.flows.models import Cluster, Flow, SecurityProtocol
from replication.cluster_ports import FlowClusters
from replication.config import FLOW_PROPERTIES, ClusterConfig, FlowConfig
from replication.connector import TopicSelection
from replication.flow_rules import CLIENT_ROLES, FlowProblem, flow_problems
from replication.mm2file import CLUSTER_ALIAS as MM2_CLUSTER_ALIAS
from replication.outbound import HostAllowlist
from replication.policy import replication_policy_for
from replication.secrets import MASK, is_secret_property

# "client" holds cluster-wide client properties; the others `<alias>.<role>.*` overrides.
PROPERTY_SCOPES = ("client", *CLIENT_ROLES)

# The API's write-only secret fields and the client property each one sets.
SECRET_FIELDS: Mapping[str, str] = {
    "sasl_username": "sasl.username",
    "sasl_password": "sasl.password",
    "ssl_ca_pem": "ssl.ca.pem",
    "ssl_certificate_pem": "ssl.certificate.pem",
    "ssl_key_pem": "ssl.key.pem",
    "ssl_key_password": "ssl.key.password",
}
# Cluster-wide client properties held in their own columns.
COLUMN_PROPERTIES: Mapping[str, str] = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
}

ScopedProperties = dict[str, dict[str, str]]


def empty_scopes() -> ScopedProperties:
    return {scope: {} for scope in PROPERTY_SCOPES}


def is_stored_as_secret(name: str) -> bool:
    """Credentials and TLS material are encrypted at rest, whether or not their name looks secret."""
    return name in SECRET_FIELDS.values() or is_secret_property(name)


def cluster_alias_error(alias: str) -> str | None:
    if not MM2_CLUSTER_ALIAS.fullmatch(alias):
        return (
            f"'{alias}' is not a valid cluster alias: use only letters, digits, '_' and '-' (no '.', which "
            "separates remote topic names, and no '->', which names flows)"
        )
    return None


def bootstrap_servers_error(value: str) -> str | None:
    addresses = [item.strip() for item in value.split(",")]
    if not value.strip() or any(not item for item in addresses):
        return "list the brokers as host:port, comma-separated"
    for address in addresses:
        host, _, port = address.rpartition("://")[2].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            return f"'{address}' is not host:port (port 1-65535)"
        if re.search(r"\s", address):
            return f"'{address}' contains whitespace"
        if problem := cluster_hosts().host_problem(host):
            return problem
    return None


def bootstrap_brokers(bootstrap_servers: str) -> frozenset[str]:
    """The bootstrap set as host:port entries, hosts in lower case (DNS names are case-insensitive)."""
    return frozenset(entry.strip().lower() for entry in bootstrap_servers.split(",") if entry.strip())


def same_cluster_evidence(
    servers: str, other_servers: str, *, cluster_id: str | None = None, other_cluster_id: str | None = None
) -> str | None:
    """Why two clusters are one, or None: their bootstrap sets share a broker (a broker belongs to one
    cluster), or their brokers report the same cluster id (DescribeCluster; one cluster reached by two
    names, e.g. localhost and 127.0.0.1)."""
    if shared := sorted(bootstrap_brokers(servers) & bootstrap_brokers(other_servers)):
        return f"both list {', '.join(shared)}"
    if cluster_id and cluster_id == other_cluster_id:
        return f"both report cluster id {cluster_id}"
    return None


def cluster_hosts() -> HostAllowlist:
    """The hosts clusters may name: MIRRORPLANE_CLUSTER_HOSTS_ALLOWED lists host names, `*.domain`
    suffixes and IP networks (10.0.0.0/8); empty, any host. The console connects where a cluster says
    (checks, pages): without the list, whoever may add a cluster may probe any address the server reaches."""
    return HostAllowlist.of(
        settings.MIRRORPLANE_CLUSTER_HOSTS_ALLOWED, setting="MIRRORPLANE_CLUSTER_HOSTS_ALLOWED"
    )


def cluster_hosts_error(cluster: Cluster) -> str | None:
    """Why a stored cluster may not be contacted now (MIRRORPLANE_CLUSTER_HOSTS_ALLOWED changed since it
    was stored), or None."""
    return bootstrap_servers_error(cluster.bootstrap_servers)


# -- secrets ----------------------------------------------------------------------------------------------
def cluster_secrets(cluster: Cluster) -> ScopedProperties:
    """The cluster's decrypted secret properties by scope (empty scopes included)."""
    stored = crypto.decrypt_json(cluster.secrets_encrypted) if cluster.secrets_encrypted else {}
    scopes = stored if isinstance(stored, dict) else {}  # encrypt_secrets stores a dict
    return {scope: dict(scopes.get(scope, {})) for scope in PROPERTY_SCOPES}


def encrypt_secrets(secrets: ScopedProperties) -> str:
    """The column value for `secrets`; empty when there is none (nothing to decrypt later)."""
    kept = {scope: values for scope, values in secrets.items() if values}
    return crypto.encrypt_json(kept) if kept else ""


def secret_names(secrets: ScopedProperties) -> list[str]:
    """`scope.property` names of the secrets that are set, never their values."""
    return sorted(f"{scope}.{name}" for scope, values in secrets.items() for name in values)


def masked(secrets: ScopedProperties) -> dict[str, str]:
    return dict.fromkeys(secret_names(secrets), MASK)


def secret_placeholder(alias: str, scope: str, name: str) -> str:
    """The environment variable an exported mm2.properties reads a secret from: `A_SASL_PASSWORD`."""
    parts = [alias] + ([] if scope == "client" else [scope]) + [name]
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).upper()


# -- rows -> engine ---------------------------------------------------------------------------------------
def cluster_to_config(
    cluster: Cluster, *, secrets: Literal["values", "placeholders"] = "values"
) -> ClusterConfig:
    """The engine's view of a cluster; with `placeholders`, each secret reads `${env:ALIAS_PROPERTY}`."""
    stored = cluster_secrets(cluster)
    if secrets == "placeholders":
        stored = {
            scope: {name: f"${{env:{secret_placeholder(cluster.alias, scope, name)}}}" for name in values}
            for scope, values in stored.items()
        }
    columns = {}
    if cluster.security_protocol != SecurityProtocol.PLAINTEXT:
        columns["security.protocol"] = cluster.security_protocol
    if cluster.sasl_mechanism:
        columns["sasl.mechanism"] = cluster.sasl_mechanism
    properties = {
        scope: {**cluster.client_properties.get(scope, {}), **stored[scope]} for scope in PROPERTY_SCOPES
    }
    return ClusterConfig(
        alias=cluster.alias,
        bootstrap_servers=cluster.bootstrap_servers,
        client={**columns, **properties["client"]},
        producer=properties["producer"],
        consumer=properties["consumer"],
        admin=properties["admin"],
    )


def _engine_value(prop_kind: type, value: Any) -> Any:
    if prop_kind is tuple:
        return tuple(value)
    if issubclass(prop_kind, Enum):
        return prop_kind(value)
    return value


def flow_settings_to_config(*, source: str, target: str, settings: Mapping[str, Any]) -> FlowConfig:
    """A FlowConfig from model-shaped settings (JSON lists, enum values as strings)."""
    return FlowConfig(
        source=source,
        target=target,
        extra=dict(settings.get("extra", {})),
        **{prop.field: _engine_value(prop.kind, settings[prop.field]) for prop in FLOW_PROPERTIES},
    )


def flow_settings(flow: Flow) -> dict[str, Any]:
    """The flow's FlowConfig-shaped columns (every flow property plus `extra`)."""
    return {prop.field: getattr(flow, prop.field) for prop in FLOW_PROPERTIES} | {"extra": flow.extra}


def flow_to_config(flow: Flow) -> FlowConfig:
    return flow_settings_to_config(
        source=flow.source.alias, target=flow.target.alias, settings=flow_settings(flow)
    )


# -- engine -> rows ---------------------------------------------------------------------------------------
def _column_value(value: Any) -> Any:
    if isinstance(value, tuple):
        return list(value)
    if isinstance(value, Enum):
        return value.value
    return value


def flow_fields_from_config(config: FlowConfig) -> dict[str, Any]:
    return {prop.field: _column_value(getattr(config, prop.field)) for prop in FLOW_PROPERTIES} | {
        "extra": dict(config.extra)
    }


@dataclass(frozen=True)
class ClusterFields:
    """A ClusterConfig split the way a Cluster row stores it."""

    bootstrap_servers: str
    security_protocol: str
    sasl_mechanism: str
    client_properties: ScopedProperties
    secrets: ScopedProperties


def cluster_fields_from_config(
    config: ClusterConfig, *, secret_properties: frozenset[tuple[str, str]] = frozenset()
) -> ClusterFields:
    """`config` split into columns; `secret_properties` ((scope, name): those a placeholder gave a value
    to) are secrets whatever their name."""
    properties, secrets = empty_scopes(), empty_scopes()
    columns = {"security.protocol": str(SecurityProtocol.PLAINTEXT), "sasl.mechanism": ""}
    for scope in PROPERTY_SCOPES:
        values = config.client if scope == "client" else getattr(config, scope)
        for name, value in values.items():
            if scope == "client" and name in COLUMN_PROPERTIES:
                columns[name] = value
            elif is_stored_as_secret(name) or (scope, name) in secret_properties:
                secrets[scope][name] = value
            else:
                properties[scope][name] = value
    return ClusterFields(
        bootstrap_servers=config.bootstrap_servers,
        security_protocol=columns["security.protocol"].upper(),
        sasl_mechanism=columns["sasl.mechanism"].upper(),
        client_properties=properties,
        secrets=secrets,
    )


# -- validation by the engine's rules ----------------------------------------------------------------------
def problem_errors(problems: Sequence[FlowProblem]) -> dict[str, list[str]]:
    """Field -> messages ("reason. Fix: fix"); a problem of the whole flow goes to non_field_errors."""
    errors: dict[str, list[str]] = {}
    for problem in problems:
        errors.setdefault(problem.field or NON_FIELD, []).append(problem.message())
    return errors


def flow_config_errors(flow: FlowConfig, *, aliases: Sequence[str]) -> dict[str, list[str]]:
    """Field -> messages for every rule `flow` breaks (empty when it is valid): the engine's own rules
    (`replication.flow_rules`), which the mm2.properties reader applies too, so the control plane accepts
    exactly what `python -m replication run` accepts."""
    return problem_errors(flow_problems(flow, aliases=aliases))


def topic_selection(flow: Flow, *, known_aliases: Sequence[str] | None = None) -> TopicSelection:
    """Which topics the flow replicates and under which remote names (its policy and topic filter), for
    pages and reads that ask without a reader; `known_aliases` saves the read of every cluster's alias."""
    config = flow_to_config(flow)
    if known_aliases is None:
        known_aliases = list(Cluster.objects.values_list("alias", flat=True))
    return TopicSelection.of(config, replication_policy_for(config, known_aliases=known_aliases))


def flow_reader(flow: Flow, *, timeout_s: float | None = None) -> FlowClusters:
    """The cluster reads (and offset writes) of the flow's failover, drill, cutover, takeover and offset
    mapping; each request bounded by `timeout_s` (the reader's own bound by default: operations run in
    workers, a web request passes its short one)."""
    return clusters().flow_clusters(
        flow=flow_to_config(flow),
        source=cluster_to_config(flow.source),
        target=cluster_to_config(flow.target),
        known_aliases=list(Cluster.objects.values_list("alias", flat=True)),
        timeout_s=timeout_s,
    )
