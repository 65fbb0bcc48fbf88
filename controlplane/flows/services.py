"""Writes of clusters and flows, and the MM2 import: one transaction each, validated by the engine's
rules, audited.

A refused change (invalid input, a replication loop, a conflict) leaves nothing behind but an audit
event with outcome "refused"; secrets never reach the audit log (only their names, masked). The flow's
state is not written here but by the lifecycle (controlplane.flows.lifecycle).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction

from controlplane.core.audit import audit_record, audited_attempt
from controlplane.core.errors import NON_FIELD, ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditAction, AuditOutcome
from controlplane.core.outbound import REGISTRY_CREDENTIALS_FIX, outbound_url_error
from controlplane.flows import engine, lifecycle, pools
from controlplane.flows.import_preview import ClusterIdentity, FlowPreview, import_preview
from controlplane.flows.models import Cluster, Flow, FlowState, SaslMechanism, SecurityProtocol
from replication.client_properties import client_property_problem, not_applicable_reason
from replication.config import FLOW_PROPERTIES, SCHEMA_REGISTRY_PREFIX, FlowConfig
from replication.flow_rules import flow_problems
from replication.mm2file import Mm2FileError, ParsedMm2, Placeholders
from replication.secrets import MASK
from replication.strimzi import parse_mirrormaker
from replication.topology import find_replication_loops

Errors = dict[str, list[str]]
FLOW_SETTING_NAMES = frozenset(prop.field for prop in FLOW_PROPERTIES) | {"extra", "pool"}
REGISTRY_URL = SCHEMA_REGISTRY_PREFIX + "url"
CLUSTER_FIELD_NAMES = frozenset(
    {"alias", "bootstrap_servers", "security_protocol", "sasl_mechanism", "client_properties"}
)


def _raise_if(errors: Errors) -> None:
    if errors:
        raise ServiceValidationError(errors)


def _add(errors: Errors, field_name: str, message: str) -> None:
    errors.setdefault(field_name, []).append(message)


# -- clusters ---------------------------------------------------------------------------------------------
def cluster_snapshot(cluster: Cluster, secrets: engine.ScopedProperties | None = None) -> dict[str, Any]:
    """The audit view of a cluster: every setting, secrets by name only."""
    return {
        "alias": cluster.alias,
        "bootstrap_servers": cluster.bootstrap_servers,
        "security_protocol": cluster.security_protocol,
        "sasl_mechanism": cluster.sasl_mechanism,
        "client_properties": cluster.client_properties,
        "secrets": engine.masked(engine.cluster_secrets(cluster) if secrets is None else secrets),
    }


def _scoped_errors(value: Any, *, field_name: str, secret: bool) -> Errors:
    errors: Errors = {}
    if not isinstance(value, Mapping):
        return {field_name: ['an object of scopes: {"client": {...}, "producer": {...}, ...}']}
    for scope, properties in value.items():
        if scope not in engine.PROPERTY_SCOPES:
            _add(errors, field_name, f"unknown scope '{scope}'; scopes: {', '.join(engine.PROPERTY_SCOPES)}")
            continue
        if not isinstance(properties, Mapping):
            _add(errors, field_name, f"{scope}: an object of property name -> string value")
            continue
        for name, prop_value in properties.items():
            where = f"{scope}.{name}"
            if not isinstance(name, str) or not name.strip() or not isinstance(prop_value, str):
                _add(errors, field_name, f"{where}: property names and values are strings")
            elif name == "bootstrap.servers":
                _add(errors, field_name, f"{where}: set bootstrap_servers instead")
            elif scope == "client" and name in engine.COLUMN_PROPERTIES:
                _add(errors, field_name, f"{where}: set {engine.COLUMN_PROPERTIES[name]} instead")
            elif not secret and engine.is_stored_as_secret(name):
                _add(errors, field_name, f"{where} is a secret: set it in secret_properties (write-only)")
            elif scope == "client" and (reason := not_applicable_reason(name)):
                _add(errors, field_name, f"{where}: {reason}; remove it")
            elif problem := client_property_problem(name, prop_value, shown=MASK if secret else None):
                _add(errors, field_name, f"{where}: {problem[0]}; {problem[1]}")
    return errors


def _cluster_errors(
    *,
    alias: str,
    bootstrap_servers: str,
    security_protocol: str,
    sasl_mechanism: str,
    client_properties: Any,
    secrets: Any,
    instance: Cluster | None,
) -> Errors:
    errors: Errors = {}
    if problem := engine.cluster_alias_error(alias):
        _add(errors, "alias", problem)
    elif Cluster.objects.filter(alias=alias).exclude(pk=getattr(instance, "pk", None)).exists():
        _add(errors, "alias", f"a cluster with alias '{alias}' already exists")
    else:
        flows = (
            Flow.objects.exclude(source=instance).exclude(target=instance) if instance else Flow.objects.all()
        )
        for separator in {flow.replication_policy_separator for flow in flows}:
            if separator in alias:
                _add(errors, "alias", f"contains '{separator}', the replication.policy.separator of a flow")
    if problem := engine.bootstrap_servers_error(bootstrap_servers):
        _add(errors, "bootstrap_servers", problem)
    if security_protocol not in SecurityProtocol.values:
        _add(errors, "security_protocol", f"one of {', '.join(SecurityProtocol.values)}")
    if sasl_mechanism not in SaslMechanism.values:
        _add(errors, "sasl_mechanism", f"one of {', '.join(v for v in SaslMechanism.values if v)} or empty")
    errors |= _scoped_errors(client_properties, field_name="client_properties", secret=False)
    errors |= _scoped_errors(secrets, field_name="secret_properties", secret=True)
    for field_name, scoped in (("client_properties", client_properties), ("secret_properties", secrets)):
        if problem := _registry_url_error(scoped):
            _add(errors, field_name, f"client.{REGISTRY_URL}: {problem}")
    return errors


def _registry_url_error(scoped: Any) -> str | None:
    """Why the cluster's schema.registry.url may not be fetched (`controlplane.core.outbound`), or None."""
    client = scoped.get("client") if isinstance(scoped, Mapping) else None
    url = client.get(REGISTRY_URL) if isinstance(client, Mapping) else None
    if url is None:
        return None
    return outbound_url_error(url, credentials_fix=REGISTRY_CREDENTIALS_FIX)


