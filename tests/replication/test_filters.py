"""Java-regex translation and MM2's topic/group/config-property filters (pure, no I/O)."""

from __future__ import annotations

import time

import pytest

from replication.config import DEFAULT_CONFIG_PROPERTIES_EXCLUDE, FlowConfig
from replication.filters import ConfigPropertyFilter, GroupFilter, TopicFilter
from replication.java_regex import PatternError, compile_java_regex


def matches(pattern: str, name: str) -> bool:
    return compile_java_regex(pattern, property_name="topics").fullmatch(name)


@pytest.mark.parametrize(
    ("pattern", "matching", "not_matching"),
    [
        # whole-name matching, as MM2's Pattern.matcher(name).matches()
        ("orders", ["orders"], ["orders-v2", "my-orders"]),
        (r".*[\-\.]internal", ["a.internal", "b-internal"], ["internal", "a.internals"]),
        # \Q...\E quotes metacharacters
        (r"\Qa.b*\E", ["a.b*"], ["axb", "a.bbb"]),
        (r"\Qa.b", ["a.b"], ["axb"]),
        (r"x\Q\E+", ["xx", "x"], [""]),
        # named groups
        (r"(?<region>[a-z]+)-(?<zone>\d)", ["eu-1"], ["eu-x"]),
        # Java's \Z and $ may stop before a final line terminator; in a whole-name match at the end they
        # mean the end of the name
        (r"orders\z", ["orders"], ["orders\n"]),
        (r"orders$", ["orders"], ["orders\n", "orders\r\n"]),
        (r"(?:orders$|a\Z)", ["orders", "a"], ["a\n"]),
        (r"(?:a|b$)?", ["", "a", "b"], ["b\n"]),
        # POSIX classes
        (r"\p{Alpha}+", ["abcXYZ"], ["abc1", "é"]),
        (r"\p{Digit}{3}", ["123"], ["12", "١٢٣"]),
        (r"\p{Alnum}+", ["a1B2"], ["a-1"]),
        (r"\p{Lower}\p{Upper}", ["aB"], ["Ab"]),
        (r"\p{Punct}", ["!", "~", "\\", "["], ["a", " "]),
        (r"\p{Space}", [" ", "\t", "\x0b"], ["a", "\u00a0"]),
        (r"\P{Digit}", ["a"], ["5"]),
        (r"[\p{Digit}x]+", ["1x2"], ["1y"]),
        (r"[^\P{Digit}]", ["7"], ["a"]),
        (r"[\P{Alpha}]", ["1", "é"], ["a"]),
        (r"[\S]+", ["ab"], ["a b", "a\x0bb"]),
        (r"\s", ["\x0b"], ["\u00a0"]),
        # Java's \d \w \s are ASCII-only, unlike Python's defaults
        (r"\d+", ["42"], ["٤٢"]),
        (r"\w+", ["a_1"], ["é"]),
        # Java's . excludes every line terminator, not only \n
        (r"a.b", ["axb"], ["a\rb", "a\u2028b", "a\nb"]),
        (r"(?s)a.b", ["a\rb", "a\nb"], []),
        # (?i) is ASCII case-insensitive and lasts until the end of its group, across alternatives
        (r"a(?i)b|c", ["aB", "ab", "C", "c"], ["B", "Ab"]),
        (r"(?i)orders", ["ORDERS", "Orders"], ["orderz"]),
        (r"(?i:a)b", ["Ab", "ab"], ["aB"]),
        (r"((?i)a)b", ["Ab"], ["AB"]),
        (r"(?i)a(?-i)b", ["Ab"], ["AB"]),
        # ASCII only: no Unicode case folding (the Kelvin sign, the long s)
        (r"(?i)k[s-t]", ["KS", "kt"], ["\u212as", "k\u017f"]),
        (r"(?i)[^a]", ["b"], ["A", "a"]),
        (r"(?i)\p{Lower}", ["a", "A"], ["1"]),
        # escapes
        (r"\x41\x{42}\u0043\0104", ["ABCD"], []),
        (r"\t\e", ["\t\x1b"], []),
        (r"\cA", ["\x01"], []),
        (r"a\.b", ["a.b"], ["axb"]),
        # character classes: a leading ']' is literal, '-' at the ends is literal
        (r"[]a]+", ["]a"], ["b"]),
        (r"[a-]+", ["a-"], ["b"]),
        (r"[!--]", ["!", "-", ","], ["."]),
        (r"[&|~]+", ["&|~"], ["a"]),
        # lazy quantifiers (a whole-name match does not depend on laziness)
        (r"a{2,3}?", ["aa", "aaa"], ["a"]),
        (r"a{1000}", ["a" * 1000], ["a" * 999]),
    ],
)
def test_java_regex_matches_like_java(pattern: str, matching: list[str], not_matching: list[str]) -> None:
    for name in matching:
        assert matches(pattern, name), (pattern, name)
    for name in not_matching:
        assert not matches(pattern, name), (pattern, name)


