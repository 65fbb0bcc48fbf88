"""Real runtime processes for the tests and the benchmarks: Celery workers and beat as subprocesses,
sharing the test database (PostgreSQL), a Redis database, and the session's Kafka clusters; gunicorn as
the Dockerfile runs it; steady traffic, arrival recorders and a rolling upgrade."""

from __future__ import annotations

import itertools
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path

import requests
from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec
from django.db import connection

from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import ClientValue, make_admin, make_consumer, make_producer
from replication.kafka.processes import free_port
from replication.kafka.source_io import PartitionReader
from replication.mirroring import source_offsets
from replication.task_io import PartitionReadError

CELERY = str(Path(sys.executable).with_name("celery"))
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
REPO = Path(__file__).resolve().parents[1]
PARTITIONS = 4


# A test's consumer that reads partitions to their end: the end is known from an empty fetch, which the
# broker holds for fetch.wait.max.ms (500 ms by default), and consume() waits its whole timeout unless the
# batch fills. Reading 100 records to the end took 1.0 s with the defaults and a 0.5 s consume, 0.055 s so.
READ_TO_END: dict[str, ClientValue] = {"enable.partition.eof": True, "fetch.wait.max.ms": 10}
READ_TO_END_POLL_S = 0.05


def wait_until(
    predicate: Callable[[], object],
    *,
    timeout_s: float,
    what: str,
    poll_s: float = 0.25,
    explain: Callable[[], str] | None = None,
):
    """The predicate's first true value within `timeout_s`; else an AssertionError naming `what`, with what
    `explain` says about the state then (for a failure seen only in CI)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            detail = f"\n{explain()}" if explain is not None else ""
            raise AssertionError(f"timed out after {timeout_s:g}s waiting for {what}{detail}")
        time.sleep(poll_s)


def database_url() -> str:
    """The current database (the test database under pytest-django) as subprocesses must reach it."""
    db = connection.settings_dict
    if db["ENGINE"] == "django.db.backends.sqlite3" and "memory" not in str(db["NAME"]):
        return f"sqlite:///{db['NAME']}"
    if db["ENGINE"] != "django.db.backends.postgresql":
        raise RuntimeError(
            "the runtime tests share the database with Celery worker processes: set DATABASE_URL to "
            "PostgreSQL, e.g. postgres://postgres@127.0.0.1:5432/postgres"
        )
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


class CeleryRuntime:
    """Starts workers and beat; every process it started is killed at `close()`."""

    def __init__(
        self,
        *,
        workdir: Path,
        redis_url: str,
        lease_ttl_s: float = 3.0,
        env: dict[str, str] | None = None,
        cwd: Path = REPO,
    ) -> None:
        """`cwd`: the processes' working directory (another machine's: the code is found on PYTHONPATH)."""
        self.workdir, self.cwd = workdir, cwd
        self.metrics_dir = workdir / "metrics"
        self.lease_ttl_s = lease_ttl_s
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": os.environ["DJANGO_SETTINGS_MODULE"],
            "DATABASE_URL": database_url(),
            "REDIS_URL": redis_url,
            "METRICS_DIR": str(self.metrics_dir),
            "MIRRORPLANE_LEASE_TTL_S": str(lease_ttl_s),
            "MIRRORPLANE_SLICE_SECONDS": "0.5",
            "MIRRORPLANE_SUPERVISE_INTERVAL_S": "0.5",
            "MIRRORPLANE_BACKOFF_MAX_S": "1",
            "METRICS_FLUSH_INTERVAL_S": "1",
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH")))),
            **(env or {}),
        }
        self.processes: dict[str, subprocess.Popen] = {}

    def _start(self, name: str, args: list[str]) -> subprocess.Popen:
        return self._run(name, [CELERY, "-A", "workers.app", *args])

    def _run(self, name: str, argv: list[str]) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "ab")  # noqa: SIM115 - the child writes to it
        process = subprocess.Popen(
            argv,
            env=self.env,
            cwd=self.cwd,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        log.close()
        self.processes[name] = process
        return process

    def start_worker(
        self, name: str, *, queues: str = "replication,metadata", pool: str = "threads", concurrency: int = 4
    ) -> subprocess.Popen:
        """A worker with the pool and concurrency the docs tell operators to use (docs/operations.md)."""
        return self._start(
            name,
            [
                "worker",
                f"--pool={pool}",
                f"--concurrency={concurrency}",
                "-n",
                f"{name}@%h",
                "-Q",
                queues,
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
            ],
        )

    def start_demo_workers(self) -> dict[str, subprocess.Popen]:
        """The workers exactly as `make demo` runs them (Procfile.demo), restart wrapper included."""
        return {name: self._run(name, argv) for name, argv in demo_worker_commands().items()}

    def start_beat(self) -> subprocess.Popen:
        return self._start(
            "beat", ["beat", "-s", str(self.workdir / "celerybeat-schedule"), "--loglevel=INFO"]
        )

    def kill(self, name: str) -> None:
        """SIGKILL, to the process's children too (the restart wrapper's worker)."""
        process = self.processes.pop(name)
        subprocess.run(["pkill", "-KILL", "-P", str(process.pid)], check=False)
        process.kill()
        process.wait(10)

    def stop(self, name: str, *, timeout_s: float = 60) -> None:
        """A warm shutdown (SIGTERM): the running slice finishes, positions are persisted."""
        process = self.processes.pop(name)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout_s)

    def log(self, name: str) -> str:
        return (self.workdir / f"{name}.log").read_text(errors="replace")

    def wait_ready(self, *names: str, timeout_s: float = 120) -> None:
        """Until each named worker has logged Celery's " ready." (its pool started, its queues consumed): a
        worker process starting on a loaded machine imports Django and the clients for many seconds."""
        for name in names:
            wait_until(
                lambda n=name: " ready." in self.log(n), timeout_s=timeout_s, what=f"worker {name} ready"
            )

    def close(self) -> None:
        for name in list(self.processes):
            self.kill(name)


def demo_worker_commands() -> dict[str, list[str]]:
    """Procfile.demo's Celery worker processes by name, with this environment's executables."""
    venv_bin = str(Path(sys.executable).parent)
    commands = {}
    for line in (REPO / "Procfile.demo").read_text().splitlines():
        name, _, command = line.partition(": ")
        if line.startswith("#") or " worker " not in command:
            continue
        argv = [token.replace(".venv/bin", venv_bin, 1) for token in shlex.split(command)]
        commands[name] = argv
    return commands


def create_topic(cluster: ClusterConfig, topic: str, partitions: int = PARTITIONS) -> None:
    """Create `topic` and wait until the broker serves every partition: a request right after CreateTopics
    can meet a broker whose metadata has not got the topic yet (a group's offsets altered on it answered
    "Unknown topic or partition" once in CI, at load)."""
    errors = TopicAdmin(cluster).create_topics([NewRemoteTopic(topic, topic, partitions, 1, {})])
    assert errors.get(topic) is None, errors
    wait_served(cluster, [TopicPartition(topic, partition) for partition in range(partitions)], timeout_s=30)


def latest_offsets(
    admin: AdminClient, partitions: Iterable[TopicPartition], *, timeout_s: float = 60.0
) -> dict[TopicPartition, int | None]:
    """Each partition's latest offset (its end) by one ListOffsets request through `admin`; None for a
    partition the cluster did not answer for (not served yet, or no answer within `timeout_s`). The caller
    keeps `admin` referenced until this returns: a collected client's futures never resolve."""
    futures = admin.list_offsets({key: OffsetSpec.latest() for key in partitions}, request_timeout=30)
    offsets: dict[TopicPartition, int | None] = {}
    for key, future in futures.items():
        try:
            offsets[key] = future.result(timeout=timeout_s).offset
        except (KafkaException, TimeoutError):
            offsets[key] = None
    return offsets