def _scopes(value: Mapping[str, Mapping[str, str]] | None) -> engine.ScopedProperties:
    scoped = engine.empty_scopes()
    for scope, properties in (value or {}).items():
        scoped.setdefault(scope, {}).update(properties)
    return scoped


def _save_cluster(
    cluster: Cluster, *, fields: Mapping[str, Any], secrets: engine.ScopedProperties
) -> Cluster:
    """Validate and store; `fields` are Cluster columns, `secrets` the full set of secret properties."""
    values = {name: getattr(cluster, name) for name in CLUSTER_FIELD_NAMES} | dict(fields)
    values["client_properties"] = _scopes(values["client_properties"])
    _raise_if(_cluster_errors(**values, secrets=secrets, instance=cluster if cluster.pk else None))
    for name, value in values.items():
        setattr(cluster, name, value)
    cluster.secrets_encrypted = engine.encrypt_secrets(secrets)
    try:
        with transaction.atomic():
            cluster.save()
    except IntegrityError as exc:  # a concurrent request took the alias
        raise ServiceValidationError.single(
            "alias", f"a cluster with alias '{cluster.alias}' already exists"
        ) from exc
    return cluster


def _merge_secrets(
    current: engine.ScopedProperties, changes: Mapping[str, Mapping[str, str]] | None
) -> engine.ScopedProperties:
    """Secret updates: a value sets the property, an empty string removes it, an absent one is kept."""
    merged = {scope: dict(values) for scope, values in current.items()}
    _raise_if(_scoped_errors(changes or {}, field_name="secret_properties", secret=True))
    for scope, values in (changes or {}).items():
        for name, value in values.items():
            if value == "":
                merged[scope].pop(name, None)
            else:
                merged[scope][name] = value
    return merged


def cluster_create(
    *,
    actor,
    alias: str,
    bootstrap_servers: str,
    security_protocol: str = SecurityProtocol.PLAINTEXT,
    sasl_mechanism: str = "",
    client_properties: Mapping[str, Mapping[str, str]] | None = None,
    secrets: Mapping[str, Mapping[str, str]] | None = None,
) -> Cluster:
    """A new cluster; `secrets` holds SASL credentials, TLS material and other secret properties by scope."""
    with audited_attempt(actor=actor, action=AuditAction.CREATE, object_type="cluster", object_repr=alias):
        secret_values = _merge_secrets(engine.empty_scopes(), secrets)
        cluster = _save_cluster(
            Cluster(),
            fields={
                "alias": alias,
                "bootstrap_servers": bootstrap_servers,
                "security_protocol": security_protocol,
                "sasl_mechanism": sasl_mechanism,
                "client_properties": client_properties or {},
            },
            secrets=secret_values,
        )
        audit_record(
            actor=actor,
            action=AuditAction.CREATE,
            object_type="cluster",
            object_id=cluster.pk,
            object_repr=cluster.alias,
            after=cluster_snapshot(cluster, secret_values),
        )
    return cluster


