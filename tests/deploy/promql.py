"""The metric names a PromQL expression reads, and the names Mirrorplane exports, for the deploy tests.

Not a PromQL parser: enough of the grammar to find every series selector in the expressions we ship
(strings, label matchers, ranges, grouping clauses and function calls are removed; what remains that
looks like a name is a metric name), so renaming a metric without updating the rules or the dashboard
fails a test.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "offset", "bool",
    "inf", "nan",
}  # fmt: skip
# Series Prometheus itself provides: scrape health and the alerts it evaluates.
BUILTIN = {"up", "ALERTS", "ALERTS_FOR_STATE"}

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_VARIABLE = re.compile(r"\$\{?\w+\}?")
_NAME = re.compile(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """The metric names `expr` selects."""
    text = _VARIABLE.sub("1", expr)
    text = _MATCHERS.sub("", _STRING.sub('""', text))
    text = _GROUPING.sub("", _RANGE.sub("", text))
    return {name for name in _NAME.findall(text) if name not in KEYWORDS and not name[0].isdigit()}


def documented_names() -> set[str]:
    """The names in the table of docs/metrics.md (first column)."""
    text = (ROOT / "docs" / "metrics.md").read_text()
    return set(re.findall(r"^\| `(mirrorplane_\w+)` \|", text, flags=re.MULTILINE))


def exported_names() -> set[str]:
    """The series controlplane/metrics/prometheus.py builds (`_gauge("x", ...)`, `_counter("x", ...)`, `_histogram`)."""
    text = (ROOT / "controlplane" / "metrics" / "prometheus.py").read_text()
    gauges = re.findall(r"_gauge\(\s*\"(\w+)\"", text)
    counters = re.findall(r"_counter\(\s*\"(\w+)\"", text)
    histograms = re.findall(r"_histogram\(\s*\"(\w+)\"", text)
    return (
        {f"mirrorplane_{name}" for name in gauges}
        | {f"mirrorplane_{name}_total" for name in counters}
        | {f"mirrorplane_{name}{suffix}" for name in histograms for suffix in ("_bucket", "_sum", "_count")}
    )
