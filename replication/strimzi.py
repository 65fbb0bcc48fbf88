"""Strimzi's `KafkaMirrorMaker2` resource (YAML, `kafka.strimzi.io/v1beta2` or `v1`): read as the
mm2.properties entries it means, and written back (v1beta2) from a configuration.

Reading maps each field to the entries Strimzi's operator gives MM2's connectors and hands them to the
mm2.properties reader (`parse_mm2_entries`), so a resource is judged by exactly the rules a file is; every
problem names the YAML field (`spec.mirrors[0].sourceConnector.config.tasks.max`) and its line.

    spec.clusters[].alias, bootstrapServers         clusters = ..., A.bootstrap.servers
    spec.clusters[].config                          A.<property> (Connect worker properties reported, ignored)
    spec.clusters[].tls                             A.security.protocol = SSL (SASL_SSL with SASL)
      .trustedCertificates[] (Secrets)              A.ssl.ca.pem: the certificates, one after the other
    spec.clusters[].authentication type tls         A.ssl.certificate.pem, A.ssl.key.pem
      type scram-sha-256, scram-sha-512, plain      A.sasl.mechanism, A.sasl.jaas.config (username, password)
      type oauth, custom                            refused, naming the field: no client equivalent here
    spec.mirrors[].sourceCluster, targetCluster     the flow A->B
      sourceConnector                               A->B.enabled: true unless absent, paused or stopped
        .tasksMax                                   A->B.tasks.max
      checkpointConnector, heartbeatConnector       A->B.emit.checkpoints.enabled, emit.heartbeats.enabled:
                                                    false when absent (Strimzi runs only the listed ones)
      sourceConnector/checkpointConnector/
      heartbeatConnector.config                     A->B.<property>; one property given two values is refused
      topicsPattern, topicsExcludePattern           A->B.topics, topics.exclude (over the connectors' config,
      groupsPattern, groupsExcludePattern           A->B.groups, groups.exclude  as Strimzi puts them)

The kafka.strimzi.io/v1 layout (also accepted under v1beta2, never mixed with spec.clusters) has one
target and the source in each mirror; each is read as a cluster above:

    spec.target (alias, bootstrapServers, tls, ...)  the target of every mirror (groupId and the Connect
                                                     topics reported, ignored)
    spec.mirrors[].source (alias, bootstrapServers,  the flow source->target
      tls, authentication, config)

A Kubernetes Secret cannot be read from here: each value taken from one becomes an `${env:SECRET_KEY}`
placeholder (`passwordSecret: {secretName: mm2-user, password: password}` reads `${env:MM2_USER_PASSWORD}`),
which the web import asks for and `python -m replication run` reads from its environment, like any
placeholder of an mm2.properties. Pairs no mirror names emit no heartbeats (`emit.heartbeats.enabled =
false` at the top level), as Strimzi deploys no connector for them. The Connect deployment's own fields
(`replicas`, `resources`, `connectCluster`, ...) are reported and ignored: Mirrorplane's workers are its own.

Writing (`write_strimzi`) gives one `KafkaMirrorMaker2` document per target cluster (Strimzi runs a resource's
connectors on its target's Connect cluster), whose reading gives back the same clusters and flows; secrets
are never written, only references to Secrets the header lists.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from replication.config import FLOW_PROPERTIES, ClusterConfig, FlowConfig, Mm2Config
from replication.flow_rules import CLIENT_ROLES
from replication.jaas import jaas_options, jaas_quote
from replication.mm2file import (
    MM2_PLACEHOLDERS,
    Mm2FileError,
    ParsedMm2,
    Placeholders,
    format_flow_value,
    missing_placeholders_of_entries,
    parse_mm2,
    parse_mm2_entries,
)
from replication.mm2file import missing_placeholders as missing_placeholders_of_properties
from replication.properties import PropertyLine
from replication.secrets import MASK, is_secret_property
from replication.yaml_budget import YamlBudgetError, compose_documents

logger = logging.getLogger(__name__)

API_VERSION = "kafka.strimzi.io/v1beta2"
KIND = "KafkaMirrorMaker2"
# At the top level, or as an item of a `kind: List` (what `kubectl get kafkamirrormaker2 -o yaml` prints).
_RESOURCE = re.compile(
    rf"^[ \t-]*(kind:\s*['\"]?{KIND}['\"]?|apiVersion:\s*['\"]?kafka\.strimzi\.io/)", re.MULTILINE
)
_SASL_LOGIN_MODULES = {
    "scram-sha-256": ("SCRAM-SHA-256", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    "scram-sha-512": ("SCRAM-SHA-512", "org.apache.kafka.common.security.scram.ScramLoginModule"),
    "plain": ("PLAIN", "org.apache.kafka.common.security.plain.PlainLoginModule"),
}
_CONNECTORS = ("sourceConnector", "checkpointConnector", "heartbeatConnector")
_CONNECTOR_EMITS = {
    "checkpointConnector": "emit.checkpoints.enabled",
    "heartbeatConnector": "emit.heartbeats.enabled",
}
_MIRROR_PATTERNS = {
    "topicsPattern": "topics",
    "topicsExcludePattern": "topics.exclude",
    "topicsBlacklistPattern": "topics.exclude",
    "groupsPattern": "groups",
    "groupsExcludePattern": "groups.exclude",
    "groupsBlacklistPattern": "groups.exclude",
}
_MIRROR_FIELDS = {"sourceCluster", "targetCluster", *_CONNECTORS, *_MIRROR_PATTERNS}
_CLUSTER_FIELDS = {"alias", "bootstrapServers", "config", "tls", "authentication"}
# v1's spec.target: the Connect cluster's group and topics besides the cluster's own fields.
_TARGET_CONNECT_FIELDS = frozenset(
    {"groupId", "configStorageTopic", "statusStorageTopic", "offsetStorageTopic"}
)
_ONE_LAYOUT = (
    "use one layout: spec.target with each mirror's source (kafka.strimzi.io/v1), or spec.clusters with "
    "each mirror's sourceCluster and targetCluster (v1beta2)"
)
_CONNECTOR_FIELDS = {"config", "tasksMax", "state", "pause", "autoRestart", "listOffsets", "alterOffsets"}
# Connector properties Strimzi sets itself from spec.clusters and the mirror.
_STRIMZI_OWNED = re.compile(r"(source|target)\.cluster\..+|connector\.class|name")


def is_strimzi_resource(text: str) -> bool:
    """Whether `text` is a Strimzi resource (YAML naming `kind: KafkaMirrorMaker2` or a kafka.strimzi.io
    apiVersion, at the top level or in a List's items) rather than an mm2.properties."""
    return _RESOURCE.search(text) is not None


def parse_mirrormaker(
    text: str,
    *,
    source_name: str = "mm2.properties",
    environ: Mapping[str, str] | None = None,
    placeholders: Placeholders = MM2_PLACEHOLDERS,
) -> ParsedMm2:
    """An mm2.properties text or a KafkaMirrorMaker2 resource, whichever `text` is; Mm2FileError lists
    every problem."""
    parse = parse_strimzi if is_strimzi_resource(text) else parse_mm2
    return parse(text, source_name=source_name, environ=environ, placeholders=placeholders)


def load_mm2_file(path: str | os.PathLike[str]) -> Mm2Config:
    """Parse an mm2.properties file, or a Strimzi KafkaMirrorMaker2 resource (UTF-8), logging its warnings."""
    parsed = parse_mirrormaker(Path(path).read_text(encoding="utf-8"), source_name=str(path))
    for warning in parsed.warnings:
        logger.warning("%s", warning)
    return parsed.config


def missing_placeholders(text: str, *, environ: Mapping[str, str]) -> list[str]:
    """The `${env:VAR}` placeholders (Secrets' values included) `text` reads that `environ` lacks, for
    either format; a text that cannot be read lists none (parsing reports why)."""
    if not is_strimzi_resource(text):
        return missing_placeholders_of_properties(text, environ=environ)
    try:
        entries = _ResourceReader.read(text, source_name="resource").entries()
    except Mm2FileError:
        return []
    return missing_placeholders_of_entries(entries, environ=environ)


# -- reading ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Node:
    """A YAML value with the field path and line it came from."""

    path: str
    line: int
    value: Any  # dict[str, _Node] | list[_Node] | a scalar

    def child(self, name: str) -> _Node | None:
        return self.value.get(name) if isinstance(self.value, dict) else None


def _nodes(node: yaml.Node, *, path: str, line: int, constructor: yaml.SafeLoader) -> _Node:
    """The tree under `node`; a field's line is its name's (a mapping value starts on the next line)."""
    if isinstance(node, yaml.MappingNode):
        children = {}
        for key_node, value_node in node.value:
            key = str(constructor.construct_object(key_node))
            child = f"{path}.{key}" if path and not path.endswith(":") else f"{path} {key}".strip()
            children[key] = _nodes(
                value_node, path=child, line=key_node.start_mark.line + 1, constructor=constructor
            )
        return _Node(path, line, children)
    if isinstance(node, yaml.SequenceNode):
        items = [
            _nodes(item, path=f"{path}[{index}]", line=item.start_mark.line + 1, constructor=constructor)
            for index, item in enumerate(node.value)
        ]
        return _Node(path, line, items)
    return _Node(path, line, constructor.construct_object(node))


def _yaml_error(exc: Exception, *, source_name: str, reason: str, fix: str) -> Mm2FileError:
    """What PyYAML said, at the line it names (when it names one)."""
    mark = getattr(exc, "problem_mark", None)
    return Mm2FileError(
        source_name=source_name,
        line=None if mark is None else mark.line + 1,
        property_name="YAML",
        reason=f"{reason}: {getattr(exc, 'problem', None) or exc}",
        fix=fix,
    )


def _env_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()


@dataclass
class _Entry:
    value: str
    node: _Node


class _ResourceReader:
    """The mm2.properties entries of one resource text, with the field each came from."""

    def __init__(self, *, source_name: str) -> None:
        self.source_name = source_name
        self.errors: list[Mm2FileError] = []
        self.warnings: list[str] = []
        self.properties: dict[str, _Entry] = {}
        self.fields: dict[str, _Node] = {}  # mm2 key -> the field that names it, set or not
        self.aliases: dict[str, _Node] = {}
        self.pairs: dict[tuple[str, str], _Node] = {}
        self.document_aliases: set[str] = set()
        self.secrets: dict[str, tuple[str, str]] = {}  # environment variable -> (Secret, key)
        self.lines: dict[str, int] = {}  # field path -> line, for the line of a missing field's parent

    @classmethod
    def read(cls, text: str, *, source_name: str) -> _ResourceReader:
        reader = cls(source_name=source_name)
        try:
            documents = compose_documents(text)
        except YamlBudgetError as exc:
            raise Mm2FileError(
                source_name=source_name, line=exc.line, property_name="YAML", reason=exc.reason, fix=exc.fix
            ) from None
        except yaml.YAMLError as exc:
            raise _yaml_error(
                exc,
                source_name=source_name,
                reason="not valid YAML",
                fix="correct the YAML syntax (indentation, quotes, ':' after each field name)",
            ) from None
        constructor = yaml.SafeLoader("")
        try:
            roots = [
                _nodes(
                    document,
                    path="" if len(documents) == 1 else f"document {index + 1}:",
                    line=document.start_mark.line + 1,
                    constructor=constructor,
                )
                for index, document in enumerate(documents)
            ]
        except (yaml.YAMLError, ValueError, KeyError) as exc:  # a core tag on a value it cannot be: !!int abc
            raise _yaml_error(
                exc,
                source_name=source_name,
                reason="a value cannot be read",
                fix="remove the value's tag (!!int, !!bool, ...) or write a value of that type",
            ) from None
        resources = [resource for root in roots for resource in reader.resources(root)]
        for resource in resources:
            reader.index(resource)
            reader.read_resource(resource)
        if not resources:
            reader.error(None, "kind", "the text holds no resource", f"paste a {KIND} resource (YAML)")
        if reader.errors:
            raise Mm2FileError.collect(reader.errors)
        return reader

    def resources(self, root: _Node) -> list[_Node]:
        """A document's resources: itself, or the items of a `kind: List` (kubectl's `-o yaml` output)."""
        kind = root.child("kind")
        if kind is None or kind.value != "List":
            return [root]
        items = root.child("items")
        if items is None:
            self.error(kind, "items", "a List without items", f"export the {KIND} resources with their items")
            return []
        return self.sequence(items)

    def index(self, node: _Node) -> None:
        self.lines[node.path] = node.line
        if isinstance(node.value, dict):
            children: Any = node.value.values()
        else:
            children = node.value if isinstance(node.value, list) else ()
        for child in children:
            self.index(child)

    # -- reporting ---------------------------------------------------------------------------------------
    def error(self, node: _Node | None, field_name: str, reason: str, fix: str) -> None:
        """A problem of `field_name`, at `node`'s line (a missing field: its closest parent's)."""
        parent = field_name
        while node is None and parent and parent not in self.lines:
            shorter = re.sub(r"(\.[^.\[]*|\[\d+\])$", "", parent)
            parent = "" if shorter == parent else shorter
        self.errors.append(
            Mm2FileError(
                source_name=self.source_name,
                line=node.line if node is not None else self.lines.get(parent),
                property_name=field_name,
                reason=reason,
                fix=fix,
            )
        )

    def warn(self, node: _Node, message: str) -> None:
        self.warnings.append(f"{self.source_name} line {node.line}: {node.path}: {message}")

    def mapping(self, node: _Node | None, *, required: bool = False, name: str = "") -> dict[str, _Node]:
        if node is None:
            if required:
                self.error(None, name, "missing", f"add {name}")
            return {}
        if not isinstance(node.value, dict):
            self.error(node, node.path, "must be a mapping of fields", "indent its fields below it")
            return {}
        return node.value

    def sequence(self, node: _Node | None) -> list[_Node]:
        if node is None:
            return []
        if not isinstance(node.value, list):
            self.error(node, node.path, "must be a list", "write one '- ' item per entry")
            return []
        return node.value

    def text(self, node: _Node | None, *, required: str = "") -> str | None:
        """A scalar field as MM2 reads it (booleans as true/false); None (and an error) when it is not one."""
        if node is None:
            if required:
                self.error(None, required, "missing", f"set {required}")
            return None
        value = node.value
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, int | float | str):
            return str(value)
        reason = "has no value" if value is None else "must be a single value, not a list or mapping"
        self.error(
            node, node.path, reason, "give it one value (quote it if it starts with a special character)"
        )
        return None

    def unknown_fields(self, fields: Mapping[str, _Node], known: set[str], *, what: str) -> None:
        for name, node in fields.items():
            if name not in known:
                self.warn(node, f"not a {what} field Mirrorplane reads; ignored")

    # -- entries -----------------------------------------------------------------------------------------
    def set(self, key: str, value: str, node: _Node) -> None:
        """One entry; the same key given a different value by two fields is an error naming both."""
        self.fields.setdefault(key, node)
        current = self.properties.get(key)
        if current is None:
            self.properties[key] = _Entry(value, node)
        elif current.value != value:
            self.error(
                node,
                node.path,
                f"sets {key} to '{value}' while {current.node.path} (line {current.node.line}) sets it to "
                f"'{current.value}'",
                "give both the same value, or keep one of them (Mirrorplane runs a flow's connectors as one)",
            )

    def override(self, key: str, value: str, node: _Node, *, why: str) -> None:
        """An entry that wins over the connectors' config, as Strimzi puts it after theirs."""
        current = self.properties.get(key)
        if current is not None and current.value != value:
            self.warn(current.node, f"{why}: '{value}' from {node.path} is used")
        self.fields[key] = node
        self.properties[key] = _Entry(value, node)

    def entries(self) -> list[PropertyLine]:
        return [PropertyLine(key, entry.value, entry.node.line) for key, entry in self.properties.items()]

    # -- the resource ------------------------------------------------------------------------------------
    def read_resource(self, root: _Node) -> None:
        prefix = f"{root.path} " if root.path else ""
        self.document_aliases = set()
        fields = self.mapping(root, required=True, name=f"{prefix}kind")
        kind_node = fields.get("kind")
        kind = self.text(kind_node, required=f"{prefix}kind")
        if kind is not None and kind != KIND:
            self.error(
                kind_node,
                kind_node.path,
                f"'{kind}' is not a {KIND}",
                f"import a {KIND} resource (MirrorMaker 1's KafkaMirrorMaker has no MM2 equivalent)"
                if kind == "KafkaMirrorMaker"
                else f"import a {KIND} resource",
            )
            return
        spec_fields = self.mapping(fields.get("spec"), required=True, name=f"{prefix}spec")
        mirrors = spec_fields.get("mirrors")
        v1 = "target" in spec_fields
        ignored = sorted(
            set(spec_fields) - {"clusters", "mirrors", *(("target", "connectCluster") if v1 else ())}
        )
        if ignored:
            self.warn(
                fields["spec"],
                f"{', '.join(ignored)}: the Connect deployment Strimzi runs; ignored (Mirrorplane's workers "
                "are its own)",
            )
        if v1:
            self.read_v1_spec(spec_fields, prefix=prefix)
            return
        for cluster in self.sequence(spec_fields.get("clusters")):
            self.read_cluster(cluster)
        if not self.aliases:
            self.error(
                spec_fields.get("clusters"),
                f"{prefix}spec.clusters",
                "no cluster",
                "list the clusters, each with alias and bootstrapServers",
            )
            return
        for mirror in self.sequence(mirrors):
            if isinstance(mirror.value, dict) and "source" in mirror.value:
                source = mirror.value["source"]
                self.error(
                    source,
                    source.path,
                    "kafka.strimzi.io/v1's mirror 'source' in a resource without spec.target",
                    _ONE_LAYOUT,
                )
                continue
            self.read_mirror(mirror)
        if mirrors is not None:
            # Strimzi runs heartbeat connectors only where a mirror lists one.
            self.set("emit.heartbeats.enabled", "false", mirrors)

    def read_v1_spec(self, spec_fields: Mapping[str, _Node], *, prefix: str) -> None:
        """The kafka.strimzi.io/v1 layout: one `spec.target` cluster, each mirror naming its `source`
        cluster in full. Mixed with v1beta2's spec.clusters or connectCluster it is refused, as Strimzi's
        operator refuses it."""
        for legacy in ("clusters", "connectCluster"):
            if legacy in spec_fields:
                node = spec_fields[legacy]
                self.error(
                    node,
                    node.path,
                    f"v1beta2's {legacy} beside kafka.strimzi.io/v1's spec.target",
                    _ONE_LAYOUT,
                )
        target = self.read_cluster(spec_fields["target"], connect_fields=_TARGET_CONNECT_FIELDS)
        mirrors = spec_fields.get("mirrors")
        if mirrors is None:
            self.error(None, f"{prefix}spec.mirrors", "missing", "list the mirrors, each with its source")
            return
        for mirror in self.sequence(mirrors):
            fields = self.mapping(mirror)
            for legacy in ("sourceCluster", "targetCluster"):
                if legacy in fields:
                    self.error(
                        fields[legacy],
                        fields[legacy].path,
                        f"v1beta2's {legacy} in a kafka.strimzi.io/v1 mirror",
                        "describe the source cluster in the mirror's source (alias, bootstrapServers, tls, "
                        "authentication, config); the target is spec.target",
                    )
            if "source" not in fields:
                if fields:
                    self.error(
                        mirror,
                        f"{mirror.path}.source",
                        "missing",
                        "add the source cluster: alias, bootstrapServers and its tls/authentication/config",
                    )
                continue
            alias_node = self.mapping(fields["source"]).get("alias")
            if target is not None and alias_node is not None and alias_node.value == target:
                self.error(
                    alias_node,
                    alias_node.path,
                    f"the source '{target}' is the target's alias",
                    "a mirror copies from another cluster: give each cluster its own alias",
                )
                continue
            source = self.read_cluster(fields["source"])
            if source is None or target is None:
                continue
            self.read_mirror(mirror, ends=(source, target))
        # Strimzi's v1 runs no heartbeat connector.
        self.set("emit.heartbeats.enabled", "false", mirrors)

    def read_cluster(self, cluster: _Node, *, connect_fields: frozenset[str] = frozenset()) -> str | None:
        """A cluster's entries; its alias (None when it cannot be read). `connect_fields`: fields of the
        Connect deployment it may carry (v1's target), reported and ignored."""
        fields = self.mapping(cluster)
        if not fields:
            return None
        self.unknown_fields(fields, _CLUSTER_FIELDS | connect_fields, what="cluster")
        for name in sorted(connect_fields & set(fields)):
            self.warn(fields[name], "Kafka Connect's own (Mirrorplane keeps no Connect topics); ignored")
        alias = self.text(fields.get("alias"), required=f"{cluster.path}.alias")
        if alias is None:
            return None
        if alias in self.document_aliases:
            self.error(
                cluster, f"{cluster.path}.alias", f"alias '{alias}' is listed twice", "list each cluster once"
            )
            return None
        self.document_aliases.add(alias)
        self.aliases.setdefault(alias, cluster)  # another resource may list it too: then with the same fields
        self.fields[f"{alias}.bootstrap.servers"] = fields.get("bootstrapServers", cluster)
        if (
            servers := self.text(fields.get("bootstrapServers"), required=f"{cluster.path}.bootstrapServers")
        ) is not None:
            self.set(f"{alias}.bootstrap.servers", servers, fields["bootstrapServers"])
        for name, node in self.mapping(fields.get("config")).items():
            if (value := self.text(node)) is not None:
                self.set(f"{alias}.{name}", value, node)
        tls = fields.get("tls")
        sasl = self.read_authentication(alias, fields.get("authentication"), tls=tls)
        if tls is not None:
            certificates = []
            for item in self.sequence(self.mapping(tls).get("trustedCertificates")):
                reference = self.secret_reference(item, "certificate", "pattern")
                if reference is not None:
                    certificates.append(self.secret_placeholder(*reference))
            if certificates:
                self.set(f"{alias}.ssl.ca.pem", "\n".join(certificates), tls)
        protocol = ("SASL_" if sasl else "") + ("SSL" if tls is not None else "PLAINTEXT")
        if protocol != "PLAINTEXT":
            self.set(f"{alias}.security.protocol", protocol, tls or fields["authentication"])
        return alias

    def secret_placeholder(self, secret: str, key: str) -> str:
        variable = _env_name(secret, key)
        self.secrets[variable] = (secret, key)
        return f"${{env:{variable}}}"

    def secret_reference(self, node: _Node, *keys: str) -> tuple[str, str] | None:
        """(secretName, key) of a Secret reference; the first of `keys` present names the key."""
        fields = self.mapping(node)
        secret = self.text(fields.get("secretName"), required=f"{node.path}.secretName")
        key_field = next((key for key in keys if key in fields), keys[0])
        key = self.text(fields.get(key_field), required=f"{node.path}.{key_field}")
        return None if secret is None or key is None else (secret, key)

    def read_authentication(self, alias: str, node: _Node | None, *, tls: _Node | None) -> bool:
        """The cluster's client authentication entries; whether it authenticates with SASL."""
        if node is None:
            return False
        fields = self.mapping(node)
        type_node = fields.get("type")
        kind = self.text(type_node, required=f"{node.path}.type")
        if kind is None:
            return False
        if kind == "tls":
            if tls is None:
                self.error(
                    type_node,
                    type_node.path,
                    "TLS client authentication needs TLS",
                    f"add {node.path.rsplit('.', 1)[0]}.tls",
                )
                return False
            certificate_node = fields.get("certificateAndKey")
            if certificate_node is None:
                self.error(
                    node,
                    f"{node.path}.certificateAndKey",
                    "missing",
                    "name the Secret with the client certificate and key",
                )
                return False
            certificate = self.secret_reference(certificate_node, "certificate")
            key = self.secret_reference(certificate_node, "key")
            if certificate is not None and key is not None:
                self.set(
                    f"{alias}.ssl.certificate.pem", self.secret_placeholder(*certificate), certificate_node
                )
                self.set(f"{alias}.ssl.key.pem", self.secret_placeholder(*key), certificate_node)
            return False
        if kind not in _SASL_LOGIN_MODULES:
            self.error(
                type_node,
                type_node.path,
                f"authentication type '{kind}' has no equivalent in Mirrorplane's clients",
                "use tls, scram-sha-256, scram-sha-512 or plain, or import without it and set the cluster's "
                "client properties in Mirrorplane",
            )
            return False
        mechanism, login_module = _SASL_LOGIN_MODULES[kind]
        username = self.text(fields.get("username"), required=f"{node.path}.username")
        password_node = fields.get("passwordSecret")
        if password_node is None:
            self.error(node, f"{node.path}.passwordSecret", "missing", "name the Secret holding the password")
            return True
        password = self.secret_reference(password_node, "password")
        if username is None or password is None:
            return True
        self.set(f"{alias}.sasl.mechanism", mechanism, type_node)
        self.set(
            f"{alias}.sasl.jaas.config",
            f'{login_module} required username="{jaas_quote(username)}" password="{self.secret_placeholder(*password)}";',
            node,
        )
        return True

    def read_mirror(self, mirror: _Node, *, ends: tuple[str, str] | None = None) -> None:
        """One mirror; `ends` (source, target) when the v1 layout gave them, else the mirror's
        sourceCluster and targetCluster name them."""
        fields = self.mapping(mirror)
        if not fields:
            return
        self.unknown_fields(fields, _MIRROR_FIELDS | ({"source"} if ends else set()), what="mirror")
        source, target = ends if ends is not None else self.mirror_ends(fields, mirror)
        if source is None or target is None:
            return
        if (source, target) in self.pairs:
            first = self.pairs[(source, target)]
            self.error(
                mirror,
                mirror.path,
                f"mirrors {source}->{target} again (first at {first.path})",
                "merge the two mirrors into one",
            )
            return
        self.pairs[(source, target)] = mirror
        flow = f"{source}->{target}"
        connectors = {name: fields.get(name) for name in _CONNECTORS}
        running = {name: self.read_connector(flow, name, node) for name, node in connectors.items()}
        source_node = connectors["sourceConnector"] or mirror
        self.fields[f"{flow}.enabled"] = source_node
        self.set(f"{flow}.enabled", "true" if running["sourceConnector"] else "false", source_node)
        for name, key in _CONNECTOR_EMITS.items():
            if running[name]:
                if f"{flow}.{key}" not in self.properties:  # its config may turn it off
                    self.set(f"{flow}.{key}", "true", connectors[name])
            else:
                self.override(
                    f"{flow}.{key}",
                    "false",
                    connectors[name] or mirror,
                    why=f"{mirror.path}.{name} does not run",
                )
        set_by_current_name = set()  # an *ExcludePattern wins over its deprecated *BlacklistPattern
        for name, key in _MIRROR_PATTERNS.items():
            node = fields.get(name)
            if node is None or key in set_by_current_name:
                continue
            if name.endswith("ExcludePattern"):
                set_by_current_name.add(key)
            elif "Blacklist" in name:
                self.warn(node, f"deprecated; use {name.replace('Blacklist', 'Exclude')}")
            if (value := self.text(node)) is not None:
                self.override(f"{flow}.{key}", value, node, why=f"{mirror.path}.{name} is set")

    def mirror_ends(self, fields: Mapping[str, _Node], mirror: _Node) -> tuple[str | None, str | None]:
        """A v1beta2 mirror's (sourceCluster, targetCluster), each an alias of spec.clusters or None."""
        ends = []
        for end in ("sourceCluster", "targetCluster"):
            alias = self.text(fields.get(end), required=f"{mirror.path}.{end}")
            if alias is not None and alias not in self.aliases:
                self.error(
                    fields[end],
                    fields[end].path,
                    f"'{alias}' is not the alias of a cluster in spec.clusters",
                    f"use one of {', '.join(self.aliases)} or add the cluster",
                )
                alias = None
            ends.append(alias)
        return ends[0], ends[1]

    def read_connector(self, flow: str, name: str, node: _Node | None) -> bool:
        """The connector's config entries; whether Strimzi runs it (listed, neither paused nor stopped)."""
        if node is None:
            return False
        fields = self.mapping(node)
        self.unknown_fields(fields, _CONNECTOR_FIELDS, what="connector")
        for key, value_node in self.mapping(fields.get("config")).items():
            if _STRIMZI_OWNED.fullmatch(key):
                self.warn(value_node, "set by Strimzi from spec.clusters and the mirror; ignored")
            elif (value := self.text(value_node)) is not None:
                self.set(f"{flow}.{key}", value, value_node)
        if (tasks := fields.get("tasksMax")) is not None:
            if name == "sourceConnector":
                if (value := self.text(tasks)) is not None:
                    self.set(f"{flow}.tasks.max", value, tasks)
            else:
                self.warn(
                    tasks,
                    "Mirrorplane runs checkpoints and heartbeats as one periodic task per flow; ignored",
                )
        state = self.text(fields.get("state")) or "running"
        paused = self.text(fields.get("pause")) == "true"
        if state not in ("running", "paused", "stopped"):
            self.error(
                fields["state"],
                fields["state"].path,
                f"'{state}' is not a connector state",
                "use running, paused or stopped",
            )
        return state == "running" and not paused


