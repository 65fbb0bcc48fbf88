"""The incremental report job: new lake partitions in, report rows (plain dicts) out.

Incremental rule. The lake is split into `date=YYYY-MM-DD/flow=<id>` partitions. A partition is SEALED
once its UTC day ended more than `seal_after` ago (late slices of that day have landed); sealed
partitions are read once and recorded in the ledger. Partitions not yet sealed (today's, being written)
are re-read by every run and never recorded. Each run therefore reads: the sealed partitions missing
from the ledger, every unsealed partition, and the carry (below). Files that appear in a partition after
it was recorded are reported in `late_files` and not read.

Report windows divide a UTC day, so no window spans two partitions: a window's rows are recomputed whole
whenever its partition is read, and the web app upserts them by `REPORT_KEYS` (newer replaces older).
What crosses partitions is context: Burrow's last N samples and the lag lookback. The job keeps a CARRY:
per mirrored partition, the sealed samples of the last lag lookback plus the N-1 before them. Rows are
emitted only for windows with newly read samples, so a run over (carry + new partitions) gives the same
rows as a full run over the whole lake. Daily usage rows (for capacity plans) are upserted in the state
and the capacity plan is recomputed from all of them on every run.

How it runs. Spark reads the files to read (and the carry) as bytes (`binaryFile`: its filesystems,
s3a for an object store), grouped by flow: the flows are packed into groups of about equal bytes
(`flow_groups`), and each group's files are read by one task. A mirrored partition's samples are all in
its flow's files, so that task's Python worker (`_partition_windows`) holds every sample of its
partitions without a shuffle: it decodes the files with pyarrow, sorts each partition's samples by time
and computes every per-window measure in numpy (the transforms' own functions: lag, Burrow features,
throughput, latency, task usage) plus the carry. The samples cross from the JVM to Python once, as the
files' bytes, and never row by row (Spark's row-to-Arrow conversion costs per column and row, and
sorting rows costs more than sorting arrays). Those rows (about 1/60 of the samples at 5-minute windows)
come to the driver once as Arrow: the per-window reports are a selection of them, the statuses and the
daily usage are computed from them in numpy, and so are the usage state (merged with the day's usage) and
the capacity plan from it: no Spark job after the pass (on a cluster each costs seconds). A group holds
whole flows: the largest flow's samples of a run are what one Python worker holds at most.

State is a directory: `ledger.json` (the commit point, written last and atomically) naming the carry and
usage Parquet files of its generation.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import reduce
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyarrow.fs import FileSelector, FileType
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from dashboards.spark import latency, throughput
from dashboards.spark.capacity import DEFAULT_HORIZON_DAYS, DEFAULT_PLAN_MONTHS, capacity_plan_table
from dashboards.spark.frames import (
    DAY_SECONDS,
    FLOW_KEY,
    PARTITION_KEY,
    WINDOW_COLUMNS,
    window_seconds,
)
from dashboards.spark.lag import DEFAULT_LOOKBACK, PARTITION_LAG_SCHEMA, window_lag_table
from dashboards.spark.lake import LAKE_COLUMNS, LakeLocation, arrow_schema, lake_location
from dashboards.spark.latency import latency_measures
from dashboards.spark.status import (
    DEFAULT_WINDOW_SAMPLES,
    WINDOW_FEATURES,
    flow_status_table,
    newest_window_features_table,
    partition_status_table,
)
from dashboards.spark.throughput import throughput_measures
from dashboards.spark.usage import USAGE_SCHEMA, daily_flow_usage_table, sample_progress, task_usage
from dashboards.spark.windowed import arrow_columns, combined_codes, count_per_window, report_windows

ProgressCallback = Callable[[str, float], None]
RowsCallback = Callable[[dict[str, list[dict]]], None]

# A mirrored partition by ids only: a flow's name ("A->B") changes when a cluster alias does.
PARTITION_ID = ("flow_id", "source_topic", "remote_topic", "partition")
# How the web app stores each dataset: upsert by these columns; capacity_plan replaces all its rows.
REPORT_KEYS: dict[str, tuple[str, ...] | None] = {
    "partition_lag": (*PARTITION_ID, "window_start"),
    "flow_throughput": (*PARTITION_ID, "window_start"),
    "latency_percentiles": (*PARTITION_ID, "window_start"),
    "partition_status": (*PARTITION_ID, "window_start"),
    "flow_status": ("flow_id", "window_start"),
    "daily_flow_usage": ("flow_id", "date"),
    "capacity_plan": None,
}


@dataclass(frozen=True)
class CapacityOptions:
    worker_nic_mbps: float = 10_000.0  # megabits per second per worker
    retention_hours: float = 168.0
    tasks_max: int = 1
    workers: int = 1
    horizon_days: tuple[int, ...] = DEFAULT_HORIZON_DAYS
    trend_days: int = 30
    per_task_mb_per_s: float | None = None  # one task's measured maximum, when windows saturated none
    plan_months: int = DEFAULT_PLAN_MONTHS  # what to add to last this many months
    # Worker pools, as the web app knows them (the lake's samples carry none): each flow's pool (a flow
    # not named: the default pool) and each pool's live workers (a pool not named: none; None: unknown).
    pools: dict[int, str] = field(default_factory=dict)
    pool_workers: dict[str, int] | None = None


@dataclass(frozen=True)
class ReportOptions:
    window: timedelta = timedelta(minutes=5)
    lag_lookback: timedelta = DEFAULT_LOOKBACK
    window_samples: int = DEFAULT_WINDOW_SAMPLES
    seal_after: timedelta = timedelta(hours=1)
    capacity: CapacityOptions = field(default_factory=CapacityOptions)


@dataclass
class ReportResult:
    datasets: dict[str, list[dict]]
    partitions_read: list[str]  # lake partitions read ("date=.../flow=..."), sealed and unsealed
    partitions_sealed: list[str]  # of which newly recorded in the ledger
    late_files: list[str]
    samples_read: int  # lake rows read (the carry excluded)


@dataclass(frozen=True)
class LakePartition:
    name: str  # "date=YYYY-MM-DD/flow=<id>"
    day: date
    files: tuple[str, ...]  # file names inside the partition directory
    size: int = 0  # their bytes

    @property
    def flow_id(self) -> int:
        return int(self.name.rsplit("flow=", 1)[1])


def list_lake_partitions(lake: str | Path | LakeLocation) -> list[LakePartition]:
    """The lake's partitions with their complete files, listed through the lake's filesystem (a directory
    or an object store: `lake.lake_location`); files being written (dot-names) are not listed."""
    location = lake if isinstance(lake, LakeLocation) else lake_location(lake)
    selector = FileSelector(location.root, recursive=True, allow_not_found=True)
    files: dict[str, list[str]] = {}
    sizes: dict[str, int] = {}
    for info in location.filesystem.get_file_info(selector):
        relative = info.path[len(location.root) :].strip("/").split("/")
        if info.type != FileType.File or len(relative) != 3:
            continue
        day, flow, name = relative
        complete = name.endswith(".parquet") and not name.startswith((".", "_"))
        if day.startswith("date=") and flow.startswith("flow=") and complete:
            files.setdefault(f"{day}/{flow}", []).append(name)
            sizes[f"{day}/{flow}"] = sizes.get(f"{day}/{flow}", 0) + (info.size or 0)
    return [
        LakePartition(
            name,
            date.fromisoformat(name.split("/")[0].removeprefix("date=")),
            tuple(sorted(found)),
            sizes[name],
        )
        for name, found in sorted(files.items())
    ]


def is_sealed(partition: LakePartition, *, now: datetime, seal_after: timedelta) -> bool:
    day_end = datetime.combine(partition.day + timedelta(days=1), datetime.min.time(), tzinfo=UTC)
    return now >= day_end + seal_after


class ReportState:
    """The ledger of sealed partitions with the carry and usage files of its generation."""

    def __init__(self, state_dir: Path) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        ledger = self.dir / "ledger.json"
        data = json.loads(ledger.read_text()) if ledger.exists() else {}
        self.sealed: dict[str, list[str]] = data.get("sealed", {})
        self.generation: str | None = data.get("generation")

    def _path(self, kind: str, generation: str | None = None) -> Path | None:
        generation = generation or self.generation
        return self.dir / f"{kind}-{generation}.parquet" if generation else None

    def path(self, kind: str) -> Path | None:
        """The current generation's file of `kind`, if there is one."""
        path = self._path(kind)
        return path if path and path.exists() else None

    def read(self, kind: str) -> pa.Table | None:
        path = self.path(kind)
        return pq.read_table(path) if path else None

    def commit(self, *, sealed: dict[str, list[str]], tables: dict[str, pa.Table]) -> None:
        """Write the new generation's files, then the ledger (atomically), then drop the old files."""
        generation = uuid.uuid4().hex[:12]
        for kind, table in tables.items():
            pq.write_table(table, self._path(kind, generation))
        ledger = self.dir / "ledger.json"
        tmp = ledger.with_suffix(".tmp")
        tmp.write_text(json.dumps({"generation": generation, "sealed": sealed}, indent=1, sort_keys=True))
        os.replace(tmp, ledger)
        old, self.generation, self.sealed = self.generation, generation, sealed
        for kind in tables:
            stale = self._path(kind, old) if old else None
            if stale and stale.exists():
                stale.unlink()


