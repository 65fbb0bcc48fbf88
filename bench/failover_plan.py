"""How long a failover plan takes: `python -m bench.failover_plan [--partitions 1000] [--groups 20]`.

Two embedded clusters: A holds `--topics` topics with the partitions spread over them, each partition
with a few records; B holds their mirrors (`A.<topic>`, same records) and A holds the offset syncs a
mirror would have written (one at the first record, one progress sync at the last). Every group has a
committed offset on every partition of A. The plan is then built `--repeat` times for all groups; the
issue asks for under 2 s with 1,000 partitions and 20 groups. The time includes the deliberate wait
between the two samples of the source end offsets (`--arrival-window`, the "records still arriving"
check), reported separately.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition

from bench.brokers import bench_cluster, bench_clusters
from replication.config import ClusterConfig, FlowConfig
from replication.connector import NewRemoteTopic
from replication.failover_reads import read_plan
from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_admin, make_producer
from replication.kafka.failover_io import FailoverReader
from replication.kafka.internal_topics import InternalTopicWriter
from replication.policy import DefaultReplicationPolicy

RECORDS_PER_PARTITION = 5


def _create(cluster: ClusterConfig, topics: dict[str, int]) -> None:
    errors = TopicAdmin(cluster).create_topics(NewRemoteTopic(t, t, n, 1, {}) for t, n in topics.items())
    failed = {name: error for name, error in errors.items() if error is not None}
    if failed:
        raise SystemExit(f"creating topics failed: {failed}")


def _produce(cluster: ClusterConfig, topics: dict[str, int]) -> None:
    producer = make_producer(cluster)
    for topic, count in topics.items():
        for partition in range(count):
            for index in range(RECORDS_PER_PARTITION):
                producer.produce(topic, value=f"{partition}:{index}".encode(), partition=partition)
        producer.poll(0)
    producer.flush(60)


def seed(source: ClusterConfig, target: ClusterConfig, *, topics: dict[str, int], groups: list[str]) -> None:
    policy = DefaultReplicationPolicy(known_aliases=[source.alias, target.alias])
    remote = {policy.format_remote_topic(source.alias, t): n for t, n in topics.items()}
    _create(source, topics)
    _create(target, remote)
    _produce(source, topics)
    _produce(target, remote)
    writer = InternalTopicWriter(source, policy.offset_syncs_topic(target.alias), replication_factor=1)
    last = RECORDS_PER_PARTITION - 1
    writer.write(
        [
            (sync.key(), sync.value())
            for topic, count in topics.items()
            for partition in range(count)
            for sync in (OffsetSync(topic, partition, 0, 0), OffsetSync(topic, partition, last, last))
        ]
    )
    writer.close()
    admin = make_admin(source)
    for index, group in enumerate(groups):
        offsets = [
            TopicPartition(topic, partition, (index + partition) % RECORDS_PER_PARTITION)
            for topic, count in topics.items()
            for partition in range(count)
        ]
        for future in admin.alter_consumer_group_offsets(
            [ConsumerGroupTopicPartitions(group, offsets)], request_timeout=60
        ).values():
            future.result()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--partitions", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10)
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--arrival-window", type=float, default=1.0)
    args = parser.parse_args(argv)
    per_topic = args.partitions // args.topics
    topics = {f"bench-orders-{i}": per_topic for i in range(args.topics)}
    groups = [f"bench-group-{i}" for i in range(args.groups)]
    with bench_clusters(["A", "B"]) as brokers:
        source = bench_cluster("A", brokers)
        target = bench_cluster("B", brokers)
        started = time.monotonic()
        seed(source, target, topics=topics, groups=groups)
        seeded_s = time.monotonic() - started
        flow = FlowConfig(source="A", target="B", enabled=True, topics=(r"bench-orders-.*",))
        totals, windows = [], []
        for _ in range(args.repeat):
            reader = FailoverReader(flow=flow, source=source, target=target, known_aliases=["A", "B"])
            began = time.monotonic()
            plan, partitions = read_plan(reader, groups=groups, arrival_window_s=args.arrival_window)
            totals.append(time.monotonic() - began)
            windows.append(args.arrival_window)
            reader.close()
        rows = sum(len(group.partitions) for group in plan.groups)
        print(
            json.dumps(
                {
                    "partitions": len(partitions),
                    "groups": len(plan.groups),
                    "group_partition_rows": rows,
                    "seed_s": round(seeded_s, 2),
                    "arrival_window_s": args.arrival_window,
                    "plan_s_median": round(statistics.median(totals), 3),
                    "plan_s_max": round(max(totals), 3),
                    "plan_s_without_window_median": round(statistics.median(totals) - args.arrival_window, 3),
                    "checklist": {item.check.value: item.status.value for item in plan.checklist},
                    "records_at_risk": plan.records_at_risk,
                },
                indent=2,
            )
        )
        under = max(totals) < 2.0
    return 0 if under else 1


if __name__ == "__main__":
    raise SystemExit(main())
