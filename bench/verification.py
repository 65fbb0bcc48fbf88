"""One continuous-verification run over a flow of many partitions:
`python -m bench verification [--partitions 500 2000] [--topics 4] [--records 10]`.

On two Apache Kafka clusters (`bench.brokers`) and a throw-away test database, `seed_mirrored` writes a
mirror as the engine leaves it: `--records` records in every partition of `--topics` source topics and
the same records (key, value, CreateTime) in their remote topics, two offset syncs per partition and the
partitions' status rows. Then it times `workers.verification.run_verification`, the beat task's body, run
after run until every partition is verified (a full rotation): over the first records, with nothing new
(one run), and after `--records` more records in every partition. Each line carries the load average of
the machine.
"""

from __future__ import annotations

import argparse
import datetime
import os
import time
from dataclasses import dataclass

from bench.brokers import bench_cluster, bench_clusters, stored_cluster
from bench.runtime import scratch_database
from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic
from replication.formats import OffsetSync
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_producer
from replication.kafka.internal_topics import InternalTopicWriter


@dataclass(frozen=True)
class MirroredFlow:
    """What `seed_mirrored` wrote: the flow's source topics and how many records each partition holds."""

    flow_id: int
    topics: tuple[str, ...]
    partitions: int  # per topic
    records: int  # per partition

    def topic_partitions(self) -> list[tuple[str, int]]:
        return [(topic, p) for topic in self.topics for p in range(self.partitions)]


def _produce(
    cluster: ClusterConfig,
    rows: list[tuple[str, int, int]],
    timestamp_ms: int,
    altered: frozenset[tuple[str, int, int]] = frozenset(),
    *,
    prefix: str = "",
) -> None:
    """Record `offset` of each (topic, partition, offset) to `prefix` + topic, the same bytes and timestamp on
    every cluster (another value for those in `altered`)."""
    producer = make_producer(cluster, overrides={"linger.ms": 20})
    for name, partition, offset in rows:
        while True:
            try:
                producer.produce(
                    prefix + name,
                    key=b"%s-%d-%d" % (name.encode(), partition, offset),
                    value=b"altered" if (name, partition, offset) in altered else b"v%d" % offset,
                    partition=partition,
                    timestamp=timestamp_ms,
                )
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def seed_mirrored(
    *,
    flow,
    source: ClusterConfig,
    target: ClusterConfig,
    topics: list[str],
    partitions: int,
    records: int,
    altered: frozenset[tuple[str, int, int]] = frozenset(),
) -> MirroredFlow:
    """Topics of `partitions` partitions on the source and their remote topics (`<source alias>.<topic>`) on
    the target, `records` identical records in each partition on both sides, offset syncs and status rows:
    a mirror as the engine leaves it, made without running it."""
    for cluster, prefix in ((source, ""), (target, f"{flow.source.alias}.")):
        names = [prefix + topic for topic in topics]
        errors = TopicAdmin(cluster).create_topics([NewRemoteTopic(n, n, partitions, 1, {}) for n in names])
        assert not any(errors.values()), errors
    mirrored = MirroredFlow(flow.pk, tuple(topics), partitions, 0)
    return append_mirrored(
        mirrored, flow=flow, source=source, target=target, records=records, altered=altered
    )


