"""The Java-regex reader of MM2's filter properties: a pattern translated for RE2 (linear time in the name,
whatever the pattern) with the meaning it has in Java, or refused, with the property, the pattern, the
reason and a fix, when RE2 cannot run it (back-references, lookaround, possessive quantifiers) or Java would
read it otherwise. A pattern is never silently given another meaning.

Over 600 lines for one reason: the translator (`_JavaRegexTranslator`) is one recursive-descent reader of
Java's pattern syntax (groups, classes with their set operations, escapes, quantifiers), each construct a
method that calls the others; split across modules, one grammar would be read in pieces.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from dataclasses import dataclass

import re2


class PatternError(ValueError):
    """A pattern of a filter property that is not a Java regex, or one RE2 cannot match identically."""

    def __init__(
        self, *, property_name: str, pattern: str, reason: str, fix: str, untranslatable: bool
    ) -> None:
        self.property_name = property_name
        self.pattern = pattern
        self.reason = reason
        self.fix = fix
        self.problem = (
            "uses a Java regular-expression feature the linear-time matcher (RE2) cannot match identically"
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


Ranges = list[tuple[int, int]]
_MAX_CODE_POINT = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)  # never in a str RE2 sees (UTF-8)
# Java's line terminators: `.` excludes them.
_JAVA_DOT = r"[^\n\r\x{85}\x{2028}\x{2029}]"
# RE2 repeats a counted repetition at most this many times.
_MAX_REPEAT = 1000


def _chars(text: str) -> Ranges:
    return [(ord(c), ord(c)) for c in text]


_POSIX_CLASSES: dict[str, Ranges] = {
    "Lower": [(0x61, 0x7A)],
    "Upper": [(0x41, 0x5A)],
    "ASCII": [(0x00, 0x7F)],
    "Alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "Digit": [(0x30, 0x39)],
    "Alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)],
    "Punct": _chars(string.punctuation),
    "Graph": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), *_chars(string.punctuation)],
    "Print": [(0x20, 0x20), (0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A), *_chars(string.punctuation)],
    "Blank": _chars(" \t"),
    "Cntrl": [(0x00, 0x1F), (0x7F, 0x7F)],
    "XDigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
    "Space": [(0x09, 0x0D), (0x20, 0x20)],
}
# Java's predefined classes (ASCII by default); the upper-case letter is the complement.
_PREDEFINED: dict[str, Ranges] = {
    "d": [(0x30, 0x39)],
    "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
    "s": [(0x09, 0x0D), (0x20, 0x20)],  # Java's \s includes \x0B, RE2's does not
}

_SIMPLE_CHAR_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f", "a": "\a", "e": "\x1b"}

_REJECTED_ESCAPES = {
    "G": ("\\G (end of the previous match) has no RE2 equivalent", "remove it; filters match whole names"),
    "R": ("\\R (any line break sequence) has no RE2 equivalent", "use (?:\\r\\n|[\\n\\r])"),
    "X": ("\\X (extended grapheme cluster) has no RE2 equivalent", "match the characters explicitly"),
    "h": ("Java's \\h (horizontal whitespace) has no RE2 equivalent", "use [ \\t]"),
    "H": ("Java's \\H (not horizontal whitespace) has no RE2 equivalent", "use [^ \\t]"),
    "v": ("Java's \\v is vertical whitespace, which RE2 reads otherwise", "use [\\n\\r]"),
    "V": ("Java's \\V (not vertical whitespace) has no RE2 equivalent", "use [^\\n\\r]"),
    "K": ("\\K is not a Java escape", "remove it"),
}
_BACKREFERENCE = (
    "back-references cannot be matched in linear time, so the matcher (RE2) has none",
    "list the names the pattern should match, e.g. (?:eu-eu|us-us)",
)
_LOOKAROUND = (
    "lookahead and lookbehind cannot be matched in linear time, so the matcher (RE2) has none",
    "filters match whole names: say what to leave out in the .exclude property instead",
)

_FLAG_REJECTIONS = {
    "m": "MULTILINE makes ^ and $ match at every Java line terminator",
    "d": "UNIX_LINES changes which line terminators . and $ see",
    "u": "UNICODE_CASE folds non-ASCII letters the way Java does",
    "U": "UNICODE_CHARACTER_CLASS makes \\w, \\d and POSIX classes Unicode-aware in Java's own way",
    "x": "COMMENTS mode treats whitespace inside character classes in Java's own way",
}

_QUANTIFIER = re.compile(r"\{(\d+)(,(\d*))?\}")
_JAVA_GROUP_NAME = re.compile(r"[a-zA-Z][a-zA-Z0-9]*")


def _complement(ranges: Ranges) -> Ranges:
    result, low = [], 0
    for start, end in sorted([*ranges, _SURROGATES]):
        if start > low:
            result.append((low, start - 1))
        low = max(low, end + 1)
    if low <= _MAX_CODE_POINT:
        result.append((low, _MAX_CODE_POINT))
    return result


def _with_ascii_case(ranges: Ranges) -> Ranges:
    """Java's CASE_INSENSITIVE without UNICODE_CASE: an ASCII letter matches if its other case does."""
    extra = [
        (ord(c.swapcase()),) * 2
        for c in string.ascii_letters
        if any(start <= ord(c) <= end for start, end in ranges)
    ]
    return ranges + extra


