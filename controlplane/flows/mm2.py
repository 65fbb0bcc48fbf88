"""The MM2 import: the clusters and flows an mm2.properties text or a Strimzi KafkaMirrorMaker2 resource
describes, created or updated in one transaction (objects it does not name are kept), validated by the same
rules as every write (`controlplane.flows.services`), audited; a dry run reports the changes and previews
each flow's topics (`controlplane.flows.import_preview`). The export is `controlplane.flows.selectors.mm2_export`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import transaction

from controlplane.core.audit import audit_record, audited_attempt
from controlplane.core.errors import NON_FIELD, ServiceValidationError
from controlplane.core.models import AuditAction, AuditOutcome
from controlplane.flows import engine, services
from controlplane.flows.import_preview import ClusterIdentity, FlowPreview, import_preview
from controlplane.flows.models import Cluster, Flow
from controlplane.flows.services import Errors
from replication.mm2file import Mm2FileError, ParsedMm2, Placeholders
from replication.secrets import MASK
from replication.strimzi import parse_mirrormaker
from replication.topology import find_replication_loops


@dataclass
class ImportChange:
    """One object an import creates, updates or leaves unchanged; secret values shown as ******."""

    object_type: str
    name: str
    change: str  # create | update | unchanged
    fields: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Mm2ImportResult:
    dry_run: bool
    applied: bool
    changes: list[ImportChange]
    warnings: list[str]
    previews: list[FlowPreview] = field(default_factory=list)  # the dry run's, per imported flow


def _diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: {"before": before.get(name), "after": after.get(name)}
        for name in sorted(set(before) | set(after))
        if before.get(name) != after.get(name)
    }


def _secret_diff(
    before: engine.ScopedProperties, after: engine.ScopedProperties
) -> dict[str, dict[str, Any]]:
    changes = {}
    for scope in engine.PROPERTY_SCOPES:
        for name in sorted(set(before[scope]) | set(after[scope])):
            if before[scope].get(name) != after[scope].get(name):
                changes[f"secrets.{scope}.{name}"] = {
                    "before": MASK if name in before[scope] else None,
                    "after": MASK if name in after[scope] else None,
                }
    return changes


def _change(object_type: str, name: str, exists: bool, fields: dict[str, dict[str, Any]]) -> ImportChange:
    kind = "update" if exists and fields else "unchanged" if exists else "create"
    return ImportChange(object_type, name, kind, fields)


def _prefixed(prefix: str, errors: Errors) -> Errors:
    return {f"{prefix}.{name}": messages for name, messages in errors.items()}


IMPORT_PLACEHOLDERS = Placeholders(
    secrets_only=True,
    unset_fix=(
        "type its value on the web import page, or have the server's administrator allow {variable} in "
        "MIRRORPLANE_IMPORT_ENV_ALLOWED and set it (its value is stored as a secret)"
    ),
)


def import_environ() -> dict[str, str]:
    """The server's environment variables an MM2 import may read: the names MIRRORPLANE_IMPORT_ENV_ALLOWED
    lists (`PREFIX_*`: every name with that prefix). None by default: the web server's environment holds
    SECRET_KEY, DATABASE_URL and the secrets key."""
    names = [entry for entry in settings.MIRRORPLANE_IMPORT_ENV_ALLOWED if not entry.endswith("*")]
    prefixes = tuple(entry[:-1] for entry in settings.MIRRORPLANE_IMPORT_ENV_ALLOWED if entry.endswith("*"))
    return {
        name: value
        for name, value in os.environ.items()
        if name in names or (prefixes and name.startswith(prefixes))
    }


def mm2_import(
    *,
    actor,
    text: str,
    dry_run: bool,
    placeholder_values: Mapping[str, str] | None = None,
    source_name: str = "mm2.properties",
    force: bool = False,
) -> Mm2ImportResult:
    """Create or update the clusters and flows an mm2.properties text, or a Strimzi KafkaMirrorMaker2
    resource (YAML), describes (objects it does not name are kept). `dry_run` only reports the changes.

    Placeholders `${env:VAR}` resolve from `placeholder_values` (typed by the importer) and the variables
    of `import_environ`, only in a cluster's client properties; every value they give is stored as a
    secret (encrypted, shown as ******, exported as a placeholder) and no error or audit event repeats it.

    The dry run also previews each imported flow (`import_preview`): the topics its source holds now that
    it would mirror, each that would loop flagged, and a warning per looping flow.

    A cluster is what its brokers are, not its alias: an import that names a cluster already known (stored
    or in the same file) by another alias, i.e. sharing a bootstrap server with it or reporting the same
    cluster id (`ClusterIdentity.read`: each cluster whose hosts are allowed, asked once), is refused unless
    `force` (`same_cluster_errors`): replication loop detection compares aliases, and two aliases of one
    cluster let `.*` copy copies back (DC1.dc2.inventory) and nest heartbeats.
    """
    try:
        parsed = parse_mirrormaker(
            text,
            source_name=source_name,
            environ={**import_environ(), **(placeholder_values or {})},
            placeholders=IMPORT_PLACEHOLDERS,
        )
    except Mm2FileError as exc:
        error = ServiceValidationError(
            {"text": [str(item) for item in exc.errors]},
            details=[
                {"line": item.line, "property": item.property_name, "reason": item.reason, "fix": item.fix}
                for item in exc.errors
            ],
        )
        if not dry_run:
            audit_record(
                actor=actor,
                action=AuditAction.IMPORT,
                object_type="mm2",
                outcome=AuditOutcome.REFUSED,
                detail=str(exc),
            )
        raise error from exc
    # Read before the transaction: its row locks are not held while the clusters answer.
    identity = ClusterIdentity.read(imported=parsed.config.clusters)
    if dry_run:
        with transaction.atomic():
            changes = _apply_import(
                actor=actor, parsed=parsed, apply=False, force=force, cluster_ids=identity.cluster_ids
            )
        previews = import_preview(identity=identity, flows=parsed.config.flows)
        loops = [
            f"{p.flow} would copy {p.loop_count} topic(s) back where they came from"
            for p in previews
            if p.loop_count
        ]
        return Mm2ImportResult(
            dry_run=True,
            applied=False,
            changes=changes,
            warnings=list(parsed.warnings) + [f"replication loop: {loop}" for loop in loops],
            previews=previews,
        )
    with audited_attempt(actor=actor, action=AuditAction.IMPORT, object_type="mm2", object_repr=source_name):
        changes = _apply_import(
            actor=actor, parsed=parsed, apply=True, force=force, cluster_ids=identity.cluster_ids
        )
    return Mm2ImportResult(dry_run=False, applied=True, changes=changes, warnings=list(parsed.warnings))


def same_cluster_errors(
    imported: Mapping[str, str], stored: Mapping[str, str], *, cluster_ids: Mapping[str, str] | None = None
) -> dict[str, list[str]]:
    """Per imported alias, the other aliases (stored, or imported before it) of the same cluster
    (`engine.same_cluster_evidence` of their bootstrap servers, alias -> servers, and of the cluster ids
    their brokers reported, alias -> id, where read)."""
    ids = cluster_ids or {}
    errors: dict[str, list[str]] = {}
    known = dict(stored)
    for alias, servers in imported.items():
        for other, other_servers in known.items():
            evidence = engine.same_cluster_evidence(
                servers, other_servers, cluster_id=ids.get(alias), other_cluster_id=ids.get(other)
            )
            if other != alias and evidence:
                errors.setdefault(f"clusters.{alias}.bootstrap_servers", []).append(
                    f"{alias} is cluster {other} under another alias ({evidence}): "
                    f"replication loop detection compares aliases, so flows of both would copy copies back "
                    f"(e.g. {alias}.{other}.topic) and nest heartbeats. Use the alias {other} in the file, "
                    "or import with force if they really are different clusters"
                )
        known[alias] = servers
    return errors


def _apply_import(
    *,
    actor,
    parsed: ParsedMm2,
    apply: bool,
    force: bool = False,
    cluster_ids: Mapping[str, str] | None = None,
) -> list[ImportChange]:
    clusters = {cluster.alias: cluster for cluster in Cluster.objects.select_for_update()}
    changes: list[ImportChange] = []
    errors: Errors = {}
    cluster_plans = []
    for config in parsed.config.clusters:
        fields = engine.cluster_fields_from_config(
            config, secret_properties=parsed.placeholder_properties.get(config.alias, frozenset())
        )
        stored = clusters.get(config.alias)
        columns: dict[str, Any] = {  # the cluster's model columns
            "alias": config.alias,
            "bootstrap_servers": fields.bootstrap_servers,
            "security_protocol": fields.security_protocol,
            "sasl_mechanism": fields.sasl_mechanism,
            "client_properties": fields.client_properties,
        }
        errors |= _prefixed(
            f"clusters.{config.alias}",
            services.cluster_errors(**columns, secrets=fields.secrets, instance=stored),
        )
        before = services.cluster_snapshot(stored) if stored else {}
        before_secrets = engine.cluster_secrets(stored) if stored else engine.empty_scopes()
        after = dict(columns) | {"client_properties": services.property_scopes(fields.client_properties)}
        diff = _diff({k: v for k, v in before.items() if k != "secrets"}, after) | _secret_diff(
            before_secrets, fields.secrets
        )
        changes.append(_change("cluster", config.alias, stored is not None, diff))
        cluster_plans.append((stored, columns, fields.secrets, bool(diff)))

    if not force:
        errors |= same_cluster_errors(
            {config.alias: config.bootstrap_servers for config in parsed.config.clusters},
            {alias: cluster.bootstrap_servers for alias, cluster in clusters.items()},
            cluster_ids=cluster_ids,
        )
    aliases = sorted(set(clusters) | set(parsed.config.aliases))
    stored_flows = {
        (flow.source.alias, flow.target.alias): flow
        for flow in Flow.objects.select_for_update().select_related("source", "target")
    }
    merged = {pair: engine.flow_to_config(flow) for pair, flow in stored_flows.items()}
    flow_plans = []
    for flow_config in parsed.config.flows:
        pair = (flow_config.source, flow_config.target)
        settings = engine.flow_fields_from_config(flow_config)
        errors |= _prefixed(
            f"flows.{flow_config.name}", engine.flow_config_errors(flow_config, aliases=aliases)
        )
        stored_flow = stored_flows.get(pair)
        diff = _diff(engine.flow_settings(stored_flow) if stored_flow else {}, settings)
        changes.append(_change("flow", flow_config.name, stored_flow is not None, diff))
        flow_plans.append((stored_flow, flow_config, settings, bool(diff)))
        merged[pair] = flow_config
    loops = find_replication_loops(list(merged.values()), aliases=aliases)
    if loops:
        errors[NON_FIELD] = [f"replication loop {loop}" for loop in loops]
    services.raise_if_errors(errors)
    if not apply:
        return changes

    for stored, columns, secrets, changed in cluster_plans:
        if not changed:
            continue
        snapshot = services.cluster_snapshot(stored) if stored else None
        cluster = services.cluster_save(stored or Cluster(), fields=columns, secrets=secrets)
        clusters[cluster.alias] = cluster
        audit_record(
            actor=actor,
            action=AuditAction.IMPORT,
            object_type="cluster",
            object_id=cluster.pk,
            object_repr=cluster.alias,
            before=snapshot,
            after=services.cluster_snapshot(cluster, secrets),
        )
    for stored_flow, flow_config, settings, changed in flow_plans:
        if not changed:
            continue
        snapshot = services.flow_snapshot(stored_flow) if stored_flow else None
        # Loops were checked across the whole merged configuration above; one flow at a time would see
        # the half-imported state.
        flow = stored_flow or Flow(source=clusters[flow_config.source], target=clusters[flow_config.target])
        flow.source, flow.target = clusters[flow_config.source], clusters[flow_config.target]
        transition = services.enabled_transition(flow, enabled=settings["enabled"])
        for name, value in settings.items():
            setattr(flow, name, value)
        services.flow_store(flow, transition=transition)
        audit_record(
            actor=actor,
            action=AuditAction.IMPORT,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            before=snapshot,
            after=services.flow_snapshot(flow),
        )
    return changes
