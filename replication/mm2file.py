"""Read MirrorMaker 2's `mm2.properties` (`replication.mm2file_writing` writes it, and describes a
configuration for `validate`).

Reading follows Java's .properties syntax (what MM2 loads) and MM2's meaning of each key:

    clusters = A, B                           the cluster aliases
    A.bootstrap.servers = ...                 required for every cluster
    A.security.protocol / A.sasl.* / A.ssl.*  cluster-wide client properties (any other `A.<prop>` too)
    A.producer.* / A.consumer.* / A.admin.*   per-role client overrides
    security.protocol / sasl.* / ssl.*        top-level: defaults for every cluster
    A->B.enabled = true                       a flow (every ordered pair mentioned becomes a FlowConfig)
    A->B.<flow property>                      a flow-scoped setting (any row of FLOW_PROPERTIES)
    <flow property>                           top-level: the default for every flow
    A->B.producer.* / .consumer.* / other     kept in FlowConfig.extra
    ${env:VAR} / ${env:VAR:-default}          resolved from the environment (`Placeholders`)

Every problem of a file is collected and reported at once, each naming the line, the property, the reason
and the fix. Values are trimmed as MM2's ConfigDef trims them. The syntax is `replication.properties`'s;
a flow property's value is judged by `replication.flow_rules`, the rules the control plane applies too.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from replication.client_properties import client_property_problem, not_applicable_reason
from replication.config import (
    FLOW_PROPERTIES,
    FLOW_PROPERTIES_BY_NAME,
    ClusterConfig,
    FlowConfig,
    FlowProperty,
    Mm2Config,
)
from replication.flow_rules import (
    CLIENT_ROLES,
    FlowValueError,
    parse_flow_value,
    separator_problem,
    value_problem,
)
from replication.properties import PropertiesSyntaxError, PropertyLine, read_properties
from replication.topology import detect_replication_loops

CLUSTER_ALIAS = re.compile(r"[A-Za-z0-9_-]+")
# Top-level keys MM2 applies to every cluster's clients (CommonClientConfigs' security settings).
_SHARED_CLIENT_PROPERTY = re.compile(r"security\.protocol|sasl\..+|ssl\..+")
_PLACEHOLDER = re.compile(r"\$\{([^}:]*):([^}]*)\}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DEPRECATED: Mapping[str, FlowProperty] = {
    alias: prop for prop in FLOW_PROPERTIES for alias in prop.deprecated_aliases
}


class Mm2FileError(ValueError):
    """One or more problems in an mm2.properties file; `errors` lists every one of them."""

    def __init__(
        self,
        *,
        source_name: str,
        line: int | None,
        property_name: str,
        reason: str,
        fix: str,
        errors: tuple[Mm2FileError, ...] = (),
    ) -> None:
        self.source_name = source_name
        self.line = line
        self.property_name = property_name
        self.reason = reason
        self.fix = fix
        self.errors: tuple[Mm2FileError, ...] = errors or (self,)
        super().__init__(self._render())

    def _render(self) -> str:
        if len(self.errors) > 1:
            listed = "\n".join(f"  {error}" for error in self.errors)
            return f"{self.source_name}: {len(self.errors)} errors:\n{listed}"
        where = self.source_name if self.line is None else f"{self.source_name} line {self.line}"
        return f"{where}: {self.property_name}: {self.reason.rstrip('.')}. Fix: {self.fix}"

    @classmethod
    def collect(cls, errors: list[Mm2FileError]) -> Mm2FileError:
        first = errors[0]
        return cls(
            source_name=first.source_name,
            line=first.line,
            property_name=first.property_name,
            reason=first.reason,
            fix=first.fix,
            errors=tuple(errors),
        )


@dataclass(frozen=True)
class Placeholders:
    """How `${env:VAR}` placeholders are read.

    MM2's way (`MM2_PLACEHOLDERS`, what `python -m replication` uses): in any value, from the whole
    environment. The control plane's (`secrets_only`): only in a cluster's client properties (those it
    stores encrypted; not `security.protocol` or `sasl.mechanism`, which are shown), from the variables
    it was given, so a resolved value is never stored, shown or exported in clear. Either way an error
    about a resolved value quotes the placeholder, never the value; `unset_fix` is the fix of an
    unresolvable one (`{variable}` is its name).
    """

    secrets_only: bool = False
    unset_fix: str = "export {variable}, or give a default as ${{env:{variable}:-value}}"


MM2_PLACEHOLDERS = Placeholders()
# Client properties the control plane keeps in clear columns: no placeholder there.
_SHOWN_CLIENT_PROPERTIES = frozenset({"security.protocol", "sasl.mechanism"})


@dataclass(frozen=True)
class ParsedMm2:
    config: Mm2Config
    warnings: tuple[str, ...]
    # alias -> the (scope, property) client properties whose value a placeholder gave ("client" scope:
    # the cluster-wide ones); with `Placeholders.secrets_only` the control plane stores them as secrets.
    placeholder_properties: Mapping[str, frozenset[tuple[str, str]]] = field(default_factory=dict)


def _read_entries(text: str, *, source_name: str) -> list[PropertyLine]:
    """The file's entries (`replication.properties`); a line it cannot read is an Mm2FileError."""
    try:
        return read_properties(text)
    except PropertiesSyntaxError as exc:
        raise Mm2FileError.collect(
            [
                Mm2FileError(
                    source_name=source_name,
                    line=problem.line,
                    property_name=problem.key,
                    reason=problem.reason,
                    fix=problem.fix,
                )
                for problem in exc.problems
            ]
        ) from None


