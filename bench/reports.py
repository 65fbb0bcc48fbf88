"""The report job on a generated metrics lake: full and incremental run times and peak memory.

Generates `--samples` lake rows (4 flows x 25 partitions, a sample every 5 s, incidents in flow 1) plus
one more day, runs the job over the lake without that day (full run, fresh state, on a JVM that has
run nothing yet), then adds the day and runs again (incremental: reads the new day, re-reads the
previous open one, and the carry). Target: the full run of 10M samples under 60 s on a 2-core machine;
exits 1 when missed. Then, for scale, a second full run on the warm JVM against a baseline measured
right after it: Spark reading every lake column of the same files and doing nothing with them. Peak
memory is the driver's (Python) and the JVM's resident high-water marks (VmHWM).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dashboards.lakegen import generate_lake
from dashboards.spark.jobs import run_reports
from dashboards.spark.lake import spark_schema_ddl
from dashboards.spark.session import spark_session

FLOWS, PARTITIONS, STEP_S = 4, 25, 5.0
TARGET_FULL_S = 60.0
START = datetime(2026, 1, 1, tzinfo=UTC)


def _jvm_peak_mb(spark) -> float:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _timed_run(spark, *, lake: Path, state: Path, now: datetime) -> tuple[float, object]:
    started = time.perf_counter()
    result = run_reports(spark=spark, lake_dir=lake, state_dir=state, now=now)
    return time.perf_counter() - started, result


def _raw_read_s(spark, lake: Path) -> float:
    """The baseline: read every column of every lake file (Spark's no-op sink), nothing computed."""
    files = [str(path) for path in sorted(lake.glob("date=*/flow=*/*.parquet"))]
    started = time.perf_counter()
    spark.read.schema(spark_schema_ddl()).parquet(*files).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reports", description=__doc__)
    parser.add_argument("--samples", type=int, default=10_000_000, help="lake rows of the full run")
    parser.add_argument("--driver-memory", default="6g")
    args = parser.parse_args(argv)

    # Whole days, so the full run's lake holds about `--samples` rows and the incremental one a day more.
    per_day = int(86_400 / STEP_S)
    days = max(round(args.samples / (FLOWS * PARTITIONS) / per_day), 1)
    with tempfile.TemporaryDirectory(prefix="mirrorplane-bench-") as tmp:
        root = Path(tmp)
        started = time.perf_counter()
        lake = generate_lake(
            root / "all",
            flows=FLOWS,
            partitions=PARTITIONS,
            samples=(days + 1) * per_day,
            start=START,
            step_s=STEP_S,
            scenario="incidents",
        )
        generated_s = time.perf_counter() - started
        days = sorted(p.name for p in (root / "all").glob("date=*"))
        # The full run sees every day but the last (all sealed); the incremental one adds the last day.
        cut = datetime.fromisoformat(days[-1].removeprefix("date=")).replace(tzinfo=UTC)
        full_lake = root / "lake"
        for day in days[:-1]:
            shutil.copytree(root / "all" / day, full_lake / day)
        print(f"generated {lake.rows:,} samples ({len(days)} days) in {generated_s:.1f} s")

        spark = spark_session(app_name="mirrorplane-bench", conf={"spark.driver.memory": args.driver_memory})
        spark.sparkContext.setLogLevel("ERROR")
        full_s, full = _timed_run(spark, lake=full_lake, state=root / "state", now=cut + timedelta(hours=2))
        shutil.copytree(root / "all" / days[-1], full_lake / days[-1])
        end = lake.end + timedelta(hours=2)
        incremental_s, incremental = _timed_run(spark, lake=full_lake, state=root / "state", now=end)
        warm_lake = root / "warm"  # what the first full run read
        for day in days[:-1]:
            shutil.copytree(root / "all" / day, warm_lake / day)
        warm_s, _ = _timed_run(spark, lake=warm_lake, state=root / "warm-state", now=cut + timedelta(hours=2))
        raw_s = _raw_read_s(spark, warm_lake)
        jvm_mb = _jvm_peak_mb(spark)
        spark.stop()

    driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = lambda result: sum(len(r) for r in result.datasets.values())  # noqa: E731
    print(
        f"full run:        {full_s:6.1f} s  {full.samples_read:,} samples, {rows(full):,} report rows "
        f"(target < {TARGET_FULL_S:.0f} s: {'met' if full_s < TARGET_FULL_S else 'MISSED'})"
    )
    print(
        f"incremental run: {incremental_s:6.1f} s  {incremental.samples_read:,} samples "
        f"({len(incremental.partitions_read)} partitions), {rows(incremental):,} report rows"
    )
    print(
        f"warm full run:   {warm_s:6.1f} s  vs a raw read of the same lake {raw_s:.1f} s: "
        f"{warm_s / raw_s:.1f}x the read"
    )
    print(f"peak memory:     driver (Python) {driver_mb:,.0f} MB, JVM {jvm_mb:,.0f} MB")
    return 0 if full_s < TARGET_FULL_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
