"""Delivery latency of a task's producer over thousands of partitions, against the same load split over
several producers (several tasks), in the same run (issue 34; docs/scale.md "One producer per task over
thousands of partitions": one producer was as fast as four once the broker was warm).

librdkafka sends one partition per Produce request, and an idempotent producer (every task's: ordered, no
duplicates from retries; transactional in exactly_once) keeps at most 5 requests in flight per broker.
Over thousands of partitions at a record a second or so each, that is about one request per record, 5 at
a time. Each round writes `--rate` records/s of 100 B round-robin over `--partitions` partitions of one
topic for `--seconds`, with the engine's producer settings (`replication.kafka.source_io`: idempotent,
acks=all, `linger.ms` 1), partition p by producer p % K, for each K of `--producers` in a rotated order,
and prints the delivery p50/p99 (produce to acknowledgement) and each K's p50 against one producer's
of the same round. Informative: it has no target, and exits 1 only when a record is not delivered.

    python -m bench producers                                  # 5,000 partitions, 5,000 rec/s, K 1 and 4
    python -m bench producers --partitions 2000 --producers 1,2,4 --rounds 3
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Sequence

from bench.brokers import bench_cluster, bench_clusters
from bench.latency import percentile
from bench.scale import create_topics, delete_topics, positive_float, positive_int
from replication.config import ClusterConfig
from replication.kafka.clients import make_producer
from replication.kafka.source_io import PRODUCER_DEFAULTS

VALUE = b"v" * 100


def rotated(values: Sequence[int], round_number: int) -> list[int]:
    """`values` starting at position `round_number` (each round leads with another one)."""
    shift = round_number % len(values) if values else 0
    return [*values[shift:], *values[:shift]]


def producer_counts(text: str) -> list[int]:
    """argparse type: comma-separated producer counts, with 1 (the baseline: one task's producer)."""
    return sorted({1, *(positive_int(value) for value in text.split(",") if value.strip())})


def deliver(
    cluster: ClusterConfig, topic: str, *, partitions: int, rate: float, seconds: float, producers: int
):
    """Delivery latencies (ms, sorted) of `rate` records/s over `partitions` for `seconds`, written by
    `producers` producers (partition p by producer p % producers); and the records not delivered."""
    latencies: list[float] = []
    failures = 0

    def delivered(error, message) -> None:
        nonlocal failures
        if error is not None:
            failures += 1
            return
        latencies.append(time.time() * 1000 - message.timestamp()[1])

    settings = {**PRODUCER_DEFAULTS, "enable.idempotence": True, "acks": "all"}
    clients = [make_producer(cluster, overrides=settings) for _ in range(producers)]
    for partition in range(partitions):  # every producer knows its partitions' leaders before the clock
        clients[partition % producers].produce(topic, b"warm-up", partition=partition)
    failures += sum(client.flush(120) for client in clients)
    sent, started = 0, time.monotonic()
    while (elapsed := time.monotonic() - started) < seconds:
        while sent < int(elapsed * rate):
            partition = sent % partitions
            client = clients[partition % producers]
            try:
                client.produce(
                    topic,
                    VALUE,
                    partition=partition,
                    timestamp=int(time.time() * 1000),
                    on_delivery=delivered,
                )
            except BufferError:
                client.poll(0.01)
                continue
            sent += 1
        for client in clients:
            client.poll(0)
        time.sleep(0.005)
    failures += sum(client.flush(120) for client in clients)
    return sorted(latencies), failures


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench producers", description=__doc__)
    parser.add_argument("--partitions", type=positive_int, default=5_000)
    parser.add_argument("--rate", type=positive_float, default=5_000.0, help="records/s in all")
    parser.add_argument("--seconds", type=positive_float, default=20.0)
    parser.add_argument(
        "--producers",
        type=producer_counts,
        default=[1, 4],
        help="producer counts K, comma-separated (1 is added)",
    )
    parser.add_argument("--rounds", type=positive_int, default=2)
    args = parser.parse_args(argv)
    counts = args.producers
    failed = 0
    with bench_clusters(["A"], heap="2g") as brokers:
        cluster = bench_cluster("A", brokers)
        print(
            f"{args.partitions:,} partitions of one broker, {args.rate:,.0f} records/s of 100 B round-robin, "
            f"{args.seconds:g} s per measure, the engine's producer settings"
        )
        print(f"{'round':>5}{'producers':>10}{'load':>7}{'p50 ms':>9}{'p99 ms':>9}")
        for round_number in range(args.rounds):
            medians: dict[int, float] = {}
            for count in rotated(counts, round_number):
                topic = f"producers-{round_number}-{count}"
                create_topics(cluster, {topic: args.partitions})
                try:
                    latencies, failures = deliver(
                        cluster,
                        topic,
                        partitions=args.partitions,
                        rate=args.rate,
                        seconds=args.seconds,
                        producers=count,
                    )
                finally:
                    delete_topics(cluster, [topic])  # a broker holds one open file per partition
                failed += failures
                medians[count] = percentile(latencies, 0.5)
                print(
                    f"{round_number + 1:>5}{count:>10}{os.getloadavg()[0]:>7.1f}{medians[count]:>9.0f}"
                    f"{percentile(latencies, 0.99):>9.0f}",
                    flush=True,
                )
                time.sleep(5)  # the broker's deletion settles
            ratios = ", ".join(
                f"{count}: {medians[count] / medians[1]:.2f}" for count in counts if count != 1
            )
            print(f"round {round_number + 1}: p50 against one producer's, by producers: {ratios}", flush=True)
    if failed:
        print(f"{failed} records not delivered")
    return 1 if failed else 0
