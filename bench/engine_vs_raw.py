"""The engine (MirrorSourceTask slices) against a raw confluent-kafka consume-then-produce loop.

Both copy pre-filled source topics (4 partitions, the same records) between two clusters, in the same
process and run, with the same client factories (the raw loop with librdkafka's defaults but the
fetch backoff `make_consumer` gives every consumer, `FETCH_QUEUE_BACKOFF_MS`); each copies into its own
target topic.
Timing starts at the first consume and ends when every record is acknowledged by the target (the raw loop's flush,
the task's close, which also persists positions). Each scenario (100 B, 1 KB and 10 KB values) runs
several rounds, the methods' order rotated every round, and compares the best of each method (see
`compare`). The engine runs with each delivery guarantee: at_least_once, and exactly_once in Kafka
transactions.

Targets (exit 1 when one is missed), at every size: engine/raw >= 1.0 for each guarantee, and
exactly_once within 10% of at_least_once. `--ab producer.linger.ms=5` (repeatable) adds, for each
guarantee, the engine with those flow-scoped client settings (`A->B.producer.*`, `A->B.consumer.*`)
in the same rounds: its ratio to the engine as configured is printed (an A/B of settings, no target).
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import logging
import math
import os
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

from bench.brokers import bench_cluster, bench_clusters
from replication.config import ClusterConfig, DeliveryGuarantee, FlowConfig
from replication.connector import NewRemoteTopic
from replication.gc_settings import freeze_after_startup
from replication.kafka.admin import TopicAdmin
from replication.kafka.clients import make_consumer, make_producer
from replication.kafka.positions import KafkaPositionStore
from replication.kafka.source_io import kafka_task_io
from replication.policy import replication_policy_for
from replication.runner import SLICE_SECONDS
from replication.schemas.ids import SchemaIdRewriter
from replication.source import MirrorSourceTask

PARTITIONS = 4
TARGET_RATIO = 1.0  # engine/raw, at every size and with each guarantee
GUARANTEE_SPREAD = 0.1  # exactly_once within 10% of at_least_once


@dataclass(frozen=True)
class Scenario:
    records: int
    value_bytes: int
    partitions: int = PARTITIONS  # of the source topic, its records spread round-robin

    @property
    def label(self) -> str:
        if self.partitions == PARTITIONS:
            return f"{self.records:,} x {self.value_bytes} B"
        return f"{self.records:,}x{self.value_bytes}B {self.partitions}p"  # within the column's 22


FULL = (Scenario(1_000_000, 100), Scenario(200_000, 1024), Scenario(30_000, 10_240))
QUICK = (Scenario(50_000, 100), Scenario(10_000, 1024), Scenario(2_000, 10_240))


@dataclass(frozen=True)
class Measurement:
    method: str
    scenario: Scenario
    seconds: float
    # CPU time of this process (all its threads, librdkafka's too) over the copy: less disturbed by other
    # load on a shared machine than the elapsed time (what is measured in another copy's process: None).
    cpu_seconds: float | None = None

    @property
    def records_per_s(self) -> float:
        return self.scenario.records / self.seconds

    @property
    def cpu_us_per_record(self) -> float:
        return math.nan if self.cpu_seconds is None else self.cpu_seconds / self.scenario.records * 1e6

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
    partitions = scenario.partitions
    TopicAdmin(cluster).create_topics([NewRemoteTopic(topic, topic, partitions, 1, {})])
    producer = make_producer(cluster, overrides={"linger.ms": 50, "batch.size": 1_000_000})
    padding = b"x" * scenario.value_bytes
    for index in range(scenario.records):
        key = b"key-%d" % index
        value = (value_prefix + key + b"|" + padding)[: scenario.value_bytes]
        _produce_until_accepted(
            producer, topic, key=key, value=value, partition=index % partitions, headers=[("bench", b"1")]
        )
        if index % 10_000 == 0:
            producer.poll(0)
    producer.flush(120)


def raw_copy(source: ClusterConfig, target: ClusterConfig, topic: str, scenario: Scenario) -> Measurement:
    """The baseline: assign, consume batches (wait for one record, take what is fetched already, as the
    engine does: waiting for a full batch would wait out its timeout where the consumer's queue cannot
    hold one, 10,000 records of 10 KB), produce each record to the same partition, flush."""
    destination = f"raw.{topic}"
    TopicAdmin(target).create_topics([NewRemoteTopic(destination, topic, scenario.partitions, 1, {})])
    # `make_consumer`'s fetch backoff (`FETCH_QUEUE_BACKOFF_MS`), as the engine's: with librdkafka's 1 s the
    # loop waits after every full prefetch queue, and the ratio would measure that setting, not the code.
    consumer = make_consumer(source)
    producer = make_producer(target)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(scenario.partitions)])
    started, cpu_started = time.perf_counter(), time.process_time()
    copied = 0
    while copied < scenario.records:
        first = consumer.consume(num_messages=1, timeout=1.0)
        for message in first and first + consumer.consume(num_messages=10_000 - 1, timeout=0):
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
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    consumer.close()
    return Measurement("raw loop", scenario, seconds, cpu_seconds)


def engine_task(
    source: ClusterConfig,
    target: ClusterConfig,
    topic: str,
    *,
    schema_ids: SchemaIdRewriter | None = None,
    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE,
    settings: Mapping[str, str] | None = None,
    partitions: int = PARTITIONS,
) -> tuple[MirrorSourceTask, str]:
    """One MirrorSourceTask assigned the topic's partitions, and its remote topic (created); `settings`
    are the flow's client overrides (`producer.linger.ms`: `A->B.producer.linger.ms`)."""
    flow = FlowConfig(
        source=source.alias,
        target=target.alias,
        enabled=True,
        topics=(topic,),
        delivery_guarantee=guarantee,
        extra=settings or {},
    )
    policy = replication_policy_for(flow, known_aliases=(source.alias, target.alias))
    remote = policy.format_remote_topic(source.alias, topic)
    TopicAdmin(target).create_topics([NewRemoteTopic(remote, topic, partitions, 1, {})])
    position_store = KafkaPositionStore(target, source_alias=source.alias)
    task = MirrorSourceTask(
        flow=flow,
        policy=policy,
        task_index=0,
        position_store=position_store,
        io=kafka_task_io(flow, source=source, target=target, policy=policy, task_index=0),
        schema_ids=schema_ids,
    )
    task.assign([(topic, p) for p in range(partitions)])
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
    settings: Mapping[str, str] | None = None,
) -> Measurement:
    """The engine: one MirrorSourceTask owning the topic's partitions, run in slices until all are copied."""
    task, _ = engine_task(
        source,
        target,
        topic,
        schema_ids=schema_ids,
        guarantee=guarantee,
        settings=settings,
        partitions=scenario.partitions,
    )
    started, cpu_started = time.perf_counter(), time.process_time()
    copied = 0
    while copied < scenario.records:
        copied += task.run_slice(  # as dedicated mode runs it
            max_seconds=SLICE_SECONDS, settle=False, return_when_caught_up=True
        ).records
    task.close()
    seconds, cpu_seconds = time.perf_counter() - started, time.process_time() - cpu_started
    return Measurement(method, scenario, seconds, cpu_seconds)


