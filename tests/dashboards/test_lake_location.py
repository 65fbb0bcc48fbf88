"""Where the metrics lake lives: a directory, or an object store written through pyarrow's filesystems
(an S3-compatible server started here: moto's), the report job's listing through the same filesystem,
and Spark reading it through the s3a connector (deploy/spark/pom.xml) on the local session.
tests/workers/test_shared_lake_cluster.py reads one from a standalone cluster."""

from __future__ import annotations

from datetime import timedelta

import pyarrow.fs
import pyarrow.parquet as pq
import pytest

from dashboards.spark.jobs import list_lake_partitions, run_reports
from dashboards.spark.lake import arrow_schema, lake_location
from dashboards.spark.s3a import pyspark_hadoop_version, s3a_hadoop_version
from dashboards.spark.session import cluster_conf, memory_size
from tests.lake import AT, lake_samples
from workers.lake import MetricsLake, part_name


def test_a_directory_is_a_local_location_spark_reads_by_path(tmp_path):
    location = lake_location(tmp_path / "lake")
    assert location.is_local and location.root == str(tmp_path / "lake") == location.spark_root
    assert lake_location(f"file://{tmp_path}/lake").root == location.root


def test_an_s3_url_is_read_by_spark_through_s3a_at_the_endpoint_it_names():
    location = lake_location("s3://metrics/lake/?endpoint_override=127.0.0.1:9&scheme=http&region=eu-west-1")
    assert not location.is_local
    assert (location.root, location.spark_root) == ("metrics/lake", "s3a://metrics/lake")
    assert location.spark_options == {
        "fs.s3a.bucket.metrics.endpoint": "http://127.0.0.1:9",
        "fs.s3a.bucket.metrics.path.style.access": "true",
        "fs.s3a.bucket.metrics.endpoint.region": "eu-west-1",
    }
    assert (
        lake_location("s3://metrics/lake?endpoint_override=minio:9000").spark_options[
            "fs.s3a.bucket.metrics.endpoint"
        ]
        == "https://minio:9000"
    )


def test_the_s3a_connector_is_fetched_for_the_hadoop_pyspark_bundles():
    assert s3a_hadoop_version() == pyspark_hadoop_version()


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
        MetricsLake(lake, flush_interval_s=60, flush_rows=1).append(lake_samples(3, partitions=2))
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


def test_driver_memory_comes_from_the_environment_and_is_checked():
    assert memory_size("SPARK_DRIVER_MEMORY", {"SPARK_DRIVER_MEMORY": " 1536m "}) == "1536m"
    assert memory_size("SPARK_DRIVER_MEMORY", {}) is None
    with pytest.raises(ValueError, match="SPARK_DRIVER_MEMORY='lots'.*e.g. 2g"):
        memory_size("SPARK_DRIVER_MEMORY", {"SPARK_DRIVER_MEMORY": "lots"})


def test_workers_write_an_object_store_lake_the_report_job_lists(s3_server):
    url = f"s3://metrics/lake?endpoint_override={s3_server}&scheme=http"
    writers = [MetricsLake(url, flush_interval_s=60, flush_rows=10_000) for _ in range(2)]
    writers[0].append(lake_samples(1, partitions=3))
    writers[1].append(lake_samples(1, partitions=2) + lake_samples(2, partitions=1))
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


def test_the_report_job_reads_an_object_store_lake_through_s3a(spark, s3_server, tmp_path):
    """The local session (with the connector's jars in `spark.jars`, tests/dashboards/conftest.py) reads
    what the workers' writer put in the S3-compatible server, at the endpoint METRICS_DIR names."""
    url = f"s3://metrics/lake?endpoint_override={s3_server}&scheme=http"
    lake = MetricsLake(url, flush_interval_s=60, flush_rows=10_000)
    lake.append(lake_samples(1, partitions=3, behind=4) + lake_samples(2, partitions=1, behind=0))
    assert len(lake.flush()) == 2

    result = run_reports(spark=spark, lake_dir=url, state_dir=tmp_path / "state", now=AT + timedelta(days=2))
    assert result.samples_read == 4
    assert result.partitions_sealed == ["date=2026-03-01/flow=1", "date=2026-03-01/flow=2"]
    lag = {
        (row["flow_id"], row["partition"]): row["records_behind_max"]
        for row in result.datasets["partition_lag"]
    }
    assert lag == {(1, 0): 4, (1, 1): 4, (1, 2): 4, (2, 0): 0}
