"""Mirrorplane at N partitions beside MirrorMaker 2 at the same N (issue 34). (Over 600 lines for one
reason: one benchmark read as it runs, traffic, the three tools, one run, the report; nothing else imports
its pieces, and tests/bench/test_scale.py tests the pure ones.)

    python -m bench scale --partitions 500 [--partitions 2000 ...] [--rate-per-partition 1]
                          [--mode runtime] [--mode dedicated] [--seconds 60] [--without-mm2]
                          [--flows 4 --workers 3]

Two Apache Kafka clusters (the project's launcher); per N and per tool, topics of
`--partitions-per-topic` partitions totalling N on the source, fresh for each tool and deleted after it.
A producer process of its own (as users' producers are) writes `--rate-per-partition` records/s to every
partition (100 B values, round robin, its timestamps kept by both copies) from before the tool starts
until the end of its window. Tools, each on the same regex of those topics and `--tasks-max` tasks:

- `runtime`: the control plane as docs/operations.md runs it: `--workers` replication workers (`-Q
  replication --pool=threads -c 4`; default one) running `--flows` flows (default one), each on its own
  share of the N partitions (a fleet: `--partitions 20000 --flows 4 --workers 3`), a metadata worker (`-Q metadata --pool=threads -c 4`; nothing takes the reports
  queue, whose Spark job would measure a JVM, not the runtime), beat, and the web under gunicorn as the
  Dockerfile runs it (its flags: `--workers 3 --threads 8`), with the production settings (settings.py defaults), on a
  throw-away PostgreSQL database next to DATABASE_URL's and Redis database `--redis-db` (FLUSHED);
- `dedicated`: `python -m replication run mm2.properties`;
- `mm2`: Apache Kafka's MirrorMaker 2 on the same mm2.properties (`bench.vs_mm2`: the brokers' jars
  from Maven Central, bin/connect-mirror-maker.sh's JVM options).

Figures per tool (a table per N, each run with the load average at the end of its window):

- start to every partition flowing: from the tool's start (its processes launched) to the first
  replicated record seen on the last of the N partitions on the target (a reader assigned to every remote
  partition as the tool creates it); beside it the start to half of them flowing, and how long the
  source broker took to create as many partitions and serve them all (the run's own topics, before the
  tool starts): the floor of a start whose remote topics are new, as the tool's target creates them too;
  and the tool's own share (`start_beyond_source`): each partition counted from the later of the tool's
  start and its first record read on the source, since at thousands of partitions the load's producer
  writes some partitions tens of seconds late;
- end-to-end p50/p99: for the records produced within the window (`--seconds`, from the moment every
  partition flows), produce timestamp to read on the target; beside it the no-copy floor of the same
  records, read on the source itself by a reader of the same settings;
- replicator CPU s per s and us per record (records arrived on the target within the window), peak
  RSS (VmHWM): the tool's process (runtime: the replication worker); runtime also gives the CPU and
  memory of the rest of the control plane (metadata worker, beat, web);
- runtime only: the oldest partition status age (the oldest of the flow's partitions as the pages age
  them, `controlplane.status.rollup.partitions_live`, sampled every 2 s of the window); rows/s written to the status tables (pg_stat_user_tables
  n_tup_ins + n_tup_upd of the `controlplane_*status*` tables; all controlplane tables beside it); the
  time and size of `/metrics` (bearer token), the flows list and the flow page (a signed-in admin) and
  the flow status API (an admin's token), `--requests` rounds spread over the window; the alert
  evaluation timed here as beat's task calls it, and the metadata worker's own evaluate_alerts,
  verify_flows and render_exposition (/metrics rendered ahead) task times (its log); the first full verification rotation (from the first partition
  checked to every partition checked, the verification rows' `checked_at`), the oldest check at the end
  (a partition with nothing new keeps its look) and the backlog the last runs left (their
  `VerificationBacklog` rows: the records waiting and how long the most neglected partition with some
  went without a look; it grows run after run when `VERIFY_MAX_BYTES_PER_S` is below the flows' bytes/s x 2).

Ratios Mirrorplane / MM2 follow each table (below 1: Mirrorplane needs less). Every phase is bounded
(topics created, tool started, partitions flowing, records drained) and a phase that times out names
what did not happen; the other tools still run. Exit 1 when a run failed.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import logging
import multiprocessing
import os
import queue
import re
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from bench.brokers import bench_cluster, bench_clusters, stored_cluster
from bench.java_load import produce_with_java
from bench.latency import percentile
from bench.processes import child_pids, peak_rss_mb, process_cpu_s, renice
from bench.vs_mm2 import Replicator, flow_properties
from bench.web import Admin
from replication.config import FLOW_PROPERTIES_BY_NAME, ClusterConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_admin, make_consumer, make_producer
from replication.kafka.mirrormaker import TEST_SETTINGS

MODES = ("runtime", "dedicated")
MM2 = "mm2"
VALUE_BYTES = 100
TOPICS_TIMEOUT_S = 300.0
DRAIN_S = 30.0
STATUS_SAMPLE_S = 2.0  # the oldest status age: every partition row read, aged as the pages age it
# The runtime's flows keep one copy of each remote and internal topic, as the other tools' mm2.properties
# (TEST_SETTINGS) and the bench's source topics do: on clusters of several brokers (--brokers-per-cluster)
# MM2's default replication.factor of 2 would double the target's partitions and its brokers' work.
REPLICATION_FACTORS = {
    FLOW_PROPERTIES_BY_NAME[name].field: int(value)
    for name, value in TEST_SETTINGS.items()
    if name in FLOW_PROPERTIES_BY_NAME and name.endswith("replication.factor")
}
REDIS_DB = 13
TASK_DONE = re.compile(r"Task (\S+)\[[^\]]+\] succeeded in ([0-9.]+)s")
FIRST_SLICE = re.compile(
    r"^(\S+ \S+) INFO \S+: Task workers\.tasks\.replicate_slice\[[^\]]+\] received", re.M
)
PARTITIONS_STARTED = re.compile(  # `replication.starting.PartitionStarter.started`, one line per topic
    r"^(\S+ \S+) INFO replication\.starting: .*?: replicating (\S+) -> \S+, (\d+) partition\(s\)", re.M
)
TASK_RECEIVED = re.compile(r"Task (\S+)\[[^\]]+\] received")
EVALUATE_TASK = "workers.alerts.evaluate_alerts"
VERIFY_TASK = "workers.verification.verify_flows"
RENDER_TASK = "workers.exposition.render_exposition"


class PhaseTimeout(Exception):
    """A phase of a run did not finish in time: the message says what did not happen."""


def wait_for(
    predicate: Callable[[], object],
    *,
    timeout_s: float,
    what: Callable[[], str],
    tick: Callable[[], None],
):
    """Poll `predicate` every 0.5 s (calling `tick` in between) until it is true; after `timeout_s`,
    PhaseTimeout naming `what()` (said then: it may tell how far it got)."""
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise PhaseTimeout(f"{what()} within {timeout_s:g} s")
        tick()
        time.sleep(0.5)
    return value


# -- pure pieces ---------------------------------------------------------------------------------------
def topic_layout(prefix: str, partitions: int, per_topic: int) -> dict[str, int]:
    """Topics `<prefix>-0000`... of `per_topic` partitions (the last one the rest) totalling `partitions`."""
    full, rest = divmod(partitions, per_topic)
    counts = [per_topic] * full + ([rest] if rest else [])
    return {f"{prefix}-{index:04d}": count for index, count in enumerate(counts)}


def fleet_layout(
    prefix: str, partitions: int, per_topic: int, flows: int, *, source: str
) -> list[tuple[str, str, dict[str, int]]]:
    """Per flow, its source alias, its topic regex and its topics: one flow's are `topic_layout`'s;
    `flows` share `partitions` as evenly as whole partitions allow, flow k's topics named
    `<prefix>-f<k>-0000`... A flow is one per ordered cluster pair: flow k > 0 reads the same source
    cluster stored under the alias `<source><k+1>` (its remote topics `<source><k+1>.<topic>`). No
    backslash in a regex: mm2.properties is a Java properties file, where one escapes the next."""
    if flows == 1:
        return [(source, f"{prefix}-[0-9]+", topic_layout(prefix, partitions, per_topic))]
    share, extra = divmod(partitions, flows)
    return [
        (
            source if k == 0 else f"{source}{k + 1}",
            f"{prefix}-f{k}-[0-9]+",
            topic_layout(f"{prefix}-f{k}", share + (k < extra), per_topic),
        )
        for k in range(flows)
    ]


def remote_names(layout: Sequence[tuple[str, str, dict[str, int]]]) -> dict[str, str]:
    """Each source topic's remote topic on the target (the default replication policy)."""
    return {topic: f"{alias}.{topic}" for alias, _, topics in layout for topic in topics}


