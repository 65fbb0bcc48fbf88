"""Mirrorplane beside Apache Kafka's MirrorMaker 2: the same brokers, the same mm2.properties, one run.

Each tool runs as its users run it in dedicated mode, as a process of its own started on the same
properties file: `org.apache.kafka.connect.mirror.MirrorMaker mm2.properties` (the jars of the brokers'
version, the JVM options of Kafka's bin/connect-mirror-maker.sh) and `python -m replication run
mm2.properties`; one flow A->B, `tasks.max = 1`, the default delivery (at least once) and client
settings of each. Every measurement starts a fresh process on a topic
of its own, and the rounds alternate which tool goes first.

- Throughput: a pre-filled 4-partition topic (100 B and 1 KB values); the window runs from the first
  record on the target to the last (the target's end offsets, watched every 20 ms), so the start-up of
  each process (a Connect worker, a Python interpreter) is not counted. Records/s, MB/s, CPU seconds of
  the tool's process per million records over that window, and its peak resident memory.
- Latency: 100 B records produced at fixed rates (5,000/s and 20,000/s) for 20 s each, read on the
  target by a plain consumer: produce timestamp (kept by both copies) to the time read, p50/p99/p99.9
  (`bench.latency.measure`, the same load and reader as `python -m bench latency`).
- Failover of a lagging group: a group committed well behind the end of a 20,000-record topic; once the
  tool copied everything and checkpointed, each tool's own translation of the group's offsets on the
  target (MM2: `RemoteClusterUtils.translateOffsets` over its checkpoints; Mirrorplane:
  `python -m replication translate-offsets`) against the exact answer (the copy of a fresh topic keeps
  offsets, checked record by record): the records the group reads again after failing over.

Prints each measurement, then Mirrorplane/MM2 ratios (throughput, CPU per record, memory, p99). Exit 1
when Mirrorplane re-reads any record after the failover, or a tool fails to copy.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from confluent_kafka import KafkaException, TopicPartition

from bench.brokers import bench_cluster, bench_clusters
from bench.engine_vs_raw import PARTITIONS, Scenario, fill_source
from bench.latency import HEADER, Copy, Latency, measure
from bench.processes import peak_rss_mb, process_cpu_s
from replication.config import ClusterConfig
from replication.kafka.clients import make_consumer
from replication.kafka.mirrormaker import SCRIPT_JVM_OPTIONS, MirrorMaker2, mm2_translate_offsets
from replication.kafka.processes import die_with_parent, stop_child
from replication.kafka.remote import translate_offsets_for_cli
from replication.strimzi import load_mm2_file

TOOLS = ("mm2", "mirrorplane")
FULL = (Scenario(1_000_000, 100), Scenario(200_000, 1024))
QUICK = (Scenario(50_000, 100), Scenario(10_000, 1024))
LATENCY_RATES, LATENCY_S = (5_000, 20_000), 20.0
FAILOVER_RECORDS = 20_000  # 5,000 per partition
START_TIMEOUT_S = 120.0


def flow_properties(
    source: ClusterConfig, target: ClusterConfig, topics: str, *, tasks_max: int = 1
) -> dict[str, str]:
    """The mm2.properties both tools run (over the single-node settings of `TEST_SETTINGS`): the topics
    matching the regex `topics`, in `tasks_max` tasks."""
    return {
        "clusters": f"{source.alias}, {target.alias}",
        f"{source.alias}.bootstrap.servers": source.bootstrap_servers,
        f"{target.alias}.bootstrap.servers": target.bootstrap_servers,
        f"{source.alias}->{target.alias}.enabled": "true",
        f"{source.alias}->{target.alias}.topics": topics,
        f"{target.alias}->{source.alias}.enabled": "false",
        "tasks.max": str(tasks_max),
        "emit.checkpoints.interval.seconds": "1",
        "sync.group.offsets.enabled": "false",
    }


class Replicator:
    """One tool as a process of its own on `properties`; its CPU seconds and peak memory from /proc."""

    def __init__(
        self, tool: str, workdir: Path, properties: dict[str, str], *, checkout: Path | None = None
    ) -> None:
        """`checkout`: Mirrorplane runs that checkout's code (`python -m` from its root), not this one's."""
        self.tool = tool
        self.checkout = checkout
        self.mm2 = MirrorMaker2(
            workdir, properties, jvm_options=SCRIPT_JVM_OPTIONS
        )  # writes mm2.properties (TEST_SETTINGS + properties)
        self.properties_path = self.mm2.properties_path
        self.process: subprocess.Popen | None = None

    def start(self) -> Replicator:
        if self.tool == "mm2":
            self.process = self.mm2.start().process
        else:
            with (self.properties_path.parent / "mirrorplane.log").open("ab") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "replication", "run", str(self.properties_path)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.checkout,
                    preexec_fn=die_with_parent,
                )
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def cpu_s(self) -> float:
        return process_cpu_s(self.pid)

    def peak_rss_mb(self) -> float:
        return peak_rss_mb(self.pid)

    def check_running(self) -> None:
        if self.process is not None and self.process.poll() is not None:
            log = self.properties_path.parent / ("mm2.log" if self.tool == "mm2" else "mirrorplane.log")
            raise RuntimeError(f"{self.tool} exited ({self.process.returncode}); its log: {log}")

    def stop(self) -> None:
        if self.tool == "mm2":
            self.mm2.stop()
        else:
            stop_child(self.process, kill=False, grace_s=60)


# -- throughput ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Throughput:
    tool: str
    scenario: Scenario
    records: int  # copied inside the window
    seconds: float
    cpu_s: float
    peak_rss_mb: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.records_per_s * self.scenario.value_bytes / 1e6

    @property
    def cpu_s_per_million(self) -> float:
        return self.cpu_s / self.records * 1e6

    def line(self) -> str:
        return (
            f"{self.scenario.label:<22}{self.tool:<12}{self.records_per_s:>11,.0f}{self.mb_per_s:>8.1f}"
            f"{self.cpu_s_per_million:>13.1f}{self.peak_rss_mb:>10.0f}"
        )


THROUGHPUT_HEADER = (
    f"{'scenario':<22}{'tool':<12}{'records/s':>11}{'MB/s':>8}{'CPU s/M rec':>13}{'peak MB':>10}"
)


def target_end(consumer, topic: str) -> int:
    """The sum of the topic's end offsets on the target (0 while it does not exist yet)."""
    total = 0
    for partition in range(PARTITIONS):
        try:
            total += consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=5)[1]
        except KafkaException:
            return 0
    return total


