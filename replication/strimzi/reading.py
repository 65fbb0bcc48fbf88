"""Reading a KafkaMirrorMaker2 resource (see `replication.strimzi`) as the mm2.properties entries
Strimzi's operator gives MM2's connectors, then reading those as a file's are (`parse_mm2_entries`): a
resource is judged by exactly the rules a file is, every problem naming the resource's field."""

from __future__ import annotations

import re
from collections.abc import Mapping

from replication.jaas import jaas_quote
from replication.mm2file import (
    MM2_PLACEHOLDERS,
    Mm2FileError,
    ParsedMm2,
    Placeholders,
    parse_mm2_entries,
)
from replication.properties import PropertyLine
from replication.strimzi.entries import FieldEntries
from replication.strimzi.resource import CONNECTORS, KIND, SASL_LOGIN_MODULES
from replication.strimzi.yaml_fields import FieldNode, read_documents

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
_MIRROR_FIELDS = {"sourceCluster", "targetCluster", *CONNECTORS, *_MIRROR_PATTERNS}
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


def _env_name(*parts: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", "_".join(parts)).strip("_").upper()


class ResourceReader(FieldEntries):
    """The mm2.properties entries of one resource text, with the field each came from."""

    def __init__(self, *, source_name: str) -> None:
        super().__init__(source_name=source_name)
        self.aliases: dict[str, FieldNode] = {}
        self.pairs: dict[tuple[str, str], FieldNode] = {}
        self.document_aliases: set[str] = set()
        self.secrets: dict[str, tuple[str, str]] = {}  # environment variable -> (Secret, key)

    @classmethod
    def read(cls, text: str, *, source_name: str) -> ResourceReader:
        reader = cls(source_name=source_name)
        roots = read_documents(text, source_name=source_name)
        resources = [resource for root in roots for resource in reader.resources(root)]
        for resource in resources:
            reader.index(resource)
            reader.read_resource(resource)
        if not resources:
            reader.error(None, "kind", "the text holds no resource", f"paste a {KIND} resource (YAML)")
        if reader.errors:
            raise Mm2FileError.collect(reader.errors)
        return reader

    def resources(self, root: FieldNode) -> list[FieldNode]:
        """A document's resources: itself, or the items of a `kind: List` (kubectl's `-o yaml` output)."""
        kind = root.child("kind")
        if kind is None or kind.value != "List":
            return [root]
        items = root.child("items")
        if items is None:
            self.error(kind, "items", "a List without items", f"export the {KIND} resources with their items")
            return []
        return self.sequence(items)

    def read_resource(self, root: FieldNode) -> None:
        prefix = f"{root.path} " if root.path else ""
        self.document_aliases = set()
        fields = self.mapping(root, required=True, name=f"{prefix}kind")
        kind_node = fields.get("kind")
        kind = self.text(kind_node, required=f"{prefix}kind")
        if kind_node is not None and kind is not None and kind != KIND:
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

    def read_v1_spec(self, spec_fields: Mapping[str, FieldNode], *, prefix: str) -> None:
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

    def read_cluster(self, cluster: FieldNode, *, connect_fields: frozenset[str] = frozenset()) -> str | None:
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

    def secret_reference(self, node: FieldNode, *keys: str) -> tuple[str, str] | None:
        """(secretName, key) of a Secret reference; the first of `keys` present names the key."""
        fields = self.mapping(node)
        secret = self.text(fields.get("secretName"), required=f"{node.path}.secretName")
        key_field = next((key for key in keys if key in fields), keys[0])
        key = self.text(fields.get(key_field), required=f"{node.path}.{key_field}")
        return None if secret is None or key is None else (secret, key)

    def read_authentication(self, alias: str, node: FieldNode | None, *, tls: FieldNode | None) -> bool:
        """The cluster's client authentication entries; whether it authenticates with SASL."""
        if node is None:
            return False
        fields = self.mapping(node)
        type_node = fields.get("type")
        kind = self.text(type_node, required=f"{node.path}.type")
        if type_node is None or kind is None:
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
        if kind not in SASL_LOGIN_MODULES:
            self.error(
                type_node,
                type_node.path,
                f"authentication type '{kind}' has no equivalent in Mirrorplane's clients",
                "use tls, scram-sha-256, scram-sha-512 or plain, or import without it and set the cluster's "
                "client properties in Mirrorplane",
            )
            return False
        mechanism, login_module = SASL_LOGIN_MODULES[kind]
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

    def read_mirror(self, mirror: FieldNode, *, ends: tuple[str, str] | None = None) -> None:
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
        connectors = {name: fields.get(name) for name in CONNECTORS}
        running = {name: self.read_connector(flow, name, node) for name, node in connectors.items()}
        source_node = connectors["sourceConnector"] or mirror
        self.fields[f"{flow}.enabled"] = source_node
        self.set(f"{flow}.enabled", "true" if running["sourceConnector"] else "false", source_node)
        for name, key in _CONNECTOR_EMITS.items():
            connector = connectors[name]
            if connector is not None and running[name]:
                if f"{flow}.{key}" not in self.properties:  # its config may turn it off
                    self.set(f"{flow}.{key}", "true", connector)
            else:
                self.override(
                    f"{flow}.{key}",
                    "false",
                    connector or mirror,
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

    def mirror_ends(
        self, fields: Mapping[str, FieldNode], mirror: FieldNode
    ) -> tuple[str | None, str | None]:
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

    def read_connector(self, flow: str, name: str, node: FieldNode | None) -> bool:
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
    reader = ResourceReader.read(text, source_name=source_name)
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