def ratio(ours: float | None, theirs: float | None) -> str:
    """ours / theirs to two decimals; `-` when either is unknown or theirs is 0."""
    if ours is None or theirs is None or theirs == 0:
        return "-"
    return f"{ours / theirs:.2f}"


def cell(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1 (a usage error otherwise)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} must be at least 1")
    return value


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"{text} must be above 0")
    return value


# -- the producer and the readers (child processes) ---------------------------------------------------------
def _produce(
    bootstrap: str, topics: dict[str, int], rate_per_partition: float, window, stop, ready, out
) -> None:
    """`rate_per_partition` records/s to every partition of `topics`, round robin, until `stop`; `out`:
    [records sent, seconds, records timestamped inside the window, delivery failures]."""
    failures = 0
    window_timestamps: list[int] = []  # of the records sent since the window opened

    def delivered(error, _message) -> None:
        nonlocal failures
        failures += error is not None

    producer = make_producer(ClusterConfig(alias="load", bootstrap_servers=bootstrap))
    destinations = [(topic, partition) for topic, count in topics.items() for partition in range(count)]
    rate = rate_per_partition * len(destinations)
    value = b"v" * VALUE_BYTES
    sent = 0
    started = time.monotonic()
    ready.set()
    while not stop.is_set():
        due = int((time.monotonic() - started) * rate)
        while sent < due:
            topic, partition = destinations[sent % len(destinations)]
            now_ms = int(time.time() * 1000)
            try:
                producer.produce(
                    topic,
                    value=value,
                    key=b"%d" % sent,
                    partition=partition,
                    timestamp=now_ms,
                    on_delivery=delivered,
                )
            except BufferError:
                producer.poll(0.01)
                continue
            sent += 1
            if window[0]:
                window_timestamps.append(now_ms)
        producer.poll(0)
        time.sleep(0.005)
    seconds = time.monotonic() - started
    failures += producer.flush(60)
    start_ms, end_ms = window[0], window[1]
    in_window = sum(start_ms <= timestamp <= end_ms for timestamp in window_timestamps)
    out[:] = [sent, seconds, in_window, failures]


@dataclass(frozen=True)
class ReaderResult:
    partitions_seen: int
    all_flowing_at: float | None  # epoch seconds: the first record of the last partition
    half_flowing_at: float | None  # ... of the partition with which half of them had a record
    first_at: dict[tuple[str, int], float]  # epoch seconds each partition's first record was read
    arrivals: int  # records read within the window
    counted: int  # records produced within the window that were read
    p50_ms: float
    p99_ms: float
    max_ms: float


def flowing_at(first: Mapping[tuple[str, int], float], total: int) -> tuple[float | None, float | None]:
    """When half and when all of `total` partitions were flowing, from each one's first record (`first`,
    epoch seconds); None for a share not reached."""
    times = sorted(first.values())
    half = times[(total - 1) // 2] if times and 2 * len(times) >= total else None
    return half, (times[-1] if times and len(times) >= total else None)


class EndOffsetSampler:
    """The target broker's own answer to "is every partition flowing": a thread asking the remote
    partitions' end offsets (one ListOffsets request per round through one admin client) until each has
    held a record, noting when each was first seen holding one (the answer's arrival: late by at most one
    round), and when the broker first answered for it at all (`served`: it serves the partition, the floor
    of its first record there). Unlike the bench's reader it does not read the records, so its figure
    carries no reader lag (at 5,000 partitions on 2 cores the readers ran 30-40 s behind the brokers)."""

    def __init__(self, cluster: ClusterConfig, topics: dict[str, int]) -> None:
        self.cluster = cluster
        self.partitions = [TopicPartition(t, p) for t, n in topics.items() for p in range(n)]
        self.total = len(self.partitions)
        self.first: dict[tuple[str, int], float] = {}
        self.served: dict[tuple[str, int], float] = {}
        self.rounds, self.longest_round_s = 0, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="end-offsets", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout=70)

    def _run(self) -> None:
        from harness.runtime import latest_offsets

        admin = make_admin(
            self.cluster
        )  # referenced until the answers are in: a collected one answers nothing
        while not self._stop.is_set() and len(self.first) < self.total:
            began = time.monotonic()
            try:
                offsets = latest_offsets(admin, self.partitions)
            except KafkaException as error:  # a broker busy creating partitions: asked again
                logging.debug("end offsets: %s", error)
                offsets = {}
            now = time.time()
            for tp, offset in offsets.items():
                if offset is not None:
                    self.served.setdefault((tp.topic, tp.partition), now)
                    if offset > 0:
                        self.first.setdefault((tp.topic, tp.partition), now)
            self.rounds += 1
            self.longest_round_s = max(self.longest_round_s, time.monotonic() - began)
            self._stop.wait(1.0)


def _read(bootstrap: str, topics: dict[str, int], window, stop, expected, flowing, results) -> None:
    """Read every partition of `topics` (each topic assigned once it exists with all its partitions) from
    its start until `stop` and every record produced within the window (`expected`) is read (or DRAIN_S);
    `flowing`: partitions with a record so far. The result to `results`."""
    cluster = ClusterConfig(alias="reader", bootstrap_servers=bootstrap)
    consumer = make_consumer(cluster, overrides={"fetch.wait.max.ms": 10})
    # Topics are looked up by an admin client of their own: at 10,000 partitions, a consumer asking for
    # the whole cluster's metadata every second while the broker created them logged garbage partition
    # numbers ("[1245184]: not found in cache") and its process died (librdkafka 2.x, November 29).
    lookups = make_admin(cluster)
    total = sum(topics.values())
    pending = dict(topics)
    first: dict[tuple[str, int], float] = {}
    latencies: list[float] = []
    arrivals = 0
    next_lookup = 0.0
    stopped_at = None
    while True:
        now = time.monotonic()
        if pending and now >= next_lookup:
            try:
                found = lookups.list_topics(timeout=10).topics
            except KafkaException:  # a broker busy creating thousands of partitions: ask again
                found = {}
            complete = [t for t, n in pending.items() if t in found and len(found[t].partitions) >= n]
            if complete:
                consumer.incremental_assign(
                    [TopicPartition(t, p, OFFSET_BEGINNING) for t in complete for p in range(pending[t])]
                )
                for topic in complete:
                    del pending[topic]
            next_lookup = time.monotonic() + 1.0
        if stop.is_set():
            stopped_at = stopped_at or now
            if 0 <= expected.value <= len(latencies) or now - stopped_at > DRAIN_S:
                break
        messages = consumer.consume(num_messages=10_000, timeout=0.05)
        now_ms = time.time() * 1000
        start_ms, end_ms = window[0], window[1]
        for message in messages:
            if message.error() is not None or message.key() is None:
                continue
            first.setdefault((message.topic(), message.partition()), now_ms / 1000)
            timestamp = message.timestamp()[1]
            if start_ms and timestamp >= start_ms and (not end_ms or timestamp <= end_ms):
                latencies.append(now_ms - timestamp)
            if start_ms and now_ms >= start_ms and (not end_ms or now_ms <= end_ms):
                arrivals += 1
        flowing.value = len(first)
    consumer.close()
    latencies.sort()
    half_flowing, all_flowing = flowing_at(first, total)
    results.put(
        ReaderResult(
            partitions_seen=len(first),
            half_flowing_at=half_flowing,
            all_flowing_at=all_flowing,
            first_at=first,
            arrivals=arrivals,
            counted=len(latencies),
            p50_ms=percentile(latencies, 0.5),
            p99_ms=percentile(latencies, 0.99),
            max_ms=percentile(latencies, 1.0),
        )
    )


