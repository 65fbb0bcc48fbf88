"""`python -m bench [name ...] [-- args]`: run the benchmarks (all of them by default), each against the
baseline it measures in the same run, and print their ratios. `make bench` runs them all.

    python -m bench                      # engine, latency, runtime, failover, reports, ...
    python -m bench engine --quick       # one benchmark with its own flags
"""

from __future__ import annotations

import importlib
import sys

BENCHMARKS = {
    "engine": "bench.engine_vs_raw",  # replication engine vs a raw consume-produce copy loop
    "schema-ids": "bench.schema_ids",  # the engine with the rewrite-ids schema ID rewrite vs without
    "latency": "bench.latency",  # end-to-end latency at fixed rates: engine, Celery runtime, raw loop
    "latency-mm2": "bench.latency_mm2",  # p50/p99 beside MM2 at 5,000 and 20,000 rec/s over 4, 8, 64 partitions
    "runtime": "bench.runtime",  # Celery workers vs the engine run in one process
    "failover": "bench.failover_plan",  # failover plan time for 1000 partitions x 20 groups
    "reports": "bench.reports",  # Spark report job on a generated 10M-sample lake
    "takeover": "bench.takeover",  # exactly_once takeover of a task of 64 and 100 partitions
    "metrics": "bench.metrics_scrape",  # /metrics scrape time for 500 flows x 10 partitions
    "api": "bench.api_load",  # the API and pages at 500 flows: p99 at 8 clients on gunicorn
    "upgrade": "bench.upgrade",  # longest arrival gap during a rolling upgrade and a scale-down
    "idle": "bench.idle",  # idle cost of the source consumer's fetch.wait.max.ms (fetches/s, broker CPU)
    "verification": "bench.verification",  # one continuous-verification run at 500 and 2,000 partitions
    "vs-mm2": "bench.vs_mm2",  # beside Apache Kafka's MirrorMaker 2: throughput, latency, CPU, memory, re-reads
    "startup": "bench.startup",  # a task of 2,000 partitions: each start phase, to every partition flowing
    "producers": "bench.producers",  # delivery p50/p99 over 5,000 partitions: one task's producer vs several
    "scale": "bench.scale",  # N partitions at R records/s each: start, latency, CPU, memory, control plane; MM2 beside
}


def main(argv: list[str]) -> int:
    if argv and argv[0] in BENCHMARKS:
        return importlib.import_module(BENCHMARKS[argv[0]]).main(argv[1:])
    if argv:
        print(f"unknown benchmark {argv[0]!r}; choose from {', '.join(BENCHMARKS)}", file=sys.stderr)
        return 2
    failed = []
    for name, module in BENCHMARKS.items():
        print(f"\n=== bench {name} ({module}) ===", flush=True)
        if importlib.import_module(module).main([]) != 0:
            failed.append(name)
    if failed:
        print(f"\nbenchmarks that missed their target or failed: {', '.join(failed)}")
    return 1 if failed else 0


raise SystemExit(main(sys.argv[1:]))
