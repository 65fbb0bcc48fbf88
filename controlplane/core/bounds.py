"""The bounds of every number and JSON body a client can send, in one place.

A value past them is refused with a 400 naming the field and the fix (never a 500 from the database, the
Kafka client or the parser): whole numbers fit a Kafka offset and a PostgreSQL bigint (2^63 - 1), seconds
are finite, JSON nests at most JSON_MAX_DEPTH deep. URLs the server fetches: controlplane.core.outbound.
"""

from __future__ import annotations

import math

from controlplane.core.errors import ServiceValidationError

INT64_MAX = 2**63 - 1  # Kafka offsets and timestamps, PostgreSQL bigint
ID_PATTERN = r"[0-9]{1,18}"  # a row id in a URL: past 18 digits a bigint lookup would fail, so a 404
INT64_MIN = -(2**63)
JSON_MAX_DEPTH = 64
MAX_SECONDS = 10 * 365 * 86400  # ten years: the longest budget, silence or wait anything takes


def whole_number(raw: object, *, field: str, minimum: int = 0, maximum: int = INT64_MAX, fix: str) -> int:
    """`raw` (text or a number) as an int within [minimum, maximum], or a ServiceValidationError on `field`."""
    text = str(raw).strip()
    try:
        value = int(text) if len(text) <= 40 else None
    except ValueError:
        value = None
    if value is None or isinstance(raw, float | bool):
        raise ServiceValidationError.single(field, f"'{text[:40]}' is not a whole number: {fix}")
    if not minimum <= value <= maximum:
        raise ServiceValidationError.single(
            field, f"{value} is out of range: give a number from {minimum} to {maximum}"
        )
    return value


def seconds(raw: object, *, field: str, minimum: float, maximum: float, fix: str) -> float:
    """`raw` as a finite number of seconds within [minimum, maximum]."""
    text = str(raw).strip()
    try:
        value = float(text) if len(text) <= 40 else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ServiceValidationError.single(field, f"'{text[:40]}' is not a number of seconds: {fix}")
    if not minimum <= value <= maximum:
        raise ServiceValidationError.single(
            field, f"{value:g} is out of range: give a number from {minimum:g} to {maximum:g}"
        )
    return value


def json_depth_error(value: object, *, limit: int = JSON_MAX_DEPTH) -> str | None:
    """Why a parsed JSON value nests too deep for the services (and their audit snapshots), or None."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            return f"JSON nested deeper than {limit} levels: flatten the body"
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)
    return None


class IdConverter:
    """`<id:pk>` in a URL: a row id of at most 18 digits (Django's `<int:>` takes any length)."""

    regex = ID_PATTERN

    def to_python(self, value: str) -> int:
        return int(value)

    def to_url(self, value: int) -> str:
        return str(value)
