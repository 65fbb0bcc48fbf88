"""MM2's topic, group and config-property filters, and the Java-regex reader they share.

MM2 lists (`topics`, `topics.exclude`, `groups`, ...) are comma-separated Java regular expressions matched
against the whole name. Python's `re` reads several Java constructs differently, so every pattern goes
through `compile_java_regex`, which translates what has an exact Python equivalent and rejects, with the
property, the pattern, the reason and a fix, what has not. A pattern is never silently given another
meaning.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from replication.config import FlowConfig


class PatternError(ValueError):
    """A pattern of a filter property that is not a Java regex, or one Python cannot match identically."""

    def __init__(
        self, *, property_name: str, pattern: str, reason: str, fix: str, untranslatable: bool
    ) -> None:
        self.property_name = property_name
        self.pattern = pattern
        self.reason = reason
        self.fix = fix
        self.problem = (
            "uses a Java regular-expression feature Python cannot match identically"
            if untranslatable
            else "is not a valid regular expression"
        )
        super().__init__(f"{property_name}: '{pattern}' {self.problem}: {reason} ({fix})")


class _Problem(Exception):
    """A pattern problem before we know which property it came from (patterns are cached by text)."""

    def __init__(self, reason: str, fix: str, *, untranslatable: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.fix = fix
        self.untranslatable = untranslatable


# Java's line terminators; `.` excludes them and `$`/`\Z` may match before a final one.
_LINE_TERMINATORS = "\n\r\x85\u2028\u2029"
_JAVA_END_BEFORE_TERMINATOR = r"(?=(?:\r\n|[\n\r\x85\u2028\u2029])?\Z)"
_JAVA_DOT = r"[^\n\r\x85\u2028\u2029]"

_POSIX_CLASSES = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": r"\x00-\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": "".join("\\" + c for c in string.punctuation),
    "Graph": "a-zA-Z0-9" + "".join("\\" + c for c in string.punctuation),
    "Print": r"\x20" + "a-zA-Z0-9" + "".join("\\" + c for c in string.punctuation),
    "Blank": r" \t",
    "Cntrl": r"\x00-\x1f\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": r" \t\n\x0b\f\r",
}
# Inside a class Python can only negate a property through its own negated escapes.
_NEGATED_IN_CLASS = {"Digit": r"\D", "Space": r"\S"}

_SIMPLE_CHAR_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}

_REJECTED_ESCAPES = {
    "G": ("\\G (end of the previous match) has no Python equivalent", "remove it; filters match whole names"),
    "R": ("\\R (any line break sequence) has no Python equivalent", "use (?:\\r\\n|[\\n\\r])"),
    "X": ("\\X (extended grapheme cluster) has no Python equivalent", "match the characters explicitly"),
    "h": ("Java's \\h (horizontal whitespace) has no Python equivalent", "use [ \\t]"),
    "H": ("Java's \\H (not horizontal whitespace) has no Python equivalent", "use [^ \\t]"),
    "v": (
        "Java's \\v is vertical whitespace while Python's \\v is one vertical-tab character",
        "use [\\n\\r]",
    ),
    "V": ("Java's \\V (not vertical whitespace) has no Python equivalent", "use [^\\n\\r]"),
    "K": ("\\K is not a Java escape", "remove it"),
}

_FLAG_REJECTIONS = {
    "m": "MULTILINE makes ^ and $ match at every Java line terminator, Python's only at \\n",
    "d": "UNIX_LINES changes which line terminators . and $ see",
    "u": "UNICODE_CASE folds non-ASCII letters the way Java does, not the way Python does",
    "U": "UNICODE_CHARACTER_CLASS makes \\w, \\d and POSIX classes Unicode-aware in Java's own way",
    "x": "COMMENTS mode treats whitespace inside character classes differently in Java and Python",
}

_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_JAVA_GROUP_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9]*")


def _literal(char: str) -> str:
    """A character as a Python-regex literal, valid both inside and outside a character class."""
    return char if char.isalnum() or char == "_" else re.escape(char) if char.isascii() else char


@dataclass
class _Group:
    saved_flags: frozenset[str]
    # Python opens a scoped `(?i:` where Java's `(?i)` changes flags mid-group; closed at `|` and `)`.
    open_flag_scopes: int = 0
    flags_at_start: frozenset[str] = field(default_factory=frozenset)


class _JavaRegexTranslator:
    """One pass over a Java pattern, emitting the equivalent Python pattern (compiled with re.ASCII)."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0
        self.out: list[str] = []
        self.flags: frozenset[str] = frozenset()
        self.groups: list[_Group] = [_Group(saved_flags=frozenset())]
        self.group_count = 0
        self.group_names: set[str] = set()
        self.can_quantify = False

    def translate(self) -> str:
        while self.pos < len(self.src):
            self._step()
        if len(self.groups) > 1:
            raise _Problem("missing ')'", "close every '(' with a ')'")
        self._close_flag_scopes(self.groups[-1])
        return "".join(self.out)

    # -- helpers --------------------------------------------------------------------------------------
    def _peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.src[index] if index < len(self.src) else ""

    def _take(self) -> str:
        char = self._peek()
        self.pos += 1
        return char

    def _atom(self, text: str) -> None:
        self.out.append(text)
        self.can_quantify = True

    def _close_flag_scopes(self, group: _Group) -> None:
        self.out.append(")" * group.open_flag_scopes)
        group.open_flag_scopes = 0

    def _open_case_scope(self, group: _Group) -> None:
        """Open a Python scoped flag group matching the current case-insensitivity, if it changed."""
        if ("i" in self.flags) != ("i" in group.flags_at_start):
            self.out.append("(?i:" if "i" in self.flags else "(?-i:")
            group.open_flag_scopes += 1

    # -- top level ------------------------------------------------------------------------------------
    def _step(self) -> None:
        start = self.pos
        char = self._take()
        if char == "\\":
            self._escape(start)
        elif char == "[":
            self._atom(self._character_class(start))
        elif char == "(":
            self._open_group(start)
        elif char == ")":
            self._close_group(start)
        elif char == "|":
            group = self.groups[-1]
            self._close_flag_scopes(group)
            self.out.append("|")
            self._open_case_scope(group)
            self.can_quantify = False
        elif char == ".":
            self._atom("(?s:.)" if "s" in self.flags else _JAVA_DOT)
        elif char == "$":
            self.out.append(_JAVA_END_BEFORE_TERMINATOR)
            self.can_quantify = False
        elif char == "^":
            self.out.append("^")
            self.can_quantify = False
        elif char in "*+?{":
            self._quantifier(char, start)
        else:
            self._atom(_literal(char))

    def _quantifier(self, char: str, start: int) -> None:
        if not self.can_quantify:
            raise _Problem(f"nothing to repeat at position {start}", _repeat_fix(self.src, start))
        text = char
        if char == "{":
            match = _QUANTIFIER.match(self.src, start)
            if not match:
                raise _Problem(
                    f"'{{' at position {start} starts a repetition in Java but no {{n}}, {{n,}} or {{n,m}} follows",
                    "escape a literal brace as '\\{'",
                )
            low, high = match.group(1), match.group(3)
            if high and int(high) < int(low):
                raise _Problem(f"repetition {match.group(0)} has its maximum below its minimum", "swap them")
            text = match.group(0)
            self.pos = match.end()
        if self._peek() in ("?", "+"):
            text += self._take()  # lazy and possessive forms read the same in Python 3.11
        self.out.append(text)
        self.can_quantify = False

    # -- groups ---------------------------------------------------------------------------------------
    def _open_group(self, start: int) -> None:
        if self._peek() != "?":
            self.group_count += 1
            self._push_group("(")
            return
        self.pos += 1
        kind = self._peek()
        if kind in (":", "=", "!", ">"):
            self.pos += 1
            self._push_group("(?" + kind)
        elif self.src.startswith(("<=", "<!"), self.pos):
            self.pos += 2
            self._push_group("(?" + self.src[self.pos - 2 : self.pos])
        elif kind == "<":
            self._named_group(start)
        elif kind == "P":
            raise _Problem(
                f"'(?P' at position {start} is Python syntax; Java (and so MM2) rejects it",
                "write a named group as (?<name>...)",
            )
        elif kind.isalpha() or kind == "-":
            self._inline_flags(start)
        else:
            raise _Problem(
                f"unknown group construct '(?{kind}' at position {start}",
                "use (...), (?:...), (?<name>...), lookarounds or inline flags (?i)",
            )

    def _push_group(self, opener: str, flags: frozenset[str] | None = None) -> None:
        self.groups.append(_Group(saved_flags=self.flags))
        if flags is not None:
            self.flags = flags
        self.groups[-1].flags_at_start = self.flags
        self.out.append(opener)
        self.can_quantify = False

    def _named_group(self, start: int) -> None:
        match = _JAVA_GROUP_NAME.match(self.src, self.pos + 1)
        if not match or self.src[match.end() : match.end() + 1] != ">":
            raise _Problem(
                f"bad group name at position {start}",
                "a Java group name is a letter followed by letters or digits, as in (?<region>...)",
            )
        name = match.group(0)
        if name in self.group_names:
            raise _Problem(f"group name '{name}' is used twice", "give each named group its own name")
        self.group_names.add(name)
        self.group_count += 1
        self.pos = match.end() + 1
        self._push_group(f"(?P<{name}>")

    def _inline_flags(self, start: int) -> None:
        match = re.compile(r"([a-zA-Z]*)(?:-([a-zA-Z]*))?([:)])").match(self.src, self.pos)
        if not match:
            raise _Problem(
                f"unterminated inline flags at position {start}", "write flags as (?i) or (?i:...)"
            )
        on, off, end = match.group(1), match.group(2) or "", match.group(3)
        for flag in on + off:
            if flag in _FLAG_REJECTIONS:
                raise _Problem(
                    f"inline flag '{flag}': {_FLAG_REJECTIONS[flag]}",
                    "remove the flag; only (?i) and (?s) are supported",
                    untranslatable=True,
                )
            if flag not in "is":
                raise _Problem(
                    f"unknown inline flag '{flag}' at position {start}", "Java's flags are idmsuxU"
                )
        flags = (self.flags | set(on)) - set(off)
        self.pos = match.end()
        if end == ":":
            self._push_group("(?i:" if "i" in flags else "(?-i:", frozenset(flags))
            return
        # `(?i)` changes the flags until the end of the enclosing group; Python 3.11 only allows global
        # flags at the very start, so open a scoped group that `|` and `)` close.
        group = self.groups[-1]
        self._close_flag_scopes(group)
        self.flags = frozenset(flags)
        self._open_case_scope(group)
        self.can_quantify = False

    def _close_group(self, start: int) -> None:
        if len(self.groups) == 1:
            raise _Problem(f"unmatched ')' at position {start}", "remove it or escape it as '\\)'")
        group = self.groups.pop()
        self._close_flag_scopes(group)
        self.flags = group.saved_flags
        self._atom(")")

    # -- escapes --------------------------------------------------------------------------------------
    def _escape(self, start: int) -> None:
        char = self._take()
        if not char:
            raise _Problem("the pattern ends with a lone backslash", "escape a backslash as '\\\\'")
        if char in "123456789":
            self._backreference(char, start)
        elif char in "dDwWsSB":
            self._atom("\\" + char)  # same meaning under re.ASCII, like Java's defaults
        elif char == "b":
            if self._peek() == "{":
                raise _Problem(
                    "\\b{g} (grapheme boundary) has no Python equivalent", "remove it", untranslatable=True
                )
            self.out.append("\\b")
            self.can_quantify = False
        elif char == "A":
            self.out.append("\\A")
            self.can_quantify = False
        elif char == "z":
            self.out.append("\\Z")
            self.can_quantify = False
        elif char == "Z":
            self.out.append(_JAVA_END_BEFORE_TERMINATOR)
            self.can_quantify = False
        elif char == "Q":
            self._quoted(lambda text: self._atom(re.escape(text)))
        elif char in "pP":
            body = _POSIX_CLASSES[self._property_name(char, start)]
            self._atom(f"[^{body}]" if char == "P" else f"[{body}]")
        elif char == "k":
            self._named_backreference(start)
        elif char in _REJECTED_ESCAPES:
            reason, fix = _REJECTED_ESCAPES[char]
            raise _Problem(reason, fix, untranslatable=True)
        else:
            self._atom(_literal(self._char_escape(char, start)))

    def _quoted(self, emit) -> None:
        """`\\Q...\\E`: everything up to `\\E` (or the end) is literal."""
        end = self.src.find("\\E", self.pos)
        text = self.src[self.pos : len(self.src) if end < 0 else end]
        self.pos = len(self.src) if end < 0 else end + 2
        if text:
            emit(text)

    def _char_escape(self, char: str, start: int) -> str:
        """The one character a Java escape stands for (after the backslash), or a clear rejection."""
        if char in _SIMPLE_CHAR_ESCAPES:
            return _SIMPLE_CHAR_ESCAPES[char]
        if char == "0":
            match = re.compile(r"[0-3][0-7]{2}|[0-7]{1,2}").match(self.src, self.pos)
            if not match:
                raise _Problem(
                    f"'\\0' at position {start} needs octal digits", "write \\0 followed by 1-3 octal digits"
                )
            self.pos = match.end()
            return chr(int(match.group(0), 8))
        if char == "x":
            match = re.compile(r"\{([0-9a-fA-F]{1,6})\}|([0-9a-fA-F]{2})").match(self.src, self.pos)
            if not match or int(match.group(1) or match.group(2), 16) > 0x10FFFF:
                raise _Problem(f"bad hexadecimal escape at position {start}", "write \\xhh or \\x{h...h}")
            self.pos = match.end()
            return chr(int(match.group(1) or match.group(2), 16))
        if char == "u":
            match = re.compile(r"[0-9a-fA-F]{4}").match(self.src, self.pos)
            if not match:
                raise _Problem(f"bad unicode escape at position {start}", "write \\uhhhh")
            self.pos = match.end()
            return chr(int(match.group(0), 16))
        if char == "c":
            control = self._take()
            if not control:
                raise _Problem("'\\c' at the end of the pattern needs a control letter", "write \\cX")
            return chr(ord(control) ^ 64)
        if char == "N":
            match = re.compile(r"\{([^}]*)\}").match(self.src, self.pos)
            try:
                value = unicodedata.lookup(match.group(1)) if match else ""
            except KeyError:
                value = ""
            if not value:
                raise _Problem(f"bad \\N{{name}} escape at position {start}", "use a Unicode character name")
            self.pos = match.end()
            return value
        if char.isascii() and char.isalpha():
            raise _Problem(
                f"'\\{char}' at position {start} is not a Java escape",
                f"write '{char}' without the backslash, or escape a special character",
            )
        return char  # Java lets any non-letter be escaped to mean itself

    def _property_name(self, char: str, start: int) -> str:
        """The POSIX class name of `\\p{Name}` / `\\P{Name}`; Unicode and java.lang properties are rejected."""
        match = re.compile(r"\{([A-Za-z_][A-Za-z0-9_=]*)\}|([A-Za-z])").match(self.src, self.pos)
        if not match:
            raise _Problem(f"bad \\{char} property at position {start}", "write \\p{Alpha}")
        name = match.group(1) or match.group(2)
        self.pos = match.end()
        if name not in _POSIX_CLASSES:
            raise _Problem(
                f"\\{char}{{{name}}} is a Unicode or Java property that Python's re does not know",
                f"use a POSIX class ({', '.join(_POSIX_CLASSES)}) or list the characters",
                untranslatable=True,
            )
        return name

    def _backreference(self, first: str, start: int) -> None:
        # Java reads more digits only while the number stays a group that already exists.
        number = first
        while self._peek().isdigit() and int(number + self._peek()) <= self.group_count:
            number += self._take()
        if int(number) > self.group_count:
            raise _Problem(
                f"\\{number} refers to a group that does not exist before it", "check the group number"
            )
        self._atom(f"(?:\\{number})")

    def _named_backreference(self, start: int) -> None:
        match = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)>").match(self.src, self.pos)
        if not match or match.group(1) not in self.group_names:
            raise _Problem(
                f"\\k at position {start} does not refer to a named group defined before it",
                "write \\k<name> after (?<name>...)",
            )
        self.pos = match.end()
        self._atom(f"(?P={match.group(1)})")

    # -- character classes ----------------------------------------------------------------------------
    def _character_class(self, start: int) -> str:
        negate = self._peek() == "^"
        if negate:
            self.pos += 1
        items: list[str] = []
        while True:
            char = self._peek()
            if not char:
                raise _Problem(f"unclosed character class starting at position {start}", "close it with ']'")
            if char == "]" and items:
                self.pos += 1
                return "[" + ("^" if negate else "") + "".join(items) + "]"
            if char == "[":
                raise _Problem(
                    f"'[' inside the character class at position {start} is a nested class (a union) in Java",
                    "merge the classes into one, or escape a literal bracket as '\\['",
                    untranslatable=True,
                )
            if self.src.startswith("&&", self.pos):
                raise _Problem(
                    f"'&&' in the character class at position {start} is a class intersection in Java",
                    "list the resulting characters in one class, e.g. [a-df-z] for [a-z&&[^e]]",
                    untranslatable=True,
                )
            items.extend(self._class_item(first=not items))

    def _class_item(self, *, first: bool) -> list[str]:
        """One literal, range or class escape inside `[...]`, as Python class text."""
        item_start = self.pos
        low = self._class_char()
        if low is None or isinstance(low, list):
            return low or []
        if self._peek() == "-" and self._peek(1) not in ("]", ""):
            self.pos += 1
            high = self._class_char()
            if not isinstance(high, str):
                raise _Problem(
                    f"bad character range at position {item_start}", "a range joins two single characters"
                )
            if ord(high) < ord(low):
                raise _Problem(
                    f"illegal character range {low}-{high} at position {item_start}",
                    "put the lower character first",
                )
            return [f"{_literal(low)}-{_literal(high)}"]
        return [_literal(low)]

    def _class_char(self) -> str | list[str] | None:
        """A single character (str), a set of class items (list), or None for an empty \\Q\\E."""
        start = self.pos
        char = self._take()
        if char != "\\":
            return char
        char = self._take()
        if not char:
            raise _Problem("the pattern ends with a lone backslash", "escape a backslash as '\\\\'")
        if char in "dDwWsS":
            return ["\\" + char]
        if char in "pP":
            name = self._property_name(char, start)
            if char == "p":
                return [_POSIX_CLASSES[name]]
            if name not in _NEGATED_IN_CLASS:
                raise _Problem(
                    f"\\P{{{name}}} inside a character class has no Python equivalent",
                    "use it outside the class, e.g. (?:[...]|\\P{...})",
                    untranslatable=True,
                )
            return [_NEGATED_IN_CLASS[name]]
        if char == "Q":
            quoted: list[str] = []
            self._quoted(lambda text: quoted.extend(_literal(c) for c in text))
            return quoted or None
        if char == "b":
            raise _Problem(
                f"'\\b' inside the character class at position {start} is not a Java escape (Python reads a backspace)",
                "write \\x08 for a backspace",
                untranslatable=True,
            )
        if char in _REJECTED_ESCAPES:
            reason, fix = _REJECTED_ESCAPES[char]
            raise _Problem(reason, fix, untranslatable=True)
        return self._char_escape(char, start)