def parse_strimzi(
    text: str,
    *,
    source_name: str = "KafkaMirrorMaker2",
    environ: Mapping[str, str] | None = None,
    placeholders: Placeholders = MM2_PLACEHOLDERS,
) -> ParsedMm2:
    """The clusters and flows a KafkaMirrorMaker2 resource describes (see the module docstring), plus
    warnings; raises one Mm2FileError listing every problem, each naming the resource's field."""
    reader = _ResourceReader.read(text, source_name=source_name)
    entries = [PropertyLine("clusters", ", ".join(reader.aliases), 1), *reader.entries()]
    fields = {key: node.path for key, node in reader.fields.items()} | {"clusters": "spec.clusters"}
    try:
        parsed = parse_mm2_entries(
            entries, source_name=source_name, environ=environ, placeholders=placeholders
        )
    except Mm2FileError as exc:
        raise Mm2FileError.collect(
            [
                Mm2FileError(
                    source_name=error.source_name,
                    line=error.line,
                    property_name=fields.get(error.property_name, error.property_name),
                    reason=error.reason,
                    fix=_secret_fix(error, reader.secrets),
                )
                for error in exc.errors
            ]
        ) from None
    return ParsedMm2(
        parsed.config,
        (*reader.warnings, *(_named(w, fields, source_name) for w in parsed.warnings)),
        parsed.placeholder_properties,
    )


