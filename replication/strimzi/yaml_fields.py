"""A pasted YAML text read under the budget (`replication.yaml_budget`) into a tree of fields, each with
its path (`spec.mirrors[0].sourceConnector`) and line, so every problem names both."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from replication.mm2file import Mm2FileError
from replication.yaml_budget import YamlBudgetError, compose_documents


@dataclass(frozen=True)
class FieldNode:
    """A YAML value with the field path and line it came from."""

    path: str
    line: int
    value: Any  # dict[str, FieldNode] | list[FieldNode] | a scalar

    def child(self, name: str) -> FieldNode | None:
        return self.value.get(name) if isinstance(self.value, dict) else None


def read_documents(text: str, *, source_name: str) -> list[FieldNode]:
    """The documents of `text` as field trees (paths start with `document N:` when there are several);
    Mm2FileError says what is over the budget, or is not YAML, at its line."""
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
        return [
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


def _nodes(node: yaml.Node, *, path: str, line: int, constructor: yaml.SafeLoader) -> FieldNode:
    """The tree under `node`; a field's line is its name's (a mapping value starts on the next line)."""
    if isinstance(node, yaml.MappingNode):
        children = {}
        for key_node, value_node in node.value:
            key = str(constructor.construct_object(key_node))
            child = f"{path}.{key}" if path and not path.endswith(":") else f"{path} {key}".strip()
            children[key] = _nodes(
                value_node, path=child, line=key_node.start_mark.line + 1, constructor=constructor
            )
        return FieldNode(path, line, children)
    if isinstance(node, yaml.SequenceNode):
        items = [
            _nodes(item, path=f"{path}[{index}]", line=item.start_mark.line + 1, constructor=constructor)
            for index, item in enumerate(node.value)
        ]
        return FieldNode(path, line, items)
    return FieldNode(path, line, constructor.construct_object(node))


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