def _glob_to_regex(pattern: str) -> str:
    return "".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern)


def _repeat_fix(pattern: str, position: int) -> str:
    char = pattern[position]
    if position == 0 or pattern[position - 1] in "(|":
        return f"a leading '{char}' repeats nothing; did you mean '{_glob_to_regex(pattern)}'?"
    return f"'{char}' follows another repetition; escape it as '\\{char}' if it is literal"


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> re.Pattern[str]:
    translated = _JavaRegexTranslator(pattern).translate()
    try:
        return re.compile(translated, re.ASCII)
    except re.error as exc:
        if "look-behind" in exc.msg:
            # Java accepts bounded variable-width look-behind; Python only fixed width.
            raise _Problem(exc.msg, "split it into fixed-width alternatives", untranslatable=True) from None
        raise _Problem(exc.msg, "check the regular expression syntax") from None


def compile_java_regex(pattern: str, *, property_name: str) -> re.Pattern[str]:
    """A compiled Python pattern (use fullmatch) with the meaning the Java pattern has in MM2."""
    try:
        return _compile(pattern)
    except _Problem as problem:
        raise PatternError(
            property_name=property_name,
            pattern=pattern,
            reason=problem.reason,
            fix=problem.fix,
            untranslatable=problem.untranslatable,
        ) from None


