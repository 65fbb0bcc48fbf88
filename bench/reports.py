"""The report job on a generated metrics lake: cold, incremental and warm run times and peak JVM memory,
each against its target, beside a raw Spark read of the same lake.

Generates `--samples` lake rows (4 flows x 25 partitions, a sample every 5 s, incidents in flow 1) plus
one more day, runs the job over the lake without that day (the cold full run: fresh state, on a JVM
that has run nothing yet; the session's start-up, printed apart, comes before it), then adds the day and runs again (incremental: reads the new day, re-reads
the previous open one, and the carry). Then a second full run on the warm JVM (fresh state, same lake)
against a baseline measured right after it: Spark reading every lake column of the same files and doing
nothing with them. Peak memory is the driver's (Python) and the JVMs' resident high-water marks
(VmHWM): the driver's JVM, and on a cluster (SPARK_MASTER) the executor JVMs this machine runs. The
cold and warm runs' steps (as the job reports them) print with their wall seconds and the CPU seconds of
the driver's JVM and of its Python workers (local mode: the job's tasks; on a cluster the executors'
are not counted).

Targets (issue 38): the cold full run of 10.4M samples under 30 s, the warm full run within 5x the raw
read, every JVM under 2 GB; exits 1 when one is missed. The JVM is sized by the session's defaults
(`dashboards.spark.session`) unless `--driver-memory` says otherwise.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from dashboards.lakegen import generate_lake
from dashboards.spark.jobs import run_reports
from dashboards.spark.lake import spark_schema_ddl
from dashboards.spark.session import spark_session

FLOWS, PARTITIONS, STEP_S = 4, 25, 5.0
TARGET_COLD_S = 30.0
TARGET_WARM_RATIO = 5.0  # warm full run / raw read
TARGET_JVM_MB = 2048.0
START = datetime(2026, 1, 1, tzinfo=UTC)


def jvm_peak_mb(pid: int) -> float:
    """The resident high-water mark (VmHWM) of process `pid`, in MB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _java_ancestor(_) -> list[tuple[str, float]]:
    """Run in a Spark task: the JVM that runs it (the Python worker's nearest `java` ancestor) and its peak."""
    pid = os.getpid()
    while pid > 1:
        if Path(f"/proc/{pid}/comm").read_text().strip() == "java":
            return [(f"{os.uname().nodename}:{pid}", jvm_peak_mb(pid))]
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    return []


def jvm_peaks_mb(spark) -> dict[str, float]:
    """Peak resident memory of the driver's JVM and of every JVM that ran a task of a small probe job
    (in local mode the same one; on a cluster the executors)."""
    driver = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    peaks = {"driver": jvm_peak_mb(driver)}
    slots = spark.sparkContext.defaultParallelism
    for name, peak in (
        spark.sparkContext.parallelize(range(slots), slots).mapPartitions(_java_ancestor).collect()
    ):
        if not name.endswith(f":{driver}"):
            peaks[f"executor {name}"] = max(peak, peaks.get(f"executor {name}", 0.0))
    return peaks


@dataclass
class Run:
    """One run of the job: its wall seconds, result, and the wall and CPU seconds of each step it reported
    (`on_progress`), CPU as (JVM, its Python workers) in local mode."""

    seconds: float
    result: object
    steps: list[tuple[str, float, tuple[float, float]]]

    def step_line(self) -> str:
        return "; ".join(
            f"{step} {wall:.1f} s (JVM {jvm:.1f}, Python {python:.1f} CPU-s)"
            for step, wall, (jvm, python) in self.steps
        )