# -- interpretation --------------------------------------------------------------------------------------
@dataclass
class _FlowDraft:
    source: str
    target: str
    line: int
    settings: dict[str, tuple[Any, int]] = field(default_factory=dict)  # FlowConfig field -> (value, line)
    extra: dict[str, str] = field(default_factory=dict)


@dataclass
class _ClusterDraft:
    bootstrap_servers: str | None = None
    client: dict[str, str] = field(default_factory=dict)
    roles: dict[str, dict[str, str]] = field(default_factory=lambda: {role: {} for role in CLIENT_ROLES})
    placeholder_properties: set[tuple[str, str]] = field(default_factory=set)


class _Mm2Reader:
    def __init__(self, *, source_name: str, environ: Mapping[str, str], placeholders: Placeholders) -> None:
        self.source_name = source_name
        self.environ = environ
        self.placeholders = placeholders
        self.placeholder_keys: set[str] = set()  # the entries a placeholder gave a value to
        self.shared_placeholder_properties: set[str] = set()
        self.errors: list[Mm2FileError] = []
        self.warnings: list[str] = []
        self.aliases: tuple[str, ...] = ()
        self.clusters_line: int | None = None
        self.clusters: dict[str, _ClusterDraft] = {}
        self.shared_client: dict[str, str] = {}
        self.defaults: dict[str, tuple[Any, int]] = {}
        self.flows: dict[tuple[str, str], _FlowDraft] = {}

    def error(self, line: int | None, property_name: str, reason: str, fix: str) -> None:
        self.errors.append(
            Mm2FileError(
                source_name=self.source_name, line=line, property_name=property_name, reason=reason, fix=fix
            )
        )

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(f"{self.source_name} line {line}: {message}")

    # -- placeholders --------------------------------------------------------------------------------------
    def resolve(self, entry: PropertyLine) -> str | None:
        """The value with `${env:VAR}` placeholders replaced; None (and an error) when one cannot be."""
        failed = False
        if _PLACEHOLDER.search(entry.value):
            self.placeholder_keys.add(entry.key)

        def replace(match: re.Match[str]) -> str:
            nonlocal failed
            provider, body = match.group(1), match.group(2)
            variable, has_default, default = body.partition(":-")
            if provider != "env":
                failed = True
                self.error(
                    entry.line,
                    entry.key,
                    f"config provider '{provider}' in '{match.group(0)}' is not supported",
                    "use an environment variable placeholder ${env:VAR}",
                )
                return ""
            if not _ENV_NAME.fullmatch(variable):
                failed = True
                self.error(
                    entry.line,
                    entry.key,
                    f"'{variable}' in '{match.group(0)}' is not an environment variable name",
                    "write ${env:NAME} with letters, digits and '_'",
                )
                return ""
            if variable in self.environ:
                return self.environ[variable]
            if has_default:
                return default
            failed = True
            self.error(
                entry.line,
                entry.key,
                f"environment variable {variable} is not set",
                self.placeholders.unset_fix.format(variable=variable),
            )
            return ""

        value = _PLACEHOLDER.sub(replace, entry.value)
        return None if failed else value.strip()

    def placeholder_refused(self, entry: PropertyLine, *, secret: bool = False) -> bool:
        """Whether `entry`'s placeholder may not stand where it is (`secret`: a property stored as a
        secret); records the error."""
        refused = self.placeholders.secrets_only and not secret and entry.key in self.placeholder_keys
        if refused:
            self.error(
                entry.line,
                entry.key,
                "a ${env:...} placeholder is resolved only in a cluster's client properties (credentials, "
                "TLS material), whose values are stored encrypted; this value would be stored and shown "
                "in clear",
                "write the value itself here",
            )
        return refused

    def quoted(self, entry: PropertyLine) -> str | None:
        """How an error quotes `value`: the placeholder text when one gave it, never its secret value."""
        return entry.value if entry.key in self.placeholder_keys else None

    # -- clusters ------------------------------------------------------------------------------------------
    def read_clusters(self, entries: dict[str, PropertyLine]) -> None:
        entry = entries.get("clusters")
        if entry is None:
            self.error(None, "clusters", "missing", "list the cluster aliases, e.g. clusters = A, B")
            return
        value = self.resolve(entry)
        if self.placeholder_refused(entry):
            return  # no alias to read the other keys with: parse_mm2 reports this alone
        self.clusters_line = entry.line
        aliases = [alias.strip() for alias in (value or "").split(",") if alias.strip()]
        if value is not None and not aliases:
            self.error(
                entry.line, "clusters", "no cluster alias given", "list the aliases, e.g. clusters = A, B"
            )
        for alias in aliases:
            if not CLUSTER_ALIAS.fullmatch(alias):
                self.error(
                    entry.line,
                    "clusters",
                    f"'{alias}' is not a valid cluster alias",
                    "use only letters, digits, '_' and '-' (no '.', which separates remote topic names, "
                    "and no '->', which names flows)",
                )
            elif aliases.count(alias) > 1 and alias not in self.clusters:
                self.error(entry.line, "clusters", f"alias '{alias}' is listed twice", "list each alias once")
            self.clusters.setdefault(alias, _ClusterDraft())
        self.aliases = tuple(self.clusters)

    def read_cluster_property(self, entry: PropertyLine, alias: str, rest: str, value: str) -> None:
        cluster = self.clusters[alias]
        role, _, role_property = rest.partition(".")
        if rest == "bootstrap.servers":
            # Refused, the text as written stands in, so that only the refusal is reported.
            cluster.bootstrap_servers = entry.value if self.placeholder_refused(entry) else value
        elif role in CLIENT_ROLES and role_property:
            if self.client_property(entry, role_property, value, role=True):
                cluster.roles[role][role_property] = value
                self.note_placeholder(entry, cluster.placeholder_properties, (role, role_property))
        elif rest in FLOW_PROPERTIES_BY_NAME or rest in _DEPRECATED:
            self.error(
                entry.line,
                entry.key,
                "flow properties cannot be scoped to one cluster",
                f"scope it to a flow ({alias}->TARGET.{rest}) or set it at the top level ({rest})",
            )
        elif self.client_property(entry, rest, value):
            cluster.client[rest] = value
            self.note_placeholder(entry, cluster.placeholder_properties, ("client", rest))

    def note_placeholder(self, entry: PropertyLine, noted: set[Any], name: Any) -> None:
        """Adds `name` to `noted` when a placeholder gave `entry` its value."""
        if entry.key in self.placeholder_keys:
            noted.add(name)

    def client_property(self, entry: PropertyLine, name: str, value: str, *, role: bool = False) -> bool:
        """Whether client property `name` goes to the clients: a not-applicable one (a Connect worker
        property, unless scoped to a client `role`) is reported (warning) and dropped, an invalid
        enumerated value is an error, and so is a placeholder where the control plane shows the value."""
        if not role and (reason := not_applicable_reason(name)):
            self.warn(entry.line, f"{entry.key}: {reason}; ignored")
            return False
        if self.placeholder_refused(entry, secret=role or name not in _SHOWN_CLIENT_PROPERTIES):
            return False
        if problem := client_property_problem(name, value, shown=self.quoted(entry)):
            self.error(entry.line, entry.key, *problem)
            return False
        return True

    # -- flow properties -----------------------------------------------------------------------------------
    def convert(self, prop: FlowProperty, value: str, *, key: str, line: int) -> tuple[bool, Any]:
        """(ok, typed value) for one flow property, judged by `replication.flow_rules`; records the error
        when not ok."""
        try:
            typed = parse_flow_value(prop, value)
        except FlowValueError as exc:
            self.error(line, key, exc.reason, exc.fix)
            return False, None
        if problem := value_problem(prop, typed):
            self.error(line, key, *problem)
            return False, None
        return True, typed

    def flow_setting(
        self, scope: dict[str, tuple[Any, int]], entry: PropertyLine, name: str, value: str, key: str
    ) -> None:
        prop = FLOW_PROPERTIES_BY_NAME.get(name)
        if prop is None:
            prop = _DEPRECATED[name]
            current = key[: len(key) - len(name)] + prop.name
            if prop.field in scope:  # the current name wins over its deprecated alias, whatever the order
                self.warn(entry.line, f"{key} is deprecated and ignored: {current} is also set")
                return
            self.warn(entry.line, f"{key} is deprecated; use {current}")
        ok, typed = self.convert(prop, value, key=key, line=entry.line)
        if ok:
            scope[prop.field] = (typed, entry.line)

    def read_flow_property(self, entry: PropertyLine, value: str) -> None:
        source, _, target_and_rest = entry.key.partition("->")
        target, _, rest = target_and_rest.partition(".")
        if not rest:
            self.error(
                entry.line,
                entry.key,
                "a flow property needs a name after the flow",
                "write e.g. A->B.enabled = true",
            )
            return
        unknown = [alias for alias in (source, target) if alias not in self.clusters]
        if unknown:
            self.error(
                entry.line,
                entry.key,
                f"flow {source}->{target} names cluster '{unknown[0]}', which is not in clusters",
                f"add {unknown[0]} to clusters = {', '.join(self.aliases)} or correct the alias",
            )
            return
        if source == target:
            self.error(
                entry.line,
                entry.key,
                f"flow {source}->{target} replicates a cluster to itself",
                "use two different aliases, source->target",
            )
            return
        if self.placeholder_refused(entry):
            return
        flow = self.flows.setdefault((source, target), _FlowDraft(source, target, entry.line))
        if rest in FLOW_PROPERTIES_BY_NAME or rest in _DEPRECATED:
            self.flow_setting(flow.settings, entry, rest, value, entry.key)
            return
        role, _, role_property = rest.partition(".")
        if role in CLIENT_ROLES:
            if not self.client_property(entry, role_property, value, role=True):
                return
        elif reason := not_applicable_reason(rest):
            self.warn(entry.line, f"{entry.key}: {reason}; ignored")
            return
        else:
            self.warn(
                entry.line, f"{entry.key}: {_unknown_property_hint(rest)}; kept with the flow but unused"
            )
        flow.extra[rest] = value

    def read_top_level(self, entry: PropertyLine, value: str) -> None:
        key = entry.key
        if key == "enabled":
            self.error(
                entry.line, key, "'enabled' only makes sense for one flow", "write A->B.enabled = true"
            )
        elif key in FLOW_PROPERTIES_BY_NAME or key in _DEPRECATED:
            if not self.placeholder_refused(entry):
                self.flow_setting(self.defaults, entry, key, value, key)
        elif _SHARED_CLIENT_PROPERTY.fullmatch(key):
            if self.client_property(entry, key, value):
                self.shared_client[key] = value
                self.note_placeholder(entry, self.shared_placeholder_properties, key)
        elif reason := not_applicable_reason(key):
            self.warn(entry.line, f"{key}: {reason}; ignored")
        else:
            prefix, _, rest = key.partition(".")
            if rest == "bootstrap.servers" or rest.partition(".")[0] in CLIENT_ROLES:
                self.error(
                    entry.line,
                    key,
                    f"'{prefix}' is not in clusters",
                    f"add {prefix} to clusters = {', '.join(self.aliases)} or correct the alias",
                )
            else:
                self.warn(entry.line, f"{key}: {_unknown_property_hint(key)}; ignored")

    def read_entry(self, entry: PropertyLine) -> None:
        if entry.key == "clusters" or entry.key.startswith("config.providers"):
            return  # config.providers*: placeholders always resolve from the environment here
        value = self.resolve(entry)
        if value is None:
            return
        if "->" in entry.key:
            self.read_flow_property(entry, value)
            return
        alias, _, rest = entry.key.partition(".")
        is_top_level_name = entry.key in FLOW_PROPERTIES_BY_NAME or entry.key in _DEPRECATED
        if alias in self.clusters and rest and not is_top_level_name:
            self.read_cluster_property(entry, alias, rest, value)
        else:
            self.read_top_level(entry, value)

    # -- assembly ------------------------------------------------------------------------------------------
    def build_clusters(self) -> tuple[ClusterConfig, ...]:
        clusters = []
        for alias, draft in self.clusters.items():
            if not draft.bootstrap_servers:
                self.error(
                    self.clusters_line,
                    f"{alias}.bootstrap.servers",
                    f"cluster {alias} has no bootstrap servers",
                    f"add {alias}.bootstrap.servers = host:9092",
                )
                continue
            clusters.append(
                ClusterConfig(
                    alias=alias,
                    bootstrap_servers=draft.bootstrap_servers,
                    client={**self.shared_client, **draft.client},
                    **draft.roles,
                )
            )
        return tuple(clusters)

    def placeholder_properties(self) -> dict[str, frozenset[tuple[str, str]]]:
        """ParsedMm2.placeholder_properties: a cluster's own, and the shared ones it does not override."""
        return {
            alias: frozenset(draft.placeholder_properties)
            | {("client", name) for name in self.shared_placeholder_properties if name not in draft.client}
            for alias, draft in self.clusters.items()
        }

    def build_flow(self, draft: _FlowDraft) -> FlowConfig:
        settings = {name: value for name, (value, _) in {**self.defaults, **draft.settings}.items()}
        flow = FlowConfig(source=draft.source, target=draft.target, extra=draft.extra, **settings)
        if (problem := separator_problem(flow, aliases=self.aliases)) is not None:
            line = {**self.defaults, **draft.settings}.get("replication_policy_separator", (None, None))[1]
            self.error(line, f"{flow.name}.{problem.property_name}", problem.reason, problem.fix)
        return flow

    def check_loops(self, flows: tuple[FlowConfig, ...]) -> None:
        for loop in detect_replication_loops(flows, aliases=self.aliases):
            first = loop.flows[0]
            line = self.flows[(first.source, first.target)].settings.get("enabled", (None, None))[1]
            self.error(
                line, f"{first.name}.enabled", f"replication loop {loop.path}: {loop.reason}", loop.fix
            )


