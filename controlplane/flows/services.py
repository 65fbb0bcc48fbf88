"""Writes of clusters and flows: one transaction each, validated by the engine's rules, audited. The MM2
import (`controlplane.flows.mm2`) stores through the same checks and savers (`cluster_errors`,
`cluster_save`, `enabled_transition`, `flow_store`).

A refused change (invalid input, a replication loop, a conflict) leaves nothing behind but an audit
event with outcome "refused"; secrets never reach the audit log (only their names, masked). The flow's
state is not written here but by the lifecycle (controlplane.flows.lifecycle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import IntegrityError, transaction

from controlplane.core.audit import audit_record, audited_attempt
from controlplane.core.errors import NON_FIELD, ServiceConflict, ServiceValidationError
from controlplane.core.models import AuditAction
from controlplane.core.outbound import REGISTRY_CREDENTIALS_FIX, outbound_url_error
from controlplane.flows import engine, lifecycle, pools
from controlplane.flows.models import Cluster, Flow, FlowState, SaslMechanism, SecurityProtocol
from replication.client_properties import client_property_problem, not_applicable_reason
from replication.config import FLOW_PROPERTIES, SCHEMA_REGISTRY_PREFIX, FlowConfig
from replication.flow_rules import flow_problems
from replication.secrets import MASK
from replication.topology import find_replication_loops

Errors = dict[str, list[str]]
FLOW_SETTING_NAMES = frozenset(prop.field for prop in FLOW_PROPERTIES) | {"extra", "pool"}
REGISTRY_URL = SCHEMA_REGISTRY_PREFIX + "url"
CLUSTER_FIELD_NAMES = frozenset(
    {"alias", "bootstrap_servers", "security_protocol", "sasl_mechanism", "client_properties"}
)


def raise_if_errors(errors: Errors) -> None:
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


def cluster_errors(
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


def property_scopes(value: Mapping[str, Mapping[str, str]] | None) -> engine.ScopedProperties:
    scoped = engine.empty_scopes()
    for scope, properties in (value or {}).items():
        scoped.setdefault(scope, {}).update(properties)
    return scoped


def cluster_save(cluster: Cluster, *, fields: Mapping[str, Any], secrets: engine.ScopedProperties) -> Cluster:
    """Validate and store; `fields` are Cluster columns, `secrets` the full set of secret properties."""
    values = {name: getattr(cluster, name) for name in CLUSTER_FIELD_NAMES} | dict(fields)
    values["client_properties"] = property_scopes(values["client_properties"])
    raise_if_errors(cluster_errors(**values, secrets=secrets, instance=cluster if cluster.pk else None))
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
    raise_if_errors(_scoped_errors(changes or {}, field_name="secret_properties", secret=True))
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
        cluster = cluster_save(
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
        cluster_save(cluster, fields=changes or {}, secrets=secret_values)
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


def enabled_transition(flow: Flow, *, enabled: bool) -> str | None:
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


def flow_store(flow: Flow, *, transition: str | None) -> None:
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
    raise_if_errors(
        _flow_errors(source=source, target=target, settings=settings, instance=flow if flow.pk else None)
    )
    transition = enabled_transition(flow, enabled=settings.get("enabled", flow.enabled))
    flow.source, flow.target = source, target
    for name, value in settings.items():
        setattr(flow, name, value)
    try:
        with transaction.atomic():
            flow_store(flow, transition=transition)
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