RAW = "raw loop"


@dataclass(frozen=True)
class Engine:
    """One engine configuration of a run: its delivery guarantee and its flow-scoped client settings (an
    A/B's B; none: the engine as configured)."""

    guarantee: DeliveryGuarantee = DeliveryGuarantee.AT_LEAST_ONCE
    settings: Mapping[str, str] = field(default_factory=dict)

    @property
    def method(self) -> str:
        name = "alo" if self.guarantee == DeliveryGuarantee.AT_LEAST_ONCE else "eos"
        return f"{name} B" if self.settings else name


BOTH_GUARANTEES = (Engine(DeliveryGuarantee.AT_LEAST_ONCE), Engine(DeliveryGuarantee.EXACTLY_ONCE))


MEASUREMENT_HEADER = (
    f"{'scenario':<22}{'method':<10}{'records/s':>12}{'MB/s':>9}{'seconds':>9}{'CPU us/rec':>12}"
)


def _print_measurement(m: Measurement, print_line: Callable[[str], None]) -> None:
    print_line(
        f"{m.scenario.label:<22}{m.method:<10}{m.records_per_s:>12,.0f}{m.mb_per_s:>9.1f}{m.seconds:>9.2f}"
        f"{m.cpu_us_per_record:>12.1f}"
    )