def wait_served(cluster: ClusterConfig, partitions: list[TopicPartition], *, timeout_s: float) -> None:
    """Wait until `cluster` serves each of `partitions` (answers ListOffsets for it). Created is not served
    yet: a broker creating thousands of partitions answers "not leader" for a while (70 s for 5,000 at load
    16). One admin client for every round; each round asks only for the partitions still pending."""
    admin = make_admin(cluster)
    pending = list(partitions)

    def served() -> bool:
        nonlocal pending
        pending = [key for key, offset in latest_offsets(admin, pending).items() if offset is None]
        return not pending

    wait_until(
        served,
        timeout_s=timeout_s,
        what=f"{len(partitions):,} partition(s) served on {cluster.alias}",
        poll_s=0.1,
    )


def produce(cluster: ClusterConfig, topic: str, count: int, *, partitions: int = PARTITIONS) -> None:
    producer = make_producer(cluster)
    for index in range(count):
        while True:
            try:
                producer.produce(
                    topic, key=b"k%d" % index, value=b"v%d" % index, partition=index % partitions
                )
                break
            except BufferError:  # the local queue is full: wait for acknowledgements
                producer.poll(0.05)
        if index % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


# One read_committed reader per cluster, kept between reads (`mirrored_offsets`) until
# `close_kept_readers`: a wait that checks a remote topic every quarter second paid a new reader per check,
# a consumer and an admin client, about a second at load.
_kept_readers: dict[tuple[str, str], PartitionReader] = {}