def carried_rows(
    micros: np.ndarray, sealed: np.ndarray, *, lookback_s: int, window_samples: int
) -> np.ndarray:
    """Which of one mirrored partition's samples the carry keeps: of its sealed samples (times in µs), those
    of the last lookback and the `window_samples - 1` before them, as row indices in time order.

    In time order, a sample is kept when the one `window_samples - 1` after it (the newest, when fewer
    follow) lies in the lookback, i.e. at or after the newest minus the lookback.
    """
    order = np.argsort(micros, kind="stable")
    rows = order[sealed[order]]
    if not len(rows):
        return rows
    times = micros[rows]
    ahead = times[np.minimum(np.arange(len(times)) + window_samples - 1, len(times) - 1)]
    return rows[ahead >= times[-1] - lookback_s * 1_000_000]


# Where a sample read comes from: `_origin` in the grouped pass.
UNSEALED, SEALED, CARRIED = 0, 1, 2
TASK = ("task_index", "worker")
LAKE_NAMES = tuple(name for name, _ in LAKE_COLUMNS)
# What the carry keeps of a sample besides its mirrored partition (the key of the row that carries it).
CARRY_COLUMNS = tuple(name for name in LAKE_NAMES if name not in PARTITION_KEY)
# What `_partition_windows` adds to `partition_lag`'s columns.
PASS_COLUMNS = ("_window", "_throughput", "_latency", "_new_samples", "_usage", "_carry")


