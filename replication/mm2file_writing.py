"""A configuration written as text: MirrorMaker 2's `mm2.properties` (`write_mm2`, which
`replication.mm2file` reads back as the same configuration) and the listing `validate` prints
(`describe_config`, secrets masked)."""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from replication.config import FLOW_PROPERTIES, FlowProperty, Mm2Config
from replication.flow_rules import CLIENT_ROLES
from replication.properties import property_line
from replication.secrets import mask_secrets


def format_flow_value(prop: FlowProperty, value: Any, *, flow: str) -> str:
    if prop.kind is tuple:
        if any("," in pattern for pattern in value):
            raise ValueError(
                f"{flow}.{prop.name}: a pattern containing ',' cannot be written in MM2's list syntax"
            )
        return ", ".join(value)
    if prop.kind is bool:
        return "true" if value else "false"
    if isinstance(value, Enum):
        return str(value.value)
    return str(value)


def write_mm2(config: Mm2Config, *, include_defaults: bool = False) -> str:
    """MM2-format text for `config`; parse_mm2 of it gives an equal Mm2Config.

    Every setting is written per cluster and per flow, so each flow reads on its own; the top-level flow
    settings (`flow_defaults`, what pairs without a flow run with) are written at the top level too, and a
    flow setting is written whenever it differs from them. Values are written as they are held, secrets
    included: placeholders were resolved when read.
    """

    lines = ["# mm2.properties written by Mirrorplane", property_line("clusters", ", ".join(config.aliases))]
    for cluster in config.clusters:
        lines += ["", property_line(f"{cluster.alias}.bootstrap.servers", cluster.bootstrap_servers)]
        lines += [
            property_line(f"{cluster.alias}.{name}", value) for name, value in sorted(cluster.client.items())
        ]
        for role in CLIENT_ROLES:
            overrides = getattr(cluster, role)
            lines += [
                property_line(f"{cluster.alias}.{role}.{name}", value)
                for name, value in sorted(overrides.items())
            ]
    defaults = {prop.field: prop.default for prop in FLOW_PROPERTIES} | dict(config.flow_defaults)
    top_level = [prop for prop in FLOW_PROPERTIES if prop.field in config.flow_defaults]
    if top_level:
        lines += ["", "# every flow, and the pairs without one (heartbeats)"]
        lines += [
            property_line(prop.name, format_flow_value(prop, defaults[prop.field], flow="top level"))
            for prop in top_level
        ]
    for flow in config.flows:
        lines += ["", property_line(f"{flow.name}.enabled", "true" if flow.enabled else "false")]
        for prop in FLOW_PROPERTIES:
            value = getattr(flow, prop.field)
            if prop.name != "enabled" and (include_defaults or value != defaults[prop.field]):
                lines.append(
                    property_line(f"{flow.name}.{prop.name}", format_flow_value(prop, value, flow=flow.name))
                )
        lines += [property_line(f"{flow.name}.{name}", value) for name, value in sorted(flow.extra.items())]
    return "\n".join(lines) + "\n"


def _describe_mapping(title: str, values: Mapping[str, str]) -> list[str]:
    return [f"    {title}{name} = {value}" for name, value in sorted(mask_secrets(values).items())]


def describe_config(config: Mm2Config) -> str:
    """A human-readable listing of clusters (secrets masked) and of every flow's effective settings."""
    lines = [f"Clusters ({len(config.clusters)}):"]
    for cluster in config.clusters:
        lines.append(f"  {cluster.alias}: bootstrap.servers = {cluster.bootstrap_servers}")
        lines += _describe_mapping("", cluster.client)
        for role in CLIENT_ROLES:
            lines += _describe_mapping(f"{role}.", getattr(cluster, role))
    enabled = sum(flow.enabled for flow in config.flows)
    lines += ["", f"Flows ({len(config.flows)}, {enabled} enabled):"]
    width = max(len(prop.name) for prop in FLOW_PROPERTIES)
    for flow in config.flows:
        lines.append(f"  {flow.name}: {'enabled' if flow.enabled else 'disabled'}")
        for prop in FLOW_PROPERTIES:
            if prop.name == "enabled":
                continue
            value = getattr(flow, prop.field)
            origin = "" if value != prop.default else "  (default)"
            lines.append(
                f"    {prop.name:<{width}} = {format_flow_value(prop, value, flow=flow.name)}{origin}"
            )
        lines += _describe_mapping("", flow.extra)
    return "\n".join(lines)
