"""The engine (MirrorSourceTask slices) against a raw confluent-kafka consume-then-produce loop.

Both copy the same pre-filled source topic (4 partitions) between two embedded clusters, in the same
process and run, with the same client factories; each copies into its own target topic. Timing starts
at the first consume and ends when every record is acknowledged by the target (the raw loop's flush,
the task's close, which also persists positions). Each scenario runs several alternating rounds and
compares the best of each method (see `compare`). The target ratio engine/raw is >= 0.9.
"""

from __future__ import annotations

import argparse
import functools
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from bench.brokers import bench_cluster, bench_clusters
from replication.config import ClusterConfig, DeliveryGuarantee, FlowConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.positions import KafkaPositionStore
from replication.policy import replication_policy_for
from replication.runner import SLICE_SECONDS
from replication.schemas.ids import SchemaIdRewriter
from replication.source import MirrorSourceTask

PARTITIONS = 4
TARGET_RATIO = 0.9


@dataclass(frozen=True)
class Scenario:
    records: int
    value_bytes: int

    @property
    def label(self) -> str:
        return f"{self.records:,} x {self.value_bytes} B"


FULL = (Scenario(1_000_000, 100), Scenario(200_000, 1024))
QUICK = (Scenario(50_000, 100), Scenario(10_000, 1024))


@dataclass(frozen=True)
class Measurement:
    method: str
    scenario: Scenario
    seconds: float

    @property
    def records_per_s(self) -> float:
        return self.scenario.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.scenario.records * self.scenario.value_bytes / self.seconds / 1e6


def _produce_until_accepted(producer, topic: str, **record) -> None:
    while True:
        try:
            producer.produce(topic, **record)
            return
        except BufferError:  # local queue full: serve delivery reports until there is room
            producer.poll(0.05)


def fill_source(cluster: ClusterConfig, topic: str, scenario: Scenario, *, value_prefix: bytes = b"") -> None:
    """`scenario.records` records of `scenario.value_bytes` bytes each, starting with `value_prefix`."""
    TopicAdmin(cluster).create_topics([NewRemoteTopic(topic, topic, PARTITIONS, 1, {})])
    producer = make_producer(cluster, overrides={"linger.ms": 50, "batch.size": 1_000_000})
    padding = b"x" * scenario.value_bytes
    for index in range(scenario.records):
        key = b"key-%d" % index
        value = (value_prefix + key + b"|" + padding)[: scenario.value_bytes]
        _produce_until_accepted(
            producer, topic, key=key, value=value, partition=index % PARTITIONS, headers=[("bench", b"1")]
        )
        if index % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)


def raw_copy(source: ClusterConfig, target: ClusterConfig, topic: str, scenario: Scenario) -> Measurement:
    """The baseline: assign, consume batches, produce each record to the same partition, flush."""
    destination = f"raw.{topic}"
    TopicAdmin(target).create_topics([NewRemoteTopic(destination, topic, PARTITIONS, 1, {})])
    consumer = make_consumer(source)
    producer = make_producer(target)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
    started = time.perf_counter()
    copied = 0
    while copied < scenario.records:
        for message in consumer.consume(num_messages=10_000, timeout=1.0):
            if message.error():
                raise RuntimeError(f"raw loop consume error: {message.error()}")
            _produce_until_accepted(
                producer,
                destination,
                key=message.key(),
                value=message.value(),
                headers=message.headers(),
                timestamp=message.timestamp()[1],
                partition=message.partition(),
            )
            copied += 1
        producer.poll(0)
    producer.flush(120)
    seconds = time.perf_counter() - started
    consumer.close()
    return Measurement("raw loop", scenario, seconds)


def engine_task(
    source: ClusterConfig,
    target: ClusterConfig,
    topic: str,
    *,
    schema_ids: SchemaIdRewriter | None = None,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
) -> tuple[MirrorSourceTask, str]:
    """One MirrorSourceTask assigned the topic's 4 partitions, and its remote topic (created)."""
    flow = FlowConfig(
        source=source.alias,
        target=target.alias,
        enabled=True,
        topics=(topic,),
        delivery_guarantee=guarantee,
    )
    policy = replication_policy_for(flow, known_aliases=(source.alias, target.alias))
    remote = policy.format_remote_topic(source.alias, topic)
    TopicAdmin(target).create_topics([NewRemoteTopic(remote, topic, PARTITIONS, 1, {})])
    position_store = KafkaPositionStore(target, source_alias=source.alias)
    task = MirrorSourceTask(
        flow=flow,
        source=source,
        target=target,
        policy=policy,
        task_index=0,
        position_store=position_store,
        schema_ids=schema_ids,
    )
    task.assign([(topic, p) for p in range(PARTITIONS)])
    position_store.prepare()  # as dedicated mode does before its first slice (replication.runner)
    task.prepare()
    return task, remote


