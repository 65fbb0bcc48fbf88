"""The idle cost of the source consumer's `fetch.wait.max.ms`, on Apache Kafka.

An idle task keeps one fetch request per source broker outstanding; Apache Kafka holds it until a record
arrives or `fetch.wait.max.ms` passes (with fetch.min.bytes = 1, a record is answered at once whatever the
setting), so the setting costs fetch requests and broker CPU while nothing happens, and buys nothing in
latency on Apache Kafka. Measured per setting, in the same run, over `--seconds` of idleness:

- fetch requests/s to the source broker (librdkafka's own statistics, `brokers.*.req.Fetch`, of a consumer
  with the engine's consumer settings assigned the same idle partitions);
- the source broker's CPU seconds per second (/proc of its JVM) while an engine task (`MirrorSourceTask`,
  run as dedicated mode runs it) idles on those partitions, against the broker with no client at all
  (the baseline of the same run);
- the engine process's own CPU.

Then the same for the internal-topic readers (`InternalTopicReader`, long-lived in a flow's checkpoint
task, the verifier and a failover: one consumer of one partition each) idling between two `read_new()`
calls: fetch requests/s of one reader and the source broker's CPU with `--readers` of them.

    python -m bench idle [--partitions 50] [--seconds 15] [--waits 10,100,500] [--readers 4]
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from collections.abc import Callable, Sequence

from confluent_kafka import OFFSET_END, TopicPartition

from bench.brokers import bench_cluster, bench_clusters
from bench.processes import process_cpu_s
from replication.config import ClusterConfig, FlowConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.internal_topics import InternalTopicReader
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import CONSUMER_DEFAULTS, kafka_task_io
from replication.policy import replication_policy_for
from replication.source import MirrorSourceTask


def own_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def fetch_requests_per_s(
    source: ClusterConfig, topic: str, partitions: int, wait_ms: int, seconds: float
) -> float:
    """Fetch requests/s a consumer with the engine's settings sends while its partitions stay idle."""
    counts: list[int] = []
    on_stats = fetch_counter(counts)
    settings = {**CONSUMER_DEFAULTS, "fetch.wait.max.ms": wait_ms, "statistics.interval.ms": 1000}
    consumer = make_consumer(source, overrides=settings, callbacks={"stats_cb": on_stats})

    consumer.assign([TopicPartition(topic, p, OFFSET_END) for p in range(partitions)])
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.close()
    return per_second(counts)


def fetch_counter(counts: list[int]) -> Callable[[str], None]:
    """A librdkafka `stats_cb` appending the Fetch requests sent so far to `counts`, once a statistics
    interval (1 s)."""

    def on_stats(text: str) -> None:
        brokers = json.loads(text)["brokers"].values()
        counts.append(sum(b.get("req", {}).get("Fetch", 0) for b in brokers if b.get("nodeid", -1) >= 0))

    return on_stats


def per_second(counts: list[int]) -> float:
    """Whole seconds between the second and the last statistics (the first includes the start-up)."""
    return (counts[-1] - counts[1]) / (len(counts) - 2) if len(counts) >= 3 else float("nan")


def idle_engine_cpu(
    source: ClusterConfig,
    target: ClusterConfig,
    topic: str,
    partitions: int,
    wait_ms: int,
    seconds: float,
    broker_pid: int,
) -> tuple[float, float]:
    """(source broker CPU s/s, engine CPU s/s) while an engine task idles on the partitions."""
    flow = FlowConfig(
        source=source.alias,
        target=target.alias,
        enabled=True,
        topics=(topic,),
        extra={"consumer.fetch.wait.max.ms": str(wait_ms)},
    )
    policy = replication_policy_for(flow, known_aliases=(source.alias, target.alias))
    store = KafkaPositionStore(target, source_alias=source.alias)
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=store,
        io=kafka_task_io(flow, source=source, target=target, policy=policy, task_index=0),
    )
    task.assign([(topic, p) for p in range(partitions)])
    store.prepare()
    task.prepare()
    for _ in range(5):  # start every partition, then measure idleness only
        task.run_slice(max_seconds=0.5, settle=False)
    broker_before, own_before, started = process_cpu_s(broker_pid), own_cpu_s(), time.monotonic()
    while time.monotonic() - started < seconds:
        task.run_slice(max_seconds=0.5, settle=False)
    elapsed = time.monotonic() - started
    broker_used, own_used = process_cpu_s(broker_pid) - broker_before, own_cpu_s() - own_before
    task.close()
    store.close()
    return broker_used / elapsed, own_used / elapsed


