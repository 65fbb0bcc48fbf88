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

State is a directory: `ledger.json` (the commit point, written last and atomically) naming the carry and
usage Parquet files of its generation.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from functools import reduce
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from dashboards.spark import latency, throughput
from dashboards.spark.capacity import (
    DEFAULT_HORIZON_DAYS,
    capacity_plan_from_usage,
    daily_flow_usage_from_windows,
    window_usage,
)
from dashboards.spark.frames import (
    DAY_SECONDS,
    FLOW_KEY,
    PARTITION_KEY,
    WINDOW_COLUMNS,
    partition_key_ddl,
    window_seconds,
    with_window,
)
from dashboards.spark.lag import DEFAULT_LOOKBACK, PARTITION_LAG_SCHEMA, POINT_COLUMNS, window_lag_table
from dashboards.spark.lake import spark_schema_ddl
from dashboards.spark.latency import latency_aggregates, latency_columns, latency_percentiles_of
from dashboards.spark.percentiles import report_windows
from dashboards.spark.status import (
    DEFAULT_WINDOW_SAMPLES,
    WINDOW_FEATURES,
    flow_status,
    newest_window_features_table,
    partition_status,
)
from dashboards.spark.throughput import throughput_aggregates, throughput_columns, throughput_percentiles

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


def list_lake_partitions(lake_dir: Path) -> list[LakePartition]:
    partitions = []
    for directory in sorted(Path(lake_dir).glob("date=*/flow=*")):
        files = tuple(sorted(p.name for p in directory.glob("*.parquet")))
        if files:
            day = date.fromisoformat(directory.parent.name.removeprefix("date="))
            partitions.append(LakePartition(f"{directory.parent.name}/{directory.name}", day, files))
    return partitions


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

    def read(self, spark: SparkSession, kind: str) -> DataFrame | None:
        path = self._path(kind)
        return spark.read.parquet(str(path)) if path and path.exists() else None

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


def _carry(sealed_samples: DataFrame, *, lookback: timedelta, window_samples: int) -> DataFrame:
    """Per mirrored partition: sealed samples of the last lookback and the `window_samples - 1` before.

    In time order, a sample is kept when the one `window_samples - 1` after it (the newest, when fewer
    follow) lies in the lookback: one look-ahead window, not a count and then a rank of every sample.
    """
    lookback_s = int(lookback.total_seconds())
    newest = sealed_samples.groupBy(*PARTITION_KEY).agg(F.max("ts").alias("_newest"))
    ahead = F.lead("ts", window_samples - 1).over(Window.partitionBy(*PARTITION_KEY).orderBy("ts"))
    in_lookback = F.col("_ahead") >= F.col("_newest") - F.expr(f"INTERVAL {lookback_s} SECONDS")
    return (
        sealed_samples.join(F.broadcast(newest), list(PARTITION_KEY))
        .withColumn("_ahead", F.coalesce(ahead, F.col("_newest")))
        .where(in_lookback)
        .select(*sealed_samples.columns)
    )


# Strings the job carries through every shuffle, cache and Arrow pass: each travels as an int code (its
# rank among the values read) and is decoded on the small outputs.
CODED_COLUMNS = ("flow_name", "source_topic", "remote_topic", "worker")


def _string_codes(samples: DataFrame) -> dict[str, DataFrame]:
    """Per coded column, its values read with their codes: (`_code` int, <column> string)."""
    spark = samples.sparkSession
    # Distinct combinations (few: flows x topics x workers) cost less to gather than per-column sets.
    combinations = samples.select(*CODED_COLUMNS).distinct().collect()
    return {
        column: spark.createDataFrame(
            list(enumerate(sorted({row[column] for row in combinations} - {None}))),
            f"_code int, `{column}` string",
        )
        for column in CODED_COLUMNS
    }


def _encoded(frame: DataFrame, codes: dict[str, DataFrame]) -> DataFrame:
    """`frame` with each coded column replaced by its code (null stays null)."""
    for column, table in codes.items():
        frame = (
            frame.join(F.broadcast(table), column, "left").withColumn(column, F.col("_code")).drop("_code")
        )
    return frame


def _decoded(frame: DataFrame, codes: dict[str, DataFrame]) -> DataFrame:
    """The inverse of `_encoded` for the coded columns `frame` has, in its column order."""
    columns = frame.columns
    for column, table in codes.items():
        if column in columns:
            values = table.select(F.col("_code").alias(column), F.col(column).alias("_value"))
            frame = frame.join(F.broadcast(values), column, "left").withColumn(column, F.col("_value"))
            frame = frame.drop("_value")
    return frame.select(*columns)