def cluster_update(
    *,
    actor,
    cluster: Cluster,
    changes: Mapping[str, Any] | None = None,
    secret_changes: Mapping[str, Mapping[str, str]] | None = None,
) -> Cluster:
    """Change some columns (`changes`) and some secrets (value sets, "" removes, absent keeps)."""
    unknown = set(changes or {}) - CLUSTER_FIELD_NAMES
    if unknown:
        raise ValueError(f"not cluster fields: {', '.join(sorted(unknown))}")
    with audited_attempt(
        actor=actor,
        action=AuditAction.UPDATE,
        object_type="cluster",
        object_id=cluster.pk,
        object_repr=cluster.alias,
    ):
        cluster = Cluster.objects.select_for_update().get(pk=cluster.pk)
        current = engine.cluster_secrets(cluster)
        before = cluster_snapshot(cluster, current)
        secret_values = _merge_secrets(current, secret_changes)
        _save_cluster(cluster, fields=changes or {}, secrets=secret_values)
        changed_secrets = sorted(
            f"{scope}.{name}"
            for scope in engine.PROPERTY_SCOPES
            for name in set(current[scope]) | set(secret_values[scope])
            if current[scope].get(name) != secret_values[scope].get(name)
        )
        audit_record(
            actor=actor,
            action=AuditAction.UPDATE,
            object_type="cluster",
            object_id=cluster.pk,
            object_repr=cluster.alias,
            before=before,
            after=cluster_snapshot(cluster, secret_values),
            detail=f"secrets changed: {', '.join(changed_secrets)}" if changed_secrets else "",
        )
    return cluster


def cluster_delete(*, actor, cluster: Cluster) -> None:
    with audited_attempt(
        actor=actor,
        action=AuditAction.DELETE,
        object_type="cluster",
        object_id=cluster.pk,
        object_repr=cluster.alias,
    ):
        flows = sorted(
            str(flow) for flow in Flow.objects.filter(source=cluster) | Flow.objects.filter(target=cluster)
        )
        if flows:
            raise ServiceConflict(
                f"cluster {cluster.alias} is used by flows {', '.join(flows)}: delete them first"
            )
        before = cluster_snapshot(cluster)
        pk = cluster.pk
        cluster.delete()
        audit_record(
            actor=actor,
            action=AuditAction.DELETE,
            object_type="cluster",
            object_id=pk,
            object_repr=before["alias"],
            before=before,
        )


# -- flows ------------------------------------------------------------------------------------------------
def flow_snapshot(flow: Flow) -> dict[str, Any]:
    return {
        "source": flow.source.alias,
        "target": flow.target.alias,
        "state": flow.state,
    } | _stored_flow_settings(flow)


def _stored_flow_settings(flow: Flow) -> dict[str, Any]:
    """The flow's MM2 settings and its worker pool (controlplane.flows.pools)."""
    return engine.flow_settings(flow) | {"pool": flow.pool}


def _enabled_transition(flow: Flow, *, enabled: bool) -> str | None:
    """The lifecycle transition an edit of MM2's `enabled` asks for (None: none).

    `enabled` is the one setting that moves the state (enable/disable); it is refused with a field
    error, before anything is stored, while the state does not allow it (a failover owns the flow).
    """
    if flow.pk is None or enabled == (flow.state != FlowState.DISABLED):
        return None
    name = "enable" if enabled else "disable"
    if lifecycle.next_state(state=flow.state, transition=name) is None:
        allowed = ", ".join(sorted(lifecycle.allowed_actions(flow.state))) or "none"
        raise ServiceValidationError.single(
            "enabled",
            f"flow {flow.name} is {flow.state}: it cannot be {name}d now; finish the failover or "
            f"failback first (allowed now: {allowed})",
        )
    return name


_LIFECYCLE_COLUMNS = {"id", "state", "state_reason", "state_changed_at", "created_at"}
_SETTINGS_COLUMNS = [f.name for f in Flow._meta.concrete_fields if f.name not in _LIFECYCLE_COLUMNS]


def _store_flow(flow: Flow, *, transition: str | None) -> None:
    """Save a flow's settings; the state only through the lifecycle (a new flow starts in its initial one)."""
    if flow.pk is None:
        flow.state = lifecycle.initial_state(enabled=flow.enabled)
        flow.save()
        return
    flow.save(update_fields=_SETTINGS_COLUMNS)
    if transition:
        lifecycle.transition(flow=flow, name=transition)