def compare(
    source: ClusterConfig,
    target: ClusterConfig,
    scenario: Scenario,
    *,
    number: int,
    rounds: int,
    print_line: Callable[[str], None],
    engines: Sequence[Engine] = BOTH_GUARANTEES,
) -> dict[str, list[Measurement]]:
    """Each method's measurements, the raw loop's (`RAW`) and each engine's (its `method`), one per round.

    Each round fills a topic per engine with the same records (a copy stores its positions on the
    target, so a second engine copying one topic would start where the first ended; the raw loop copies
    the first) and runs the methods in an order rotated every round, so a burst of load from elsewhere
    on the machine or a broker warming up does not favour one; the best of each (`best`) is its least
    disturbed run.
    """
    measured: dict[str, list[Measurement]] = {}
    for round_number in range(rounds):
        topics = [
            f"bench-{number}-{scenario.value_bytes}b-r{round_number}-{index}" for index in range(len(engines))
        ]
        for topic in topics:
            fill_source(source, topic, scenario)
        copies = [functools.partial(raw_copy, source, target, topics[0], scenario)] + [
            functools.partial(
                engine_copy,
                source,
                target,
                topic,
                scenario,
                method=engine.method,
                guarantee=engine.guarantee,
                settings=engine.settings,
            )
            for topic, engine in zip(topics, engines, strict=True)
        ]
        shift = round_number % len(copies)
        for copy in copies[shift:] + copies[:shift]:
            measurement = copy()
            measured.setdefault(measurement.method, []).append(measurement)
            _print_measurement(measurement, print_line)
    return measured


def best(measurements: Sequence[Measurement]) -> Measurement:
    return min(measurements, key=lambda m: m.seconds)


def verdicts(
    measured: Mapping[str, Sequence[Measurement]],
    engines: Sequence[Engine],
    *,
    rounds: int,
    print_line: Callable[[str], None],
) -> list[str]:
    """Print each engine's ratio to the raw loop (target >= TARGET_RATIO), exactly_once's to
    at_least_once (within GUARANTEE_SPREAD) and each B's to its engine as configured (no target; with
    the ratio of each round's pair too: a round's two runs saw the same machine); the targets missed."""
    configured = {engine.guarantee: engine.method for engine in engines if not engine.settings}
    missed: list[str] = []
    for engine in engines:
        if engine.settings:
            baseline = configured[engine.guarantee]
            name = f"{engine.method}/{baseline}"
            print_ratio(
                name,
                best(measured[engine.method]),
                best(measured[baseline]),
                rounds=rounds,
                print_line=print_line,
            )
            for figure in ("records_per_s", "cpu_us_per_record"):
                pairs = [
                    getattr(b, figure) / getattr(a, figure)
                    for b, a in zip(measured[engine.method], measured[baseline], strict=True)
                ]
                print_line(
                    f"{' ' * 22}{name} {figure} per round {' '.join(f'{ratio:.2f}' for ratio in pairs)}, "
                    f"median {statistics.median(pairs):.2f}"
                )
        else:
            missed += print_ratio(
                f"{engine.method}/raw",
                best(measured[engine.method]),
                best(measured[RAW]),
                rounds=rounds,
                print_line=print_line,
                low=TARGET_RATIO,
            )
    if len(configured) == 2:
        missed += print_ratio(
            "eos/alo",
            best(measured[configured[DeliveryGuarantee.EXACTLY_ONCE]]),
            best(measured[configured[DeliveryGuarantee.AT_LEAST_ONCE]]),
            rounds=rounds,
            print_line=print_line,
            low=1 - GUARANTEE_SPREAD,
            high=1 / (1 - GUARANTEE_SPREAD),
        )
    return missed


def run(
    scenarios: Sequence[Scenario],
    *,
    rounds: int = 3,
    print_line: Callable[[str], None] = print,
    engines: Sequence[Engine] = BOTH_GUARANTEES,
) -> list[str]:
    """Every scenario's ratios (best of `rounds` each), printed with their verdicts; the targets missed.
    An exactly_once engine writes in Kafka transactions (the default of exactly.once.transactions)."""
    missed: list[str] = []
    with bench_clusters(["A", "B"]) as brokers:
        source = bench_cluster("A", brokers)
        target = bench_cluster("B", brokers)
        print_line(f"load average at start: {load_average()}")
        freeze_after_startup()  # as the engine's processes do; the raw loop runs under it too
        print_line(MEASUREMENT_HEADER)
        for number, scenario in enumerate(scenarios):
            measured = compare(
                source, target, scenario, number=number, rounds=rounds, print_line=print_line, engines=engines
            )
            missed += verdicts(measured, engines, rounds=rounds, print_line=print_line)
            print_line(f"load average: {load_average()}")
    return missed


def load_average() -> str:
    """The machine's 1, 5 and 15 minute load averages: every figure of a shared machine carries them."""
    return " ".join(f"{load:.1f}" for load in os.getloadavg())