class Traffic:
    """The producer and the two readers (the target's copy, and the floor: the source itself), each a
    process of its own, sharing the measurement window [start, end] (epoch ms; 0: not yet)."""

    def __init__(
        self,
        *,
        source: ClusterConfig,
        target: ClusterConfig,
        topics: dict[str, int],
        remote: dict[str, str],
        rate: float,
        load_client: str = "librdkafka",
    ):
        spawn = multiprocessing.get_context("spawn")
        self.window = spawn.Array("d", 2)
        self.stop_load, self.stop_reading, self.ready = spawn.Event(), spawn.Event(), spawn.Event()
        self.load_out = spawn.Array("d", 4)
        self.expected = spawn.Value("q", -1)
        self.flowing = spawn.Value("q", 0)
        self.floor_flowing = spawn.Value("q", 0)  # held: a started Process drops its args
        self.results = {"copy": spawn.Queue(), "floor": spawn.Queue()}
        remote_counts = {remote[topic]: count for topic, count in topics.items()}
        self.processes = [
            spawn.Process(
                target=produce_with_java if load_client == "java" else _produce,
                args=(
                    source.bootstrap_servers,
                    topics,
                    rate,
                    self.window,
                    self.stop_load,
                    self.ready,
                    self.load_out,
                ),
            ),
            spawn.Process(
                target=_read,
                args=(
                    target.bootstrap_servers,
                    remote_counts,
                    self.window,
                    self.stop_reading,
                    self.expected,
                    self.flowing,
                    self.results["copy"],
                ),
            ),
            spawn.Process(
                target=_read,
                args=(
                    source.bootstrap_servers,
                    topics,
                    self.window,
                    self.stop_reading,
                    self.expected,
                    self.floor_flowing,
                    self.results["floor"],
                ),
            ),
        ]

    def start(self) -> None:
        for process in self.processes:
            process.start()
        if not self.ready.wait(60):
            raise PhaseTimeout("the producer process did not connect within 60 s")

    def open_window(self) -> float:
        now = time.time()
        self.window[0] = now * 1000
        return now

    def close_window(self) -> None:
        self.window[1] = time.time() * 1000

    def finish(self) -> tuple[list[float], ReaderResult, ReaderResult]:
        """Stop producing, read what the window's records became: (load figures, copy, floor)."""
        self.stop_load.set()
        self.processes[0].join(DRAIN_S + 90)  # a producer of thousands of partitions flushes a while
        load = list(self.load_out)
        self.expected.value = int(load[2])
        self.stop_reading.set()
        try:
            copy = self.results["copy"].get(timeout=DRAIN_S + 60)
            floor = self.results["floor"].get(timeout=DRAIN_S + 60)
        except queue.Empty:
            raise PhaseTimeout(f"the readers' results within {DRAIN_S + 60:g} s of the end") from None
        return load, copy, floor

    def close(self) -> None:
        self.stop_load.set()
        self.stop_reading.set()
        for process in self.processes:
            if process.pid is None:  # never started: the run failed before its traffic began
                continue
            process.join(DRAIN_S + 30)
            if process.is_alive():
                process.kill()
                process.join(10)