def _secret_fix(error: Mm2FileError, secrets: Mapping[str, tuple[str, str]]) -> str:
    """The fix of an unset placeholder that stands for a Secret's value names the Secret and its key."""
    match = re.fullmatch(r"environment variable (\S+) is not set", error.reason)
    if match is None or match.group(1) not in secrets:
        return error.fix
    secret, key = secrets[match.group(1)]
    return f"export {match.group(1)} with the value of key '{key}' of the Kubernetes Secret {secret}"


def _named(warning: str, fields: Mapping[str, str], source_name: str) -> str:
    """A reader warning with the mm2.properties key it starts with replaced by the resource's field."""
    head, separator, rest = warning.partition(": ")
    if not head.startswith(source_name) or not separator:
        return warning
    key = max((key for key in fields if re.match(rf"{re.escape(key)}\b", rest)), key=len, default=None)
    return warning if key is None else f"{head}: {fields[key]}{rest[len(key) :]}"


# -- writing ----------------------------------------------------------------------------------------------
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
    kind = next((kind for kind, (name, _) in _SASL_LOGIN_MODULES.items() if name == mechanism), None)
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
        secret = is_secret_property(name) or scopes[name] in secret_properties
        if secret or name.partition(".")[2] in _TLS_MATERIAL:
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

    configs: dict[str, dict[str, Any]] = {name: {} for name in _CONNECTORS}
    for name in changed:
        holders = (
            [c for c in _CONNECTORS if c == "sourceConnector" or listed[c]]
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
    for name in _CONNECTORS:
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
    secrets, omitted = _SecretKeys({}), []
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
