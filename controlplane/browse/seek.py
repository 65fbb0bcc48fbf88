"""The browser's input: where to read a partition (`Seek`, parsed from query parameters by `parse_seek`, a
moment by `parse_moment`) and what a topic name may be (`topic_name_error`). Bad input raises
ServiceValidationError naming the field and the fix.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from django.utils import timezone
from django.utils.dateparse import parse_datetime

from controlplane.core.bounds import INT64_MAX, whole_number
from controlplane.core.errors import ServiceValidationError
from replication.browse import ValueFormat

DEFAULT_RECORDS = 20
MAX_RECORDS = 500


@dataclass(frozen=True)
class Seek:
    """Where to start reading a partition: an offset, a moment, or (neither) the newest `max_records`."""

    partition: int = 0
    offset: int | None = None
    timestamp_ms: int | None = None
    max_records: int = DEFAULT_RECORDS
    format: ValueFormat = ValueFormat.AUTO

    def to_dict(self) -> dict:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "timestamp_ms": self.timestamp_ms,
            "max_records": self.max_records,
            "format": self.format.value,
        }


def _int(params: Mapping, name: str, errors: dict, *, minimum: int, maximum: int = INT64_MAX, fix: str):
    raw = str(params.get(name, "")).strip()
    if not raw:
        return None
    try:
        return whole_number(raw, field=name, minimum=minimum, maximum=maximum, fix=fix)
    except ServiceValidationError as exc:
        errors |= exc.errors
        return None


def parse_moment(raw: str) -> int:
    """Epoch milliseconds from ISO 8601 (no zone: the server's zone) or from epoch milliseconds."""
    text = raw.strip()
    if re.fullmatch(r"\d{10,16}", text):
        return int(text)
    try:
        moment = parse_datetime(text.replace(" ", "T", 1))
    except ValueError:
        moment = None
    if moment is None:
        raise ValueError(text)
    try:
        if timezone.is_naive(moment):
            moment = timezone.make_aware(moment, timezone.get_current_timezone())
        return int(moment.timestamp() * 1000)
    except OverflowError:  # a zone moving year 1 or 9999 off the calendar
        raise ValueError(text) from None


def parse_seek(params: Mapping) -> Seek:
    """A Seek from query parameters (`partition`, `offset`, `time`, `max_records`, `format`)."""
    errors: dict[str, list[str]] = {}
    partition = _int(
        params, "partition", errors, minimum=0, maximum=2**31 - 1, fix="give a partition number, e.g. 0"
    )
    offset = _int(params, "offset", errors, minimum=0, fix="give a record offset, e.g. 42")
    max_records = _int(
        params, "max_records", errors, minimum=1, maximum=MAX_RECORDS, fix=f"give 1 to {MAX_RECORDS}"
    )
    timestamp_ms = None
    raw_time = str(params.get("time", "")).strip()
    if raw_time:
        try:
            timestamp_ms = parse_moment(raw_time)
        except ValueError:
            errors["time"] = [
                f"'{raw_time}' is not a time: give ISO 8601 (2026-11-24T05:30:00, with or without a zone; "
                "without one the server's zone) or epoch milliseconds"
            ]
    if timestamp_ms is not None and timestamp_ms < 0:  # Kafka reads -1 and -2 as "latest" and "earliest"
        errors["time"] = [
            f"'{raw_time}' is before 1970-01-01T00:00:00Z, where Kafka time starts: give a later time"
        ]
    if offset is not None and timestamp_ms is not None:
        errors.setdefault("time", []).append("give an offset or a time to seek to, not both")
    raw_format = str(params.get("format", "") or ValueFormat.AUTO.value)
    try:
        fmt = ValueFormat(raw_format)
    except ValueError:
        errors["format"] = [f"'{raw_format}' is not a format: use one of auto, text, json, hex"]
        fmt = ValueFormat.AUTO
    if errors:
        raise ServiceValidationError(errors)
    return Seek(
        partition=partition or 0,
        offset=offset,
        timestamp_ms=timestamp_ms,
        max_records=max_records or DEFAULT_RECORDS,
        format=fmt,
    )


TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def topic_name_error(topic: str) -> str | None:
    if not TOPIC_NAME.fullmatch(topic):
        return f"'{topic}' is not a Kafka topic name (letters, digits, '.', '_', '-'; at most 249)"
    return None
