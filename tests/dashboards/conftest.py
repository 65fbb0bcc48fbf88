"""One local SparkSession for every dashboards test, plus a builder of lake-shaped sample DataFrames."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest
from rest_framework.test import APIClient

from dashboards.spark.lake import spark_schema_ddl
from dashboards.spark.s3a import s3a_jars
from dashboards.spark.session import spark_session
from tests.lake import S3_ENVIRONMENT

T0 = datetime(2026, 1, 5, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def spark():
    # py4j logs its shutdown at INFO from an atexit hook, after pytest closed the captured streams.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = spark_session(
        app_name="mirrorplane-tests",
        master="local[2]",
        conf={
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
            # The s3a connector, for the lake on object storage (test_lake_location.py), with the test
            # server's credentials as per-bucket settings: this JVM may start before the server's
            # fixture sets them in the environment (tests/workers/test_shared_lake_cluster.py reads them
            # from there).
            "spark.jars": ",".join(str(jar) for jar in s3a_jars()),
            "spark.hadoop.fs.s3a.bucket.metrics.access.key": S3_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
            "spark.hadoop.fs.s3a.bucket.metrics.secret.key": S3_ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
        },
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def sample(
    *,
    at_s: float,
    end: int,
    position: int,
    partition: int = 0,
    flow_id: int = 1,
    records: int = 0,
    bytes_: int = 0,
    interval_s: float = 10.0,
    record_age_ms: float | None = None,
    replication_latency_ms: float | None = None,
    topic: str = "orders",
    task_index: int = 0,
    partitions: int | None = 1,
) -> tuple:
    """One lake row, `at_s` seconds after T0, in LAKE_COLUMNS order."""
    return (
        T0 + timedelta(seconds=at_s),
        flow_id,
        f"A->B#{flow_id}",
        topic,
        f"A.{topic}",
        partition,
        task_index,
        f"w{task_index}:1",
        end,
        position,
        records,
        bytes_,
        float(interval_s),
        record_age_ms,
        replication_latency_ms,
        partitions,
    )


@pytest.fixture
def samples_df(spark):
    def build(rows: list[tuple]):
        return spark.createDataFrame(rows, spark_schema_ddl())

    return build


@pytest.fixture
def api_as(users):
    """api_as("operator") -> a DRF client authenticated as that role; "anonymous" is not."""

    def make(role: str) -> APIClient:
        client = APIClient()
        if role != "anonymous":
            client.force_authenticate(users[role])
        return client

    return make