@pytest.mark.parametrize(
    ("pattern", "reason_part", "untranslatable"),
    [
        ("[a-z&&[^e]]", "intersection", True),
        ("[a-z[0-9]]", "nested class", True),
        (r"\p{L}+", "Unicode or Java property", True),
        (r"\p{IsAlphabetic}", "Unicode or Java property", True),
        (r"\h", "horizontal whitespace", True),
        (r"\v", "vertical whitespace", True),
        (r"\R", "line break", True),
        (r"\X", "grapheme", True),
        (r"\Ga", "previous match", True),
        (r"\b{g}", "grapheme boundary", True),
        (r"[\b]", "not a Java escape", True),
        (r"(?<region>[a-z]+)-\k<region>", "back-references", True),
        (r"(a)\10", "back-references", True),
        (r"(a)\1", "back-references", True),
        ("a*+b", "possessive", True),
        ("(?>ab|a)b", "atomic group", True),
        ("(?=a)a", "lookahead", True),
        ("(?!a).*", "lookahead", True),
        ("(?<!a)b", "lookahead", True),
        ("a{1001}", "the most RE2 repeats", True),
        (r"orders$\r", "followed by more pattern", True),
        (r"a\Zb", "followed by more pattern", True),
        (r"(a$)+", "repeated", True),
        (r"(a$|b)c", "followed by more pattern", True),
        ("((a{1000}){1000}){1000}", "RE2 cannot compile it", True),
        ("\ud800", "surrogate", False),
        ("(?m)^a", "MULTILINE", True),
        ("(?x)a b", "COMMENTS", True),
        ("(?u)a", "UNICODE_CASE", True),
        ("(?U)a", "UNICODE_CHARACTER_CLASS", True),
        ("(?d)a", "UNIX_LINES", True),
        ("*.internal", "nothing to repeat at position 0", False),
        ("a|*b", "nothing to repeat at position 2", False),
        ("a**", "nothing to repeat", False),
        ("a{foo}", "starts a repetition", False),
        ("a{,3}", "starts a repetition", False),
        ("a{3,1}", "maximum below its minimum", False),
        ("(?P<n>a)", "Python syntax", False),
        ("(?#comment)a", "unknown group construct", False),
        ("(?q)a", "unknown inline flag", False),
        ("(a", "missing ')'", False),
        ("a)", "unmatched ')'", False),
        ("[a-", "unclosed character class", False),
        ("[z-a]", "illegal character range", False),
        ("a\\", "lone backslash", False),
        (r"\y", "not a Java escape", False),
        (r"\2(a)(b)", "does not exist", False),
        (r"\k<nope>", "named group", False),
        (r"\0", "octal", False),
        (r"\xZZ", "hexadecimal", False),
        (r"\u12", "unicode escape", False),
    ],
)
def test_untranslatable_or_invalid_patterns_are_rejected_clearly(
    pattern: str, reason_part: str, untranslatable: bool
) -> None:
    with pytest.raises(PatternError) as caught:
        compile_java_regex(pattern, property_name="groups.exclude")
    error = caught.value
    assert error.property_name == "groups.exclude"
    assert error.pattern == pattern
    assert reason_part in error.reason
    assert error.fix
    message = str(error)
    assert message.startswith(f"groups.exclude: '{pattern}' ")
    assert error.reason in message and error.fix in message
    expected_problem = (
        "(RE2) cannot match identically" if untranslatable else "is not a valid regular expression"
    )
    assert expected_problem in message