# -- the tools --------------------------------------------------------------------------------------------
class Tool:
    """A replicator under measurement: `prepare()` (not timed), `start()` (the clock starts), observed by
    `tick()` every 0.5-1 s, `stop()`. The runtime adds control-plane observations around the window."""

    name: str

    def prepare(self) -> None:
        pass

    def start(self) -> None:
        raise NotImplementedError

    def check_running(self) -> None:
        """Raise when a process of the tool exited."""
        raise NotImplementedError

    def replicator_pids(self) -> list[int]:
        raise NotImplementedError

    def control_plane_pids(self) -> list[int]:
        return []

    def tick(self, *, in_window: bool) -> None:
        pass

    def window_opened(self) -> None:
        pass

    def window_closed(self) -> None:
        pass

    def figures(self) -> ControlPlane | None:
        return None

    def first_slice_at(self) -> float | None:
        """When the tool's first task started (epoch s); None when it does not say."""
        return None

    def all_started_at(self, topics: dict[str, int]) -> float | None:
        """When the tool had started replicating every partition of `topics` (epoch s), by its own account:
        what a start spends before a record can flow, apart from the copy of the first records."""
        return None

    def describe(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Log what the tool says of these source partitions (a start that timed out names them)."""

    def stop(self) -> None:
        raise NotImplementedError


class DedicatedTool(Tool):
    """A tool as a process of its own on the run's mm2.properties (`bench.vs_mm2.Replicator`)."""

    def __init__(self, name: str, *, workdir: Path, properties: dict[str, str]) -> None:
        self.name = name
        self.replicator = Replicator(MM2 if name == MM2 else "mirrorplane", workdir, properties)

    def start(self) -> None:
        self.replicator.start()

    def check_running(self) -> None:
        self.replicator.check_running()

    def replicator_pids(self) -> list[int]:
        return [self.replicator.pid]

    def stop(self) -> None:
        if self.replicator.process is not None:
            self.replicator.stop()


@dataclass
class Timings:
    """Seconds and sizes of repeated requests."""

    seconds: list[float] = field(default_factory=list)
    size: int = 0
    status: int = 0

    def line(self, label: str) -> str:
        if not self.seconds:
            return f"{label:<44}{'-':>8}"
        line = f"{label:<44}{statistics.median(self.seconds):>8.2f} s median, {max(self.seconds):.2f} s max"
        return line + (f"; {self.size / 1000:,.0f} KB (HTTP {self.status})" if self.status else "")


@dataclass
class ControlPlane:
    """The runtime's control-plane figures of one run."""

    status_ages: list[float] = field(default_factory=list)
    # Each status sample's median over the partitions: a record's age when the task fetched it (MM2's
    # record-age-ms) and when the target acknowledged it (its replication latency), as the workers saw them.
    record_ages_ms: list[float] = field(default_factory=list)
    latencies_ms: list[float] = field(default_factory=list)
    status_rows_seen: int = 0
    stale: int = 0  # the most partitions judged STALE in one sample
    stalled: int = 0  # the most partitions a worker reported STALL in one sample (replication.fetch_stall)
    status_rows_per_s: float | None = None
    rows_per_s_by_table: dict[str, float] = field(default_factory=dict)
    requests: dict[str, Timings] = field(default_factory=dict)
    alert_evaluation: Timings = field(default_factory=Timings)
    alert_cpu_s: list[float] = field(default_factory=list)  # the evaluating thread's CPU
    alert_statements: dict[str, list[float]] = field(default_factory=dict)  # seconds by `_statement_kind`
    alert_statement_count: int = 0
    worker_tasks: dict[str, list[float]] = field(default_factory=dict)
    worker_tasks_received: dict[str, int] = field(default_factory=dict)
    first_rotation_s: float | None = None
    checked: int = 0
    oldest_check_s: float | None = None
    backlog: tuple[int, int, float | None] | None = None  # partitions, records waiting; the longest wait (s)
    cpu_per_s: float | None = None
    peak_rss_mb: float | None = None

    def lines(self, partitions: int) -> list[str]:
        out = []
        if self.status_ages:
            ages = sorted(self.status_ages)
            out.append(
                f"{'oldest partition status age':<44}{ages[-1]:>8.1f} s max, {statistics.median(ages):.1f} s "
                f"median over {len(ages)} samples ({self.status_rows_seen:,} of {partitions:,} rows; "
                f"at most {self.stale:,} STALE, {self.stalled:,} STALL)"
            )
        else:
            out.append(f"{'oldest partition status age':<44}- (no status rows in the window)")
        if self.record_ages_ms and self.latencies_ms:
            out.append(
                f"{'a record fetched / acknowledged after (s)':<44}"
                f"{statistics.median(self.record_ages_ms) / 1000:>8.1f} / "
                f"{statistics.median(self.latencies_ms) / 1000:.1f} s (the workers' status: the partitions' median, "
                f"its median over {len(self.latencies_ms)} samples)"
            )
        out.append(f"{'status rows written/s (status tables)':<44}{cell(self.status_rows_per_s):>8}")
        busiest = sorted(self.rows_per_s_by_table.items(), key=lambda item: -item[1])[:4]
        tables = ", ".join(f"{name.removeprefix('controlplane_')} {rate:,.1f}" for name, rate in busiest)
        out.append(
            f"{'rows written/s, all controlplane tables':<44}{cell(sum(self.rows_per_s_by_table.values())):>8}"
            f"  ({tables})"
        )
        for label, timings in self.requests.items():
            out.append(timings.line(f"GET {label}"))
        out.append(self.alert_evaluation.line("alert evaluation (as beat's task calls it)"))
        if self.alert_cpu_s:
            slowest = sorted(self.alert_statements.items(), key=lambda item: -statistics.median(item[1]))[:3]
            out.append(
                f"{'  its CPU; statements, the slowest (median)':<44}{statistics.median(self.alert_cpu_s):>8.2f} s; "
                f"{self.alert_statement_count}: "
                + ", ".join(f"{kind} {statistics.median(times) * 1000:.0f} ms" for kind, times in slowest)
            )
        for task, label in (
            (EVALUATE_TASK, "evaluate_alerts"),
            (VERIFY_TASK, "verify_flows"),
            (RENDER_TASK, "render_exposition (/metrics)"),
        ):
            done, received = self.worker_tasks.get(task, []), self.worker_tasks_received.get(task, 0)
            figures = (
                f"{statistics.median(done):>8.2f} s median, {max(done):.2f} s max" if done else f"{'-':>8}"
            )
            out.append(
                f"{'metadata worker ' + label + ' tasks':<44}{figures}; {len(done)} finished of {received} received"
            )
        if self.first_rotation_s == 0:  # a run stores its outcome in one transaction, at one time
            rotation = f"{'one run':>8} (every partition checked by the first run that checked any)"
        elif self.first_rotation_s is not None:
            rotation = f"{self.first_rotation_s:>8.1f} s"
        else:
            rotation = f"{'-':>8} (not complete: {self.checked:,} of {partitions:,} partitions checked)"
        out.append(f"{'verification: first full rotation':<44}{rotation}")
        oldest = "-" if self.oldest_check_s is None else f"{self.oldest_check_s:.1f} s"
        out.append(f"{'verification: oldest check at the end':<44}{oldest:>8}")
        if self.backlog is None:
            waiting = f"{'-':>8} (no run stored one)"
        else:
            partitions_waiting, records, wait_s = self.backlog
            longest = "-" if wait_s is None else f"{wait_s:.1f} s"
            waiting = f"{longest:>8} longest wait; {records:,} records in {partitions_waiting:,} partitions"
        out.append(f"{'verification: backlog at the end':<44}{waiting}")
        out.append(
            f"{'rest of the control plane CPU s/s, peak MB':<44}{cell(self.cpu_per_s, 2):>8}  "
            f"{cell(self.peak_rss_mb, 0)} MB (metadata worker, beat, web)"
        )
        return out


class RuntimeTool(Tool):
    """The control plane (module docstring) running a stored flow of the run's topics."""

    name = "runtime"

    def __init__(
        self,
        *,
        workdir: Path,
        source: ClusterConfig,
        target: ClusterConfig,
        flows: Sequence[tuple[str, str]],
        partitions: int,
        tasks_max: int,
        workers: int,
        redis_db: int,
        requests_rounds: int,
        seconds: float,
        admin: Admin,
    ) -> None:
        self.workdir, self.source, self.target, self.partitions = workdir, source, target, partitions
        self.layout, self.tasks_max, self.redis_db = list(flows), tasks_max, redis_db
        self.workers, self.rounds, self.seconds, self.admin = workers, requests_rounds, seconds, admin
        self.flows: list = []
        self.runtime = None
        self.web = None
        self.figures_ = ControlPlane()
        self._rows_before: dict[str, int] = {}
        self._window_started = 0.0
        self._next_round = 0.0
        self._rounds_done = 0
        self._first_check = None
        self._next_status_sample = 0.0

    # -- set-up and processes --
    def prepare(self) -> None:
        from django.conf import settings

        from bench.runtime import _redis_url
        from controlplane.flows import services
        from harness.runtime import CeleryRuntime, Gunicorn, database_url, dockerfile_gunicorn_flags

        target = stored_cluster(self.target)
        self.flows = [
            services.flow_create(
                actor=None,
                source=stored_cluster(dataclasses.replace(self.source, alias=alias)),
                target=target,
                enabled=True,
                topics=[regex],
                tasks_max=self.tasks_max,
                **REPLICATION_FACTORS,
            )
            for alias, regex in self.layout
        ]
        redis_url = _redis_url(self.redis_db)
        production = {
            name: str(getattr(settings, name))
            for name in (
                "MIRRORPLANE_SLICE_SECONDS",
                "MIRRORPLANE_SUPERVISE_INTERVAL_S",
                "MIRRORPLANE_BACKOFF_MAX_S",
                "METRICS_FLUSH_INTERVAL_S",
            )
        }
        # Celery's per-task "received" / "succeeded in" lines: the metadata worker's task times.
        production["CELERY_TASK_LOG_LEVEL"] = "INFO"
        self.runtime = CeleryRuntime(
            workdir=self.workdir,
            redis_url=redis_url,
            lease_ttl_s=settings.MIRRORPLANE_LEASE_TTL_S,
            env=production,
        )
        env = {**os.environ, "DATABASE_URL": database_url(), "REDIS_URL": redis_url, "PYTHONUNBUFFERED": "1"}
        env.pop("DEBUG", None)
        env["METRICS_BEARER_TOKEN"] = self.admin.metrics_token
        self.web = Gunicorn(env=env, log=self.workdir / "web.log", args=dockerfile_gunicorn_flags()).start()
        self.admin.sign_in(self.web.url)

    def start(self) -> None:
        for name in self.replication_workers:
            self.runtime.start_worker(name, queues="replication")
        self.runtime.start_worker("metadata", queues="metadata")
        self.runtime.start_beat()

    def check_running(self) -> None:
        for name, process in self.runtime.processes.items():
            if process.poll() is not None:
                raise RuntimeError(
                    f"{name} exited ({process.returncode}); its log: {self.workdir / name}.log"
                )

    @property
    def replication_workers(self) -> list[str]:
        """The replication workers' names (their logs are `<name>.log`)."""
        return ["replication"] + [f"replication-{number}" for number in range(2, self.workers + 1)]

    def replicator_pids(self) -> list[int]:
        return [self.runtime.processes[name].pid for name in self.replication_workers]

    def control_plane_pids(self) -> list[int]:
        web = self.web.process.pid
        return [
            self.runtime.processes["metadata"].pid,
            self.runtime.processes["beat"].pid,
            web,
            *child_pids(web),
        ]

    def stop(self) -> None:
        from controlplane.flows import services

        if self.runtime is not None:
            self.runtime.close()
        if self.web is not None and self.web.process is not None:
            self.web.kill()
        for flow in self.flows:
            services.flow_delete(actor=None, flow=flow)

    # -- observations --
    def tick(self, *, in_window: bool) -> None:
        from django.db import close_old_connections

        close_old_connections()
        self._observe_verification()
        if not in_window:
            return
        self._observe_status()
        if self._rounds_done < self.rounds and time.monotonic() >= self._next_round:
            self._request_round()
            self._rounds_done += 1
            self._next_round = time.monotonic() + self.seconds / self.rounds

    def window_opened(self) -> None:
        self._rows_before = table_rows()
        self._window_started = time.monotonic()
        self._next_round = time.monotonic() + self.seconds / (2 * self.rounds)

    def window_closed(self) -> None:
        seconds = time.monotonic() - self._window_started
        after = table_rows()
        rates = {name: (rows - self._rows_before.get(name, 0)) / seconds for name, rows in after.items()}
        self.figures_.rows_per_s_by_table = {name: rate for name, rate in rates.items() if rate > 0}
        self.figures_.status_rows_per_s = sum(rate for name, rate in rates.items() if "status" in name)
        for name, pattern in (("done", TASK_DONE), ("received", TASK_RECEIVED)):
            for match in pattern.finditer(self.runtime.log("metadata")):
                if name == "done":
                    self.figures_.worker_tasks.setdefault(match.group(1), []).append(float(match.group(2)))
                else:
                    received = self.figures_.worker_tasks_received
                    received[match.group(1)] = received.get(match.group(1), 0) + 1
        self._observe_verification(final=True)

    def figures(self) -> ControlPlane:
        return self.figures_

    def first_slice_at(self) -> float | None:
        """When a replication worker first received a slice (its chain's lease comes with it): the earliest
        of the workers', so that with several flows the figure is the slowest flow's, never flattered."""
        found = [FIRST_SLICE.search(self.runtime.log(name)) for name in self.replication_workers]
        return min((_log_time(match.group(1)) for match in found if match is not None), default=None)

    def all_started_at(self, topics: dict[str, int]) -> float | None:
        """From the workers' "replicating <topic> -> <remote>, N partition(s)" lines: the time by which
        every topic's partitions were started (a topic started again counts once, up to its partitions)."""
        lines = [
            (_log_time(match.group(1)), match.group(2), int(match.group(3)))
            for name in self.replication_workers
            for match in PARTITIONS_STARTED.finditer(self.runtime.log(name))
        ]
        started: dict[str, int] = {}
        total = sum(topics.values())
        for at, topic, count in sorted(lines):
            if topic in topics:
                started[topic] = min(topics[topic], started.get(topic, 0) + count)
                if sum(started.values()) >= total:
                    return at
        return None

    def describe(self, partitions: Sequence[tuple[str, int]]) -> None:
        """Each partition's status row as the workers last wrote it (the database goes with the run)."""
        from controlplane.status.models import FlowPartitionStatus, FlowTaskStatus

        for topic, partition in partitions:
            rows = FlowPartitionStatus.objects.filter(topic=topic, partition=partition).values(
                "flow_id",
                "task_index",
                "state",
                "replicated_offset",
                "source_end_offset",
                "records_behind",
                "record_count",
                "last_error",
                "observed_at",
            )
            logging.warning("not copied: %s[%d]; its status: %s", topic, partition, list(rows) or "no row")
            for row in rows:
                task = FlowTaskStatus.objects.filter(flow_id=row["flow_id"], task_index=row["task_index"])
                logging.warning(
                    "  its task: %s",
                    list(task.values("partitions", "state_counts", "records_behind", "observed_at")),
                )

    def _observe_status(self) -> None:
        from django.utils import timezone

        from controlplane.status import budgets, rollup
        from controlplane.status.models import FlowPartitionStatus, PartitionState

        if time.monotonic() < self._next_status_sample:
            return
        self._next_status_sample = time.monotonic() + STATUS_SAMPLE_S
        now = timezone.now()
        rows = {flow.pk: list(FlowPartitionStatus.objects.filter(flow=flow)) for flow in self.flows}
        live = [
            partition
            for flow in self.flows
            for partition in rollup.partitions_live(
                rows[flow.pk], flow=flow, budget=budgets.rpo_budget_of(flow=flow), now=now
            )
        ]
        for name, figures in (
            ("record_age_ms", self.figures_.record_ages_ms),
            ("replication_latency_ms", self.figures_.latencies_ms),
        ):
            known = [getattr(row, name) for flow_rows in rows.values() for row in flow_rows]
            known = [value for value in known if value is not None]
            if known:
                figures.append(statistics.median(known))
        if live:
            self.figures_.status_ages.append(max(partition.age_s for partition in live))
            self.figures_.stale = max(self.figures_.stale, sum(partition.stale for partition in live))
            stalled = sum(partition.row.state == PartitionState.STALL for partition in live)
            self.figures_.stalled = max(self.figures_.stalled, stalled)
            self.figures_.status_rows_seen = len(live)

    def _observe_verification(self, *, final: bool = False) -> None:
        from django.db.models import Count, Max, Min
        from django.utils import timezone

        from controlplane.assurance.models import PartitionVerification, VerificationBacklog

        found = PartitionVerification.objects.filter(flow__in=self.flows, checked_at__isnull=False).aggregate(
            rows=Count("id"), first=Min("checked_at"), last=Max("checked_at")
        )
        figures = self.figures_
        if found["rows"] and self._first_check is None:
            self._first_check = found["first"]
        figures.checked = found["rows"]
        if figures.first_rotation_s is None and found["rows"] >= self.partitions:
            figures.first_rotation_s = (found["last"] - self._first_check).total_seconds()
        if final and found["rows"] >= self.partitions:
            figures.oldest_check_s = (timezone.now() - found["first"]).total_seconds()
        if final:
            backlogs = list(VerificationBacklog.objects.filter(flow__in=self.flows))
            if backlogs:
                looks = [b.oldest_look_at for b in backlogs if b.oldest_look_at is not None]
                figures.backlog = (
                    sum(b.partitions_waiting for b in backlogs),
                    sum(b.records_waiting for b in backlogs),
                    (timezone.now() - min(looks)).total_seconds() if looks else None,
                )

    def _request_round(self) -> None:
        import requests

        flow = self.flows[0]  # with several flows, the first one's page and status
        pages = {
            "/metrics (bearer token)": (self.admin.metrics, "/metrics"),
            "/flows/ (signed in)": (self.admin.browser, "/flows/"),
            f"/flows/{flow.pk}/ (signed in)": (self.admin.browser, f"/flows/{flow.pk}/"),
            f"/api/v1/flows/{flow.pk}/status/ (token)": (
                self.admin.api,
                f"/api/v1/flows/{flow.pk}/status/",
            ),
        }
        for label, (session, path) in pages.items():
            timings = self.figures_.requests.setdefault(label, Timings())
            started = time.perf_counter()
            try:
                response = session.get(f"{self.web.url}{path}", timeout=60)
            except requests.RequestException as error:
                logging.warning("GET %s failed: %s", path, error)
                continue
            timings.seconds.append(time.perf_counter() - started)
            timings.size, timings.status = len(response.content), response.status_code
        self._evaluate_alerts()

    def _evaluate_alerts(self) -> None:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        from controlplane import alerts
        from workers.alerts import task_leases

        started, cpu = time.perf_counter(), time.thread_time()
        with CaptureQueriesContext(connection) as queries:
            alerts.alerts_evaluate(tasks=task_leases(), replication_workers=self.workers)
        self.figures_.alert_evaluation.seconds.append(time.perf_counter() - started)
        self.figures_.alert_cpu_s.append(time.thread_time() - cpu)
        for query in queries.captured_queries:  # what a slow evaluation waited for, by statement
            self.figures_.alert_statements.setdefault(_statement_kind(query["sql"]), []).append(
                float(query["time"])
            )
        self.figures_.alert_statement_count = len(queries)


def _statement_kind(sql: str) -> str:
    """A statement's first word and first table (`SELECT alert`), to group an evaluation's statements."""
    table = re.search(r'"controlplane_(\w+)"', sql)
    return f"{sql.split(None, 1)[0]} {table.group(1) if table else ''}".strip()


def _log_time(text: str) -> float:
    """A worker log line's local time (`2026-11-30 13:26:24,557`) as epoch seconds."""
    return datetime.datetime.strptime(text, "%Y-%m-%d %H:%M:%S,%f").astimezone().timestamp()


DESCRIBED = 10  # a start that timed out: the uncopied partitions whose status the tool logs


def table_rows() -> dict[str, int]:
    """Rows inserted + updated so far per controlplane table (pg_stat_user_tables)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute(
            "SELECT relname, n_tup_ins + n_tup_upd FROM pg_stat_user_tables WHERE relname LIKE 'controlplane\\_%%'"
        )
        return dict(cursor.fetchall())


# -- one run ------------------------------------------------------------------------------------------------
@dataclass
class Run:
    tool: str
    load_average: tuple[float, float, float] = (0.0, 0.0, 0.0)
    start_s: float | None = None
    half_start_s: float | None = None
    lease_start_s: float | None = None
    lease_started_s: float | None = None
    beyond_source_s: float | None = None
    written_start_s: float | None = None  # the same by the target's end offsets (`EndOffsetSampler`)
    written_half_s: float | None = None
    written_lease_s: float | None = None
    served_lease_s: float | None = None  # first slice to the target serving every remote partition
    broker_create_s: float | None = None
    p50_ms: float | None = None
    p99_ms: float | None = None
    floor_p50_ms: float | None = None
    floor_p99_ms: float | None = None
    cpu_per_s: float | None = None
    cpu_us_per_record: float | None = None
    peak_rss_mb: float | None = None
    records: int = 0
    load_rate: float | None = None
    control_plane: ControlPlane | None = None
    never_written: int = 0  # partitions the load never wrote on the source (`never_written`)
    failure: str = ""


def start_beyond_source(
    *,
    copy: Mapping[tuple[str, int], float],
    floor: Mapping[tuple[str, int], float],
    remote: Mapping[str, str],
    started: float,
) -> float | None:
    """The tool's own share of the start: the longest any partition waited for its first record on the
    target after the tool started and the source had a record of it (the floor reader's first read), i.e.
    start to every partition flowing without what the load's producer took to write each partition (at
    5,000 partitions and more, its records reached the source tens of seconds late). Over the partitions
    the source reader saw; None when the target reader did not see one of them."""
    if not floor:
        return None
    waits = []
    for (topic, partition), on_source in floor.items():
        on_target = copy.get((remote[topic], partition))
        if on_target is None:
            return None
        waits.append(on_target - max(started, on_source))
    return max(0.0, max(waits))


def create_topics(cluster: ClusterConfig, topics: dict[str, int]) -> float:
    """Create `topics` and wait until every partition is served; how long that took (s)."""
    began = time.monotonic()
    admin = TopicAdmin(cluster)
    errors = admin.create_topics([NewRemoteTopic(name, name, count, 1, {}) for name, count in topics.items()])
    failed = {name: error for name, error in errors.items() if error is not None}
    if failed:
        raise RuntimeError(f"creating topics failed: {failed}")
    wait_for(
        lambda: all(admin.partition_counts().get(name) == count for name, count in topics.items()),
        timeout_s=TOPICS_TIMEOUT_S,
        what=lambda: (
            f"{len(topics)} topics of {sum(topics.values()):,} partitions created on {cluster.alias}"
        ),
        tick=lambda: None,
    )
    # A user's topics exist before a tool starts: every tool starts once the source answers ListOffsets for
    # every partition, so that wait is no tool's.
    from harness.runtime import wait_served

    try:
        wait_served(
            cluster,
            [TopicPartition(name, p) for name, count in topics.items() for p in range(count)],
            timeout_s=TOPICS_TIMEOUT_S,
        )
    except AssertionError as error:
        raise PhaseTimeout(str(error)) from None
    return time.monotonic() - began


def partitions_held(cluster: ClusterConfig, topics: dict[str, int]) -> tuple[set[tuple[str, int]], int]:
    """Which of `topics`' partitions hold a record by the broker's end offsets (one ListOffsets request),
    and how many the broker did not answer for."""
    from harness.runtime import latest_offsets

    admin = make_admin(cluster)  # referenced until the answers are in: a collected client answers nothing
    offsets = latest_offsets(admin, [TopicPartition(t, p) for t, n in topics.items() for p in range(n)])
    held = {(tp.topic, tp.partition) for tp, offset in offsets.items() if offset is not None and offset > 0}
    return held, sum(offset is None for offset in offsets.values())


def with_records(cluster: ClusterConfig, topics: dict[str, int]) -> str:
    """`partitions_held` said: a start that timed out says whether the tool did not copy a partition, the
    bench's reader did not see its copy yet, or the producer never wrote it."""
    held, unknown = partitions_held(cluster, topics)
    return f"{len(held):,}" + (f" ({unknown:,} not answered)" if unknown else "")


def uncopied(
    on_source: set[tuple[str, int]], on_target: set[tuple[str, int]], remote: dict[str, str]
) -> set[tuple[str, int]]:
    """The source partitions holding records whose remote partition holds none."""
    return {
        (topic, partition) for topic, partition in on_source if (remote[topic], partition) not in on_target
    }


def never_written(
    *,
    source: ClusterConfig,
    target: ClusterConfig,
    topics: dict[str, int],
    remote: dict[str, str],
    attempts: int = 3,
) -> int:
    """After a start that timed out: how many partitions the load never wrote when the tool copied every
    partition it did write (both brokers answering for every partition); 0 otherwise (the tool's failure).
    At 10,000 partitions the source broker once held no record of one partition after 600 s.
    The source is asked first and the target then holds a record of each partition the source did (the
    load writes on meanwhile: at 20,000 partitions here each request took about 50 s). Asked up to
    `attempts` times: a broker may leave partitions unanswered, a copy may be on its way."""
    partitions = sum(topics.values())
    for _ in range(attempts):
        on_source, source_unknown = partitions_held(source, topics)
        on_target, target_unknown = partitions_held(target, {remote[t]: n for t, n in topics.items()})
        missing = uncopied(on_source, on_target, remote)
        if not source_unknown and not target_unknown and not missing:
            return partitions - len(on_source)
        logging.warning(
            "partitions with records: %d on the source (%d not answered), %d on the target (%d not "
            "answered); not copied: %s",
            len(on_source),
            source_unknown,
            len(on_target),
            target_unknown,
            ", ".join(f"{topic}[{partition}]" for topic, partition in sorted(missing)[:5]) or "none",
        )
    return 0


def delete_topics(cluster: ClusterConfig, names: Sequence[str]) -> None:
    admin = make_admin(cluster)
    existing = set(admin.list_topics(timeout=30).topics)
    found = [name for name in names if name in existing]
    if not found:
        return
    futures = admin.delete_topics(found, operation_timeout=120)
    for name, future in futures.items():
        try:
            future.result()
        except Exception as error:
            logging.warning("deleting %s on %s: %s", name, cluster.alias, error)


def measure(
    tool: Tool,
    *,
    source: ClusterConfig,
    target: ClusterConfig,
    topics: dict[str, int],
    remote: dict[str, str],
    rate: float,
    seconds: float,
    start_timeout_s: float,
    load_client: str = "librdkafka",
    background_nice: int = 0,
) -> Run:
    """One tool's run on fresh `topics` (module docstring); the topics are deleted after it. The load's
    producer runs at nice `background_nice` (`--background-nice`)."""
    partitions = sum(topics.values())
    run = Run(tool.name)
    traffic = Traffic(
        source=source, target=target, topics=topics, remote=remote, rate=rate, load_client=load_client
    )
    written = EndOffsetSampler(target, {remote[t]: n for t, n in topics.items()})
    try:
        run.broker_create_s = create_topics(source, topics)
        traffic.start()
        if background_nice:
            renice(traffic.processes[0].pid, background_nice)
        tool.prepare()

        def tick(*, in_window: bool = False) -> None:
            tool.check_running()
            if not all(process.is_alive() for process in traffic.processes):
                raise RuntimeError("the producer or a reader process exited")
            tool.tick(in_window=in_window)

        started = time.time()
        tool.start()
        written.start()
        try:
            wait_for(
                lambda: traffic.flowing.value >= partitions,
                timeout_s=start_timeout_s,
                what=lambda: (
                    f"every partition flowing ({partitions:,}; {traffic.flowing.value:,} had a record on the "
                    f"target as the bench's reader saw it; by the brokers' end offsets, "
                    f"{with_records(target, {remote[t]: n for t, n in topics.items()})} on the target and "
                    f"{with_records(source, topics)} on the source)"
                ),
                tick=tick,
            )
        except PhaseTimeout as timeout:
            # The tool copied every partition the load wrote: the window is measured over those, without
            # start figures (they are about every partition).
            run.never_written = never_written(source=source, target=target, topics=topics, remote=remote)
            if not run.never_written:
                on_source, _ = partitions_held(source, topics)
                on_target, _ = partitions_held(target, {remote[t]: n for t, n in topics.items()})
                tool.describe(sorted(uncopied(on_source, on_target, remote))[:DESCRIBED])
                raise
            logging.warning("%s; the tool copied every partition the load wrote: measuring on", timeout)
        written.stop()
        window_started = traffic.open_window()
        cpu_before = sum(process_cpu_s(pid) for pid in tool.replicator_pids())
        control_before = sum(process_cpu_s(pid) for pid in tool.control_plane_pids())
        tool.window_opened()
        while time.time() - window_started < seconds:
            tick(in_window=True)
            time.sleep(1)
        traffic.close_window()
        window_s = time.time() - window_started
        cpu = sum(process_cpu_s(pid) for pid in tool.replicator_pids()) - cpu_before
        control_plane = tool.control_plane_pids()
        control_cpu = sum(process_cpu_s(pid) for pid in control_plane) - control_before
        run.peak_rss_mb = max(peak_rss_mb(pid) for pid in tool.replicator_pids())
        run.load_average = os.getloadavg()
        tool.window_closed()
        (sent, load_s, _, failures), copy, floor = traffic.finish()
        written_half, written_all = flowing_at(written.first, written.total)
        first_slice_at = tool.first_slice_at()
        if written_half is not None:
            run.written_half_s = written_half - started
        if written_all is not None:
            run.written_start_s = written_all - started
            run.written_lease_s = written_all - first_slice_at if first_slice_at is not None else None
        served_all = flowing_at(written.served, written.total)[1]
        if first_slice_at is not None and served_all is not None:
            run.served_lease_s = max(0.0, served_all - first_slice_at)
        logging.warning(  # said either way: a round of thousands of partitions can take tens of seconds
            "the target's end offsets: %d rounds (the longest %.1f s) until the window opened: %d of %d "
            "partitions served, %d holding a record",
            written.rounds,
            written.longest_round_s,
            len(written.served),
            written.total,
            len(written.first),
        )
        if copy.all_flowing_at is not None:
            run.start_s = copy.all_flowing_at - started
            run.half_start_s = copy.half_flowing_at - started
            first_slice_at = tool.first_slice_at()
            run.lease_start_s = copy.all_flowing_at - first_slice_at if first_slice_at is not None else None
            all_started_at = tool.all_started_at(topics)
            if first_slice_at is not None and all_started_at is not None:
                run.lease_started_s = all_started_at - first_slice_at
            run.beyond_source_s = start_beyond_source(
                copy=copy.first_at, floor=floor.first_at, remote=remote, started=started
            )
        elif not run.never_written:
            raise RuntimeError(f"the target reader saw {copy.partitions_seen} of {partitions} partitions")
        run.p50_ms, run.p99_ms, run.floor_p50_ms, run.floor_p99_ms = (
            copy.p50_ms,
            copy.p99_ms,
            floor.p50_ms,
            floor.p99_ms,
        )
        # None: the producer had not reported when it was stopped (still flushing: `Traffic.finish`)
        run.records, run.load_rate = copy.arrivals, sent / load_s if load_s else None
        run.cpu_per_s = cpu / window_s
        run.cpu_us_per_record = cpu / copy.arrivals * 1e6 if copy.arrivals else None
        run.control_plane = tool.figures()
        if run.control_plane is not None:
            run.control_plane.cpu_per_s = control_cpu / window_s
            run.control_plane.peak_rss_mb = sum(peak_rss_mb(pid) for pid in control_plane)
        if failures:
            run.failure = f"{failures:.0f} records were not delivered to the source"
        elif copy.counted < floor.counted:
            run.failure = (
                f"{floor.counted - copy.counted:,} of the window's {floor.counted:,} records did not reach the "
                f"target within {DRAIN_S:g} s of the end"
            )
    except (PhaseTimeout, RuntimeError) as error:
        run.failure = f"{type(error).__name__}: {error}"
        run.load_average = run.load_average if any(run.load_average) else os.getloadavg()
    finally:
        written.stop()
        tool.stop()
        traffic.close()
        delete_topics(source, list(topics))
        delete_topics(target, [remote[name] for name in topics])
    return run


# -- the report ---------------------------------------------------------------------------------------------
ROWS: tuple[tuple[str, str, int], ...] = (
    ("start to every partition flowing (s)", "start_s", 1),
    ("start to half the partitions flowing (s)", "half_start_s", 1),
    ("first slice to every partition flowing (s)", "lease_start_s", 1),
    ("... to every partition started, its log (s)", "lease_started_s", 1),
    ("... each from its first record on the source (s)", "beyond_source_s", 1),
    ("start to every partition on the target (s)", "written_start_s", 1),
    ("... to half of them, its end offsets (s)", "written_half_s", 1),
    ("first slice to every partition on target (s)", "written_lease_s", 1),
    ("... to the target serving them all (s)", "served_lease_s", 1),
    ("the broker creating as many partitions (s)", "broker_create_s", 1),
    ("end-to-end p50 (ms)", "p50_ms", 1),
    ("end-to-end p99 (ms)", "p99_ms", 1),
    ("no-copy floor p50, same run (ms)", "floor_p50_ms", 1),
    ("no-copy floor p99, same run (ms)", "floor_p99_ms", 1),
    ("replicator CPU s/s", "cpu_per_s", 3),
    ("replicator CPU us/record", "cpu_us_per_record", 0),
    ("replicator peak RSS (MB)", "peak_rss_mb", 0),
    ("records read on the target in the window", "records", 0),
    ("load produced (records/s)", "load_rate", 0),
)
RATIO_FIELDS = ("start_s", "p50_ms", "p99_ms", "cpu_per_s", "cpu_us_per_record", "peak_rss_mb")


def report(
    partitions: int, runs: list[Run], *, topics: int, rate: float, seconds: float, fleet: str = ""
) -> list[str]:
    lines = [
        "",
        f"=== {partitions:,} partitions ({topics} topics), {rate:g} record/s each ({partitions * rate:,.0f} "
        f"records/s), {seconds:g} s window{fleet} ===",
    ]
    mm2 = next((run for run in runs if run.tool == MM2 and not run.failure), None)
    ours = [run for run in runs if run.tool != MM2]
    header = f"{'':<44}" + "".join(f"{run.tool:>16}" for run in runs)
    if mm2 is not None:
        header += "".join(f"{run.tool + '/mm2':>16}" for run in ours)
    lines.append(header)
    lines.append(
        f"{'load average 1/5/15 min (window end)':<44}"
        + "".join(f"{'/'.join(f'{v:.1f}' for v in run.load_average):>16}" for run in runs)
    )
    for label, name, digits in ROWS:
        line = f"{label:<44}" + "".join(f"{cell(getattr(run, name), digits):>16}" for run in runs)
        if mm2 is not None and name in RATIO_FIELDS:
            line += "".join(f"{ratio(getattr(run, name), getattr(mm2, name)):>16}" for run in ours)
        lines.append(line)
    for run in runs:
        if run.control_plane is not None:
            lines.append(f"-- {run.tool}: the control plane")
            lines.extend(run.control_plane.lines(partitions))
    lines.extend(
        f"NOTE {run.tool}: {run.never_written:,} of the {partitions:,} partitions had no record on the source "
        "when the start timed out (the load's producer never wrote them) and every other partition was "
        "copied: no start figures; the window is measured over the partitions written"
        for run in runs
        if run.never_written
    )
    lines.extend(f"FAILED {run.tool}: {run.failure}" for run in runs if run.failure)
    return lines


@contextlib.contextmanager
def runtime_environment(redis_db: int):
    """Django on a throw-away PostgreSQL database next to DATABASE_URL's, the bench's admin; the bench
    process's Redis is the runtime's (`redis_db`), so the alert evaluation reads the same leases."""
    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
    os.environ["REDIS_URL"] = f"{base.rsplit('/', 1)[0]}/{redis_db}"
    from bench.runtime import scratch_database

    with scratch_database():
        yield Admin.create("scale-bench")


def run(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    print(f"logs in {workdir}", flush=True)
    tools = [*args.mode, *([] if args.without_mm2 else [MM2])]
    failed = False
    with contextlib.ExitStack() as stack:
        admin = stack.enter_context(runtime_environment(args.redis_db)) if "runtime" in tools else None
        brokers = stack.enter_context(
            bench_clusters(["A", "B"], heap=args.broker_heap, nodes=args.brokers_per_cluster)
        )
        if args.background_nice:
            for broker in brokers.values():
                for node in (broker, *broker.followers):
                    renice(node.process.pid, args.background_nice)
            print(f"brokers and the load at nice {args.background_nice}", flush=True)
        source, target = bench_cluster("A", brokers), bench_cluster("B", brokers)
        for number, partitions in enumerate(args.partitions):
            runs = []
            for tool_name in tools:
                prefix = f"scale{number}-{tool_name}"
                flows = args.flows if tool_name == "runtime" else 1
                layout = fleet_layout(
                    prefix, partitions, args.partitions_per_topic, flows, source=source.alias
                )
                topics = {name: count for *_, flow_topics in layout for name, count in flow_topics.items()}
                run_dir = workdir / f"{partitions}-{tool_name}"
                run_dir.mkdir()
                if tool_name == "runtime":
                    tool = RuntimeTool(
                        workdir=run_dir,
                        source=source,
                        target=target,
                        flows=[(alias, regex) for alias, regex, _ in layout],
                        partitions=partitions,
                        tasks_max=args.tasks_max,
                        workers=args.workers,
                        redis_db=args.redis_db,
                        requests_rounds=args.requests,
                        seconds=args.seconds,
                        admin=admin,
                    )
                else:
                    ((_, regex, _),) = layout
                    properties = flow_properties(source, target, regex, tasks_max=args.tasks_max)
                    tool = DedicatedTool(tool_name, workdir=run_dir, properties=properties)
                print(f"{partitions:,} partitions: {tool_name} ...", flush=True)
                runs.append(
                    measure(
                        tool,
                        source=source,
                        target=target,
                        topics=topics,
                        remote=remote_names(layout),
                        rate=args.rate_per_partition,
                        seconds=args.seconds,
                        start_timeout_s=args.start_timeout,
                        load_client=args.load_client,
                        background_nice=args.background_nice,
                    )
                )
            failed |= any(run.failure for run in runs)
            fleet = f"; runtime: {args.flows} flows, {args.workers} replication workers"
            for line in report(
                partitions,
                runs,
                topics=len(topics),
                rate=args.rate_per_partition,
                seconds=args.seconds,
                fleet=fleet if (args.flows, args.workers) != (1, 1) else "",
            ):
                print(line, flush=True)
    return 1 if failed else 0


def parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench scale",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--partitions", type=positive_int, action="append", help="N (repeat for several; default 100)"
    )
    parser.add_argument(
        "--rate-per-partition", type=positive_float, default=1.0, help="records/s (default 1)"
    )
    parser.add_argument(
        "--mode", choices=MODES, action="append", help="Mirrorplane's mode (repeat for both; default both)"
    )
    parser.add_argument(
        "--seconds", type=positive_float, default=60.0, help="measurement window (default 60)"
    )
    parser.add_argument("--without-mm2", action="store_true", help="skip MirrorMaker 2")
    parser.add_argument(
        "--load-client",
        choices=("librdkafka", "java"),
        default="librdkafka",
        help="the load's producer: librdkafka (default) or Apache Kafka's Java client (bench/LoadProducer.java)",
    )
    parser.add_argument(
        "--background-nice",
        type=int,
        choices=range(0, 20),
        metavar="{0..19}",
        default=0,
        help="run the brokers and the load's producer at this nice value (default 0): on a machine of few "
        "cores, the CPU goes to the tools and the readers first, as if the brokers ran on machines of "
        "their own; the no-copy floor is read at nice 0 as the tools are",
    )
    parser.add_argument("--partitions-per-topic", type=positive_int, default=50, help="default 50")
    parser.add_argument(
        "--tasks-max", type=positive_int, default=1, help="tasks.max of every tool (default 1)"
    )
    parser.add_argument(
        "--flows",
        type=positive_int,
        default=1,
        help="runtime: flows sharing the N partitions, each on its own topics (default 1; the other tools: one)",
    )
    parser.add_argument(
        "--workers", type=positive_int, default=1, help="runtime: replication workers (default 1)"
    )
    parser.add_argument(
        "--broker-heap",
        default="1g",
        help="each broker JVM's -Xmx (default 1g: at 10,000 partitions a broker ran out of it; 4g there)",
    )
    parser.add_argument(
        "--brokers-per-cluster",
        type=positive_int,
        default=1,
        help="Apache Kafka brokers in each cluster (default 1; a broker holds an open file per partition, "
        "and `ulimit -Hn` caps a process's: 20,000 partitions need 2 or more)",
    )
    parser.add_argument(
        "--start-timeout",
        type=positive_float,
        default=300.0,
        help="s until every partition flows (default 300)",
    )
    parser.add_argument(
        "--requests", type=positive_int, default=3, help="rounds of page requests (default 3)"
    )
    parser.add_argument(
        "--redis-db",
        type=int,
        default=REDIS_DB,
        help=f"REDIS_URL's server database used and FLUSHED ({REDIS_DB})",
    )
    return parser


def parse(argv: Sequence[str]) -> argparse.Namespace:
    options = parser()
    args = options.parse_args(argv)
    if args.redis_db < 0:
        options.error(f"argument --redis-db: {args.redis_db} is not a Redis database number (0 or more)")
    args.partitions = args.partitions or [100]
    args.mode = list(dict.fromkeys(args.mode or MODES))
    return args


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("replication.mm2file").setLevel(logging.ERROR)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    args = parse(list(argv or []))
    if "runtime" in args.mode and not os.environ.get("DATABASE_URL", "").startswith(
        ("postgres://", "postgresql://")
    ):
        print(
            "bench scale: the runtime mode runs on PostgreSQL (the workers share its database; the status "
            "writes are read from pg_stat_user_tables): set DATABASE_URL=postgres://..., or --mode dedicated",
            file=sys.stderr,
        )
        return 2
    return run(args)
