"""The SparkSession the report jobs run on: `local[*]` by default, any cluster through SPARK_MASTER."""

from __future__ import annotations

import os
import sys

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"

# Small shuffles: report datasets are per partition and window, far smaller than the lake they come from.
DEFAULT_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.sql.adaptive.enabled": "true",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # The job caches the samples once and scans them once per dataset: building a compressed cache costs
    # more CPU than the scans save, and the memory is there.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    # A batch job: the throughput collector beats G1 by ~10% on the report job (bench/reports.py); only
    # applies to JVMs this session starts (in local mode, the one JVM).
    "spark.driver.extraJavaOptions": "-XX:+UseParallelGC",
    "spark.executor.extraJavaOptions": "-XX:+UseParallelGC",
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
    if master.startswith("local"):
        # Python workers (the grouped lag function) need this venv's pandas; clusters set PYSPARK_PYTHON.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    for key, value in {**DEFAULT_CONF, **(conf or {})}.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()
