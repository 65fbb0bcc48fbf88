"""End-to-end latency beside MirrorMaker 2 (issue 38 item 2): p50 and p99 at 5,000 and 20,000 records/s
over 4, 8 and 64 partitions, each tool in dedicated mode, the load written by a process of its own.

Per round and partition count, each tool runs as its users run it, a process of its own on the same
`mm2.properties` (`bench.vs_mm2.Replicator`: MM2's `connect-mirror-maker.sh` JVM, `python -m replication
run`), one flow A->B, `tasks.max = 1`, default delivery (at least once) and client settings, MM2's
default intervals (topics and groups refreshed every 10 minutes, checkpoints every minute: what a new
user runs). Its topics (one per rate, 100 B records) exist before it starts; per rate, one record per
partition is carried first (primed), then a load process produces at the rate for `--seconds` and a
reader process (a plain consumer on the target) takes, for every record, produce timestamp (CreateTime,
kept by both copies) to the time it was read (`bench.latency.measure_running`); the first `--warmup`
seconds are not counted (a JVM's JIT, a Python interpreter's first batches). The order of the tools is
rotated at every partition count and round.

`--floor` adds the reader on the source topic itself, no copy (load, one broker, reader): what is left
of a tool's p50 after it is the copy's own. `--ab consumer.fetch.wait.max.ms=10` (repeatable) adds
`mirrorplane-B`, Mirrorplane with those flow-scoped client settings (`A->B.consumer.*`); `--b-checkout
PATH` runs `mirrorplane-B` from another checkout's code instead or as well (an A/B of an engine change
in the same session). Each figure is printed with the load average at its end (the machine is shared).

Targets (exit 1 when one is missed): at every (partitions, rate), Mirrorplane's p50 and p99 at or
below MM2's, each the median over the rounds.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import re
import statistics
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.brokers import bench_cluster, bench_clusters
from bench.engine_vs_raw import add_ab_argument, load_average
from bench.latency import Copy, NoCopy, measure_running
from bench.vs_mm2 import START_TIMEOUT_S, Replicator, flow_properties
from replication.config import ClusterConfig
from replication.connector import NewRemoteTopic
from replication.kafka.admin import TopicAdmin

PARTITION_COUNTS = (4, 8, 64)
RATES = (5_000, 20_000)
MM2, OURS, OURS_B, FLOOR = "mm2", "mirrorplane", "mirrorplane-B", "no-copy"
# MM2's defaults for what TEST_SETTINGS shortens (`replication.kafka.mirrormaker`): a new user's file.
DEFAULT_INTERVALS = {
    "refresh.topics.interval.seconds": "600",
    "refresh.groups.interval.seconds": "600",
    "emit.checkpoints.interval.seconds": "60",
}


@dataclass(frozen=True)
class Point:
    tool: str
    partitions: int
    rate: int
    records: int
    p50: float
    p99: float
    load: float  # 1-minute load average when the point ended
    cpu_us: float = math.nan  # CPU of the tool's process per record over the load (no process: nan)

    def line(self) -> str:
        return (
            f"{self.tool:<15}{self.partitions:>6}{self.rate:>9,}{self.records:>10,}"
            f"{self.p50:>9.1f}{self.p99:>9.1f}{self.cpu_us:>9.1f}{self.load:>7.1f}"
        )


HEADER = (
    f"{'tool':<15}{'parts':>6}{'rec/s':>9}{'records':>10}{'p50 ms':>9}{'p99 ms':>9}{'CPU us':>9}{'load':>7}"
)


class ToolTopic(Copy):
    """A topic a tool's process copies (started elsewhere): what `measure_running` produces to and reads."""

    def __init__(self, source: ClusterConfig, target: ClusterConfig, topic: str) -> None:
        super().__init__(source, target, topic)
        self.remote_topic = f"{source.alias}.{topic}"


@dataclass(frozen=True)
class Tool:
    name: str
    settings: Mapping[str, str]  # flow-scoped client settings (`A->B.consumer.*`, `A->B.producer.*`)
    checkout: Path | None = None  # run `python -m replication` from this checkout (Mirrorplane only)