def copy_window(
    replicator: Replicator, target: ClusterConfig, remote: str, records: int
) -> tuple[int, float, float]:
    """From the first record on the target to the last: (records in the window, seconds, CPU seconds)."""
    consumer = make_consumer(target)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while (first := target_end(consumer, remote)) == 0:
            replicator.check_running()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{replicator.tool} copied nothing to {remote} in {START_TIMEOUT_S:.0f}s")
            time.sleep(0.02)
        started, cpu_started = time.perf_counter(), replicator.cpu_s()
        deadline = time.monotonic() + 600
        while target_end(consumer, remote) < records:
            replicator.check_running()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{replicator.tool} did not copy all {records:,} records to {remote}")
            time.sleep(0.02)
        return records - first, time.perf_counter() - started, replicator.cpu_s() - cpu_started
    finally:
        consumer.close()


def throughput(
    tool: str, source: ClusterConfig, target: ClusterConfig, scenario: Scenario, *, topic: str, workdir: Path
) -> Throughput:
    fill_source(source, topic, scenario)
    replicator = Replicator(tool, workdir / topic, flow_properties(source, target, re.escape(topic))).start()
    try:
        records, seconds, cpu_s = copy_window(replicator, target, f"{source.alias}.{topic}", scenario.records)
        return Throughput(tool, scenario, records, seconds, cpu_s, replicator.peak_rss_mb())
    finally:
        replicator.stop()


# -- latency ---------------------------------------------------------------------------------------------
class ProcessCopy(Copy):
    """`bench.latency`'s copy interface over a tool's own process."""

    def __init__(self, tool: str, source: ClusterConfig, target: ClusterConfig, topic: str, workdir: Path):
        super().__init__(source, target, topic)
        self.remote_topic = f"{source.alias}.{topic}"
        self.replicator = Replicator(tool, workdir / topic, flow_properties(source, target, re.escape(topic)))

    def start(self) -> None:
        self.replicator.start()

    def stop(self) -> None:
        self.replicator.stop()