def _default_flow_settings() -> dict[str, Any]:
    return engine.flow_fields_from_config(FlowConfig(source="", target=""))


def _loop_errors(config: FlowConfig, *, replacing: Flow | None) -> list[str]:
    """Explanations of the replication loops `config` would close with the stored flows."""
    stored = Flow.objects.select_related("source", "target")
    if replacing is not None:
        stored = stored.exclude(pk=replacing.pk)
    others = [engine.flow_to_config(flow) for flow in stored]
    aliases = list(Cluster.objects.values_list("alias", flat=True))
    return [f"replication loop {loop}" for loop in find_replication_loops([*others, config], aliases=aliases)]


def _flow_errors(
    *, source: Cluster, target: Cluster, settings: Mapping[str, Any], instance: Flow | None
) -> Errors:
    errors: Errors = {}
    if source.pk == target.pk:
        return {
            "target": [f"a flow replicates between two clusters; source and target are both {source.alias}"]
        }
    pair = Flow.objects.filter(source=source, target=target).exclude(pk=getattr(instance, "pk", None))
    if pair.exists():
        return {
            NON_FIELD: [f"flow {source.alias}->{target.alias} already exists (one flow per ordered pair)"]
        }
    for name in settings.get("extra", {}):
        if engine.is_stored_as_secret(name):
            _add(errors, "extra", f"{name} is a secret: set it on the cluster's secret_properties")
    pool_error = pools.pool_name_error(settings.get("pool", ""))
    if pool_error:
        _add(errors, "pool", pool_error)
    if errors:
        return errors
    config = engine.flow_settings_to_config(source=source.alias, target=target.alias, settings=settings)
    problems = flow_problems(config, aliases=Cluster.objects.values_list("alias", flat=True))
    if problems:  # typed (field, property_name, value, reason, fix) for API clients, besides the messages
        raise ServiceValidationError(
            engine.problem_errors(problems), details=[problem.to_dict() for problem in problems]
        )
    if config.enabled:
        loops = _loop_errors(config, replacing=instance)
        if loops:
            errors[NON_FIELD] = loops
    return errors


def _save_flow(flow: Flow, *, source: Cluster, target: Cluster, settings: Mapping[str, Any]) -> Flow:
    _raise_if(
        _flow_errors(source=source, target=target, settings=settings, instance=flow if flow.pk else None)
    )
    transition = _enabled_transition(flow, enabled=settings.get("enabled", flow.enabled))
    flow.source, flow.target = source, target
    for name, value in settings.items():
        setattr(flow, name, value)
    try:
        with transaction.atomic():
            _store_flow(flow, transition=transition)
    except IntegrityError as exc:  # a concurrent request created the same pair
        raise ServiceValidationError.single(NON_FIELD, f"flow {flow.name} already exists") from exc
    return flow


def _check_setting_names(settings: Mapping[str, Any]) -> None:
    unknown = set(settings) - FLOW_SETTING_NAMES
    if unknown:
        raise ValueError(f"not flow settings: {', '.join(sorted(unknown))}")


def flow_create(*, actor, source: Cluster, target: Cluster, **settings: Any) -> Flow:
    """A new flow `source->target`; unset settings take MM2's defaults (a new flow is disabled by default)."""
    _check_setting_names(settings)
    name = f"{source.alias}->{target.alias}"
    with audited_attempt(actor=actor, action=AuditAction.CREATE, object_type="flow", object_repr=name):
        flow = _save_flow(Flow(), source=source, target=target, settings=_default_flow_settings() | settings)
        audit_record(
            actor=actor,
            action=AuditAction.CREATE,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            after=flow_snapshot(flow),
        )
    return flow


def flow_update(
    *, actor, flow: Flow, source: Cluster | None = None, target: Cluster | None = None, **changes: Any
) -> Flow:
    _check_setting_names(changes)
    with audited_attempt(
        actor=actor, action=AuditAction.UPDATE, object_type="flow", object_id=flow.pk, object_repr=flow.name
    ):
        flow = Flow.objects.select_for_update().select_related("source", "target").get(pk=flow.pk)
        before = flow_snapshot(flow)
        _save_flow(
            flow,
            source=source or flow.source,
            target=target or flow.target,
            settings=_stored_flow_settings(flow) | changes,
        )
        audit_record(
            actor=actor,
            action=AuditAction.UPDATE,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            before=before,
            after=flow_snapshot(flow),
        )
    return flow