def print_ratio(
    name: str,
    measured: Measurement,
    baseline: Measurement,
    *,
    rounds: int,
    print_line: Callable[[str], None],
    low: float | None = None,
    high: float | None = None,
) -> list[str]:
    """`measured`'s records/s over `baseline`'s, printed with its verdict: at least `low` (and at most
    `high`, when given), or no target without `low`; the target missed, if it was."""
    ratio = measured.records_per_s / baseline.records_per_s
    met = low is None or low <= ratio <= (math.inf if high is None else high)
    if low is None:
        verdict = "no target"
    else:
        bounds = f">= {low:.2f}" if high is None else f"{low:.2f}-{high:.2f}"
        verdict = f"target {bounds}: {'ok' if met else 'MISSED'}"
    line = (
        f"{measured.scenario.label:<22}{name} ratio {ratio:.2f} (best of {rounds} each: "
        f"{measured.records_per_s:,.0f} / {baseline.records_per_s:,.0f} records/s; {verdict})"
    )
    print_line(line)
    return [] if met else [line]


def scenarios_parser(*, prog: str, description: str | None) -> argparse.ArgumentParser:
    """The command line of a ratio benchmark over FULL (or QUICK) scenarios (`chosen_scenarios`)."""
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument("--quick", action="store_true", help="small volumes (a smoke run)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per scenario, order rotated (best of)")
    parser.add_argument(
        "--size",
        type=int,
        action="append",
        help="only the scenarios of this value size in bytes (repeatable)",
    )
    parser.add_argument(
        "--partitions",
        type=int,
        default=PARTITIONS,
        help=f"of each source topic (default {PARTITIONS}): the engine's per-partition work against the raw "
        "loop's, e.g. 5000 with --records 500000",
    )
    parser.add_argument("--records", type=int, help="per scenario, instead of its default")
    return parser


def chosen_scenarios(args: argparse.Namespace) -> list[Scenario]:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    scenarios = QUICK if args.quick else FULL
    chosen = [
        dataclasses.replace(
            scenario,
            partitions=getattr(args, "partitions", PARTITIONS),
            records=getattr(args, "records", None) or scenario.records,
        )
        for scenario in scenarios
        if not args.size or scenario.value_bytes in args.size
    ]
    if not chosen:  # a run that measures nothing must not pass for one that met its targets
        sizes = ", ".join(str(scenario.value_bytes) for scenario in scenarios)
        raise SystemExit(
            f"--size {' '.join(map(str, args.size))}: no scenario of that size; the sizes are {sizes}"
        )
    return chosen


def exit_code(missed: Sequence[str], *, print_line: Callable[[str], None] = print) -> int:
    """1 when a target was missed (each printed again), else 0."""
    for line in missed:
        print_line(f"MISSED: {line.strip()}")
    return 1 if missed else 0


def _client_setting(text: str) -> tuple[str, str]:
    name, equals, value = text.partition("=")
    if not equals or not name.startswith(("producer.", "consumer.")):
        raise argparse.ArgumentTypeError(f"{text!r}: expected producer.NAME=VALUE or consumer.NAME=VALUE")
    return name, value


class _Settings(argparse.Action):
    """Collects repeated `ROLE.NAME=VALUE` into one dict, printed once parsed (the B of an A/B)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        settings = {**(getattr(namespace, self.dest) or {}), **dict([values])}
        setattr(namespace, self.dest, settings)


def add_ab_argument(parser: argparse.ArgumentParser, help: str) -> None:
    """`--ab producer.linger.ms=5` (repeatable): the flow-scoped client settings of an A/B's B, a dict."""
    parser.add_argument(
        "--ab",
        type=_client_setting,
        action=_Settings,
        default={},
        metavar="ROLE.NAME=VALUE",
        help=f"{help}, e.g. producer.linger.ms=5 (repeatable: all of them)",
    )


def print_settings(settings: Mapping[str, str]) -> None:
    print(f"B: {', '.join(f'{name}={value}' for name, value in settings.items())}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = scenarios_parser(prog="python -m bench engine", description=__doc__)
    parser.add_argument(
        "--guarantee",
        choices=["both", *(g.value for g in DeliveryGuarantee)],
        default="both",
        help="the engine's delivery guarantee(s)",
    )
    add_ab_argument(parser, "B: each engine with this flow-scoped client setting too, in the same rounds")
    args = parser.parse_args(argv)
    configured = [engine for engine in BOTH_GUARANTEES if args.guarantee in ("both", engine.guarantee.value)]
    b_side = [Engine(engine.guarantee, args.ab) for engine in configured] if args.ab else []
    if args.ab:
        print_settings(args.ab)
    return exit_code(run(chosen_scenarios(args), rounds=args.rounds, engines=configured + b_side))