def _cpu_s(jvm: int) -> tuple[float, float]:
    """CPU seconds so far of process `jvm` (itself) and of its descendants (Python workers), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # not a process, or gone
        stats[int(entry.name)] = (int(fields[1]), sum(map(int, fields[11:15])) / tick)
    descendants = 0.0
    for parent, seconds in stats.values():
        while parent > 1 and parent != jvm:
            parent = stats.get(parent, (1, 0.0))[0]
        descendants += seconds if parent == jvm else 0.0
    own = Path(f"/proc/{jvm}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(own[11]) + int(own[12])) / tick, descendants


def _timed_run(spark, *, lake: Path, state: Path, now: datetime) -> Run:
    jvm = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()
    marks = []
    started = time.perf_counter()
    result = run_reports(
        spark=spark,
        lake_dir=lake,
        state_dir=state,
        now=now,
        on_progress=lambda step, _: marks.append((step, time.perf_counter(), _cpu_s(jvm))),
    )
    steps = [
        (step, end - begin, (cpu_end[0] - cpu[0], cpu_end[1] - cpu[1]))
        for (step, begin, cpu), (_, end, cpu_end) in zip(marks, marks[1:], strict=False)
    ]
    return Run(time.perf_counter() - started, result, steps)


def _raw_read_s(spark, lake: Path) -> float:
    """The baseline: read every column of every lake file (Spark's no-op sink), nothing computed."""
    files = [str(path) for path in sorted(lake.glob("date=*/flow=*/*.parquet"))]
    # Read tasks of at most 32 MB: the bench's 24 files of 14 MB as 12 tasks on 2 cores, the read at its
    # quickest (Spark's default packs 128 MB: 3 tasks, the third alone on a core).
    spark.conf.set("spark.sql.files.maxPartitionBytes", str(32 * 1024 * 1024))
    started = time.perf_counter()
    spark.read.schema(spark_schema_ddl()).parquet(*files).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started


def _load() -> str:
    return "load {:.1f} {:.1f} {:.1f}".format(*os.getloadavg())


def _verdict(met: bool) -> str:
    return "met" if met else "MISSED"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.reports", description=__doc__)
    parser.add_argument("--samples", type=int, default=10_000_000, help="lake rows of the full run")
    parser.add_argument("--driver-memory", help="spark.driver.memory (default: the session's)")
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
        print(f"generated {lake.rows:,} samples ({len(days)} days) in {generated_s:.1f} s ({_load()})")

        conf = {"spark.driver.memory": args.driver_memory} if args.driver_memory else {}
        started = time.perf_counter()
        spark = spark_session(app_name="mirrorplane-bench", conf=conf)
        spark.sparkContext.setLogLevel("ERROR")
        session_s, session_load = time.perf_counter() - started, _load()
        master = spark.sparkContext.master
        cold = _timed_run(spark, lake=full_lake, state=root / "state", now=cut + timedelta(hours=2))
        cold_load = _load()
        shutil.copytree(root / "all" / days[-1], full_lake / days[-1])
        end = lake.end + timedelta(hours=2)
        incremental = _timed_run(spark, lake=full_lake, state=root / "state", now=end)
        incremental_load = _load()
        warm_lake = root / "warm"  # what the first full run read
        for day in days[:-1]:
            shutil.copytree(root / "all" / day, warm_lake / day)
        warm = _timed_run(spark, lake=warm_lake, state=root / "warm-state", now=cut + timedelta(hours=2))
        raw_s = _raw_read_s(spark, warm_lake)
        warm_load = _load()
        jvm_mb = jvm_peaks_mb(spark)
        spark.stop()

    driver_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows = lambda run: sum(len(r) for r in run.result.datasets.values())  # noqa: E731
    ratio = warm.seconds / raw_s
    jvm_peak = max(jvm_mb.values())
    met = {
        "cold": cold.seconds < TARGET_COLD_S,
        "warm": ratio <= TARGET_WARM_RATIO,
        "jvm": jvm_peak < TARGET_JVM_MB,
    }
    print(f"master {master}")
    print(
        f"session start:   {session_s:6.1f} s  (the JVM and the SparkContext; not in the runs below; {session_load})"
    )
    print(
        f"cold full run:   {cold.seconds:6.1f} s  {cold.result.samples_read:,} samples, {rows(cold):,} report rows "
        f"(target < {TARGET_COLD_S:.0f} s: {_verdict(met['cold'])}; {cold_load})"
    )
    print(
        f"incremental run: {incremental.seconds:6.1f} s  {incremental.result.samples_read:,} samples "
        f"({len(incremental.result.partitions_read)} partitions), {rows(incremental):,} report rows "
        f"({incremental_load})"
    )
    print(
        f"warm full run:   {warm.seconds:6.1f} s  vs a raw read of the same lake {raw_s:.2f} s: {ratio:.1f}x the read "
        f"(target <= {TARGET_WARM_RATIO:.0f}x: {_verdict(met['warm'])}; {warm_load})"
    )
    print(f"  cold run's steps: {cold.step_line()}")
    print(f"  warm run's steps: {warm.step_line()}")
    jvms = ", ".join(f"{name} {mb:,.0f} MB" for name, mb in jvm_mb.items())
    print(
        f"peak memory:     driver (Python) {driver_mb:,.0f} MB; JVM {jvms} "
        f"(target < {TARGET_JVM_MB:,.0f} MB: {_verdict(met['jvm'])})"
    )
    missed = [name for name, ok in met.items() if not ok]
    if missed:
        print(f"targets missed: {', '.join(missed)}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