def _unknown_property_hint(name: str) -> str:
    close = difflib.get_close_matches(name, [prop.name for prop in FLOW_PROPERTIES], n=1)
    suffix = f" (did you mean {close[0]}?)" if close else ""
    return f"not a property Mirrorplane uses{suffix}"


def missing_placeholders(text: str, *, environ: Mapping[str, str]) -> list[str]:
    """The environment variables `${env:VAR}` placeholders of `text` read that `environ` lacks and that
    have no `:-default`, in file order, each once. A text that cannot be read lists none (parse_mm2
    reports its problems)."""
    try:
        entries = read_properties(text)
    except PropertiesSyntaxError:
        return []
    return missing_placeholders_of_entries(entries, environ=environ)


def missing_placeholders_of_entries(entries: list[PropertyLine], *, environ: Mapping[str, str]) -> list[str]:
    """missing_placeholders of entries already read."""
    missing: dict[str, None] = {}
    for entry in entries:
        for match in _PLACEHOLDER.finditer(entry.value):
            variable, has_default, _ = match.group(2).partition(":-")
            wanted = match.group(1) == "env" and _ENV_NAME.fullmatch(variable) and not has_default
            if wanted and variable not in environ:
                missing[variable] = None
    return list(missing)


def parse_mm2(
    text: str,
    *,
    source_name: str = "mm2.properties",
    environ: Mapping[str, str] | None = None,
    placeholders: Placeholders = MM2_PLACEHOLDERS,
) -> ParsedMm2:
    """The clusters and flows an mm2.properties text describes, plus warnings (deprecated names, ...).
    Placeholders resolve from `environ` (the process's environment by default) as `placeholders` says.

    Raises one Mm2FileError listing every problem found.
    """
    return parse_mm2_entries(
        _read_entries(text, source_name=source_name),
        source_name=source_name,
        environ=environ,
        placeholders=placeholders,
    )


