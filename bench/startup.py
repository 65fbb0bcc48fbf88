"""Where a big task's start goes (issue 34 item 5): one `MirrorSourceTask` of N partitions on Apache Kafka,
its start timed phase by phase, beside how long the broker takes to create as many partitions.

    python -m bench startup [--partitions 2000 ...] [--delivery-guarantee exactly_once]
                            [--remote-topics new|existing]

Per N, on two fresh topics sets (source topics created and served first, one record in every partition):
the topic sync creates the remote topics (`new`: as a new flow's first metadata run does, the task starts
right after; `existing`: they are created and served before, as when a worker restarts or takes a task
over), then the task is assigned every partition and runs 1 s slices until every partition has its
record acknowledged by the target. Printed: the broker creating and serving N partitions (the source's,
same run: the floor of a start whose remote topics are new), the topic sync, the time each start phase
took summed over the slices (stored positions, source offsets, remote tails, fencing, metadata warm-up;
timed at the task's adapters) with its calls, and the time from the first slice to half and to every
partition flowing, with the load average.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from collections import Counter

from bench.brokers import bench_cluster, bench_clusters
from bench.scale import create_topics, delete_topics, positive_int, topic_layout
from replication.config import DeliveryGuarantee, FlowConfig
from replication.kafka.clients import make_producer
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io, task_internal_topics
from replication.kafka.topic_sync import TopicMetadataSync
from replication.policy import replication_policy_for
from replication.source import MirrorSourceTask

PHASES = ("load", "watermarks_all", "init_transactions", "tails", "list_topics")  # the start's, printed
MAX_SLICES = 600


class Counted:
    """Forwards to `inner`, counting each call of a method by name and the partitions it named, and
    summing its time (tests/replication/test_engine_startup.py counts a task's start with it too)."""

    def __init__(self, inner, calls: Counter, keys: Counter, seconds: Counter | None = None) -> None:
        self._inner, self._calls, self._keys = inner, calls, keys
        self._seconds = seconds if seconds is not None else Counter()

    def __getattr__(self, name):
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def counted(*args, **kwargs):
            self._calls[name] += 1
            named = kwargs.get("partitions", args[0] if args else None)
            if isinstance(named, list | tuple | dict) and named and isinstance(next(iter(named)), tuple):
                self._keys[name] += len(named)
            began = time.monotonic()
            try:
                return attribute(*args, **kwargs)
            finally:
                self._seconds[name] += time.monotonic() - began

        return counted

    def __len__(self) -> int:
        return len(self._inner)


def start(
    source, target, *, partitions: int, guarantee: DeliveryGuarantee, new: bool, prefix: str
) -> list[str]:
    topics = topic_layout(prefix, partitions, 50)
    remote = {f"{source.alias}.{name}": count for name, count in topics.items()}
    lines = [
        f"=== {partitions:,} partitions, {guarantee.value}, remote topics {'new' if new else 'existing'} ==="
    ]
    try:
        floor = create_topics(source, topics)
        lines.append(f"the broker creating and serving {partitions:,} partitions  {floor:6.1f} s (source)")
        producer = make_producer(source, overrides={"linger.ms": 50})
        for name, count in topics.items():
            for partition in range(count):
                producer.produce(name, key=b"k", value=b"v", partition=partition)
        producer.flush(120)
        if not new:
            create_topics(target, remote)
        flow = FlowConfig(
            source=source.alias,
            target=target.alias,
            enabled=True,
            topics=(f"{prefix}-[0-9]+",),
            delivery_guarantee=guarantee,
        )
        policy = replication_policy_for(flow, known_aliases=(source.alias, target.alias))
        began = time.monotonic()
        sync = TopicMetadataSync(
            flow=flow,
            source=source,
            target=target,
            policy=policy,
            internal_topics=task_internal_topics(flow, source=source, target=target, policy=policy),
        )
        sync.tick(now=time.time())
        assigned = sync.replicated_partitions()
        lines.append(f"topic sync ({len(assigned):,} partitions planned)  {time.monotonic() - began:6.1f} s")
        lines.extend(_run(flow, policy, source, target, assigned))
    finally:
        delete_topics(source, list(topics))
        delete_topics(target, list(remote))
    return lines


def _run(flow, policy, source, target, assigned) -> list[str]:
    seconds, calls, keys = Counter(), Counter(), Counter()
    io = kafka_task_io(flow, source=source, target=target, policy=policy, task_index=0)
    io = dataclasses.replace(
        io,
        sink=lambda make=io.sink: Counted(make(), calls, keys, seconds),
        source_reader=lambda make=io.source_reader: Counted(make(), calls, keys, seconds),
        target_reader=lambda make=io.target_reader: Counted(make(), calls, keys, seconds),
    )
    store = KafkaPositionStore(target, source_alias=flow.source)
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=Counted(store, calls, keys, seconds),
        io=io,
        remote_partition_wait_s=3600,  # waiting for the broker is what is measured
    )
    task.assign(assigned)
    began, half, slices, flowed = time.monotonic(), None, 0, 0
    try:
        while slices < MAX_SLICES and flowed < len(assigned):
            slices += 1
            task.run_slice(max_seconds=1.0, settle=False)
            flowed = sum(1 for p in task.metrics.snapshot() if (p.next_offset or 0) >= 1)
            if half is None and 2 * flowed >= len(assigned):
                half = time.monotonic() - began
        done = time.monotonic() - began
    finally:
        task.close()
        store.close()
    lines = [
        f"  {name:<20} {seconds[name]:6.2f} s in {calls[name]} call(s) naming {keys[name]:,} partitions"
        for name in PHASES
        if calls[name]
    ]
    if flowed < len(assigned):
        return [*lines, f"FAILED: {flowed:,} of {len(assigned):,} partitions flowed in {slices} slices"]
    return [
        *lines,
        f"first slice to half flowing / every partition flowing  {half:6.1f} / {done:6.1f} s "
        f"({slices} slices; load {os.getloadavg()[0]:.1f})",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench startup", description=__doc__)
    parser.add_argument("--partitions", type=positive_int, action="append", help="N (default 2000)")
    parser.add_argument(
        "--delivery-guarantee",
        type=DeliveryGuarantee,
        default=DeliveryGuarantee.AT_LEAST_ONCE,
        choices=list(DeliveryGuarantee),
    )
    parser.add_argument("--remote-topics", choices=("new", "existing"), default="new")
    args = parser.parse_args(argv or [])
    failed = False
    with bench_clusters(["A", "B"]) as brokers:
        source, target = bench_cluster("A", brokers), bench_cluster("B", brokers)
        for number, partitions in enumerate(args.partitions or [2000]):
            lines = start(
                source,
                target,
                partitions=partitions,
                guarantee=args.delivery_guarantee,
                new=args.remote_topics == "new",
                prefix=f"startup{number}",
            )
            failed |= any(line.startswith("FAILED") for line in lines)
            print("\n".join(lines), flush=True)
    return 1 if failed else 0
