"""The SparkSession the report jobs run on: `local[*]` by default, any cluster through SPARK_MASTER.

Settings (environment), read here:
- SPARK_MASTER: `local[*]` (default), or a cluster's master URL (`spark://host:7077` for standalone).
- PYSPARK_PYTHON: the Python the executors run the job's Python functions with (they need pandas and
  pyarrow); by default this process's interpreter, which a standalone worker on the same machine, or
  on machines running the same image, finds at the same path.
- SPARK_EXECUTOR_MEMORY: each executor's heap (`spark.executor.memory`, Spark's default 1g) on a cluster.
- SPARK_DRIVER_MEMORY: the driver's heap (`spark.driver.memory`, DEFAULT_DRIVER_MEMORY), which in local
  mode runs the tasks too. The job keeps the lake's samples out of the JVM (`jobs.py`, "How it runs"):
  1g runs a 10M-sample lake in local mode with the JVM's resident peak under 2 GB (bench/reports.py).
Anything else (the s3a connector's jars, `spark.jars`: `make spark-jars`) goes in
`$SPARK_CONF_DIR/spark-defaults.conf`, which the driver reads when it starts; an object-store lake's
endpoint comes with its reads from METRICS_DIR (`lake.LakeLocation.spark_options`): docs/analytics.md,
"Spark on a cluster".
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Mapping

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "1g"

# Small shuffles: report datasets are per partition and window, far smaller than the lake they come from.
DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Arrow batches between the JVM and Python of at most 32 MB (Spark's default is 10,000 rows whatever
    # their size): the report job hands Python whole lake files (jobs.py), which would otherwise sit in
    # the JVM a task (a group of flows) at a time.
    "spark.sql.execution.arrow.maxBytesPerBatch": str(32 * 1024 * 1024),
    # A union of single-partition reads keeps a partition per read: the report job reads each group of
    # flows in one task (jobs.py), a union of one read per group. Spark 4 merges partition i of every
    # child of a union whose children share a partitioning (here all single), which ran every group in
    # one task.
    "spark.sql.unionOutputPartitioning": "false",
    # The job caches the pass's rows once and scans them once per dataset: building a compressed cache
    # costs more CPU than the scans save, and the memory is there.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # A batch job on a fresh JVM (every run in local mode, every application's executors on a cluster):
    # - the throughput collector beats G1 by ~10% on the report job (bench/reports.py);
    # - the client compiler only (C1, no C2): a cold run of 10.4M samples spent 43 CPU-s in the JVM with
    #   both, 26 with C1 alone, its results identical (docs/performance.md, "The report job").
    # Only applies to JVMs this session starts (in local mode, the one JVM).
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC -XX:TieredStopAtLevel=1",
    "spark.executor.extraJavaOptions": "-XX:+UseParallelGC -XX:TieredStopAtLevel=1",
}


def spark_session(
    *, app_name: str = "mirrorplane-reports", master: str | None = None, conf: dict[str, str] | None = None
) -> SparkSession:
    """Get or create the session; `master` falls back to SPARK_MASTER, then `local[*]`.

    `conf` overrides the defaults (tests lower the shuffle partitions; the bench raises driver memory).
    Options that size the JVM only apply when this call starts it.
    """
    master = master or os.environ.get("SPARK_MASTER") or DEFAULT_MASTER
    builder = SparkSession.builder.appName(app_name).master(master)
    # Python workers (the grouped pass) need pandas and pyarrow: this venv's unless PYSPARK_PYTHON says.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    sized = {"spark.driver.memory": memory_size("SPARK_DRIVER_MEMORY", os.environ) or DEFAULT_DRIVER_MEMORY}
    for key, value in {**DEFAULT_CONF, **sized, **cluster_conf(master, os.environ), **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def cluster_conf(master: str, environ: Mapping[str, str]) -> dict[str, str]:
    """The session's settings for a cluster master from the environment (none in local mode, where the
    driver's JVM runs the tasks)."""
    if master.startswith("local"):
        return {}
    memory = memory_size("SPARK_EXECUTOR_MEMORY", environ)
    return {"spark.executor.memory": memory} if memory else {}


def memory_size(variable: str, environ: Mapping[str, str]) -> str | None:
    """A JVM memory size from the environment (`2g`, `512m`), None when unset; anything else is refused
    naming the variable."""
    memory = environ.get(variable, "").strip()
    if memory and not re.fullmatch(r"\d+([kmgtp]b?)?", memory.lower()):
        raise ValueError(f"{variable}={memory!r} is not a JVM memory size: write e.g. 2g or 512m")
    return memory or None
