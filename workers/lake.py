"""The metrics lake writer: every slice's samples (per partition, or per topic for a large task), appended
as Parquet under METRICS_DIR.

Layout and schema are `dashboards.spark.lake`'s (`date=YYYY-MM-DD/flow=<id>/part-*.parquet`,
`LAKE_COLUMNS`). A worker process buffers its samples and writes one file per (date, flow) at most
every `flush_interval_s` or `flush_rows` samples, not one file per slice: Spark reads few large files
far faster than many small ones. Samples buffered by a process that is killed -9 are lost (metrics
only; the positions and the data are not affected).

METRICS_DIR is a directory (shared by every worker machine and the Spark job: an NFS mount) or an
object store URL (`s3://bucket/prefix?endpoint_override=...`), written through pyarrow's filesystems
(`dashboards.spark.lake.lake_location`). Readers never see a partial file: in a directory a file is
written under a dot-name and renamed; an object appears only when its upload completes, so it is
written directly. File names carry the host, the pid and a random part: workers on several machines
writing to one lake never collide.
"""

from __future__ import annotations

import logging
import os
import re
import socket
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

from dashboards.spark.lake import LAKE_COLUMNS, arrow_schema, lake_location, topic_row_partition
from replication.metrics import PartitionMetrics

log = logging.getLogger(__name__)

LAKE_COLUMN_NAMES = tuple(name for name, _ in LAKE_COLUMNS)
RemotePartition = tuple[str, int]


@dataclass(frozen=True)
class Counts:
    records: int
    bytes: int


NO_COUNTS = Counts(0, 0)
# A partition's metrics at the end of a slice, with the records and bytes it replicated in the slice.
Sample = tuple[PartitionMetrics, int, int]


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
    topic_rows_above: int,
) -> tuple[list[dict], dict[RemotePartition, Counts]]:
    """A slice's samples (records and bytes since `previous`) and the new totals: one row per partition,
    or, for a task of more than `topic_rows_above` partitions, one topic row per topic (`lake` module
    doc): the rows a slice writes grow with the task's topics, not its partitions."""
    task = {
        "ts": at,
        "flow_id": flow_id,
        "flow_name": flow_name,
        "task_index": task_index,
        "worker": worker,
        "interval_s": interval_s,
    }
    samples: list[Sample] = []
    totals: dict[RemotePartition, Counts] = {}
    for p in partitions:
        before = previous.get((p.topic, p.partition), NO_COUNTS)
        samples.append((p, p.record_count - before.records, p.byte_count - before.bytes))
        totals[(p.topic, p.partition)] = Counts(p.record_count, p.byte_count)
    if len(samples) > topic_rows_above:
        return topic_rows(samples, task=task, partition=topic_row_partition(task_index)), totals
    rows = [
        {
            **task,
            "source_topic": p.source_topic,
            "remote_topic": p.topic,
            "partition": p.partition,
            "source_end_offset": p.source_end_offset,
            "next_offset": p.next_offset,
            "records": records,
            "bytes": byte_count,
            "record_age_ms": p.record_age_ms if records else None,
            "replication_latency_ms": p.replication_latency_ms if records else None,
            "partitions": 1,
        }
        for p, records, byte_count in samples
    ]
    return rows, totals


def topic_rows(samples: Iterable[Sample], *, task: Mapping, partition: int) -> list[dict]:
    """A slice's samples as one row per topic, numbered `partition`, after the `task` columns: records
    and bytes summed, offsets summed (unknown when any partition's is; the end taken at least at the
    position, so that records behind is the sum of the partitions' own, each clamped at 0), the worst
    record age and latency of the partitions that replicated records."""
    topics: dict[str, dict] = {}
    for p, records, byte_count in samples:
        row = topics.get(p.topic)
        if row is None:
            row = topics[p.topic] = {
                **task,
                "source_topic": p.source_topic,
                "remote_topic": p.topic,
                "partition": partition,
                "source_end_offset": 0,
                "next_offset": 0,
                "records": 0,
                "bytes": 0,
                "record_age_ms": None,
                "replication_latency_ms": None,
                "partitions": 0,
            }
        row["partitions"] += 1
        row["records"] += records
        row["bytes"] += byte_count
        if row["source_end_offset"] is not None:
            end = None if p.source_end_offset is None else max(p.source_end_offset, p.next_offset or 0)
            row["source_end_offset"] = None if end is None else row["source_end_offset"] + end
        if row["next_offset"] is not None:
            row["next_offset"] = None if p.next_offset is None else row["next_offset"] + p.next_offset
        if records:
            row["record_age_ms"] = _worst(row["record_age_ms"], p.record_age_ms)
            row["replication_latency_ms"] = _worst(row["replication_latency_ms"], p.replication_latency_ms)
    return list(topics.values())


def _worst(a: float | None, b: float | None) -> float | None:
    return a if b is None else b if a is None else max(a, b)


class MetricsLake:
    """A per-process buffer of lake rows; thread-safe (a threads-pool worker shares one)."""

    def __init__(
        self,
        root: str | Path,
        *,
        flush_interval_s: float,
        flush_rows: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.location = lake_location(root)
        self.flush_interval_s, self.flush_rows = flush_interval_s, flush_rows
        self._clock = clock
        self._rows: list[dict] = []
        self._since = clock()
        self._lock = threading.Lock()

    def append(self, rows: list[dict]) -> list[str]:
        """Buffer `rows`; write the buffer when it is old or large enough (the written files)."""
        with self._lock:
            self._rows.extend(rows)
            due = len(self._rows) >= self.flush_rows or self._clock() - self._since >= self.flush_interval_s
        return self.flush() if due else []

    def flush(self) -> list[str]:
        with self._lock:
            rows, self._rows = self._rows, []
            self._since = self._clock()
        if not rows:
            return []
        groups: dict[tuple[str, int], list[dict]] = defaultdict(list)
        for row in rows:
            groups[(row["ts"].astimezone(UTC).strftime("%Y-%m-%d"), row["flow_id"])].append(row)
        return [self._write(date, flow_id, group) for (date, flow_id), group in sorted(groups.items())]

    def _write(self, date: str, flow_id: int, rows: list[dict]) -> str:
        """Write one file; its path in the lake's filesystem."""
        filesystem, folder = self.location.filesystem, f"{self.location.root}/date={date}/flow={flow_id}"
        final = f"{folder}/{part_name(datetime.now(UTC))}"
        table = pa.Table.from_pylist(rows, schema=arrow_schema())
        if self.location.is_local:
            filesystem.create_dir(folder, recursive=True)
            partial = f"{folder}/.{final.rpartition('/')[2]}.tmp"
            pq.write_table(table, partial, filesystem=filesystem)
            filesystem.move(partial, final)  # a rename: atomic in a directory, on NFS too
        else:
            pq.write_table(table, final, filesystem=filesystem)
        log.debug("metrics lake: %d samples -> %s", len(rows), final)
        return final


def part_name(at: datetime, *, host: str | None = None, pid: int | None = None) -> str:
    """`part-<UTC time>-<host>-<pid>-<random>.parquet`: unique across the machines sharing a lake."""
    host = re.sub(r"[^A-Za-z0-9.-]+", "_", host if host is not None else socket.gethostname()) or "host"
    pid = os.getpid() if pid is None else pid
    return f"part-{at.astimezone(UTC).strftime('%Y%m%dT%H%M%S')}-{host}-{pid}-{uuid.uuid4().hex[:12]}.parquet"
