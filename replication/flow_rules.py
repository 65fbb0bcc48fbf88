"""The rules a flow's settings obey, in one place, as typed problems (field, value, reason, fix).

The mm2.properties reader (`replication.mm2file`), `python -m replication validate`, the control plane's
services (and so its API and web forms) all judge a flow here, so a value is accepted or refused, with the
same reason and fix, whichever way it arrives:

- `parse_flow_value`: text (a file, a form box) -> the property's type; only the type is checked;
- `value_problem`: the rules of one property's typed value (ranges, Java regexes Python can match the same
  way, known enums and policies, values MM2's file syntax can hold);
- `flow_problems`: every rule of a whole `FlowConfig` against the known cluster aliases: the values, the
  pair, the separator against the aliases, the flow-scoped client overrides (`extra`).

Replication loops involve several flows and are judged by `replication.topology`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from enum import Enum
from typing import Any

from replication.client_properties import client_property_problem, not_applicable_reason
from replication.config import FLOW_PROPERTIES, FLOW_PROPERTIES_BY_NAME, FlowConfig, FlowProperty
from replication.java_regex import PatternError, compile_java_regex
from replication.policy import policy_class_error

CLIENT_ROLES = ("producer", "consumer", "admin")
_DEPRECATED = {alias: prop.name for prop in FLOW_PROPERTIES for alias in prop.deprecated_aliases}
_INTERVAL_ENABLED = {
    prop.name: prop.name.replace("interval.seconds", "enabled")
    for prop in FLOW_PROPERTIES
    if prop.name.endswith(".interval.seconds")
}


@dataclass(frozen=True)
class FlowProblem:
    """One broken rule. `field` is the FlowConfig field (None: the flow as a whole), `property_name` its
    MM2 name (the flow's name for the flow as a whole), `value` the offending value as text."""

    field: str | None
    property_name: str
    value: str
    reason: str
    fix: str

    def message(self) -> str:
        return f"{self.reason.rstrip('.')}. Fix: {self.fix}"

    def to_dict(self) -> dict[str, str | None]:
        return asdict(self)


class FlowValueError(ValueError):
    """Text that is not a value of a property's type."""

    def __init__(self, reason: str, fix: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix


JAVA_INT_MIN, JAVA_INT_MAX = -(2**31), 2**31 - 1


# -- one property ---------------------------------------------------------------------------------------
def parse_flow_value(prop: FlowProperty, text: str) -> Any:
    """The typed value of property `prop` written as `text` (MM2's syntax: lists comma-separated, items
    trimmed, empty items dropped; booleans and enums in any case). Raises FlowValueError."""
    if prop.kind is tuple:
        return tuple(item.strip() for item in text.split(",") if item.strip())
    if prop.kind is bool:
        if text.lower() not in ("true", "false"):
            raise FlowValueError(f"'{text}' is not a boolean", "write true or false")
        return text.lower() == "true"
    if prop.kind is int:
        if not re.fullmatch(r"[+-]?\d+", text):
            raise FlowValueError(f"'{text}' is not a whole number", f"write a number, e.g. {prop.default}")
        return int(text)
    if issubclass(prop.kind, Enum):
        accepted = [member.value for member in prop.kind]
        if text.lower() not in accepted:
            raise FlowValueError(
                f"'{text}' is not one of {', '.join(accepted)}", f"write one of {', '.join(accepted)}"
            )
        return prop.kind(text.lower())
    return text


def _int_problem(name: str, number: int) -> str | None:
    if not JAVA_INT_MIN <= number <= JAVA_INT_MAX:
        return f"must be from {JAVA_INT_MIN} to {JAVA_INT_MAX} (MM2 reads it as a Java int)"
    if name.endswith(".interval.seconds") and number < 1:
        return f"must be at least 1 second; turn the task off with {_INTERVAL_ENABLED[name]} = false instead"
    if name.endswith("replication.factor") and number < 1 and number != -1:
        return "must be at least 1, or -1 for the broker's default"
    if name == "tasks.max" and number < 1:
        return "must be at least 1"
    if name == "offset.lag.max" and number < 0:
        return "must not be negative"
    return None


def _text_problem(text: str) -> tuple[str, str] | None:
    """What MM2's file syntax would change in `text`: it trims values and resolves `${...}`."""
    if text != text.strip():
        return f"'{text}' has leading or trailing whitespace, which MM2 trims", "remove the whitespace"
    if "${" in text:
        return (
            f"'{text}' contains '${{', which MM2 reads as a config provider placeholder",
            "remove '${' (placeholders are resolved when a file is imported, not stored)",
        )
    return None


def _pattern_problem(prop: FlowProperty, pattern: str) -> tuple[str, str] | None:
    if not pattern.strip():
        return "an empty pattern, which MM2's list syntax drops", "remove the empty item"
    if "," in pattern:
        return (
            f"'{pattern}' contains ',', which separates the patterns of MM2's lists",
            "write the comma as \\x2C, or split the pattern in two",
        )
    if problem := _text_problem(pattern):
        return problem
    try:
        compile_java_regex(pattern, property_name=prop.name)
    except PatternError as exc:
        return f"'{exc.pattern}' {exc.problem}: {exc.reason}", exc.fix
    return None


def value_problem(prop: FlowProperty, value: Any) -> tuple[str, str] | None:
    """(reason, fix) when `value` breaks a rule of property `prop`, else None."""
    if prop.kind is tuple:
        if isinstance(value, str) or not all(isinstance(item, str) for item in value):
            return "not a list of patterns", "give a list of Java regular expressions"
        return next(filter(None, (_pattern_problem(prop, pattern) for pattern in value)), None)
    if prop.kind is bool:
        return None if isinstance(value, bool) else (f"'{value}' is not a boolean", "write true or false")
    if prop.kind is int:
        if isinstance(value, bool) or not isinstance(value, int):
            return f"'{value}' is not a whole number", f"write a number, e.g. {prop.default}"
        fix = _int_problem(prop.name, value)
        return None if fix is None else (f"{value} is out of range", fix)
    if issubclass(prop.kind, Enum):
        accepted = ", ".join(member.value for member in prop.kind)
        return (
            None
            if isinstance(value, prop.kind)
            else (f"'{value}' is not one of {accepted}", f"write one of {accepted}")
        )
    if not isinstance(value, str):
        return f"'{value}' is not text", "write the value as text"
    if prop.name == "replication.policy.separator" and not value:
        return "the separator is empty", "use '.', the default"
    if problem := _text_problem(value):
        return problem
    if prop.name == "replication.policy.class" and (error := policy_class_error(value)):
        return error.partition(": ")[2], "use DefaultReplicationPolicy or IdentityReplicationPolicy"
    return None


# -- a whole flow ---------------------------------------------------------------------------------------
def separator_problem(flow: FlowConfig, *, aliases: Iterable[str]) -> FlowProblem | None:
    """A separator found inside a cluster alias would make remote topic names ambiguous."""
    separator = flow.replication_policy_separator
    for alias in aliases:
        if separator and separator in alias:
            return FlowProblem(
                field="replication_policy_separator",
                property_name="replication.policy.separator",
                value=separator,
                reason=f"separator '{separator}' occurs in cluster alias '{alias}', so remote topic names "
                "could not be read back",
                fix="use a separator that no alias contains, such as '.'",
            )
    return None


def extra_problems(extra: Mapping[str, str]) -> list[FlowProblem]:
    """The flow-scoped client overrides and pass-through properties (`A->B.producer.linger.ms`)."""
    problems: list[FlowProblem] = []

    def add(name: str, value: str, reason: str, fix: str) -> None:
        problems.append(FlowProblem("extra", name, value, reason, fix))

    for name, value in sorted(extra.items()):
        role, _, role_property = name.partition(".")
        if not name.strip():
            add(name, value, "a property without a name", "name it, e.g. producer.linger.ms")
        elif name in FLOW_PROPERTIES_BY_NAME:
            add(name, value, f"{name} is a flow property", "set its own field")
        elif name in _DEPRECATED:
            add(name, value, f"{name} is the old name of {_DEPRECATED[name]}", f"set {_DEPRECATED[name]}")
        elif role in CLIENT_ROLES and (problem := client_property_problem(role_property, value)):
            add(name, value, f"{name}: {problem[0]}", problem[1])
        elif role not in CLIENT_ROLES and (reason := not_applicable_reason(name)):
            add(name, value, f"{name}: {reason}", "remove it")
        elif problem := _text_problem(value):
            add(name, value, f"{name}: {problem[0]}", problem[1])
    return problems


def flow_problems(flow: FlowConfig, *, aliases: Iterable[str]) -> list[FlowProblem]:
    """Every rule `flow` breaks, given the cluster aliases that exist (empty when it is valid)."""
    aliases = tuple(aliases)
    problems: list[FlowProblem] = []
    unknown = [alias for alias in (flow.source, flow.target) if alias not in aliases]
    if unknown:
        problems.append(
            FlowProblem(
                None,
                flow.name,
                unknown[0],
                f"flow {flow.name} names cluster '{unknown[0]}', which is not known",
                f"add cluster {unknown[0]} first, or correct the alias",
            )
        )
    if flow.source == flow.target:
        problems.append(
            FlowProblem(
                None,
                flow.name,
                flow.source,
                f"flow {flow.name} replicates a cluster to itself",
                "use two different aliases, source->target",
            )
        )
    for prop in FLOW_PROPERTIES:
        value = getattr(flow, prop.field)
        if problem := value_problem(prop, value):
            text = ", ".join(value) if prop.kind is tuple and not isinstance(value, str) else str(value)
            problems.append(FlowProblem(prop.field, prop.name, text, *problem))
    if (separator := separator_problem(flow, aliases=aliases)) is not None:
        problems.append(separator)
    return problems + extra_problems(flow.extra)