def idle_readers(
    source: ClusterConfig, topic: str, readers: int, seconds: float, broker_pid: int
) -> tuple[float, float]:
    """(fetch requests/s of one reader, source broker CPU s/s with `readers` of them) while internal-topic
    readers that have read their partition to its end wait for the next read."""
    producer = make_producer(source)
    for number in range(10):
        producer.produce(topic, key=b"k%d" % number, value=b"v")
    producer.flush(30)
    counts: list[int] = []
    counted = ClusterConfig(
        alias=source.alias,
        bootstrap_servers=source.bootstrap_servers,
        consumer={"statistics.interval.ms": 1000, "stats_cb": fetch_counter(counts)},
    )
    opened = [InternalTopicReader(counted, topic, decode=lambda key, value: value)]
    opened += [
        InternalTopicReader(source, topic, decode=lambda key, value: value) for _ in range(readers - 1)
    ]
    for reader in opened:
        reader.read_new()
    time.sleep(1)
    before, started = process_cpu_s(broker_pid), time.monotonic()
    while time.monotonic() - started < seconds:
        opened[0]._consumer.poll(0.2)  # serves the statistics callback only: nothing is consumed here
    broker_cpu = (process_cpu_s(broker_pid) - before) / (time.monotonic() - started)
    for reader in opened:
        reader.close()
    return per_second(counts), broker_cpu


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench idle", description=__doc__)
    parser.add_argument("--partitions", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument("--waits", default="10,100,500", help="fetch.wait.max.ms values, comma-separated")
    parser.add_argument("--readers", type=int, default=4, help="idle internal-topic readers (0: skip)")
    args = parser.parse_args(argv)
    waits = [int(value) for value in args.waits.split(",") if value]
    with bench_clusters(["A", "B"]) as brokers:
        source = bench_cluster("A", brokers)
        target = bench_cluster("B", brokers)
        broker_pid = brokers["A"].process.pid
        time.sleep(5)  # the JVM's start-up work settles
        before = process_cpu_s(broker_pid)
        time.sleep(args.seconds)
        baseline = (process_cpu_s(broker_pid) - before) / args.seconds
        print(f"{args.partitions} idle partitions, {args.seconds:g} s per measure")
        print(f"source broker with no client (baseline): {baseline * 1000:.1f} ms CPU/s")
        print(
            f"{'fetch.wait.max.ms':>18}{'fetch req/s':>13}{'per partition':>15}{'broker ms CPU/s':>17}"
            f"{'over baseline':>15}{'engine ms CPU/s':>17}"
        )
        for number, wait_ms in enumerate(waits):
            topic = f"idle-{number}-{wait_ms}"
            TopicAdmin(source).create_topics([NewRemoteTopic(topic, topic, args.partitions, 1, {})])
            requests = fetch_requests_per_s(source, topic, args.partitions, wait_ms, args.seconds)
            broker_cpu, engine_cpu = idle_engine_cpu(
                source, target, topic, args.partitions, wait_ms, args.seconds, broker_pid
            )
            print(
                f"{wait_ms:>18}{requests:>13.1f}{requests / args.partitions:>15.2f}{broker_cpu * 1000:>17.1f}"
                f"{(broker_cpu - baseline) * 1000:>15.1f}{engine_cpu * 1000:>17.1f}",
                flush=True,
            )
        if args.readers:
            topic = "idle-internal"
            TopicAdmin(source).create_topics([NewRemoteTopic(topic, topic, 1, 1, {})])
            requests, broker_cpu = idle_readers(source, topic, args.readers, args.seconds, broker_pid)
            print(
                f"{args.readers} idle internal-topic readers: {requests:.1f} fetch req/s each, source broker "
                f"{broker_cpu * 1000:.1f} ms CPU/s ({(broker_cpu - baseline) * 1000:.1f} over baseline)",
                flush=True,
            )
    return 0
