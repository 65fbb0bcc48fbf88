"""How long a /metrics scrape takes: `python -m bench metrics [--flows 500] [--partitions 10]`; the issue's
large shapes: `--flows 1 --partitions 20000` and `--flows 4 --partitions 5000`.

Creates a throw-away test database (Django's test database machinery, next to DATABASE_URL's), stores
`--flows` flows between generated clusters with `--partitions` fresh status rows each (and each flow's
task roll-up, as the workers write them), and times the whole
exposition (`controlplane.metrics.prometheus.exposition`: the selectors' queries, the roll-ups, the text format)
against, as the baseline in the same run, reading the same status rows raw (`values_list`). Each flow also
has an RPO budget and runtime signals, and one flow in ten is over its budget, so the alert families are
in the scrape; the alert evaluation (`controlplane.alerts.evaluation.alerts_evaluate`) over the same flows is timed
too. The scrape is timed at each MIRRORPLANE_METRICS_PARTITION_LEVEL: `partition` (every partition's series)
and `topic` (per topic only). The issue's target: under 1 s either way, for 500 flows x 10 partitions
and for 20,000 partitions (exit 1 when missed).
"""

from __future__ import annotations

import argparse
import statistics
import time

from bench.fleet import seed_fleet
from bench.runtime import scratch_database

TARGET_S = 1.0
LEVELS = ("partition", "topic")


def _time(run, repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench metrics_scrape")
    parser.add_argument("--flows", type=int, default=500)
    parser.add_argument("--partitions", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)

    with scratch_database():
        from django.test.utils import override_settings, setup_test_environment

        from controlplane import alerts
        from controlplane.metrics import prometheus
        from controlplane.status.models import FlowPartitionStatus

        setup_test_environment()
        seed_fleet(flows=args.flows, partitions=args.partitions)
        raw_s = _time(lambda: list(FlowPartitionStatus.objects.values_list()), args.repeat)
        evaluate_s = _time(lambda: alerts.alerts_evaluate(replication_workers=1), args.repeat)
        firing = alerts.alerts_firing().count()
        scrapes = {}
        for level in LEVELS:
            with override_settings(MIRRORPLANE_METRICS_PARTITION_LEVEL=level):
                scrapes[level] = (_time(prometheus.exposition, args.repeat), len(prometheus.exposition()))
    rows = args.flows * args.partitions
    print(f"/metrics scrape, {args.flows} flows x {args.partitions} partitions ({rows} status rows)")
    for level, (scrape_s, size) in scrapes.items():
        print(f"  exposition per {level}: {scrape_s * 1000:.0f} ms (median of {args.repeat}), {size} bytes")
    print(f"  raw read of the rows: {raw_s * 1000:.0f} ms")
    print(f"  alert evaluation: {evaluate_s * 1000:.0f} ms (median of {args.repeat}; {firing} alerts firing)")
    worst = max(scrape_s for scrape_s, _ in scrapes.values())
    print(
        f"  ratio slowest scrape / raw read: {worst / raw_s:.1f}; target under {TARGET_S:g} s: "
        f"{'met' if worst < TARGET_S else 'MISSED'}"
    )
    return 0 if worst < TARGET_S else 1
