"""`python -m replication ...`: MM2's dedicated mode plus tools. Thin: parse, call, print."""

from __future__ import annotations

import argparse
import json
import logging
import sys


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m replication", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    commands = parser.add_subparsers(dest="command", required=True)

    run = commands.add_parser("run", help="run every enabled flow of an mm2.properties file")
    run.add_argument("properties", help="path to mm2.properties")
    run.add_argument("--clusters", nargs="+", help="only flows whose target is one of these aliases")
    run.add_argument("--duration-s", type=float, help="stop after this many seconds")

    validate = commands.add_parser("validate", help="list flows and their effective settings, or errors")
    validate.add_argument("properties")

    translate = commands.add_parser("translate-offsets", help="a group's offsets translated to the target")
    translate.add_argument("properties")
    translate.add_argument("--source", required=True)
    translate.add_argument("--target", required=True)
    translate.add_argument("--group", required=True)

    demo = commands.add_parser("demo", help="two embedded clusters, traffic and active-active replication")
    demo.add_argument("--rate", type=float, default=200.0, help="records per second per generator")

    embedded = commands.add_parser("embedded-kafka", help="run embedded Kafka clusters until Ctrl-C")
    embedded.add_argument("--clusters", type=int, default=2)
    embedded.add_argument(
        "--ports",
        type=lambda text: [int(port) for port in text.split(",")],
        help="fixed loopback ports, comma-separated, one per cluster (default: free ports)",
    )
    apache = commands.add_parser(
        "apache-kafka", help="run Apache Kafka clusters (KRaft, from Maven Central) until Ctrl-C"
    )
    apache.add_argument("--clusters", type=int, default=2)
    apache.add_argument(
        "--ports",
        type=lambda text: [int(port) for port in text.split(",")],
        help="fixed loopback ports, comma-separated, one per cluster (default: free ports)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.command == "embedded-kafka":
        from replication.kafka.embedded import run_until_interrupted

        return run_until_interrupted(args.clusters, ports=args.ports)
    if args.command == "apache-kafka":
        from replication.kafka.apache import apache_clusters
        from replication.kafka.embedded import run_until_interrupted

        return run_until_interrupted(args.clusters, ports=args.ports, clusters=apache_clusters)
    if args.command == "demo":
        from replication.demo import run_demo

        return run_demo(rate_per_s=args.rate)

    from replication.mm2file import Mm2FileError
    from replication.strimzi import load_mm2_file

    try:
        config = load_mm2_file(args.properties)
    except (Mm2FileError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2

    if args.command == "validate":
        from replication.mm2file_writing import describe_config

        print(describe_config(config))
        return 0
    if args.command == "translate-offsets":
        from replication.kafka.remote import translate_offsets_for_cli

        result = translate_offsets_for_cli(config, source=args.source, target=args.target, group=args.group)
        print(json.dumps(result, indent=2, sort_keys=True))
        return 0
    from replication.runner import run_dedicated

    return run_dedicated(config, targets=tuple(args.clusters or ()), duration_s=args.duration_s)