def close_kept_readers() -> None:
    """Close the readers `mirrored_offsets` kept (tests/conftest.py: after each test)."""
    while _kept_readers:
        _kept_readers.popitem()[1].close()


def mirrored_offsets(
    cluster: ClusterConfig, topic: str, partitions: int = PARTITIONS
) -> dict[int, list[int]]:
    """Per remote partition, the source offsets its records carry (exactly_once header), in order, as a
    read_committed consumer sees them (what a consumer of an exactly_once mirror reads). The cluster's
    reader is kept for the next read; one that failed is closed, the next read starts a new one (librdkafka
    keeps a partition it found missing, a remote topic not created yet, unknown until its next metadata
    refresh, minutes later)."""
    key = (cluster.alias, cluster.bootstrap_servers)
    reader = _kept_readers.pop(key, None) or PartitionReader(cluster, read_committed=True)
    try:
        records, failures = reader.read_all_to_end({(topic, partition): 0 for partition in range(partitions)})
    except BaseException:
        reader.close()
        raise
    if failures:
        reader.close()
        raise next(iter(failures.values()))
    _kept_readers[key] = reader
    return {
        partition: source_offsets([headers for _, headers in found])
        for (_, partition), found in records.items()
    }


def assert_mirrored_exactly_once(
    cluster: ClusterConfig, topic: str, produced: dict[int, int], *, timeout_s: float = 120
) -> None:
    """Wait until the remote topic holds as many records as were `produced` per partition, then check
    that a read_committed reader sees each source offset exactly once, in order."""
    partitions = len(produced)
    wait_until(
        lambda: all(
            len(offsets) >= produced[partition]
            for partition, offsets in mirrored_offsets(cluster, topic, partitions).items()
        ),
        timeout_s=timeout_s,
        what="every record replicated",
    )
    offsets = mirrored_offsets(cluster, topic, partitions)
    for partition in range(partitions):
        assert offsets[partition] == list(range(produced[partition])), (
            f"partition {partition}: {len(offsets[partition])} records, "
            f"{len(set(offsets[partition]))} distinct, expected {produced[partition]}"
        )


def count_records(cluster: ClusterConfig, topic: str, partitions: int = PARTITIONS) -> int:
    return sum(len(offsets) for offsets in mirrored_offsets(cluster, topic, partitions).values())