def measure_tool(
    tool: Tool,
    *,
    source: ClusterConfig,
    target: ClusterConfig,
    partitions: int,
    rates: Sequence[int],
    prefix: str,
    seconds: float,
    warmup_s: float,
    workdir: Path,
) -> list[Point]:
    """One process of `tool` copying a topic per rate (created first), each measured in turn."""
    topics = {rate: f"{prefix}-{rate}" for rate in rates}
    TopicAdmin(source).create_topics([NewRemoteTopic(t, t, partitions, 1, {}) for t in topics.values()])
    points = []
    if tool.name == FLOOR:
        for rate, topic in topics.items():
            copy = NoCopy(source, target, topic)
            points.append(_point(copy, tool, partitions, rate, seconds, warmup_s, cpu_s=lambda: math.nan))
        return points
    flow = f"{source.alias}->{target.alias}"
    properties = {
        **flow_properties(source, target, f"{re.escape(prefix)}-.*"),
        **DEFAULT_INTERVALS,
        **{f"{flow}.{name}": value for name, value in tool.settings.items()},
    }
    kind = MM2 if tool.name == MM2 else OURS
    replicator = Replicator(kind, workdir / prefix, properties, checkout=tool.checkout).start()
    try:
        for rate, topic in topics.items():
            replicator.check_running()
            copy = ToolTopic(source, target, topic)
            points.append(_point(copy, tool, partitions, rate, seconds, warmup_s, cpu_s=replicator.cpu_s))
    finally:
        replicator.stop()
    return points


def _point(
    copy: Copy,
    tool: Tool,
    partitions: int,
    rate: int,
    seconds: float,
    warmup_s: float,
    *,
    cpu_s: Callable[[], float],
) -> Point:
    """`measure_running`, with the CPU seconds (`cpu_s`) of the tool's process per record from the end of
    the priming (its start-up not counted) to the last record read."""
    cpu_before: list[float] = []
    latency = measure_running(
        copy,
        method=tool.name,
        rate=rate,
        seconds=seconds,
        partitions=partitions,
        warmup_s=warmup_s,
        start_timeout_s=START_TIMEOUT_S,
        on_primed=lambda: cpu_before.append(cpu_s()),
    )
    cpu_us = (cpu_s() - cpu_before[0]) / (rate * seconds) * 1e6
    point = Point(
        tool.name, partitions, rate, latency.records, latency.p50, latency.p99, os.getloadavg()[0], cpu_us
    )
    print(point.line(), flush=True)
    return point


def run(
    tools: Sequence[Tool],
    *,
    partition_counts: Sequence[int],
    rates: Sequence[int],
    rounds: int,
    seconds: float,
    warmup_s: float,
) -> list[Point]:
    workdir = Path(tempfile.mkdtemp(prefix="latency-mm2-"))
    print(f"tool logs in {workdir}; load average at the start: {load_average()}", flush=True)
    points: list[Point] = []
    with bench_clusters(["A", "B"]) as brokers:
        source, target = bench_cluster("A", brokers), bench_cluster("B", brokers)
        print(HEADER, flush=True)
        step = 0
        for round_number in range(rounds):
            for partitions in partition_counts:
                shift = step % len(tools)
                step += 1
                for tool in [*tools[shift:], *tools[:shift]]:
                    ordered = rates if step % 2 else list(reversed(rates))
                    points += measure_tool(
                        tool,
                        source=source,
                        target=target,
                        partitions=partitions,
                        rates=ordered,
                        prefix=f"lat-r{round_number}-p{partitions}-{tool.name}",
                        seconds=seconds,
                        warmup_s=warmup_s,
                        workdir=workdir,
                    )
    print(f"load average at the end: {load_average()}", flush=True)
    return points


