"""The metrics lake's one schema and location: Parquet files under METRICS_DIR,
`date=YYYY-MM-DD/flow=<id>/part-*.parquet`.

Workers append one row per (slice, source partition) with what the engine measured; the Spark jobs read
them. A task of more than METRICS_TOPIC_ROWS_ABOVE partitions writes one row per (slice, topic) instead: a
TOPIC ROW stands for the task's `partitions` partitions of the topic (`partition` is
`topic_row_partition(task_index)`, below 0), with their records and bytes summed, their offsets summed
(so records behind is the sum of theirs) and the worst record age and latency. The report job treats a
topic row as one mirrored partition that counts `partitions` times (docs/analytics.md "Topic rows"). Both sides build their schema from `LAKE_COLUMNS`, so the writer and the readers cannot drift.
Offsets are source offsets unless named otherwise; `next_offset` is the mirror's position (the next
source offset to replicate), so `source_end_offset - next_offset` is records behind (clamped at 0).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

LAKE_COLUMNS: tuple[tuple[str, str], ...] = (
    ("ts", "timestamp"),  # UTC instant the sample was taken
    ("flow_id", "long"),
    ("flow_name", "string"),  # "A->B" (not `flow`: that is the directory's flow id)
    ("source_topic", "string"),
    ("remote_topic", "string"),
    ("partition", "int"),
    ("task_index", "int"),
    ("worker", "string"),  # host:pid of the worker process that ran the slice
    ("source_end_offset", "long"),  # source log end offset seen at the end of the slice
    ("next_offset", "long"),  # next source offset to replicate after the slice (the mirror's position)
    ("records", "long"),  # records replicated in this slice
    # Value bytes the target acknowledged in this slice (as MM2's byte-count: keys and headers excluded).
    ("bytes", "long"),
    ("interval_s", "double"),  # wall seconds the slice covered (rates = records / interval_s)
    ("record_age_ms", "double"),  # max over the slice of (poll time - record timestamp); null if no records
    ("replication_latency_ms", "double"),  # max over the slice of (ack time - record timestamp); null if none
    # Mirrored partitions the row stands for: 1, or a topic row's count. Null in files written before the
    # column existed: read as 1 (`partition_counts`).
    ("partitions", "int"),
)

PARTITION_COLUMNS = ("date", "flow")  # Hive-style directories: date=YYYY-MM-DD/flow=<flow_id>


def topic_row_partition(task_index: int) -> int:
    """The `partition` of task `task_index`'s topic rows: -1 for task 0, -2 for task 1, ...

    MM2 spreads a topic's partitions over all tasks, so each task's share of a topic is its own series
    (a sum of offsets is only a series when the same task adds up the same partitions)."""
    return -1 - task_index


def topic_row_task(partition: int) -> int | None:
    """The task whose topic row `partition` numbers; None for a partition's own row."""
    return -1 - partition if partition < 0 else None


def spark_schema_ddl() -> str:
    """`ts timestamp, flow_id long, ...` for `spark.read.schema(...)`."""
    return ", ".join(f"{name} {kind}" for name, kind in LAKE_COLUMNS)


def arrow_schema():
    """The pyarrow schema the workers write with (imported lazily: Spark jobs do not need pyarrow here)."""
    import pyarrow as pa

    types = {
        "timestamp": pa.timestamp("us", tz="UTC"),
        "long": pa.int64(),
        "int": pa.int32(),
        "string": pa.string(),
        "double": pa.float64(),
    }
    return pa.schema([(name, types[kind]) for name, kind in LAKE_COLUMNS])


# How Spark names an object store pyarrow reaches by `scheme://`: the s3a connector reads `s3://` lakes.
SPARK_SCHEMES = {"s3": "s3a", "gs": "gs", "abfs": "abfs", "hdfs": "hdfs"}


@dataclass(frozen=True)
class LakeLocation:
    """Where the lake lives: a pyarrow filesystem and the root inside it (writers and the job's listing),
    and how Spark names that root (the job's reads)."""

    filesystem: Any  # pyarrow.fs.FileSystem
    root: str  # the lake's root inside `filesystem`, without a trailing slash
    spark_root: str  # a local path, or e.g. `s3a://bucket/prefix`
    # Hadoop settings Spark's reads of the lake take as options: where the store is, from the same URL.
    spark_options: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_local(self) -> bool:
        import pyarrow.fs

        return isinstance(self.filesystem, pyarrow.fs.LocalFileSystem)


