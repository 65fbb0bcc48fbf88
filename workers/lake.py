"""The metrics lake writer: every slice's per-partition samples, appended as Parquet under METRICS_DIR.

Layout and schema are `dashboards.spark.lake`'s (`date=YYYY-MM-DD/flow=<id>/part-*.parquet`,
`LAKE_COLUMNS`). A worker process buffers its samples and writes one file per (date, flow) at most
every `flush_interval_s` or `flush_rows` samples, not one file per slice: Spark reads few large files
far faster than many small ones. Files are written under a dot-name and renamed, so readers never see
a partial file. Samples buffered by a process that is killed -9 are lost (metrics only; the positions
and the data are not affected).
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dashboards.spark.lake import LAKE_COLUMNS, arrow_schema, partition_path
from replication.metrics import PartitionMetrics

log = logging.getLogger(__name__)

LAKE_COLUMN_NAMES = tuple(name for name, _ in LAKE_COLUMNS)
RemotePartition = tuple[str, int]


@dataclass(frozen=True)
class Counts:
    records: int
    bytes: int


def lake_rows(
    *,
    flow_id: int,
    flow_name: str,
    task_index: int,
    worker: str,
    partitions: Iterable[PartitionMetrics],
    previous: Mapping[RemotePartition, Counts],
    interval_s: float,
    at: datetime,
) -> tuple[list[dict], dict[RemotePartition, Counts]]:
    """One sample per partition for a slice (records and bytes since `previous`), and the new totals."""
    rows: list[dict] = []
    totals: dict[RemotePartition, Counts] = {}
    for p in partitions:
        before = previous.get((p.topic, p.partition), Counts(0, 0))
        records, byte_count = p.record_count - before.records, p.byte_count - before.bytes
        totals[(p.topic, p.partition)] = Counts(p.record_count, p.byte_count)
        rows.append(
            {
                "ts": at,
                "flow_id": flow_id,
                "flow_name": flow_name,
                "source_topic": p.source_topic,
                "remote_topic": p.topic,
                "partition": p.partition,
                "task_index": task_index,
                "worker": worker,
                "source_end_offset": p.source_end_offset,
                "next_offset": p.next_offset,
                "records": records,
                "bytes": byte_count,
                "interval_s": interval_s,
                "record_age_ms": p.record_age_ms if records else None,
                "replication_latency_ms": p.replication_latency_ms if records else None,
            }
        )
    return rows, totals


class MetricsLake:
    """A per-process buffer of lake rows; thread-safe (a threads-pool worker shares one)."""

    def __init__(
        self,
        root: Path,
        *,
        flush_interval_s: float,
        flush_rows: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.root = Path(root)
        self.flush_interval_s, self.flush_rows = flush_interval_s, flush_rows
        self._clock = clock
        self._rows: list[dict] = []
        self._since = clock()
        self._lock = threading.Lock()

    def append(self, rows: list[dict]) -> list[Path]:
        """Buffer `rows`; write the buffer when it is old or large enough (the written files)."""
        with self._lock:
            self._rows.extend(rows)
            due = len(self._rows) >= self.flush_rows or self._clock() - self._since >= self.flush_interval_s
        return self.flush() if due else []

    def flush(self) -> list[Path]:
        with self._lock:
            rows, self._rows = self._rows, []
            self._since = self._clock()
        if not rows:
            return []
        groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
        for row in rows:
            groups[(row["ts"].astimezone(UTC).strftime("%Y-%m-%d"), row["flow_id"])].append(row)
        return [self._write(date, flow_id, group) for (date, flow_id), group in sorted(groups.items())]

    def _write(self, date: str, flow_id: int, rows: list[dict]) -> Path:
        folder = partition_path(self.root, date=date, flow_id=flow_id)
        folder.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
        name = f"part-{stamp}-{os.getpid()}-{uuid.uuid4().hex[:8]}.parquet"
        table = pa.Table.from_pylist(rows, schema=arrow_schema())
        partial = folder / f".{name}.tmp"
        pq.write_table(table, partial)
        final = folder / name
        os.replace(partial, final)
        log.debug("metrics lake: %d samples -> %s", len(rows), final)
        return final
