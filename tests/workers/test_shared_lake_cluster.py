"""A lake every machine shares, read by a Spark standalone cluster (a master and a worker started from the
pyspark package's own launcher): two Celery workers, each with its own working directory (two machines),
write to one lake directory, and the report job, another process, counts every sample of both; and a
lake on object storage (an S3-compatible server) that the report job's executors read through s3a."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from controlplane.reports.models import ReportRow, ReportRun, ReportRunState
from dashboards.spark.s3a import s3a_jars
from harness.runtime import (
    REPO,
    CeleryRuntime,
    create_topic,
    database_url,
    free_port,
    produce,
    wait_until,
)
from tests.lake import S3_ENVIRONMENT, lake_samples
from workers.lake import MetricsLake

pytestmark = [pytest.mark.slow]


class SparkStandalone:
    """A standalone master and one worker (`spark-class ...Master` / `...Worker` from the pyspark wheel,
    which ships no sbin start scripts), on free ports of 127.0.0.1; `stop()` ends both."""

    def __init__(self, workdir: Path, *, cores: int = 2, memory: str = "1g") -> None:
        import pyspark

        self.workdir, self.cores, self.memory = workdir, cores, memory
        self.spark_class = str(Path(pyspark.__file__).parent / "bin" / "spark-class")
        # The executors' Python workers import the job's modules: this checkout's, whatever else the
        # environment's installs point at.
        python_path = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
        self.env = {
            **os.environ,
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_NO_DAEMONIZE": "1",
            "PYTHONPATH": python_path,
        }
        self.master_url = f"spark://127.0.0.1:{free_port()}"
        self.processes: list[subprocess.Popen] = []

    def _start(self, name: str, *args: str) -> None:
        with open(self.workdir / f"{name}.log", "wb") as log:
            self.processes.append(
                subprocess.Popen(
                    [self.spark_class, *args],
                    env=self.env,
                    cwd=self.workdir,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                )
            )

    def log(self, name: str, *, since: int = 0) -> str:
        """The process's log from character `since` on (what it said after a mark taken by a test)."""
        path = self.workdir / f"{name}.log"
        return path.read_text(errors="replace")[since:] if path.exists() else ""

    def start(self) -> SparkStandalone:
        self.workdir.mkdir(parents=True, exist_ok=True)
        port = self.master_url.rpartition(":")[2]
        self._start(
            "spark-master",
            "org.apache.spark.deploy.master.Master",
            *("--host", "127.0.0.1", "--port", port, "--webui-port", str(free_port())),
        )
        self._start(
            "spark-worker",
            "org.apache.spark.deploy.worker.Worker",
            *("--host", "127.0.0.1", "--webui-port", str(free_port())),
            *("--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(self.workdir / "work")),
            self.master_url,
        )
        return self

    def wait_ready(self) -> None:
        wait_until(
            lambda: "Successfully registered with master" in self.log("spark-worker"),
            timeout_s=120,
            what=f"the Spark worker to register with {self.master_url} (logs in {self.workdir})",
            poll_s=0.5,
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory):
    """One standalone cluster for this module's tests (its JVMs start once), without the object store's
    credentials: the cluster's processes get none, the report job's driver passes them on."""
    cluster = SparkStandalone(tmp_path_factory.mktemp("spark"))
    for name in S3_ENVIRONMENT:
        cluster.env.pop(name, None)
    cluster.start()
    yield cluster
    cluster.stop()


def _lake_samples(lake: Path):
    """Every sample in the lake's complete files (what a report must count), read without Spark."""
    files = sorted(str(path) for path in lake.glob("date=*/flow=*/part-*.parquet"))
    return ds.dataset(files, format="parquet").to_table(columns=["worker", "records"]) if files else None


@pytest.mark.kafka
@pytest.mark.timeout(900)  # seven JVM and Python processes: minutes on a loaded 2-core machine
def test_two_machines_share_a_lake_and_a_standalone_cluster_reports_every_sample(
    make_flow, cluster_a, redis_url, unique_name, tmp_path, spark_cluster
):
    lake = tmp_path / "shared-lake"
    cluster = spark_cluster  # its JVMs start while the workers replicate
    worker_log_mark = len(cluster.log("spark-worker"))
    shared = {
        "METRICS_DIR": str(lake),
        "MIRRORPLANE_REBALANCE_SLICES": "2",
        "REPORTS_STATE_DIR": str(tmp_path / "reports-state"),
    }
    machines = []
    for name in ("host1", "host2"):
        (tmp_path / name).mkdir()
        machines.append(
            CeleryRuntime(workdir=tmp_path / name, redis_url=redis_url, env=shared, cwd=tmp_path / name)
        )
    try:
        create_topic(cluster_a, unique_name)
        make_flow(topics=[unique_name], tasks_max=2)
        workers = {
            name: runtime.start_worker(name) for name, runtime in zip(("w1", "w2"), machines, strict=True)
        }
        machines[0].start_beat()
        produce(cluster_a, unique_name, 2000)

        def both_wrote_every_record() -> bool:
            samples = _lake_samples(lake)
            if samples is None:
                return False
            pids = {worker.rpartition(":")[2] for worker in set(samples.column("worker").to_pylist())}
            both = pids >= {str(process.pid) for process in workers.values()}
            return both and sum(samples.column("records").to_pylist()) >= 2000

        wait_until(both_wrote_every_record, timeout_s=90, what=f"samples of 2000 records by both in {lake}")
        for name, runtime in zip(("w1", "w2"), machines, strict=True):
            runtime.stop(name)  # a warm stop writes the samples it buffered
        samples = _lake_samples(lake)

        # Beat queued the scheduled report run when it started; a reports worker on the second machine,
        # started now that the lake is complete, runs it on the standalone cluster.
        cluster.wait_ready()
        machines[1].env.update(
            {
                "SPARK_MASTER": cluster.master_url,
                "SPARK_EXECUTOR_MEMORY": "512m",
                "SPARK_LOCAL_IP": "127.0.0.1",
            }
        )
        machines[1].start_worker("reports", queues="reports", concurrency=1)
        run = wait_until(
            lambda: ReportRun.objects.filter(active=False).first(),
            timeout_s=720,
            what=f"the report run to finish (logs: {tmp_path / 'host2' / 'reports.log'}, {cluster.workdir})",
            poll_s=0.5,
        )
        assert run.state == ReportRunState.SUCCEEDED, run.error
        assert run.samples_read == samples.num_rows
        # it ran on the cluster's executor
        assert "Asked to launch executor" in cluster.log("spark-worker", since=worker_log_mark)
        seconds = (run.finished_at - run.started_at).total_seconds()
        print(f"report run on the standalone cluster: {seconds:.1f} s, {run.samples_read} samples")
    finally:
        for runtime in machines:
            runtime.close()


@pytest.mark.timeout(600)  # three JVMs and the executor's Python workers on a loaded 2-core machine
def test_a_standalone_cluster_reports_a_lake_on_object_storage_through_s3a(
    transactional_db, s3_server, tmp_path, spark_cluster
):
    """As in production: the workers' writer puts the samples in the object store (`METRICS_DIR=s3://...`),
    and `manage.py run_reports` runs the report job on the cluster, whose executor reads them through s3a.
    The connector reaches the session as docs/analytics.md tells operators: `spark.jars` in
    `$SPARK_CONF_DIR/spark-defaults.conf` (Spark ships the jars to the executor); the endpoint comes from
    METRICS_DIR, the credentials from the driver's environment only: the cluster's processes have none."""
    cluster = spark_cluster
    worker_log_mark = len(cluster.log("spark-worker"))
    url = f"s3://metrics/lake?endpoint_override={s3_server}&scheme=http"
    lake = MetricsLake(url, flush_interval_s=60, flush_rows=10_000)
    lake.append(lake_samples(1, partitions=2, behind=5) + lake_samples(2, partitions=1, behind=0))
    assert len(lake.flush()) == 2
    conf_dir = tmp_path / "spark-conf"
    conf_dir.mkdir()
    (conf_dir / "spark-defaults.conf").write_text(f"spark.jars {','.join(map(str, s3a_jars()))}\n")
    cluster.wait_ready()

    log = tmp_path / "run_reports.log"
    with log.open("wb") as output:
        finished = subprocess.run(
            [sys.executable, "manage.py", "run_reports"],
            cwd=REPO,
            env={
                **os.environ,
                "DATABASE_URL": database_url(),
                "METRICS_DIR": url,
                "REPORTS_STATE_DIR": str(tmp_path / "reports-state"),
                "SPARK_MASTER": cluster.master_url,
                "SPARK_EXECUTOR_MEMORY": "512m",
                "SPARK_LOCAL_IP": "127.0.0.1",
                "SPARK_CONF_DIR": str(conf_dir),
            },
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=540,
            check=False,
        )
    assert finished.returncode == 0, log.read_text(errors="replace")[-6000:]
    run = ReportRun.objects.get()
    assert (run.state, run.samples_read, run.partitions_read) == (ReportRunState.SUCCEEDED, 3, 2)
    lag = {
        (row.flow_id, row.data["partition"]): row.data["records_behind_max"]
        for row in ReportRow.objects.filter(dataset="partition_lag")
    }
    assert lag == {(1, 0): 5, (1, 1): 5, (2, 0): 0}
    # it ran on the cluster's executor
    assert "Asked to launch executor" in cluster.log("spark-worker", since=worker_log_mark)