def lake_location(lake: str | Path) -> LakeLocation:
    """METRICS_DIR as a location: a directory (local, or a shared mount every worker and the Spark job
    see), or an object store URL pyarrow opens (`s3://bucket/prefix?endpoint_override=...`).

    Raises ValueError naming METRICS_DIR when the URL is not one pyarrow and Spark can both use.
    """
    import pyarrow as pa
    import pyarrow.fs

    text = str(lake)
    if "://" not in text:
        return LakeLocation(
            pyarrow.fs.LocalFileSystem(), str(Path(text).absolute()), str(Path(text).absolute())
        )
    parts = urlsplit(text)
    if parts.scheme == "file":
        return lake_location(parts.path)
    if parts.scheme not in SPARK_SCHEMES:
        raise ValueError(
            f"METRICS_DIR={text!r}: scheme {parts.scheme!r} is not supported; use a directory every worker "
            f"and the Spark job share (e.g. an NFS mount) or an object store URL ({', '.join(SPARK_SCHEMES)}"
            "://bucket/prefix)"
        )
    try:
        filesystem, root = pyarrow.fs.FileSystem.from_uri(text)
    except (pa.ArrowException, ValueError) as exc:
        raise ValueError(f"METRICS_DIR={text!r} is not an object store URL pyarrow can open: {exc}") from None
    root = root.strip("/")
    if not root:
        raise ValueError(f"METRICS_DIR={text!r} names no bucket: write {parts.scheme}://bucket/prefix")
    return LakeLocation(
        filesystem,
        root,
        f"{SPARK_SCHEMES[parts.scheme]}://{root}",
        s3a_options(parts, bucket=root.split("/")[0]),
    )


def s3a_options(parts, *, bucket: str) -> dict[str, str]:
    """The s3a settings of the lake's bucket for what its `s3://` URL says beyond the bucket: an
    S3-compatible store's endpoint (`endpoint_override`, with `scheme`; addressed by path, as such stores
    are) and `region`. Credentials are not here: s3a takes them where pyarrow does (AWS_ACCESS_KEY_ID /
    AWS_SECRET_ACCESS_KEY, which Spark hands from the driver's environment to the executors, or the
    instance role)."""
    if parts.scheme != "s3":
        return {}
    query = {name: values[-1] for name, values in parse_qs(parts.query).items()}
    prefix = f"fs.s3a.bucket.{bucket}."
    options = {}
    if "endpoint_override" in query:
        endpoint = query["endpoint_override"]
        if "://" not in endpoint:
            endpoint = f"{query.get('scheme', 'https')}://{endpoint}"
        options |= {f"{prefix}endpoint": endpoint, f"{prefix}path.style.access": "true"}
    if "region" in query:
        options[f"{prefix}endpoint.region"] = query["region"]
    return options


def partition_path(root: Path, *, date: str, flow_id: int) -> Path:
    """The directory of one UTC day of one flow: `<root>/date=YYYY-MM-DD/flow=<flow_id>`.

    Readers list files and read them without partition discovery: the directory names repeat the `ts` day
    and the `flow_id` column, and discovery would add them as columns of another type.
    """
    return Path(root) / f"date={date}" / f"flow={flow_id}"


def append_samples(root: Path, table, *, part: str) -> list[Path]:
    """Write a pyarrow table of lake rows as `<part>.parquet` in each (date, flow) directory it spans.

    `part` must be unique per writer and slice (e.g. `part-<worker>-<ts>`): files are never rewritten.
    """
    import numpy as np
    import pyarrow.parquet as pq

    dates = table.column("ts").to_numpy().astype("datetime64[D]").astype(str)
    flow_ids = table.column("flow_id").to_numpy()
    written = []
    for date in np.unique(dates):
        for flow_id in np.unique(flow_ids[dates == date]):
            rows = np.flatnonzero((dates == date) & (flow_ids == flow_id))
            directory = partition_path(root, date=str(date), flow_id=int(flow_id))
            directory.mkdir(parents=True, exist_ok=True)
            path = directory / f"{part}.parquet"
            pq.write_table(table.take(rows), path)
            written.append(path)
    return written