def parse_mm2_entries(
    entries: list[PropertyLine],
    *,
    source_name: str,
    environ: Mapping[str, str] | None = None,
    placeholders: Placeholders = MM2_PLACEHOLDERS,
) -> ParsedMm2:
    """parse_mm2 of entries already read (an mm2.properties text's, or those another format maps to)."""
    reader = _Mm2Reader(
        source_name=source_name,
        environ=os.environ if environ is None else environ,
        placeholders=placeholders,
    )
    last: dict[str, PropertyLine] = {}
    for entry in entries:
        if entry.key in last:
            reader.warn(
                entry.line,
                f"{entry.key} is set again (first on line {last[entry.key].line}); the last value wins",
            )
        last[entry.key] = entry
    reader.read_clusters(last)
    if reader.clusters_line is None:  # without clusters every other key would be reported as unknown
        raise Mm2FileError.collect(reader.errors)
    for entry in sorted(last.values(), key=lambda e: e.line):
        reader.read_entry(entry)
    clusters = reader.build_clusters()
    flows = tuple(reader.build_flow(draft) for draft in reader.flows.values())
    reader.check_loops(flows)
    if reader.errors:
        raise Mm2FileError.collect(reader.errors)
    if not any(flow.enabled for flow in flows):
        reader.warnings.append(f"{source_name}: no flow is enabled; set e.g. A->B.enabled = true")
    defaults = {name: value for name, (value, _) in reader.defaults.items()}
    return ParsedMm2(
        Mm2Config(clusters=clusters, flows=flows, flow_defaults=defaults),
        tuple(reader.warnings),
        reader.placeholder_properties(),
    )