def flow_groups(sizes: Mapping[int, int], groups: int) -> list[list[int]]:
    """Flows (id -> bytes to read) packed into at most `groups` groups of about equal bytes, the largest
    flow first into the lightest group: the pass reads each group in one task, whole flows (a mirrored
    partition's samples are all in its flow's files)."""
    packed: list[tuple[int, list[int]]] = [(0, []) for _ in range(min(groups, len(sizes)))]
    for flow, size in sorted(sizes.items(), key=lambda item: (-item[1], item[0])):
        lightest = min(range(len(packed)), key=lambda i: packed[i][0])
        total, flows = packed[lightest]
        packed[lightest] = (total + size, [*flows, flow])
    return [sorted(flows) for _, flows in packed]


# The lake's string columns (flow names, topics, workers: a few values repeated on every row) as the pass
# reads them: dictionary-encoded, so that coding, sorting and taking samples moves integers, not strings.
STRINGS = tuple(name for name, kind in LAKE_COLUMNS if kind == "string")
DICTIONARY = pa.dictionary(pa.int32(), pa.string())


def _lake_table(content: pa.Buffer, origin: int) -> pa.Table:
    """One lake (or carry) file's samples in the lake's schema, a column it lacks null (as Spark reads
    it), flagged with their `_origin`; the STRINGS dictionary-encoded."""
    read = pq.read_table(pa.BufferReader(content), read_dictionary=STRINGS)
    return pa.table(
        {
            field.name: read.column(field.name).cast(DICTIONARY if field.name in STRINGS else field.type)
            if field.name in read.column_names
            else pa.nulls(read.num_rows, DICTIONARY if field.name in STRINGS else field.type)
            for field in arrow_schema()
        }
        | {"_origin": pa.array(np.full(read.num_rows, origin, np.int8))}
    )


