"""Spark's s3a connector, which the pyspark wheel does not ship: `hadoop-aws` of the Hadoop version the
wheel bundles and the AWS SDK v2 modules it calls, named by `deploy/spark/pom.xml` and fetched from Maven
Central into `var/spark-jars/<hadoop version>` (`make spark-jars`).

A report job's session gets them through `spark.jars` (in `$SPARK_CONF_DIR/spark-defaults.conf` on the
driver's machine: Spark ships them to the executors); docs/analytics.md, "Reading an object-store lake".
"""

from __future__ import annotations

import sys
from pathlib import Path

from replication.maven import maven_libs, pom_property

PROJECT_ROOT = Path(__file__).resolve().parents[2]
S3A_POM = PROJECT_ROOT / "deploy" / "spark" / "pom.xml"


def s3a_hadoop_version() -> str:
    """The Hadoop version deploy/spark/pom.xml fetches hadoop-aws at (its one home)."""
    return pom_property(S3A_POM, "hadoop.version")


def pyspark_hadoop_version() -> str:
    """The Hadoop version the installed pyspark bundles (`pyspark/jars/hadoop-client-api-<version>.jar`):
    hadoop-aws must be the same, or S3A fails on classes that moved between Hadoop versions."""
    import pyspark

    (jar,) = (Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar")
    return jar.stem.removeprefix("hadoop-client-api-")


def s3a_jars() -> list[Path]:
    """The connector's jars, fetched on first use: the value of `spark.jars` is their comma-joined paths."""
    version = s3a_hadoop_version()
    libs = maven_libs(
        S3A_POM,
        PROJECT_ROOT / "var" / "spark-jars" / version,
        what=f"Spark's s3a connector (hadoop-aws {version})",
    )
    return sorted(libs.glob("*.jar"))


if __name__ == "__main__":  # `make spark-jars`
    jars = s3a_jars()
    megabytes = sum(jar.stat().st_size for jar in jars) / 1e6
    print(
        f"Spark's s3a connector (hadoop-aws {s3a_hadoop_version()}): {len(jars)} jars, {megabytes:.1f} MB in "
        f"{jars[0].parent}; for spark-defaults.conf:",
        file=sys.stderr,
    )
    print(f"spark.jars {','.join(str(jar) for jar in jars)}")
