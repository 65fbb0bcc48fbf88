"""The cost of `rewrite-ids` (docs/schemas.md): the engine copying Avro-framed records (the Confluent wire
format: magic byte, schema ID, payload) with the ID rewrite against the same engine without it.

Two Apache Kafka clusters and two Apicurio registries (one per cluster, as the tests start them): one
schema registered on the source registry and synced to the target, where the target's own schemas make
its ID differ, so every record's value is rewritten. Each scenario (100 B, 1 KB and 10 KB values, as
`bench engine`) copies a freshly filled topic with both methods, the order swapped every round; the best
of each is compared. The rewrite resolves the ID once (then a dict lookup and a 5-byte splice per
record), so the target ratio with/without is >= 0.9.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence

from bench.brokers import bench_cluster, bench_clusters
from bench.engine_vs_raw import (
    MEASUREMENT_HEADER,
    Measurement,
    Scenario,
    _print_measurement,
    chosen_scenarios,
    engine_copy,
    exit_code,
    fill_source,
    print_ratio,
    scenarios_parser,
)
from harness.apicurio import apicurio_registries
from replication.config import ClusterConfig, FlowConfig, SchemaIdMode
from replication.outbound import OUTBOUND_HOSTS_VARIABLE
from replication.policy import DefaultReplicationPolicy
from replication.schemas.flow import flow_subject_renamer
from replication.schemas.ids import SchemaIdRewriter
from replication.schemas.rest import ConfluentRegistryClient, Schema
from replication.schemas.sync import sync_schemas
from replication.schemas.wire import with_schema_id

TARGET_RATIO = 0.9  # rewrite-ids/plain
SCHEMA = Schema(json.dumps({"type": "record", "name": "Bench", "fields": [{"name": "v", "type": "bytes"}]}))


def compare(
    source: ClusterConfig,
    target: ClusterConfig,
    registries: tuple[ConfluentRegistryClient, ConfluentRegistryClient],
    scenario: Scenario,
    *,
    number: int,
    rounds: int,
    print_line: Callable[[str], None],
) -> tuple[Measurement, Measurement]:
    """The best plain copy and the best copy with the ID rewrite over `rounds` alternating rounds."""
    plains: list[Measurement] = []
    rewrites: list[Measurement] = []
    for round_number in range(rounds):
        # Each method copies a topic of its own (the same records): a copy stores its positions on the
        # target, so a second copy of one topic would start where the first ended.
        stem = f"bench-ids-{number}-{scenario.value_bytes}b-r{round_number}"
        rename = flow_subject_renamer(
            FlowConfig(source="A", target="B", topics=(f"{stem}-ids",)),
            DefaultReplicationPolicy(known_aliases=["A", "B"]),
        )
        source_id = registries[0].register(f"{stem}-ids-value", SCHEMA)
        synced = sync_schemas(
            source=registries[0], target=registries[1], rename=rename, mode=SchemaIdMode.REWRITE_IDS
        )
        assert synced.ok and synced.id_map[source_id] != source_id, synced
        for method in ("plain", "ids"):
            fill_source(
                source, f"{stem}-{method}", scenario, value_prefix=with_schema_id(b"\0" * 5, source_id)
            )

        def plain(stem=stem):
            return engine_copy(source, target, f"{stem}-plain", scenario, method="engine")

        def rewritten(stem=stem, rename=rename):
            rewriter = SchemaIdRewriter(source=registries[0], target=registries[1], rename=rename)
            return engine_copy(source, target, f"{stem}-ids", scenario, schema_ids=rewriter, method="ids")

        for copy in (plain, rewritten) if round_number % 2 == 0 else (rewritten, plain):
            measurement = copy()
            (plains if copy is plain else rewrites).append(measurement)
            _print_measurement(measurement, print_line)
    return min(plains, key=lambda m: m.seconds), min(rewrites, key=lambda m: m.seconds)


def run(
    scenarios: Sequence[Scenario], *, rounds: int = 3, print_line: Callable[[str], None] = print
) -> list[str]:
    """Every scenario's rewrite-ids/plain ratio, printed with its verdict; the targets missed."""
    missed: list[str] = []
    # The bench's registries listen on loopback, which the outbound policy reaches only when listed.
    os.environ.setdefault(OUTBOUND_HOSTS_VARIABLE, "127.0.0.1")
    with bench_clusters(["A", "B"]) as brokers, apicurio_registries(["A", "B"]) as started:
        registries = (ConfluentRegistryClient(started["A"].url), ConfluentRegistryClient(started["B"].url))
        for index in range(3):  # the target's own schemas: its IDs are not the source's
            registries[1].register(
                "bench-own-value", Schema(json.dumps({"type": "enum", "name": f"E{index}", "symbols": ["X"]}))
            )
        print_line(MEASUREMENT_HEADER)
        for number, scenario in enumerate(scenarios):
            plain, rewrite = compare(
                bench_cluster("A", brokers),
                bench_cluster("B", brokers),
                registries,
                scenario,
                number=number,
                rounds=rounds,
                print_line=print_line,
            )
            missed += print_ratio(
                "rewrite-ids/plain", rewrite, plain, rounds=rounds, print_line=print_line, low=TARGET_RATIO
            )
    return missed


def main(argv: Sequence[str] | None = None) -> int:
    args = scenarios_parser(prog="python -m bench schema-ids", description=__doc__).parse_args(argv)
    return exit_code(run(chosen_scenarios(args), rounds=args.rounds))