def _partitions_of(tables: list[pa.Table]) -> Iterator[pa.Table]:
    """Samples (`_lake_table`s) as each mirrored partition's, in time order, with plain strings."""
    table = pa.concat_tables(tables).unify_dictionaries().combine_chunks()
    key = combined_codes(table, PARTITION_KEY)  # dictionary indices: equal for equal strings
    micros = table.column("ts").cast(pa.int64()).to_numpy()
    order = np.lexsort((micros, key))
    key = key[order]
    table = table.take(order)
    schema = pa.schema([*arrow_schema(), table.schema.field("_origin")])
    bounds = np.concatenate([[0], np.flatnonzero(np.diff(key)) + 1, [len(key)]])
    for first, last in zip(bounds[:-1], bounds[1:], strict=True):
        yield table.slice(first, last - first).cast(schema)


def _list_column(values: pa.Table, rows_per_window: np.ndarray) -> pa.ListArray:
    """`values`' rows as one list per window, `rows_per_window[i]` of them for window i, in order."""
    offsets = np.concatenate([[0], np.cumsum(rows_per_window)]).astype(np.int32)
    return pa.ListArray.from_arrays(offsets, values.to_struct_array().combine_chunks())


def _partition_windows(files: DataFrame, groups: list[list[int]], options: ReportOptions) -> DataFrame:
    """Everything the reports need of the samples, from one pass over the files of each group of flows
    (`files`: their bytes, `_origin` and `_group`, an index into `groups`, one group a Spark partition:
    `_read_groups`): per mirrored partition and report window it reported in, `partition_lag`'s columns,
    Burrow's `_window` features, the `_throughput` and `_latency` measures, `_new_samples` (not carried),
    the `_usage` of its new samples per task, and, on a partition's first window only, the `_carry` it
    leaves.

    Each reads a mirrored partition's samples and gives a row per window in time order: the samples
    go to Python once instead of once per report, and Spark aggregates only these rows.
    """
    window_s = window_seconds(options.window)
    lookback_s = int(options.lag_lookback.total_seconds())
    lag = window_lag_table(window_s=window_s, lookback_s=options.lag_lookback.total_seconds())
    features = newest_window_features_table(window_s=window_s, window_samples=options.window_samples)

    def struct(measures: dict) -> pa.StructArray:
        columns = arrow_columns(measures)
        return pa.StructArray.from_arrays(list(columns.values()), names=list(columns))

    def partition(table: pa.Table) -> pa.Table:
        windows, starts = report_windows(table, window_s)
        count = len(starts)
        origin = table.column("_origin").to_numpy()
        new = origin != CARRIED
        progress = sample_progress(table)  # over the carried samples too: each needs the one before
        new_samples, new_progress = (
            (table, progress) if new.all() else (table.filter(new), progress.take(new))
        )
        window_of_usage, usage = task_usage(new_samples, windows[new], count, progress=new_progress, by=TASK)
        micros = table.column("ts").cast(pa.int64()).to_numpy()
        carry = carried_rows(
            micros, origin != UNSEALED, lookback_s=lookback_s, window_samples=options.window_samples
        )
        carry_per_window = np.zeros(count, np.int64)
        carry_per_window[0] = len(carry)
        return (
            lag(table)
            .append_column("_window", features(table).column("_window"))
            .append_column("_throughput", struct(throughput_measures(table, windows, count)))
            .append_column("_latency", struct(latency_measures(table, windows, count)))
            .append_column("_new_samples", pa.array(count_per_window(windows, count, new)))
            .append_column("_usage", _list_column(usage, np.bincount(window_of_usage, minlength=count)))
            .append_column("_carry", _list_column(table.select(CARRY_COLUMNS).take(carry), carry_per_window))
        )

    def apply(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        read = []
        for batch in batches:
            for content, origin, group in zip(*batch.columns, strict=True):
                table = _lake_table(content.as_buffer(), origin.as_py())
                if origin.as_py() == CARRIED:  # the carry holds every flow's: this group's only
                    table = table.filter(pc.is_in(table.column("flow_id"), pa.array(groups[group.as_py()])))
                read.append(table)
        if read:
            for samples in _partitions_of(read):
                yield from partition(samples).to_batches()

    kinds = dict(LAKE_COLUMNS)

    def ddl(*names: str) -> str:
        return ", ".join(f"`{name}` {kinds[name]}" for name in names)

    schema = (
        f"{ddl(*PARTITION_KEY)}, window_start timestamp, window_end timestamp, "
        f"{PARTITION_LAG_SCHEMA}, _window struct<{WINDOW_FEATURES}>, "
        f"_throughput struct<{throughput.MEASURE_SCHEMA}>, _latency struct<{latency.MEASURE_SCHEMA}>, "
        f"_new_samples long, _usage array<struct<{ddl(*TASK)}, {USAGE_SCHEMA}>>, "
        f"_carry array<struct<{ddl(*CARRY_COLUMNS)}>>"
    )
    return files.select("content", "_origin", "_group").mapInArrow(apply, schema)


def _read_groups(
    spark: SparkSession,
    *,
    location: LakeLocation,
    to_read: list[LakePartition],
    sealed_names: set[str],
    carry: Path | None,
) -> tuple[DataFrame, list[list[int]]]:
    """The files to read, their bytes read by Spark (its filesystems: s3a for an object store) flagged
    with their `_origin` and `_group`, one Spark partition per group of flows (`flow_groups`, at most
    spark.sql.shuffle.partitions of them), and the groups. A group's files are read in one task, so
    every sample of a mirrored partition reaches one Python worker without a shuffle. The carry holds
    every flow's samples: each group that has flows in it reads it (and keeps its flows' rows)."""
    sizes: dict[int, int] = {}
    for partition in to_read:
        sizes[partition.flow_id] = sizes.get(partition.flow_id, 0) + partition.size
    carried = (
        set(pq.read_table(carry, columns=["flow_id"]).column("flow_id").unique().to_pylist())
        if carry
        else set()
    )
    groups = flow_groups(
        {flow: sizes.get(flow, 0) for flow in sizes.keys() | carried},
        int(spark.conf.get("spark.sql.shuffle.partitions")),
    )

    def binary_files(paths: list[str], origin: int, options: Mapping[str, str]) -> DataFrame | None:
        """One read of the files, flagged with their `_origin`: no per-row test."""
        if not paths:
            return None
        return (
            spark.read.format("binaryFile")
            .options(**options)
            .option("recursiveFileLookup", "true")  # no partition discovery: see lake.partition_path
            .load(paths)
            .withColumn("_origin", F.lit(origin).cast("byte"))
        )

    def group_files(index: int, flows: list[int]) -> DataFrame:
        def lake_files(sealed: bool) -> list[str]:
            return [
                f"{location.spark_root}/{p.name}/{name}"
                for p in to_read
                if p.flow_id in flows and (p.name in sealed_names) == sealed
                for name in p.files
            ]

        parts = [
            binary_files(lake_files(True), SEALED, location.spark_options),
            binary_files(lake_files(False), UNSEALED, location.spark_options),
            binary_files([str(carry)] if carried & set(flows) else [], CARRIED, {}),
        ]
        files = reduce(DataFrame.unionByName, [frame for frame in parts if frame is not None])
        return files.coalesce(1).withColumn("_group", F.lit(index))

    return reduce(DataFrame.union, [group_files(i, flows) for i, flows in enumerate(groups)]), groups


def _exploded(windows: pa.Table, column: str, keep: Iterable[str]) -> pa.Table:
    """One row per element of a list column of the pass's rows (`windows`): its mirrored partition, `keep`
    and the element's fields."""
    lists = windows.column(column).combine_chunks()
    elements = pc.list_flatten(lists)
    keys = windows.select([*PARTITION_KEY, *keep]).take(pc.list_parent_indices(lists))
    return pa.table(
        {name: keys.column(name) for name in keys.column_names}
        | {field.name: elements.field(field.name) for field in elements.type}
    )


def _rows(table: pa.Table) -> list[dict]:
    columns = {}
    for name in table.column_names:
        column = table.column(name)
        if pa.types.is_timestamp(column.type):
            # Aware datetimes cost most of a row to build, and window bounds and sample times repeat
            # across partitions: each distinct instant is built once.
            encoded = column.combine_chunks().dictionary_encode()
            instants = encoded.dictionary.to_pylist()
            columns[name] = [None if i is None else instants[i] for i in encoded.indices.to_pylist()]
        else:
            columns[name] = column.to_pylist()
    return [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]


def run_reports(
    *,
    spark: SparkSession,
    lake_dir: str | Path,
    state_dir: str | Path,
    options: ReportOptions = ReportOptions(),
    since: date | None = None,
    now: datetime | None = None,
    on_progress: ProgressCallback = lambda step, fraction: None,
    store_rows: RowsCallback = lambda datasets: None,
) -> ReportResult:
    """Read what is new in the lake, return the report rows it changes (see the module doc).

    `store_rows` gets the rows before the ledger records the partitions read: when it raises, nothing
    is recorded and the next run reads the same partitions again (storing is an idempotent upsert).
    """
    if DAY_SECONDS % window_seconds(options.window):
        raise ValueError("the report window must divide a day, so windows never span lake partitions")
    now = now or datetime.now(UTC)
    state = ReportState(Path(state_dir))
    on_progress("listing lake partitions", 0.0)
    location = lake_location(lake_dir)
    partitions = [p for p in list_lake_partitions(location) if since is None or p.day >= since]
    late_files = [
        f"{p.name}/{name}"
        for p in partitions
        if p.name in state.sealed
        for name in sorted(set(p.files) - set(state.sealed[p.name]))
    ]
    to_read = [p for p in partitions if p.name not in state.sealed]
    newly_sealed = [p for p in to_read if is_sealed(p, now=now, seal_after=options.seal_after)]
    sealed_names = {p.name for p in newly_sealed}
    usage = state.read("usage")

    datasets: dict[str, list[dict]] = {name: [] for name in REPORT_KEYS}
    samples_read = 0
    if to_read:
        on_progress("reading the lake", 0.05)
        carry = state.path("carry")
        files, groups = _read_groups(
            spark, location=location, to_read=to_read, sealed_names=sealed_names, carry=carry
        )
        # The pass's rows, once in the driver: the per-window reports are a selection of them, the
        # statuses and daily usage are computed from them in numpy, the carry is a flattening.
        windows = _partition_windows(files, groups, options).toArrow()
        samples_read = pc.sum(windows.column("_new_samples")).as_py() or 0
        on_progress("lag, throughput and latency", 0.1)
        datasets.update(_window_reports(windows, has_carry=carry is not None))
        on_progress("status", 0.5)
        datasets.update(_status_reports(windows, has_carry=carry is not None, options=options))
        on_progress("daily usage", 0.8)
        # Computed once: the rows reported and the usage kept are the same table.
        new_usage = daily_flow_usage_table(
            _exploded(windows, "_usage", ["window_start"]), window_s=window_seconds(options.window)
        )
        datasets["daily_flow_usage"] = new_usage.to_pylist()
        usage = new_usage if usage is None else merged_usage(usage, new_usage)
        tables = {"usage": usage, "carry": _next_carry(windows)}

    on_progress("capacity plan", 0.9)
    if usage is not None:
        datasets["capacity_plan"] = _rows(capacity_plan_table(usage, **asdict(options.capacity)))
    on_progress("storing report rows", 0.95)
    store_rows(datasets)
    if to_read:
        state.commit(sealed={**state.sealed, **{p.name: list(p.files) for p in newly_sealed}}, tables=tables)
    on_progress("done", 1.0)
    return ReportResult(
        datasets=datasets,
        partitions_read=[p.name for p in to_read],
        partitions_sealed=sorted(sealed_names),
        late_files=late_files,
        samples_read=samples_read,
    )


def merged_usage(stored: pa.Table, new: pa.Table) -> pa.Table:
    """The usage state with a run's daily usage: its rows replace the stored ones of the same flow and day
    (a day re-read while it was not sealed), the others are kept."""
    keys = ["flow_id", "date"]
    both = pa.concat_tables([stored.select(keys).cast(new.select(keys).schema), new.select(keys)])
    codes = combined_codes(both, keys)
    kept = stored.filter(pa.array(~np.isin(codes[: stored.num_rows], codes[stored.num_rows :])))
    return pa.concat_tables([kept.select(new.column_names).cast(new.schema), new])


def _window_reports(windows: pa.Table, *, has_carry: bool) -> dict[str, list[dict]]:
    """partition_lag, flow_throughput and latency_percentiles from the pass's rows (`windows`): those of the
    windows with new samples (without a carry, every sample is new)."""
    touched = windows.filter(pc.greater(windows.column("_new_samples"), 0)) if has_carry else windows

    def measures(table: pa.Table, column: str) -> pa.Table:
        struct = table.column(column)
        return pa.table(
            {name: table.column(name) for name in (*PARTITION_KEY, *WINDOW_COLUMNS)}
            | dict(zip((field.name for field in struct.type), struct.flatten(), strict=True))
        )

    with_latency = pc.greater(pc.struct_field(touched.column("_latency"), "samples"), 0)
    return {
        "partition_lag": _rows(touched.drop_columns([c for c in PASS_COLUMNS if c in touched.column_names])),
        "flow_throughput": _rows(measures(touched, "_throughput")),
        "latency_percentiles": _rows(measures(touched.filter(with_latency), "_latency")),
    }


def _next_carry(windows: pa.Table) -> pa.Table:
    """The carry the pass's rows (`windows`) leave: their `_carry` lists as lake rows."""
    return _exploded(windows, "_carry", []).select(list(LAKE_NAMES))


def _status_reports(windows: pa.Table, *, has_carry: bool, options: ReportOptions) -> dict[str, list[dict]]:
    """partition_status and flow_status of the windows with new samples (without a carry, all), from the
    pass's rows (`windows`) in the driver: about 1/60 of the samples, in numpy (Spark's joins, window
    function and aggregation over the same rows took longer than the pass that made them)."""
    statuses = partition_status_table(windows, window_seconds(options.window))
    if has_carry:
        touched = windows.filter(pc.greater(windows.column("_new_samples"), 0))
        keys = [*FLOW_KEY, "window_start"]
        codes = combined_codes(pa.concat_tables([statuses.select(keys), touched.select(keys)]), keys)
        statuses = statuses.filter(pa.array(np.isin(codes[: statuses.num_rows], codes[statuses.num_rows :])))
    return {"partition_status": _rows(statuses), "flow_status": _rows(flow_status_table(statuses))}