def append_mirrored(
    mirrored: MirroredFlow,
    *,
    flow,
    source: ClusterConfig,
    target: ClusterConfig,
    records: int,
    altered: frozenset[tuple[str, int, int]] = frozenset(),
) -> MirroredFlow:
    """`records` more records in every partition on both sides, their offset syncs and positions; the
    copies of the source records in `altered` (topic, partition, offset) have another value."""
    from django.utils import timezone

    from controlplane.flows import engine
    from controlplane.status.models import FlowPartitionStatus
    from replication.policy import replication_policy_for

    start, end = mirrored.records, mirrored.records + records
    rows = [(t, p, o) for t, p in mirrored.topic_partitions() for o in range(start, end)]
    now_ms = int(time.time() * 1000)  # an older timestamp falls to the topics' retention
    _produce(source, rows, now_ms)
    prefix = f"{flow.source.alias}."
    _produce(target, rows, now_ms, altered, prefix=prefix)
    config = engine.flow_to_config(flow)
    syncs_topic = replication_policy_for(config, known_aliases=["A", "B"]).flow_offset_syncs_topic(config)
    writer = InternalTopicWriter(source, syncs_topic, replication_factor=1)
    syncs = [OffsetSync(t, p, o, o) for t, p in mirrored.topic_partitions() for o in sorted({start, end - 1})]
    writer.write([(sync.key(), sync.value()) for sync in syncs])
    writer.close()
    now = timezone.now()
    FlowPartitionStatus.objects.bulk_create(
        [
            FlowPartitionStatus(
                flow_id=flow.pk,
                topic=t,
                partition=p,
                remote_topic=prefix + t,
                source_end_offset=end,
                replicated_offset=end,
                records_behind=0,
                observed_at=now,
            )
            for t, p in mirrored.topic_partitions()
        ],
        update_conflicts=True,
        unique_fields=["flow", "topic", "partition"],
        update_fields=["source_end_offset", "replicated_offset", "observed_at"],
    )
    return MirroredFlow(mirrored.flow_id, mirrored.topics, mirrored.partitions, end)


def _rotate(flow, mirrored: MirroredFlow, what: str, size: int) -> None:
    """Runs until every partition is verified to its end (one run when nothing is new), each timed."""
    from django.db.models import Count

    from controlplane.assurance.models import PartitionVerification
    from workers.verification import run_verification

    total = 0.0
    for run in range(1, 100):
        started = time.perf_counter()
        budget = run_verification(run=run)
        elapsed = time.perf_counter() - started
        total += elapsed
        verified = PartitionVerification.objects.filter(flow=flow, verified_up_to=mirrored.records).count()
        print(
            f"  {size} partitions, {what}, run {run}: {elapsed:.2f} s, {budget.spent} bytes read, "
            f"{verified} partitions verified to the end ({_load()})",
            flush=True,
        )
        if verified == size or budget.spent == 0:
            break
    if verified < size:
        behind = PartitionVerification.objects.filter(flow=flow).exclude(verified_up_to=mirrored.records)
        reasons = behind.values_list("status", "reason").annotate(partitions=Count("pk"))
        print(f"  not verified to the end: {sorted(reasons)}", flush=True)
    print(f"  {size} partitions, {what}: {run} run(s), {total:.2f} s in all", flush=True)


def _load() -> str:
    return "load average " + " ".join(f"{value:.2f}" for value in os.getloadavg())


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench verification")
    parser.add_argument("--partitions", type=int, nargs="+", default=[500, 2000])
    parser.add_argument("--topics", type=int, default=4)
    parser.add_argument("--records", type=int, default=10, help="records per partition, each step")
    args = parser.parse_args(argv)

    with scratch_database(), bench_clusters(["A", "B"]) as brokers:
        from controlplane.flows import services

        source, target = bench_cluster("A", brokers), bench_cluster("B", brokers)
        a, b = stored_cluster(source), stored_cluster(target)
        for size in args.partitions:
            topics = [f"verify{size}-{index}" for index in range(args.topics)]
            flow = services.flow_create(
                actor=None, source=a, target=b, enabled=True, topics=[f"verify{size}-.*"]
            )
            made = time.perf_counter()
            mirrored = seed_mirrored(
                flow=flow,
                source=source,
                target=target,
                topics=topics,
                partitions=size // args.topics,
                records=args.records,
            )
            print(f"{size} partitions seeded in {time.perf_counter() - made:.1f} s ({_load()})", flush=True)
            for what in ("first records", "nothing new", f"{args.records} new records per partition"):
                if what.endswith("per partition"):
                    mirrored = append_mirrored(
                        mirrored, flow=flow, source=source, target=target, records=args.records
                    )
                _rotate(flow, mirrored, what, size)
            services.flow_delete(actor=None, flow=flow)
    print(f"done at {datetime.datetime.now(datetime.UTC):%H:%M:%S} UTC")
    return 0