def flow_delete(*, actor, flow: Flow) -> None:
    with audited_attempt(
        actor=actor, action=AuditAction.DELETE, object_type="flow", object_id=flow.pk, object_repr=flow.name
    ):
        before, pk, name = flow_snapshot(flow), flow.pk, flow.name
        # The flow's row locked before its cascade reads the rows that point to it: a status, event or
        # signals row a worker writes meanwhile waits (its foreign-key check locks the flow row) and
        # fails once the flow is gone, instead of landing after that read and failing this delete.
        if not Flow.objects.select_for_update().filter(pk=pk).exists():
            return  # deleted meanwhile (that delete is audited)
        flow.delete()
        audit_record(
            actor=actor,
            action=AuditAction.DELETE,
            object_type="flow",
            object_id=pk,
            object_repr=name,
            before=before,
        )


def _pause_or_resume(*, actor, flow: Flow, name: str) -> Flow:
    action = AuditAction.PAUSE if name == "pause" else AuditAction.RESUME
    with audited_attempt(
        actor=actor, action=action, object_type="flow", object_id=flow.pk, object_repr=flow.name
    ):
        flow = Flow.objects.select_related("source", "target").get(pk=flow.pk)
        before = {"state": flow.state}
        if not lifecycle.transition(flow=flow, name=name):
            return flow  # pressing Pause twice is not a change: nothing to audit
        audit_record(
            actor=actor,
            action=action,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            before=before,
            after={"state": flow.state},
        )
    return flow


def flow_pause(*, actor, flow: Flow) -> Flow:
    """Stop replicating (positions are kept; resume continues where it stopped). Idempotent."""
    return _pause_or_resume(actor=actor, flow=flow, name="pause")


def flow_resume(*, actor, flow: Flow) -> Flow:
    return _pause_or_resume(actor=actor, flow=flow, name="resume")


# -- MM2 import -------------------------------------------------------------------------------------------
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
        columns = {
            "alias": config.alias,
            "bootstrap_servers": fields.bootstrap_servers,
            "security_protocol": fields.security_protocol,
            "sasl_mechanism": fields.sasl_mechanism,
            "client_properties": fields.client_properties,
        }
        errors |= _prefixed(
            f"clusters.{config.alias}",
            _cluster_errors(**columns, secrets=fields.secrets, instance=stored),
        )
        before = cluster_snapshot(stored) if stored else {}
        before_secrets = engine.cluster_secrets(stored) if stored else engine.empty_scopes()
        after = dict(columns) | {"client_properties": _scopes(fields.client_properties)}
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
    for config in parsed.config.flows:
        pair = (config.source, config.target)
        settings = engine.flow_fields_from_config(config)
        errors |= _prefixed(f"flows.{config.name}", engine.flow_config_errors(config, aliases=aliases))
        stored = stored_flows.get(pair)
        diff = _diff(engine.flow_settings(stored) if stored else {}, settings)
        changes.append(_change("flow", config.name, stored is not None, diff))
        flow_plans.append((stored, config, settings, bool(diff)))
        merged[pair] = config
    loops = find_replication_loops(list(merged.values()), aliases=aliases)
    if loops:
        errors[NON_FIELD] = [f"replication loop {loop}" for loop in loops]
    _raise_if(errors)
    if not apply:
        return changes

    for stored, columns, secrets, changed in cluster_plans:
        if not changed:
            continue
        before = cluster_snapshot(stored) if stored else None
        cluster = _save_cluster(stored or Cluster(), fields=columns, secrets=secrets)
        clusters[cluster.alias] = cluster
        audit_record(
            actor=actor,
            action=AuditAction.IMPORT,
            object_type="cluster",
            object_id=cluster.pk,
            object_repr=cluster.alias,
            before=before,
            after=cluster_snapshot(cluster, secrets),
        )
    for stored, config, settings, changed in flow_plans:
        if not changed:
            continue
        before = flow_snapshot(stored) if stored else None
        # Loops were checked across the whole merged configuration above; one flow at a time would see
        # the half-imported state.
        flow = stored or Flow(source=clusters[config.source], target=clusters[config.target])
        flow.source, flow.target = clusters[config.source], clusters[config.target]
        transition = _enabled_transition(flow, enabled=settings["enabled"])
        for name, value in settings.items():
            setattr(flow, name, value)
        _store_flow(flow, transition=transition)
        audit_record(
            actor=actor,
            action=AuditAction.IMPORT,
            object_type="flow",
            object_id=flow.pk,
            object_repr=flow.name,
            before=before,
            after=flow_snapshot(flow),
        )
    return changes