def replication_started(cluster: ClusterConfig, topic: str) -> bool:
    """Whether the remote topic holds a record yet; one that cannot be read to its end yet (not created,
    or not known to the kept reader until it is made again) has none: a wait goes on."""
    try:
        return count_records(cluster, topic) > 0
    except PartitionReadError:
        return False


def start_prometheus(*, config: Path, workdir: Path, port: int) -> subprocess.Popen:
    """Debian's `prometheus` (`make prometheus`) on 127.0.0.1:`port`; its data and log go to `workdir`."""
    binary = shutil.which("prometheus")
    assert binary, "Debian's prometheus is missing: `make test` installs it (make prometheus)"
    return subprocess.Popen(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=(workdir / "prometheus.log").open("wb"),
        stderr=subprocess.STDOUT,
    )


def dockerfile_gunicorn_flags() -> tuple[str, ...]:
    """The flags the Dockerfile's CMD gives gunicorn, but its --bind (the test binds a free port)."""
    cmd = next(line for line in (REPO / "Dockerfile").read_text().splitlines() if line.startswith("CMD "))
    argv = json.loads(cmd.removeprefix("CMD "))
    assert argv[:2] == ["gunicorn", "controlplane.wsgi"], argv
    flags = argv[2:]
    at = flags.index("--bind")
    return tuple(flags[:at] + flags[at + 2 :])


class Gunicorn:
    """`gunicorn controlplane.wsgi`: gunicorn's defaults (1 sync worker, 30 s timeout) unless `args` adds
    flags (`dockerfile_gunicorn_flags()`: the Dockerfile's, `--workers 3 --threads 8`)."""

    def __init__(self, *, env: dict[str, str], log: Path, args: tuple[str, ...] = ()) -> None:
        self.env, self.log, self.args, self.process = env, log, args, None
        self.url = ""

    def start(self) -> Gunicorn:
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                [GUNICORN, "controlplane.wsgi", "--bind", f"127.0.0.1:{port}", *self.args],
                env=self.env,
                cwd=REPO,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # kill() takes its workers down too
            )
        wait_until(self._answers, timeout_s=60, what="gunicorn to answer")
        return self

    def _answers(self) -> bool:
        try:
            return requests.get(f"{self.url}/login/", timeout=10).status_code == 200
        except requests.RequestException:  # not listening yet, or still importing Django
            return False

    def kill(self) -> None:
        """kill -9 of the whole web: the master and its workers (a crashed host, not a graceful stop)."""
        os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(10)


def login_attempt(
    url: str,
    *,
    username: str,
    password: str,
    path: str = "/login/",
    headers: dict | None = None,
    session: requests.Session | None = None,
) -> tuple[requests.Session, requests.Response]:
    """One POST of a login form (after the GET that gives its CSRF cookie), as a browser sends it: the
    session (a new one unless given) and the answer (302 signed in, 200 the form again, 429 locked out)."""
    session = session or requests.Session()
    session.get(f"{url}{path}", timeout=10, headers=headers)
    response = session.post(
        f"{url}{path}",
        data={
            "username": username,
            "password": password,
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": f"{url}{path}", **(headers or {})},
        timeout=10,
        allow_redirects=False,
    )
    return session, response


def sign_in(url: str, *, username: str, password: str) -> requests.Session:
    """A session signed in through the login page (its CSRF cookie and token), as a browser does."""
    session, response = login_attempt(url, username=username, password=password)
    assert response.status_code == 302 and "sessionid" in session.cookies, response.text[:500]
    return session


class SteadyTraffic:
    """Records produced at a fixed rate from a thread, round robin over the partitions, until `stop()`."""

    def __init__(
        self, cluster: ClusterConfig, topic: str, *, rate_per_s: int, partitions: int = PARTITIONS
    ) -> None:
        self._producer = make_producer(cluster)
        self._topic, self._rate_per_s, self._partitions = topic, rate_per_s, partitions
        self.produced = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="steady-traffic", daemon=True)

    def start(self) -> SteadyTraffic:
        self._thread.start()
        return self

    def _run(self) -> None:
        tick_s = 0.01
        started = time.monotonic()
        while not self._stopping.is_set():
            due = int((time.monotonic() - started) * self._rate_per_s)
            while self.produced < due:
                index = self.produced
                try:
                    self._producer.produce(
                        self._topic,
                        key=b"k%d" % index,
                        value=b"v%d" % index,
                        partition=index % self._partitions,
                    )
                except BufferError:  # the local queue is full: serve acknowledgements first
                    self._producer.poll(0.05)
                    continue
                self.produced += 1
            self._producer.poll(0)
            self._stopping.wait(tick_s)

    def stop(self) -> dict[int, int]:
        """Stop producing; records produced per partition (all acknowledged)."""
        self._stopping.set()
        self._thread.join()
        assert self._producer.flush(30) == 0
        return {p: len(range(p, self.produced, self._partitions)) for p in range(self._partitions)}