# -- failover of a lagging group -------------------------------------------------------------------------
@dataclass(frozen=True)
class Reread:
    tool: str
    committed: dict[int, int]  # partition -> the group's committed offset on the source (= exact on target)
    translated: dict[int, int | None]  # partition -> the tool's translation (None: no checkpoint)

    @property
    def reread(self) -> int:
        """Records the group reads again on the target (a partition without a translation starts over)."""
        return sum(
            self.committed[p] - (self.translated[p] if self.translated[p] is not None else 0)
            for p in self.committed
        )

    @property
    def skipped(self) -> int:
        """Records the group would never read (a translation past the exact offset)."""
        return sum(max(0, (t or 0) - self.committed[p]) for p, t in self.translated.items())

    def line(self) -> str:
        per_partition = ", ".join(
            f"p{p}: {self.committed[p]}->{'none' if t is None else t}"
            for p, t in sorted(self.translated.items())
        )
        return f"{self.tool:<12}re-read {self.reread:>6,}  skipped {self.skipped:>3}  ({per_partition})"


def commit_group(source: ClusterConfig, group: str, offsets: dict[tuple[str, int], int]) -> None:
    consumer = make_consumer(source, overrides={"group.id": group, "enable.auto.commit": False})
    try:
        consumer.commit(
            offsets=[TopicPartition(t, p, o) for (t, p), o in offsets.items()], asynchronous=False
        )
    finally:
        consumer.close()


def check_offsets_kept(target: ClusterConfig, remote: str, committed: dict[int, int]) -> None:
    """The exact answer is the source offset itself only if the copy kept offsets: check the record there."""
    consumer = make_consumer(target)
    try:
        for partition, offset in committed.items():
            consumer.assign([TopicPartition(remote, partition, offset)])
            message = consumer.poll(10)
            expected = b"key-%d" % (offset * PARTITIONS + partition)  # fill_source's key of that record
            if message is None or message.error() or message.key() != expected:
                raise RuntimeError(f"{remote}[{partition}]@{offset} is not the source's record {expected!r}")
    finally:
        consumer.close()


def translation(replicator: Replicator, target: ClusterConfig, group: str, remote: str) -> dict[int, int]:
    if replicator.tool == "mm2":
        found = mm2_translate_offsets(target.bootstrap_servers, source_alias="A", group=group)
        return {p: o for (t, p), o in found.items() if t == remote}
    config = load_mm2_file(str(replicator.properties_path))
    result = translate_offsets_for_cli(config, source="A", target=target.alias, group=group)
    return {entry["partition"]: entry["offset"] for entry in result["offsets"] if entry["topic"] == remote}


