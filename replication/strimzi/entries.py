"""The mm2.properties entries a resource's fields mean, each with the field it came from, and the
problems found on the way: what `ResourceReader` (`replication.strimzi.reading`) builds on. A field read
as a mapping, a list or one value reports, at its line, a field that is not one; two fields giving one
entry two values is a problem naming both."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from replication.mm2file import Mm2FileError
from replication.properties import PropertyLine
from replication.strimzi.yaml_fields import FieldNode


@dataclass
class _Entry:
    value: str
    node: FieldNode


class FieldEntries:
    """The entries read so far, the fields that name them, the problems and the warnings."""

    def __init__(self, *, source_name: str) -> None:
        self.source_name = source_name
        self.errors: list[Mm2FileError] = []
        self.warnings: list[str] = []
        self.properties: dict[str, _Entry] = {}
        self.fields: dict[str, FieldNode] = {}  # mm2 key -> the field that names it, set or not
        self.lines: dict[str, int] = {}  # field path -> line, for the line of a missing field's parent

    def index(self, node: FieldNode) -> None:
        self.lines[node.path] = node.line
        if isinstance(node.value, dict):
            children: Any = node.value.values()
        else:
            children = node.value if isinstance(node.value, list) else ()
        for child in children:
            self.index(child)

    # -- reporting ---------------------------------------------------------------------------------------
    def error(self, node: FieldNode | None, field_name: str, reason: str, fix: str) -> None:
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

    def warn(self, node: FieldNode, message: str) -> None:
        self.warnings.append(f"{self.source_name} line {node.line}: {node.path}: {message}")

    def mapping(
        self, node: FieldNode | None, *, required: bool = False, name: str = ""
    ) -> dict[str, FieldNode]:
        if node is None:
            if required:
                self.error(None, name, "missing", f"add {name}")
            return {}
        if not isinstance(node.value, dict):
            self.error(node, node.path, "must be a mapping of fields", "indent its fields below it")
            return {}
        return node.value

    def sequence(self, node: FieldNode | None) -> list[FieldNode]:
        if node is None:
            return []
        if not isinstance(node.value, list):
            self.error(node, node.path, "must be a list", "write one '- ' item per entry")
            return []
        return node.value

    def text(self, node: FieldNode | None, *, required: str = "") -> str | None:
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

    def unknown_fields(self, fields: Mapping[str, FieldNode], known: set[str], *, what: str) -> None:
        for name, node in fields.items():
            if name not in known:
                self.warn(node, f"not a {what} field Mirrorplane reads; ignored")

    # -- entries -----------------------------------------------------------------------------------------
    def set(self, key: str, value: str, node: FieldNode) -> None:
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

    def override(self, key: str, value: str, node: FieldNode, *, why: str) -> None:
        """An entry that wins over the connectors' config, as Strimzi puts it after theirs."""
        current = self.properties.get(key)
        if current is not None and current.value != value:
            self.warn(current.node, f"{why}: '{value}' from {node.path} is used")
        self.fields[key] = node
        self.properties[key] = _Entry(value, node)

    def entries(self) -> list[PropertyLine]:
        return [PropertyLine(key, entry.value, entry.node.line) for key, entry in self.properties.items()]
