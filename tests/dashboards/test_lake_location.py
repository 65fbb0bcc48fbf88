"""Where the metrics lake lives: a directory, or an object store written through pyarrow's filesystems
(an S3-compatible server started here: moto's), and the report job's listing through the same
filesystem. Spark's s3a reads cannot run here (no hadoop-aws jar on this machine): docs/analytics.md."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pyarrow.fs
import pyarrow.parquet as pq
import pytest
import requests

from dashboards.spark.jobs import list_lake_partitions
from dashboards.spark.lake import arrow_schema, lake_location
from dashboards.spark.session import cluster_conf
from replication.metrics import PartitionMetrics
from tests.workers.harness import free_port, wait_until
from workers.lake import MetricsLake, lake_rows, part_name

AT = datetime(2026, 3, 1, 23, 59, 59, tzinfo=UTC)


def _rows(flow_id: int, *, partitions: int, at: datetime = AT) -> list[dict]:
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
            records_behind=0,
            seconds_behind=0.0,
            source_end_offset=10,
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
    )
    return rows


def test_a_directory_is_a_local_location_spark_reads_by_path(tmp_path):
    location = lake_location(tmp_path / "lake")
    assert location.is_local and location.root == str(tmp_path / "lake") == location.spark_root
    assert lake_location(f"file://{tmp_path}/lake").root == location.root


def test_an_s3_url_is_read_by_spark_through_s3a():
    location = lake_location("s3://metrics/lake/?endpoint_override=127.0.0.1:9&scheme=http")
    assert not location.is_local
    assert (location.root, location.spark_root) == ("metrics/lake", "s3a://metrics/lake")


@pytest.mark.parametrize(
    ("url", "says"),
    [("ftp://host/lake", "scheme 'ftp' is not supported"), ("s3://", "names no bucket")],
)
def test_a_lake_url_neither_pyarrow_nor_spark_can_use_is_refused_naming_the_setting(url, says):
    with pytest.raises(ValueError, match="METRICS_DIR") as error:
        lake_location(url)
    assert says in str(error.value)


def test_file_names_differ_between_machines_with_the_same_pid_at_the_same_second():
    names = {part_name(AT, host=host, pid=4242) for host in ("worker-a", "worker-b") for _ in range(50)}
    assert len(names) == 100
    assert part_name(AT, host="ip-10-0-0-1.ec2/internal", pid=7).startswith(
        "part-20260301T235959-ip-10-0-0-1.ec2_internal-7-"
    )


def test_two_writers_sharing_a_directory_write_files_the_listing_finds(tmp_path):
    lake = tmp_path / "shared"
    for _ in range(2):  # two workers (or machines) with the same lake
        MetricsLake(lake, flush_interval_s=60, flush_rows=1).append(_rows(3, partitions=2))
    (partition,) = list_lake_partitions(lake)
    assert partition.name == "date=2026-03-01/flow=3" and len(partition.files) == 2
    (tmp_path / "shared" / "date=2026-03-01" / "flow=3" / ".part-x.parquet.tmp").write_bytes(b"partial")
    assert list_lake_partitions(lake) == [partition]  # files being written are not listed
    assert list_lake_partitions(tmp_path / "missing") == []


def test_executor_memory_is_set_on_a_cluster_only_and_checked():
    assert cluster_conf("spark://h:7077", {"SPARK_EXECUTOR_MEMORY": "2g"}) == {"spark.executor.memory": "2g"}
    assert cluster_conf("local[*]", {"SPARK_EXECUTOR_MEMORY": "2g"}) == {}
    assert cluster_conf("spark://h:7077", {}) == {}
    with pytest.raises(ValueError, match="SPARK_EXECUTOR_MEMORY='2 GB'.*e.g. 2g"):
        cluster_conf("spark://h:7077", {"SPARK_EXECUTOR_MEMORY": "2 GB"})


@pytest.fixture
def s3_server(tmp_path, monkeypatch):
    """moto's S3-compatible server on a free port (`moto[server]`, the dev extra), with a `metrics` bucket."""
    port = free_port()
    log = (tmp_path / "moto.log").open("wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    for name, value in (("AWS_ACCESS_KEY_ID", "test"), ("AWS_SECRET_ACCESS_KEY", "test")):
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    endpoint = f"127.0.0.1:{port}"

    def answers() -> bool:
        try:
            return requests.get(f"http://{endpoint}/", timeout=1).ok
        except requests.RequestException:
            return False

    try:
        wait_until(answers, timeout_s=30, what=f"moto_server on {endpoint} (log: {log.name})")
        pyarrow.fs.S3FileSystem(
            endpoint_override=endpoint, scheme="http", allow_bucket_creation=True
        ).create_dir("metrics")
        yield endpoint
    finally:
        server.terminate()
        server.wait(10)
        log.close()


def test_workers_write_an_object_store_lake_the_report_job_lists(s3_server):
    url = f"s3://metrics/lake?endpoint_override={s3_server}&scheme=http"
    writers = [MetricsLake(url, flush_interval_s=60, flush_rows=10_000) for _ in range(2)]
    writers[0].append(_rows(1, partitions=3))
    writers[1].append(_rows(1, partitions=2) + _rows(2, partitions=1))
    written = [path for writer in writers for path in writer.flush()]
    assert len(written) == 3 and all(
        path.startswith("metrics/lake/date=2026-03-01/flow=") for path in written
    )

    partitions = list_lake_partitions(url)
    assert [(p.name, len(p.files)) for p in partitions] == [
        ("date=2026-03-01/flow=1", 2),
        ("date=2026-03-01/flow=2", 1),
    ]
    location = lake_location(url)
    objects = location.filesystem.get_file_info(pyarrow.fs.FileSelector("metrics", recursive=True))
    assert not [info.path for info in objects if ".tmp" in info.path]  # written directly, no temp objects
    tables = [pq.read_table(path, filesystem=location.filesystem) for path in written]
    assert all(table.schema.equals(arrow_schema()) for table in tables)
    assert sum(table.num_rows for table in tables) == 3 + 2 + 1
