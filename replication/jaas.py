"""MM2 (Java) files configure SASL with a JAAS line (`sasl.jaas.config`); librdkafka wants
`sasl.username`/`sasl.password`, and the Strimzi export writes the line back. One reading and one writing
of its quoted options: a value's backslash escapes (`\\"`, `\\\\`) are undone when read and made when written."""

from __future__ import annotations

import re

_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')
_ESCAPE = re.compile(r"\\(.)")


def jaas_options(jaas: str) -> dict[str, str]:
    """The quoted options of a JAAS line (`username="a\\"b"` -> {"username": 'a"b'}), unescaped."""
    return {name: _ESCAPE.sub(r"\1", value) for name, value in _OPTION.findall(jaas)}


def jaas_quote(value: str) -> str:
    """`value` as a JAAS option's quoted text (the inverse of `jaas_options`)."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