class _IncludeExcludeFilter:
    """Names matching any include pattern and no exclude pattern (MM2's default filters)."""

    def __init__(
        self, include: Sequence[str], exclude: Sequence[str], *, property_names: tuple[str, str]
    ) -> None:
        self.include_property, self.exclude_property = property_names
        self._include = [(p, compile_java_regex(p, property_name=self.include_property)) for p in include]
        self._exclude = [(p, compile_java_regex(p, property_name=self.exclude_property)) for p in exclude]

    def exclusion_reason(self, name: str) -> str | None:
        """Why `name` is filtered out, or None when it passes."""
        for pattern, compiled in self._exclude:
            if compiled.fullmatch(name):
                return f"matches {self.exclude_property} pattern '{pattern}'"
        if not any(compiled.fullmatch(name) for _, compiled in self._include):
            return f"matches no {self.include_property} pattern"
        return None

    def _passes(self, name: str) -> bool:
        return self.exclusion_reason(name) is None


class TopicFilter(_IncludeExcludeFilter):
    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        *,
        property_names: tuple[str, str] = ("topics", "topics.exclude"),
    ) -> None:
        super().__init__(include, exclude, property_names=property_names)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> TopicFilter:
        return cls(flow.topics, flow.topics_exclude)

    def should_replicate_topic(self, topic: str) -> bool:
        return self._passes(topic)