def test_glob_style_exclude_names_property_pattern_reason_and_fix() -> None:
    with pytest.raises(PatternError) as caught:
        compile_java_regex("*.internal", property_name="topics.exclude")
    assert str(caught.value) == (
        "topics.exclude: '*.internal' is not a valid regular expression: nothing to repeat at position 0 "
        "(a leading '*' repeats nothing; did you mean '.*\\.internal'?)"
    )


def test_matching_takes_linear_time_whatever_the_pattern() -> None:
    """Issue 27 item 6: `(a+)+b` against a 29-character name took 24-27 s on Python's backtracking re."""
    started = time.perf_counter()
    for pattern in ["(a+)+b", "(a|a)*b", "(a|aa)+$", "(.*a){20}", "(\\w+\\s?)+x"]:
        compiled = compile_java_regex(pattern, property_name="topics")
        assert not compiled.fullmatch("a" * 5_000 + "!")
        assert TopicFilter([pattern], []).should_replicate_topic("a" * 248 + "!") is False
    assert time.perf_counter() - started < 2


def test_compiled_patterns_are_cached() -> None:
    first = compile_java_regex("cache-me-.*", property_name="topics")
    assert compile_java_regex("cache-me-.*", property_name="groups") is first


def test_topic_filter_with_mm2_defaults() -> None:
    topic_filter = TopicFilter.for_flow(FlowConfig(source="A", target="B"))
    for topic in ("orders", "orders.v1", "A.orders", "payments-eu"):
        assert topic_filter.should_replicate_topic(topic)
        assert topic_filter.exclusion_reason(topic) is None
    for topic, pattern in (
        ("__consumer_offsets", "__.*"),
        ("connect-offsets.internal", r".*[\-\.]internal"),
        ("app-internal", r".*[\-\.]internal"),
        ("orders.replica", r".*\.replica"),
    ):
        assert not topic_filter.should_replicate_topic(topic)
        assert topic_filter.exclusion_reason(topic) == f"matches topics.exclude pattern '{pattern}'"


def test_topic_filter_include_list_is_whole_name() -> None:
    topic_filter = TopicFilter(["orders", "pay.*"], [])
    assert topic_filter.should_replicate_topic("orders")
    assert topic_filter.should_replicate_topic("payments")
    assert not topic_filter.should_replicate_topic("orders-eu")
    assert topic_filter.exclusion_reason("orders-eu") == "matches no topics pattern"


def test_exclude_wins_over_include() -> None:
    topic_filter = TopicFilter([".*"], ["secret-.*"])
    assert not topic_filter.should_replicate_topic("secret-plans")
    assert topic_filter.exclusion_reason("secret-plans") == "matches topics.exclude pattern 'secret-.*'"


def test_filter_rejects_a_bad_pattern_with_its_property_name() -> None:
    with pytest.raises(PatternError, match=r"^topics: '\?x'"):
        TopicFilter(["?x"], [])
    with pytest.raises(PatternError, match=r"^groups.exclude: "):
        GroupFilter([".*"], ["[a-z&&[^e]]"])


def test_group_filter_with_mm2_defaults() -> None:
    group_filter = GroupFilter.for_flow(FlowConfig(source="A", target="B", groups=("app-.*",)))
    assert group_filter.should_replicate_group("app-billing")
    assert not group_filter.should_replicate_group("other")
    assert group_filter.exclusion_reason("other") == "matches no groups pattern"
    default = GroupFilter.for_flow(FlowConfig(source="A", target="B"))
    assert not default.should_replicate_group("console-consumer-123")
    assert default.exclusion_reason("connect-mm2") == "matches groups.exclude pattern 'connect-.*'"
    assert default.should_replicate_group("billing")


def test_config_property_filter() -> None:
    config_filter = ConfigPropertyFilter.for_flow(FlowConfig(source="A", target="B"))
    for name in DEFAULT_CONFIG_PROPERTIES_EXCLUDE:
        assert not config_filter.should_replicate_config_property(name)
    assert config_filter.should_replicate_config_property("retention.ms")
    assert config_filter.should_replicate_config_property("cleanup.policy")
    custom = ConfigPropertyFilter(["retention\\..*"])
    assert not custom.should_replicate_config_property("retention.bytes")
    assert custom.should_replicate_config_property("min.insync.replicas")