def summarize(points: Sequence[Point], tools: Sequence[Tool]) -> list[str]:
    """Per (partitions, rate): each tool's p50 and p99 (median over rounds, the range beside it, the load
    averages of its points) and its ratio to MM2's; the targets missed."""
    print("\nmedian over the rounds (range) and the load averages of the points; ratio to MM2's")
    print(
        f"{'parts':>5}{'rec/s':>8}  {'tool':<15}{'p50 ms':>24}{'p99 ms':>26}{'p50/MM2':>9}{'p99/MM2':>9}  load"
    )
    missed = []
    for partitions in sorted({p.partitions for p in points}):
        for rate in sorted({p.rate for p in points}):
            found = {
                tool.name: [
                    p for p in points if (p.tool, p.partitions, p.rate) == (tool.name, partitions, rate)
                ]
                for tool in tools
            }
            medians = {
                name: (statistics.median(p.p50 for p in ps), statistics.median(p.p99 for p in ps))
                for name, ps in found.items()
                if ps
            }
            for name, ps in found.items():
                if not ps:
                    continue
                p50, p99 = medians[name]
                ratios = ""
                if MM2 in medians and name in (OURS, OURS_B):
                    ratios = f"{p50 / medians[MM2][0]:>9.2f}{p99 / medians[MM2][1]:>9.2f}"
                print(
                    f"{partitions:>5}{rate:>8,}  {name:<15}{_figure(p50, [p.p50 for p in ps]):>24}"
                    f"{_figure(p99, [p.p99 for p in ps]):>26}{ratios:<18}  "
                    + " ".join(f"{p.load:.1f}" for p in ps)
                )
            if MM2 in medians and OURS in medians:
                for index, field in enumerate(("p50", "p99")):
                    ours, theirs = medians[OURS][index], medians[MM2][index]
                    if ours > theirs:
                        missed.append(
                            f"{partitions} partitions at {rate:,} rec/s: Mirrorplane {field} {ours:.1f} ms "
                            f"above MM2's {theirs:.1f} ms"
                        )
    return missed


def _figure(median: float, values: Sequence[float]) -> str:
    return f"{median:.1f} ({min(values):.1f}-{max(values):.1f})" if len(values) > 1 else f"{median:.1f}"


def _counts(text: str) -> list[int]:
    return [int(part.replace("_", "")) for part in text.split(",") if part]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench latency-mm2", description=__doc__)
    parser.add_argument(
        "--partitions", type=_counts, default=list(PARTITION_COUNTS), help="comma-separated (4,8,64)"
    )
    parser.add_argument("--rates", type=_counts, default=list(RATES), help="records/s, comma-separated")
    parser.add_argument("--rounds", type=int, default=2, help="rounds over every size (medians reported)")
    parser.add_argument("--seconds", type=float, default=10.0, help="load duration per point")
    parser.add_argument("--warmup", type=float, default=2.0, help="seconds of each load not counted")
    parser.add_argument("--floor", action="store_true", help="add the reader on the source, no copy")
    parser.add_argument("--no-mm2", action="store_true", help="leave MM2 out (an A/B of Mirrorplane only)")
    parser.add_argument("--b-checkout", type=Path, help="mirrorplane-B runs this checkout's code")
    add_ab_argument(parser, "mirrorplane-B: Mirrorplane with this flow-scoped client setting")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    tools = [Tool(OURS, {})] if args.no_mm2 else [Tool(MM2, {}), Tool(OURS, {})]
    if args.ab or args.b_checkout:
        checkout = args.b_checkout.resolve() if args.b_checkout else None
        print(f"mirrorplane-B: settings {dict(args.ab)}, code {checkout or 'this checkout'}", flush=True)
        tools.append(Tool(OURS_B, args.ab, checkout))
    if args.floor:
        tools.append(Tool(FLOOR, {}))
    points = run(
        tools,
        partition_counts=args.partitions,
        rates=args.rates,
        rounds=args.rounds,
        seconds=args.seconds,
        warmup_s=args.warmup,
    )
    missed = summarize(points, tools)
    for line in missed:
        print(f"MISSED: {line}")
    return 1 if missed else 0
