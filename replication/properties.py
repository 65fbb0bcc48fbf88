"""Java's `.properties` syntax, read and written exactly as `java.util.Properties.load(Reader)` does.

The one reader of properties text in Mirrorplane: MM2 files (`replication.mm2file`) and the property
boxes of the web forms use it, so `a: b`, `a b`, escapes and continuations mean the same everywhere.

- Lines end at `\\n`, `\\r` or `\\r\\n` (nothing else: a form feed is whitespace, as in Java).
- `#` or `!` as the first non-blank character starts a comment line; blank lines are skipped.
- A line ending in an odd number of backslashes continues on the next one, whose leading whitespace is
  dropped (a comment line never continues).
- The key ends at the first unescaped `=`, `:` or whitespace; whitespace, one `=` or `:`, and whitespace
  may follow before the value.
- Escapes in keys and values: `\\t \\n \\r \\f`, `\\uXXXX`, and `\\x` for any other `x`.

Why not a library: `jproperties` (PyPI) reads the syntax, but keeps only the last value of a repeated key
and no line numbers, and every problem Mirrorplane reports names its line and warns about repeated keys.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ESCAPED = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_WHITESPACE = " \t\f"
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True)
class PropertyLine:
    """One key = value entry of a .properties text; `line` is where its logical line starts."""

    key: str
    value: str
    line: int


@dataclass(frozen=True)
class PropertiesSyntaxProblem:
    """A logical line that cannot be read (a malformed `\\uXXXX` escape), with the fix."""

    line: int
    key: str
    reason: str
    fix: str


class PropertiesSyntaxError(ValueError):
    """Every line of a text that cannot be read; `problems` lists them in file order."""

    def __init__(self, problems: list[PropertiesSyntaxProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("; ".join(f"line {p.line}: {p.key}: {p.reason}. Fix: {p.fix}" for p in problems))


def _unescape(text: str) -> str:
    out: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        index += 1
        if char != "\\" or index == len(text):
            out.append(char)
            continue
        char = text[index]
        index += 1
        if char == "u":
            digits = text[index : index + 4]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise ValueError(f"malformed \\uxxxx escape '\\u{digits}'")
            out.append(chr(int(digits, 16)))
            index += 4
        else:
            out.append(_ESCAPED.get(char, char))
    return "".join(out)


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of every non-comment logical line, continuations joined."""
    natural = _LINE_END.split(text)
    result: list[tuple[int, str]] = []
    index = 0
    while index < len(natural):
        start = index
        line = natural[index].lstrip(_WHITESPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        # An odd number of trailing backslashes continues the line (an even number is escaped backslashes).
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:
            line = line[:-1]
            if index == len(natural):
                break
            line += natural[index].lstrip(_WHITESPACE)
            index += 1
        result.append((start + 1, line))
    return result


def _split_key_value(line: str) -> tuple[str, str]:
    index = 0
    while index < len(line) and line[index] not in "=:" + _WHITESPACE:
        index += 2 if line[index] == "\\" else 1
    # The key ends at '=', ':' or whitespace; whitespace, one '=' or ':', and whitespace may follow.
    rest = line[index:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:]
    return line[:index], rest.lstrip(_WHITESPACE)


def read_properties(text: str) -> list[PropertyLine]:
    """Every entry in text order (repeated keys kept), keys and values unescaped as Java does.

    Raises PropertiesSyntaxError listing every line that cannot be read."""
    entries: list[PropertyLine] = []
    problems: list[PropertiesSyntaxProblem] = []
    for number, line in _logical_lines(text):
        raw_key, raw_value = _split_key_value(line)
        try:
            entries.append(PropertyLine(_unescape(raw_key), _unescape(raw_value), number))
        except ValueError as exc:
            problems.append(
                PropertiesSyntaxProblem(
                    line=number,
                    key=raw_key,
                    reason=str(exc),
                    fix="write \\u followed by four hexadecimal digits, or '\\\\' for a backslash",
                )
            )
    if problems:
        raise PropertiesSyntaxError(problems)
    return entries


def escape(text: str, *, key: bool) -> str:
    """`text` as a key or a value that `read_properties` reads back unchanged."""
    out: list[str] = []
    for index, char in enumerate(text):
        if char == "\\":
            out.append("\\\\")
        elif char in "\t\n\r\f":
            out.append("\\" + {"\t": "t", "\n": "n", "\r": "r", "\f": "f"}[char])
        elif char in "=:#!" or (char == " " and (key or index == 0)):
            out.append("\\" + char)
        else:
            out.append(char)
    return "".join(out)


def property_line(key: str, value: str) -> str:
    """One `key = value` line, escaped."""
    return f"{escape(key, key=True)} = {escape(value, key=False)}"