def failover_reread(
    tool: str, source: ClusterConfig, target: ClusterConfig, *, topic: str, workdir: Path
) -> Reread:
    fill_source(source, topic, Scenario(FAILOVER_RECORDS, 100))
    per_partition = FAILOVER_RECORDS // PARTITIONS
    committed = {p: per_partition // 3 + 137 * p for p in range(PARTITIONS)}  # lagging, off any round number
    group = f"{topic}-group"
    commit_group(source, group, {(topic, p): o for p, o in committed.items()})
    remote = f"{source.alias}.{topic}"
    replicator = Replicator(tool, workdir / topic, flow_properties(source, target, re.escape(topic))).start()
    try:
        copy_window(replicator, target, remote, FAILOVER_RECORDS)
        check_offsets_kept(target, remote, committed)
        # The checkpoints that follow the whole copy: the translation once it stopped changing for 3 s.
        found: dict[int, int] = {}
        stable_since, deadline = time.monotonic(), time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            latest = translation(replicator, target, group, remote)
            if latest != found or len(latest) < PARTITIONS:
                found, stable_since = latest, time.monotonic()
            elif time.monotonic() - stable_since >= 3:
                break
            time.sleep(1)
        return Reread(tool, committed, {p: found.get(p) for p in range(PARTITIONS)})
    finally:
        replicator.stop()


# -- the run ---------------------------------------------------------------------------------------------
def _ratio_line(label: str, ours: float, theirs: float, *, higher_is_better: bool) -> str:
    ratio = ours / theirs if theirs else float("nan")
    ahead = (ratio > 1) == higher_is_better
    return (
        f"{label:<34}{ours:>12,.1f}{theirs:>12,.1f}{ratio:>8.2f}  ({'Mirrorplane' if ahead else 'MM2'} ahead)"
    )


def run(
    scenarios: Sequence[Scenario], *, rounds: int, latency_s: float, print_line: Callable[[str], None] = print
) -> list[Reread]:
    workdir = Path(tempfile.mkdtemp(prefix="vs-mm2-"))
    print_line(f"tool logs in {workdir}")
    with bench_clusters(["A", "B"]) as brokers:
        source = bench_cluster("A", brokers)
        target = bench_cluster("B", brokers)

        print_line("\nthroughput (first to last record on the target; CPU and memory of the tool's process)")
        print_line(THROUGHPUT_HEADER)
        best: dict[tuple[str, int], Throughput] = {}
        for number, scenario in enumerate(scenarios):
            for round_number in range(rounds):
                order = TOOLS if round_number % 2 == 0 else TOOLS[::-1]
                for tool in order:
                    topic = f"vsmm2-{number}-{scenario.value_bytes}b-r{round_number}-{tool}"
                    result = throughput(tool, source, target, scenario, topic=topic, workdir=workdir)
                    print_line(result.line())
                    key = (tool, number)
                    if key not in best or result.seconds < best[key].seconds:
                        best[key] = result

        print_line(f"\nlatency at fixed rates for {latency_s:.0f} s each (100 B)")
        print_line(HEADER)
        latencies: dict[tuple[str, int], Latency] = {}
        for rate in LATENCY_RATES:
            for tool in TOOLS if rate == LATENCY_RATES[0] else TOOLS[::-1]:
                latencies[(tool, rate)] = measure(
                    make_copy=lambda topic, tool=tool: ProcessCopy(tool, source, target, topic, workdir),
                    method=tool,
                    source=source,
                    target=target,
                    topic=f"vsmm2-latency-{rate}-{tool}",
                    rate=rate,
                    seconds=latency_s,
                    start_timeout_s=START_TIMEOUT_S,
                )
                print_line(latencies[(tool, rate)].line())

        print_line(f"\nfailover of a lagging group ({FAILOVER_RECORDS:,} records; committed -> translated)")
        rereads = [
            failover_reread(tool, source, target, topic=f"vsmm2-failover-{tool}", workdir=workdir)
            for tool in TOOLS
        ]
        for reread in rereads:
            print_line(reread.line())

    print_line(
        f"\nMirrorplane / MM2 (best of {rounds} rounds each){'':<2}{'Mirrorplane':>12}{'MM2':>12}{'ratio':>8}"
    )
    for number, scenario in enumerate(scenarios):
        ours, theirs = best[("mirrorplane", number)], best[("mm2", number)]
        print_line(
            _ratio_line(
                f"records/s {scenario.label}", ours.records_per_s, theirs.records_per_s, higher_is_better=True
            )
        )
        print_line(
            _ratio_line(
                f"CPU s per M records {scenario.label}",
                ours.cpu_s_per_million,
                theirs.cpu_s_per_million,
                higher_is_better=False,
            )
        )
        print_line(
            _ratio_line(
                f"peak MB {scenario.label}", ours.peak_rss_mb, theirs.peak_rss_mb, higher_is_better=False
            )
        )
    for rate in LATENCY_RATES:
        print_line(
            _ratio_line(
                f"p99 ms at {rate:,} rec/s",
                latencies[("mirrorplane", rate)].p99,
                latencies[("mm2", rate)].p99,
                higher_is_better=False,
            )
        )
    by_tool = {r.tool: r for r in rereads}
    print_line(
        f"{'records re-read after failover':<34}{by_tool['mirrorplane'].reread:>12,}{by_tool['mm2'].reread:>12,}"
    )
    return rereads


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench vs-mm2", description=__doc__)
    parser.add_argument(
        "--quick", action="store_true", help="small volumes and a 6 s latency load (a smoke run)"
    )
    parser.add_argument("--rounds", type=int, default=2, help="alternating throughput rounds per scenario")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # The file carries MM2's Connect worker settings; reading it for a translation, Mirrorplane says it
    # ignores them (once per read): known here, not news.
    logging.getLogger("replication.mm2file").setLevel(logging.ERROR)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    rereads = run(
        QUICK if args.quick else FULL, rounds=args.rounds, latency_s=6.0 if args.quick else LATENCY_S
    )
    ours = next(r for r in rereads if r.tool == "mirrorplane")
    return 0 if ours.reread == 0 and ours.skipped == 0 else 1