def _clustered(samples: DataFrame) -> DataFrame:
    """Samples hash-partitioned by mirrored partition and sorted by time within it.

    Every transform groups or orders by the mirrored partition (and time): over this layout, cached
    once, their aggregates, windows and grouped functions run without shuffling or sorting again.
    """
    partitions = int(samples.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    return samples.repartition(partitions, *PARTITION_KEY).sortWithinPartitions(*PARTITION_KEY, "ts")


def _lag_status_features_and_percentiles(samples: DataFrame, options: ReportOptions) -> DataFrame:
    """`partition_lag`, `newest_window_features` (`_window`) and the throughput and latency percentiles
    (`_percentiles`) side by side, from one grouped pass over the samples.

    All read each mirrored partition's samples and give a row per report window it reported in, in the
    same order: one pass ships the samples to Python once instead of three times.
    """
    window_s = window_seconds(options.window)
    lag = window_lag_table(window_s=window_s, lookback_s=options.lag_lookback.total_seconds())
    features = newest_window_features_table(window_s=window_s, window_samples=options.window_samples)

    def apply(table):
        windows, starts = report_windows(table, window_s)
        percentiles = {
            **throughput_percentiles(table, windows, len(starts)),
            **latency_percentiles_of(table, windows, len(starts)),
        }
        return (
            lag(table)
            .append_column("_window", features(table).column("_window"))
            .append_column(
                "_percentiles",
                pa.StructArray.from_arrays(
                    [pa.array(array, from_pandas=True) for array in percentiles.values()],
                    names=list(percentiles),
                ),
            )
        )

    schema = (
        f"{partition_key_ddl(samples)}, window_start timestamp, window_end timestamp, "
        f"{PARTITION_LAG_SCHEMA}, _window struct<{WINDOW_FEATURES}>, "
        f"_percentiles struct<{throughput.PERCENTILE_SCHEMA}, {latency.PERCENTILE_SCHEMA}>"
    )
    columns = dict.fromkeys((*POINT_COLUMNS, *throughput.SAMPLE_COLUMNS, *latency.SAMPLE_COLUMNS))
    return samples.select(*PARTITION_KEY, *columns).groupBy(*PARTITION_KEY).applyInArrow(apply, schema)


def _throughput_and_latency(samples: DataFrame, window: timedelta, percentiles: DataFrame) -> DataFrame:
    """`flow_throughput` and `latency_percentiles` measures side by side, from one aggregation pass and
    the `_percentiles` of `_lag_status_features_and_percentiles`.

    Both group the samples by mirrored partition and window; latency columns are for the groups with
    `_latency_samples > 0` (latency_percentiles leaves the others out).
    """
    return (
        with_window(samples, window)
        .groupBy(*PARTITION_KEY, *WINDOW_COLUMNS)
        .agg(*throughput_aggregates(), *latency_aggregates())
        .join(
            percentiles.select(*PARTITION_KEY, "window_start", "_percentiles.*"),
            [*PARTITION_KEY, "window_start"],
        )
    )


def _windows_with_new_samples(new: DataFrame, window: timedelta, key: Iterable[str]) -> DataFrame:
    return with_window(new, window).select(*key, "window_start").distinct()


def _rows(frame: DataFrame) -> list[dict]:
    table = frame.toArrow()
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
    partitions = [p for p in list_lake_partitions(Path(lake_dir)) if since is None or p.day >= since]
    late_files = [
        f"{p.name}/{name}"
        for p in partitions
        if p.name in state.sealed
        for name in sorted(set(p.files) - set(state.sealed[p.name]))
    ]
    to_read = [p for p in partitions if p.name not in state.sealed]
    newly_sealed = [p for p in to_read if is_sealed(p, now=now, seal_after=options.seal_after)]
    sealed_names = {p.name for p in newly_sealed}
    usage = state.read(spark, "usage")

    datasets: dict[str, list[dict]] = {name: [] for name in REPORT_KEYS}
    samples_read = 0
    if to_read:

        def lake_files(sealed: bool) -> DataFrame | None:
            """The partitions to read that are (not) sealed, flagged so: one read each, no per-row test."""
            files = [
                str(Path(lake_dir) / p.name / name)
                for p in to_read
                if (p.name in sealed_names) == sealed
                for name in p.files
            ]
            if not files:
                return None
            return (
                spark.read.schema(spark_schema_ddl())
                .option("recursiveFileLookup", "true")  # no partition discovery: see lake.partition_path
                .parquet(*files)
                .withColumn("_sealed", F.lit(sealed))
                .withColumn("_carried", F.lit(False))
            )

        carry = state.read(spark, "carry")
        if carry is not None:
            carry = carry.withColumn("_sealed", F.lit(True)).withColumn("_carried", F.lit(True))
        parts = [frame for frame in (lake_files(True), lake_files(False), carry) if frame is not None]
        new = reduce(DataFrame.unionByName, parts)
        codes = _string_codes(new)
        everything = _clustered(_encoded(new, codes).select(*new.columns)).persist()
        new = everything.where(~F.col("_carried")).drop("_sealed", "_carried")
        samples_read = new.count()
        datasets.update(
            _windowed_reports(
                samples=everything.drop("_sealed", "_carried"),
                new=new,
                has_carry=carry is not None,
                codes=codes,
                options=options,
                on_progress=on_progress,
            )
        )
        on_progress("daily usage", 0.8)
        # Computed once: the rows reported and the usage kept are the same table; its window reduction,
        # which three aggregates read, is cached so it runs once too.
        windows = window_usage(new, options.window).persist()
        new_usage_table = _decoded(daily_flow_usage_from_windows(windows), codes).toArrow()
        windows.unpersist()
        datasets["daily_flow_usage"] = new_usage_table.to_pylist()
        new_usage = spark.createDataFrame(new_usage_table)
        if usage is not None:
            new_usage = usage.join(new_usage, ["flow_id", "date"], "left_anti").unionByName(new_usage)
        next_carry = _decoded(
            _carry(
                everything.where("_sealed").drop("_sealed", "_carried"),
                lookback=options.lag_lookback,
                window_samples=options.window_samples,
            ),
            codes,
        )
        tables = {
            "usage": new_usage.toArrow() if usage is not None else new_usage_table,
            "carry": next_carry.toArrow(),
        }
        everything.unpersist()
        usage = spark.createDataFrame(tables["usage"])

    on_progress("capacity plan", 0.9)
    if usage is not None:
        datasets["capacity_plan"] = _rows(capacity_plan_from_usage(usage, **asdict(options.capacity)))
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


def _windowed_reports(
    *,
    samples: DataFrame,
    new: DataFrame,
    has_carry: bool,
    codes: dict[str, DataFrame],
    options: ReportOptions,
    on_progress: ProgressCallback,
) -> dict[str, list[dict]]:
    """Report rows of the windows with new samples (without a carry, every sample is new)."""
    window = options.window
    partition_windows = _windows_with_new_samples(new, window, PARTITION_KEY)
    flow_windows = _windows_with_new_samples(new, window, FLOW_KEY)

    def touched(frame: DataFrame, windows: DataFrame, key: Iterable[str]) -> DataFrame:
        return frame.join(windows, [*key, "window_start"], "left_semi") if has_carry else frame

    def rows(frame: DataFrame) -> list[dict]:
        return _rows(_decoded(frame, codes))

    reports = {}
    on_progress("lag", 0.1)
    lag_and_features = _lag_status_features_and_percentiles(samples, options).persist()
    lag = lag_and_features.drop("_window", "_percentiles")
    reports["partition_lag"] = rows(touched(lag, partition_windows, PARTITION_KEY))
    on_progress("throughput and latency", 0.3)
    measures = touched(
        _throughput_and_latency(samples, window, lag_and_features), partition_windows, PARTITION_KEY
    ).persist()
    reports["flow_throughput"] = rows(measures.select(*PARTITION_KEY, *WINDOW_COLUMNS, *throughput_columns()))
    reports["latency_percentiles"] = rows(
        measures.where(F.col("_latency_samples") > 0).select(
            *PARTITION_KEY, *WINDOW_COLUMNS, *latency_columns()
        )
    )
    measures.unpersist()
    on_progress("status", 0.5)
    statuses = touched(
        partition_status(
            samples,
            window,
            window_samples=options.window_samples,
            features=lag_and_features,
        ),
        flow_windows,
        FLOW_KEY,
    ).persist()
    reports["partition_status"] = rows(statuses)
    reports["flow_status"] = rows(flow_status(statuses))
    statuses.unpersist()
    lag_and_features.unpersist()
    return reports
