"""A message-browser search's result as a file: JSON (the search, when it read and how much, and every
record whole) or CSV (one record a row).

Records are exported as a producer wrote them, not as a page shows them (never cut at 4096 bytes): keys,
values and header values as UTF-8 text when they are, else base64. A masked result (a viewer on a masked
topic) exports values and header values as `masked (N bytes)`, as its page shows them. CSV cells a
spreadsheet would run as a formula (starting with =, +, -, @, tab or carriage return) are quoted with a
leading apostrophe: a record is whatever a producer wrote.
"""

from __future__ import annotations

import base64
import csv
import io
import json
from enum import StrEnum

from controlplane.browse.record_search import SearchPage
from replication.browse import KafkaRecord

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


class ExportFormat(StrEnum):
    JSON = "json"
    CSV = "csv"


def _bytes(data: bytes | None, *, masked: bool) -> dict | None:
    if data is None:
        return None
    if masked:
        return {"masked": f"masked ({len(data)} bytes)"}
    try:
        return {"text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _record(record: KafkaRecord, *, masked: bool) -> dict:
    return {
        "partition": record.partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "key": _bytes(record.key, masked=False),
        "value": _bytes(record.value, masked=masked),
        "headers": [{"name": name, "value": _bytes(data, masked=masked)} for name, data in record.headers],
    }


def export_name(page: SearchPage, fmt: ExportFormat) -> str:
    """The file's name says what it holds and when it was read: A-orders-20261126T165000Z.csv."""
    return f"{page.cluster.alias}-{page.topic}-{page.read_at.strftime('%Y%m%dT%H%M%SZ')}.{fmt.value}"


def search_export(page: SearchPage, fmt: ExportFormat) -> str:
    records = [_record(r, masked=page.masked) for r in page.found]
    if fmt is ExportFormat.JSON:
        summary = {key: value for key, value in page.to_dict().items() if key != "records"}
        return json.dumps({**summary, "records": records}, ensure_ascii=False, indent=1)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["partition", "offset", "timestamp_ms", "key", "value", "headers"])
    for record in records:
        writer.writerow(
            [
                record["partition"],
                record["offset"],
                record["timestamp_ms"],
                *(_cell(record[name]) for name in ("key", "value")),
                _cell(json.dumps(record["headers"], ensure_ascii=False)),
            ]
        )
    return out.getvalue()


def _cell(value: dict | str | None) -> str:
    """A key or value as one cell: its text, `base64:<...>`, its mask; never a formula."""
    if value is None:
        text = ""
    elif isinstance(value, str):
        text = value
    else:
        text = value["text"] if "text" in value else value.get("masked") or f"base64:{value['base64']}"
    return f"'{text}" if text.startswith(FORMULA_STARTS) else text