def _code(point: int) -> str:
    char = chr(point)
    return char if char.isascii() and char.isalnum() else f"\\x{{{point:x}}}"


def _class(ranges: Ranges, *, negate: bool = False) -> str:
    """An RE2 character class of exactly these code points (or all others)."""
    if not ranges:
        return "[\\x{0}-\\x{10ffff}]" if negate else "[^\\x{0}-\\x{10ffff}]"
    body = "".join(_code(lo) if lo == hi else f"{_code(lo)}-{_code(hi)}" for lo, hi in sorted(set(ranges)))
    return f"[{'^' if negate else ''}{body}]"


@dataclass
class _Group:
    saved_flags: frozenset[str]
    # Whether the names this branch matches so far may already have reached `$` (then nothing may follow).
    at_end: bool = False
    started_at_end: bool = False
    a_branch_ended: bool = False


class _JavaRegexTranslator:
    """One pass over a Java pattern, emitting the RE2 pattern that matches the same whole names."""

    def __init__(self, pattern: str) -> None:
        self.src = pattern
        self.pos = 0
        self.out: list[str] = []
        self.flags: frozenset[str] = frozenset()
        self.groups: list[_Group] = [_Group(saved_flags=frozenset())]
        self.group_count = 0
        self.group_names: set[str] = set()
        self.can_quantify = False
        self.last_group_ended = False

    def translate(self) -> str:
        while self.pos < len(self.src):
            self._step()
        if len(self.groups) > 1:
            raise _Problem("missing ')'", "close every '(' with a ')'")
        return "".join(self.out)

    # -- helpers --------------------------------------------------------------------------------------
    def _peek(self, offset: int = 0) -> str:
        index = self.pos + offset
        return self.src[index] if index < len(self.src) else ""

    def _take(self) -> str:
        char = self._peek()
        self.pos += 1
        return char

    def _atom(self, text: str, start: int) -> None:
        """A part of the pattern that consumes characters."""
        if self.groups[-1].at_end:
            raise _Problem(
                f"'$' or '\\Z' before position {start} is followed by more pattern, where Java's end anchor "
                "may stop before a final line terminator, which RE2 cannot express",
                "filters match whole names: remove the '$' (or write the line terminator without it)",
                untranslatable=True,
            )
        self.out.append(text)
        self.can_quantify = True
        self.last_group_ended = False

    def _assertion(self, text: str) -> None:
        self.out.append(text)
        self.can_quantify = False

    def _ranges_atom(self, ranges: Ranges, start: int, *, negate: bool = False) -> None:
        if "i" in self.flags:
            ranges = _with_ascii_case(ranges)
        self._atom(_class(ranges, negate=negate), start)

    def _char(self, char: str, start: int) -> None:
        if "i" in self.flags and char.isascii() and char.isalpha():
            self._atom(f"[{char.lower()}{char.upper()}]", start)
        else:
            self._atom(_code(ord(char)), start)

    # -- top level ------------------------------------------------------------------------------------
    def _step(self) -> None:
        start = self.pos
        char = self._take()
        if char == "\\":
            self._escape(start)
        elif char == "[":
            ranges, negate = self._character_class(start)
            self._ranges_atom(ranges, start, negate=negate)
        elif char == "(":
            self._open_group(start)
        elif char == ")":
            self._close_group(start)
        elif char == "|":
            group = self.groups[-1]
            group.a_branch_ended |= group.at_end
            group.at_end = group.started_at_end
            self.out.append("|")
            self.can_quantify = False
        elif char == ".":
            self._atom("(?s:.)" if "s" in self.flags else _JAVA_DOT, start)
        elif char == "$":
            self._end_anchor()
        elif char == "^":
            self._assertion("^")
        elif char in "*+?{":
            self._quantifier(char, start)
        else:
            self._char(char, start)

    def _end_anchor(self) -> None:
        # Java's `$` and `\Z` also hold before a final line terminator; with nothing after them in a whole
        # name match that is the end of the name (RE2's `\z`), and `_atom` refuses anything after them.
        self._assertion("\\z")
        self.groups[-1].at_end = True

    def _quantifier(self, char: str, start: int) -> None:
        if not self.can_quantify:
            raise _Problem(f"nothing to repeat at position {start}", _repeat_fix(self.src, start))
        text, repeats = char, char != "?"
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
            if int(low) > _MAX_REPEAT or (high and int(high) > _MAX_REPEAT):
                raise _Problem(
                    f"repetition {match.group(0)} counts past {_MAX_REPEAT}, the most RE2 repeats",
                    "use * or + or a count up to 1000",
                    untranslatable=True,
                )
            text = match.group(0)
            repeats = match.group(2) is not None or int(low) > 1
            self.pos = match.end()
        if self._peek() == "+":
            raise _Problem(
                f"possessive quantifier '{text}+' at position {start}: RE2 has none",
                f"use the greedy '{text}' (it matches more names when the pattern needs the possessive's give-up)",
                untranslatable=True,
            )
        if self._peek() == "?":
            text += self._take()  # lazy: a whole-name match does not depend on it
        if repeats and self.last_group_ended:
            raise _Problem(
                f"a group that can end at '$' is repeated at position {start}",
                "filters match whole names: remove the '$'",
                untranslatable=True,
            )
        self.out.append(text)
        self.can_quantify = False

    # -- groups ---------------------------------------------------------------------------------------
    def _open_group(self, start: int) -> None:
        if self._peek() != "?":
            self.group_count += 1
            self._push_group()
            return
        self.pos += 1
        kind = self._peek()
        if kind == ":":
            self.pos += 1
            self._push_group()
        elif kind in ("=", "!", ">") or self.src.startswith(("<=", "<!"), self.pos):
            if kind == ">":
                raise _Problem(
                    f"atomic group '(?>' at position {start}: RE2 has none",
                    "use a plain group (?:...)",
                    untranslatable=True,
                )
            raise _Problem(*_LOOKAROUND, untranslatable=True)
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
                "use (...), (?:...), (?<name>...) or inline flags (?i)",
            )

    def _push_group(self, flags: frozenset[str] | None = None) -> None:
        at_end = self.groups[-1].at_end
        self.groups.append(_Group(saved_flags=self.flags, at_end=at_end, started_at_end=at_end))
        if flags is not None:
            self.flags = flags
        self.out.append("(?:")
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
        self._push_group()

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
        flags = frozenset((self.flags | set(on)) - set(off))
        self.pos = match.end()
        if end == ":":
            self._push_group(flags)
            return
        # `(?i)` changes the flags until the end of the enclosing group (across its alternatives): the
        # translation applies them to each character, so nothing is emitted here.
        self.flags = flags
        self.can_quantify = False

    def _close_group(self, start: int) -> None:
        if len(self.groups) == 1:
            raise _Problem(f"unmatched ')' at position {start}", "remove it or escape it as '\\)'")
        group = self.groups.pop()
        self.flags = group.saved_flags
        ended = group.at_end or group.a_branch_ended
        self.groups[-1].at_end |= ended
        self.out.append(")")
        self.can_quantify = True
        self.last_group_ended = ended

    # -- escapes --------------------------------------------------------------------------------------
    def _escape(self, start: int) -> None:
        char = self._take()
        if not char:
            raise _Problem("the pattern ends with a lone backslash", "escape a backslash as '\\\\'")
        if char in "123456789":
            self._backreference(char, start)
        elif char.lower() in _PREDEFINED:
            self._ranges_atom(_PREDEFINED[char.lower()], start, negate=char.isupper())
        elif char in "bB":
            if self._peek() == "{":
                raise _Problem(
                    "\\b{g} (grapheme boundary) has no RE2 equivalent", "remove it", untranslatable=True
                )
            self._assertion("\\" + char)  # ASCII word boundaries, as \w
        elif char == "A":
            self._assertion("\\A")
        elif char == "z":
            self._assertion("\\z")
        elif char == "Z":
            self._end_anchor()
        elif char == "Q":
            for quoted_char in self._quoted():
                self._char(quoted_char, start)
        elif char in "pP":
            self._ranges_atom(_POSIX_CLASSES[self._property_name(char, start)], start, negate=char == "P")
        elif char == "k":
            self._named_backreference(start)
        elif char in _REJECTED_ESCAPES:
            reason, fix = _REJECTED_ESCAPES[char]
            raise _Problem(reason, fix, untranslatable=True)
        else:
            self._char(self._char_escape(char, start), start)

    def _quoted(self) -> str:
        """`\\Q...\\E`: everything up to `\\E` (or the end) is literal."""
        end = self.src.find("\\E", self.pos)
        text = self.src[self.pos : len(self.src) if end < 0 else end]
        self.pos = len(self.src) if end < 0 else end + 2
        return text

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
            return self._not_surrogate(chr(int(match.group(1) or match.group(2), 16)), start)
        if char == "u":
            match = re.compile(r"[0-9a-fA-F]{4}").match(self.src, self.pos)
            if not match:
                raise _Problem(f"bad unicode escape at position {start}", "write \\uhhhh")
            self.pos = match.end()
            return self._not_surrogate(chr(int(match.group(0), 16)), start)
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
            if match is None or not value:
                raise _Problem(f"bad \\N{{name}} escape at position {start}", "use a Unicode character name")
            self.pos = match.end()
            return value
        if char.isascii() and char.isalpha():
            raise _Problem(
                f"'\\{char}' at position {start} is not a Java escape",
                f"write '{char}' without the backslash, or escape a special character",
            )
        return char  # Java lets any non-letter be escaped to mean itself

    @staticmethod
    def _not_surrogate(char: str, start: int) -> str:
        if _SURROGATES[0] <= ord(char) <= _SURROGATES[1]:
            raise _Problem(
                f"the escape at position {start} is a UTF-16 surrogate, never a character of a name",
                "escape the whole character, e.g. \\x{1F600}",
                untranslatable=True,
            )
        return char

    def _property_name(self, char: str, start: int) -> str:
        """The POSIX class name of `\\p{Name}` / `\\P{Name}`; Unicode and java.lang properties are rejected."""
        match = re.compile(r"\{([A-Za-z_][A-Za-z0-9_=]*)\}|([A-Za-z])").match(self.src, self.pos)
        if not match:
            raise _Problem(f"bad \\{char} property at position {start}", "write \\p{Alpha}")
        name = match.group(1) or match.group(2)
        self.pos = match.end()
        if name not in _POSIX_CLASSES:
            raise _Problem(
                f"\\{char}{{{name}}} is a Unicode or Java property the matcher does not know",
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
        raise _Problem(*_BACKREFERENCE, untranslatable=True)

    def _named_backreference(self, start: int) -> None:
        match = re.compile(r"<([a-zA-Z][a-zA-Z0-9]*)>").match(self.src, self.pos)
        if not match or match.group(1) not in self.group_names:
            raise _Problem(
                f"\\k at position {start} does not refer to a named group defined before it",
                "write \\k<name> after (?<name>...)",
            )
        raise _Problem(*_BACKREFERENCE, untranslatable=True)

    # -- character classes ----------------------------------------------------------------------------
    def _character_class(self, start: int) -> tuple[Ranges, bool]:
        """The code points of `[...]` and whether it is negated."""
        negate = self._peek() == "^"
        if negate:
            self.pos += 1
        ranges: Ranges = []
        empty = True
        while True:
            char = self._peek()
            if not char:
                raise _Problem(f"unclosed character class starting at position {start}", "close it with ']'")
            if char == "]" and not empty:
                self.pos += 1
                return ranges, negate
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
            item = self._class_item()
            ranges += item or []
            empty = empty and item is None

    def _class_item(self) -> Ranges | None:
        """One literal, range or class escape inside `[...]`, as code point ranges (None: an empty \\Q\\E)."""
        item_start = self.pos
        low = self._class_char()
        if low is None or isinstance(low, list):
            return low
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
            return [(ord(low), ord(high))]
        return [(ord(low), ord(low))]

    def _class_char(self) -> str | Ranges | None:
        """A single character (str), a set of code point ranges (list), or None for an empty \\Q\\E."""
        start = self.pos
        char = self._take()
        if char != "\\":
            return char
        char = self._take()
        if not char:
            raise _Problem("the pattern ends with a lone backslash", "escape a backslash as '\\\\'")
        if char.lower() in _PREDEFINED:
            ranges = _PREDEFINED[char.lower()]
            return _complement(ranges) if char.isupper() else ranges
        if char in "pP":
            ranges = _POSIX_CLASSES[self._property_name(char, start)]
            return ranges if char == "p" else _complement(ranges)
        if char == "Q":
            return _chars(self._quoted()) or None
        if char == "b":
            raise _Problem(
                f"'\\b' inside the character class at position {start} is not a Java escape",
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


class JavaRegex:
    """A Java pattern compiled for RE2: `fullmatch(name)` says whether MM2 would match the whole name, in
    time linear in the name's length."""

    def __init__(self, pattern: str, compiled: re2._Regexp) -> None:
        self.pattern = pattern
        self._compiled = compiled

    def fullmatch(self, name: str) -> bool:
        return self._compiled.fullmatch(name) is not None

    def __repr__(self) -> str:
        return f"JavaRegex({self.pattern!r})"


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False
    return options


@functools.lru_cache(maxsize=4096)
def _compile(pattern: str) -> JavaRegex:
    if any(_SURROGATES[0] <= ord(char) <= _SURROGATES[1] for char in pattern):
        raise _Problem("the pattern holds a lone UTF-16 surrogate, never a character of a name", "remove it")
    translated = _JavaRegexTranslator(pattern).translate()
    try:
        return JavaRegex(pattern, re2.compile(translated, options=_RE2_OPTIONS))
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise _Problem(
            f"RE2 cannot compile it ({reason})", "make the pattern smaller", untranslatable=True
        ) from None


_RE2_OPTIONS = _re2_options()


def compile_java_regex(pattern: str, *, property_name: str) -> JavaRegex:
    """The pattern with the meaning it has in MM2 (use `fullmatch`), matched in linear time by RE2."""
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