class GroupFilter(_IncludeExcludeFilter):
    def __init__(
        self,
        include: Sequence[str],
        exclude: Sequence[str],
        *,
        property_names: tuple[str, str] = ("groups", "groups.exclude"),
    ) -> None:
        super().__init__(include, exclude, property_names=property_names)

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> GroupFilter:
        return cls(flow.groups, flow.groups_exclude)

    def should_replicate_group(self, group: str) -> bool:
        return self._passes(group)


class SubjectFilter(_IncludeExcludeFilter):
    """Schema registry subjects a flow syncs (`replication.schemas.subjects`)."""

    def __init__(
        self,
        include: Sequence[str] = (".*",),
        exclude: Sequence[str] = (),
        *,
        property_names: tuple[str, str] = ("schema.subjects", "schema.subjects.exclude"),
    ) -> None:
        super().__init__(include, exclude, property_names=property_names)

    def should_sync_subject(self, subject: str) -> bool:
        return self._passes(subject)


class ConfigPropertyFilter(_IncludeExcludeFilter):
    """Topic config properties copied to remote topics: all but those matching `config.properties.exclude`."""

    def __init__(self, exclude: Sequence[str], *, property_name: str = "config.properties.exclude") -> None:
        super().__init__([".*"], exclude, property_names=("config.properties", property_name))

    @classmethod
    def for_flow(cls, flow: FlowConfig) -> ConfigPropertyFilter:
        return cls(flow.config_properties_exclude)

    def should_replicate_config_property(self, name: str) -> bool:
        return self._passes(name)