def engine_copy(
    source: ClusterConfig,
    target: ClusterConfig,
    topic: str,
    scenario: Scenario,
    *,
    schema_ids: SchemaIdRewriter | None = None,
    method: str = "engine",
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
) -> Measurement:
    """The engine: one MirrorSourceTask owning the 4 partitions, run in slices until all are copied."""
    task, _ = engine_task(source, target, topic, schema_ids=schema_ids, guarantee=guarantee)
    started = time.perf_counter()
    copied = 0
    while copied < scenario.records:
        copied += task.run_slice(  # as dedicated mode runs it
            max_seconds=SLICE_SECONDS, settle=False, return_when_caught_up=True
        ).records
    task.close()
    seconds = time.perf_counter() - started
    return Measurement(method, scenario, seconds)


def _print_measurement(m: Measurement, print_line: Callable[[str], None]) -> None:
    print_line(
        f"{m.scenario.label:<22}{m.method:<10}{m.records_per_s:>12,.0f}{m.mb_per_s:>9.1f}{m.seconds:>9.2f}"
    )


def compare(
    source: ClusterConfig,
    target: ClusterConfig,
    scenario: Scenario,
    *,
    number: int,
    rounds: int,
    print_line: Callable[[str], None],
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
) -> tuple[Measurement, Measurement]:
    """The best raw loop and the best engine copy over `rounds` alternating rounds.

    Each round copies its own freshly filled topic with both methods, the order swapped every round,
    so a burst of load from elsewhere on the machine or a broker warming up does not favour one side;
    the best of each is its least disturbed run.
    """
    raws: list[Measurement] = []
    engines: list[Measurement] = []
    for round_number in range(rounds):
        topic = f"bench-{number}-{scenario.value_bytes}b-r{round_number}"
        fill_source(source, topic, scenario)
        engine = functools.partial(engine_copy, guarantee=guarantee)
        copies = (raw_copy, engine) if round_number % 2 == 0 else (engine, raw_copy)
        for copy in copies:
            measurement = copy(source, target, topic, scenario)
            (raws if copy is raw_copy else engines).append(measurement)
            _print_measurement(measurement, print_line)
    return min(raws, key=lambda m: m.seconds), min(engines, key=lambda m: m.seconds)


def run(
    scenarios: Sequence[Scenario],
    *,
    rounds: int = 3,
    print_line: Callable[[str], None] = print,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
) -> list[float]:
    """engine/raw ratio (best of `rounds` each) per scenario; the engine's flow has `guarantee`
    (exactly_once: in Kafka transactions, the default of exactly.once.transactions)."""
    ratios: list[float] = []
    with bench_clusters(["A", "B"]) as brokers:
        source = bench_cluster("A", brokers)
        target = bench_cluster("B", brokers)
        print_line(f"{'scenario':<22}{'method':<10}{'records/s':>12}{'MB/s':>9}{'seconds':>9}")
        for number, scenario in enumerate(scenarios):
            raw, engine = compare(
                source,
                target,
                scenario,
                number=number,
                rounds=rounds,
                print_line=print_line,
                guarantee=guarantee,
            )
            ratios.append(print_ratio("engine/raw", engine, raw, rounds=rounds, print_line=print_line))
    return ratios


def print_ratio(
    name: str, measured: Measurement, baseline: Measurement, *, rounds: int, print_line: Callable[[str], None]
) -> float:
    """`measured`'s records/s over `baseline`'s, printed with its verdict against TARGET_RATIO."""
    ratio = measured.records_per_s / baseline.records_per_s
    verdict = "ok" if ratio >= TARGET_RATIO else f"BELOW the {TARGET_RATIO} target"
    print_line(
        f"{measured.scenario.label:<22}{name} ratio {ratio:.2f} (best of {rounds} each: "
        f"{measured.records_per_s:,.0f} / {baseline.records_per_s:,.0f} records/s; {verdict})"
    )
    return ratio


def scenarios_main(
    argv: Sequence[str] | None, *, prog: str, description: str | None, run: Callable[..., list[float]]
) -> int:
    """The command line of a ratio benchmark over FULL (or QUICK) scenarios: 0 when every ratio meets
    TARGET_RATIO."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help="small volumes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds per scenario (best of)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    ratios = run(QUICK if args.quick else FULL, rounds=args.rounds)
    return 0 if all(ratio >= TARGET_RATIO for ratio in ratios) else 1


def main(argv: Sequence[str] | None = None) -> int:
    """`--guarantee exactly_once` measures the engine writing in Kafka transactions against the raw loop."""
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--guarantee", choices=[g.value for g in DeliveryGuarantee], default="at_least_once")
    known, rest = parser.parse_known_args(argv)
    guarantee = DeliveryGuarantee(known.guarantee)
    return scenarios_main(
        rest,
        prog="python -m bench engine",
        description=__doc__,
        run=functools.partial(run, guarantee=guarantee),
    )