class ArrivalRecorder:
    """When each record of a remote topic arrives on the target (a reader polling without pause)."""

    def __init__(self, cluster: ClusterConfig, topic: str, *, partitions: int = PARTITIONS) -> None:
        # The embedded broker holds a fetch for fetch.wait.max.ms even when records are there.
        self._consumer = make_consumer(cluster, overrides={"fetch.wait.max.ms": 10})
        self._consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        self.arrivals: dict[int, list[float]] = {p: [] for p in range(partitions)}  # epoch seconds
        self.waits: dict[int, list[float]] = {p: [] for p in range(partitions)}  # arrival - record timestamp
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="arrival-recorder", daemon=True)

    def start(self) -> ArrivalRecorder:
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stopping.is_set():
            messages = self._consumer.consume(num_messages=10_000, timeout=0.05)
            now = time.time()
            for message in messages:
                if message.error() is None:
                    self.arrivals[message.partition()].append(now)
                    self.waits[message.partition()].append(now - message.timestamp()[1] / 1000)

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        self._consumer.close()

    def longest_wait_s(self, *, start: float, end: float) -> float:
        """The longest a record arriving within [start, end] waited since it was produced (its source
        timestamp): a pause of replication makes records wait; a pause of the producer does not."""
        return max(
            (
                wait
                for partition, times in self.arrivals.items()
                for at, wait in zip(times, self.waits[partition], strict=True)
                if start <= at <= end
            ),
            default=0.0,
        )

    def longest_gap(
        self, *, start: float, end: float, partitions: Iterable[int] | None = None
    ) -> tuple[float, int, float]:
        """The longest time between arrivals on one partition (of `partitions`, default all) within
        [start, end] (epoch seconds): (seconds, partition, when it began)."""
        worst = (0.0, -1, start)
        chosen = set(self.arrivals if partitions is None else partitions)
        for partition, times in self.arrivals.items():
            if partition not in chosen:
                continue
            window = [start, *(t for t in times if start <= t <= end), end]
            for earlier, later in itertools.pairwise(window):
                if later - earlier > worst[0]:
                    worst = (later - earlier, partition, earlier)
        return worst


def rolling_upgrade(
    runtime: CeleryRuntime, old: list[str], *, queues: str = "replication", settle_s: float = 2.0
) -> list[str]:
    """Replace each worker of `old` in turn, as docs/operations.md tells: start one of the new version
    (same queues, pool and flags), wait until it is ready, stop the old one warm (SIGTERM). The new names."""
    new = []
    for name in old:
        successor = f"{name}-next"
        runtime.start_worker(successor, queues=queues)
        runtime.wait_ready(successor)
        runtime.stop(name)
        new.append(successor)
        time.sleep(settle_s)  # steady traffic on the new worker before the next step
    return new
