"""The metrics lake in the tests: rows as the workers write them, and an S3-compatible server for the
lake on object storage: moto's (`moto[server]`, the dev extra), a real HTTP server speaking the S3 API on
a free loopback port."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.fs
import requests
from django.conf import settings

from replication.kafka.processes import free_port
from replication.metrics import PartitionMetrics
from workers.lake import lake_rows

AT = datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC)

# What the lake's writers and Spark's s3a connector authenticate with (moto takes any key).
S3_ENVIRONMENT = {
    "AWS_ACCESS_KEY_ID": "test",
    "AWS_SECRET_ACCESS_KEY": "test",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextmanager
def moto_s3_server(log_path: Path, *, bucket: str = "metrics", timeout_s: float = 30.0) -> Iterator[str]:
    """The server's `host:port` once it answers, with `bucket` created; stopped on exit."""
    endpoint = f"127.0.0.1:{free_port()}"
    with log_path.open("wb") as log:
        server = subprocess.Popen(
            [
                str(Path(sys.executable).with_name("moto_server")),
                "-H",
                "127.0.0.1",
                "-p",
                endpoint.split(":")[1],
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + timeout_s
            while not _answers(endpoint):
                if time.monotonic() > deadline or server.poll() is not None:
                    raise AssertionError(f"moto_server on {endpoint} did not answer (log: {log_path})")
                time.sleep(0.2)
            pyarrow.fs.S3FileSystem(
                access_key=S3_ENVIRONMENT["AWS_ACCESS_KEY_ID"],
                secret_key=S3_ENVIRONMENT["AWS_SECRET_ACCESS_KEY"],
                endpoint_override=endpoint,
                scheme="http",
                allow_bucket_creation=True,
            ).create_dir(bucket)
            yield endpoint
        finally:
            server.terminate()
            server.wait(10)


def _answers(endpoint: str) -> bool:
    try:
        return requests.get(f"http://{endpoint}/", timeout=1).ok
    except requests.RequestException:
        return False


def lake_samples(flow_id: int, *, partitions: int, behind: int = 0, at: datetime = AT) -> list[dict]:
    """Lake rows as a worker writes them for one slice of `flow_id`: each partition `behind` records behind."""
    metrics = [
        PartitionMetrics(
            topic="A.orders",
            partition=p,
            source_topic="orders",
            record_count=10,
            record_rate=0.0,
            byte_count=100,
            byte_rate=0.0,
            record_age_ms=5.0,
            replication_latency_ms=7.0,
            records_behind=behind,
            seconds_behind=0.0,
            source_end_offset=10 + behind,
            next_offset=10,
            skipped_count=0,
            gap_count=0,
            lost_records=0,
            stopped=False,
            last_error=None,
        )
        for p in range(partitions)
    ]
    rows, _ = lake_rows(
        flow_id=flow_id,
        flow_name="A->B",
        task_index=0,
        worker="h:1",
        partitions=metrics,
        previous={},
        interval_s=1.0,
        at=at,
        topic_rows_above=settings.METRICS_TOPIC_ROWS_ABOVE,
    )
    return rows
