"""How long a /metrics scrape takes: `python -m bench.metrics_scrape [--flows 500] [--partitions 10]`.

Creates a throw-away test database (Django's test database machinery, next to DATABASE_URL's), stores
`--flows` flows between generated clusters with `--partitions` fresh status rows each, and times the whole
exposition (`controlplane.metrics.prometheus.exposition`: the selectors' queries, the roll-ups, the text format)
against, as the baseline in the same run, reading the same status rows raw (`values_list`). Each flow also
has an RPO budget and runtime signals, and one flow in ten is over its budget, so the alert families are
in the scrape; the alert evaluation (`controlplane.alerts.evaluation.alerts_evaluate`) over the same flows is timed
too. The issue's target: under 1 s for 500 flows x 10 partitions (exit 1 when missed).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time

from bench.runtime import scratch_database

TARGET_S = 1.0


def _seed(*, flows: int, partitions: int) -> None:
    from django.utils import timezone

    from controlplane.models import Cluster, Flow, FlowPartitionStatus, FlowRpoBudget, FlowSignals, FlowState

    clusters_needed = next(n for n in itertools.count(2) if n * (n - 1) >= flows)
    clusters = Cluster.objects.bulk_create(
        Cluster(alias=f"dc{index:03d}", bootstrap_servers=f"dc{index:03d}:9092")
        for index in range(clusters_needed)
    )
    pairs = itertools.islice(((a, b) for a in clusters for b in clusters if a.pk != b.pk), flows)
    stored = Flow.objects.bulk_create(
        Flow(source=a, target=b, enabled=True, state=FlowState.ACTIVE, topics=["orders"]) for a, b in pairs
    )
    now = timezone.now()
    FlowPartitionStatus.objects.bulk_create(
        FlowPartitionStatus(
            flow=flow,
            topic="orders",
            partition=p,
            remote_topic=f"{flow.source.alias}.orders",
            source_end_offset=1000 + p,
            replicated_offset=990,
            records_behind=10 + p,
            seconds_behind=90.0 if index % 10 == 0 else 0.5,
            record_age_ms=120,
            replication_latency_ms=30,
            latency_counts=[0, 0, 4000, 900, 90, 10, 0, 0, 0, 0, 0, 0, 0, 0],
            latency_sum_ms=5000 * 30.0,
            record_count=5000,
            byte_count=500_000,
            state="OK",
            observed_at=now,
        )  # fmt: skip
        for index, flow in enumerate(stored)
        for p in range(partitions)
    )
    FlowRpoBudget.objects.bulk_create(FlowRpoBudget(flow=flow, records_behind=100_000) for flow in stored)
    FlowSignals.objects.bulk_create(
        FlowSignals(
            flow=flow,
            heartbeat_emitted_at=now,
            checkpoint_emitted_at=now,
            offset_sync_emitted_at=now,
            records_replicated_at=now,
            tasks_planned=1,
            tasks_leased=1,
            tasks_observed_at=now,
        )
        for flow in stored
    )


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
        from django.test.utils import setup_test_environment

        from controlplane import alerts
        from controlplane.metrics import prometheus
        from controlplane.models import FlowPartitionStatus

        setup_test_environment()
        _seed(flows=args.flows, partitions=args.partitions)
        raw_s = _time(lambda: list(FlowPartitionStatus.objects.values_list()), args.repeat)
        evaluate_s = _time(lambda: alerts.alerts_evaluate(replication_workers=1), args.repeat)
        firing = alerts.alerts_firing().count()
        scrape_s = _time(prometheus.exposition, args.repeat)
        size = len(prometheus.exposition())
    rows = args.flows * args.partitions
    print(
        f"/metrics scrape, {args.flows} flows x {args.partitions} partitions ({rows} status rows, {size} bytes)"
    )
    print(
        f"  exposition: {scrape_s * 1000:.0f} ms (median of {args.repeat}); raw read of the rows: {raw_s * 1000:.0f} ms"
    )
    print(f"  alert evaluation: {evaluate_s * 1000:.0f} ms (median of {args.repeat}; {firing} alerts firing)")
    print(
        f"  ratio scrape / raw read: {scrape_s / raw_s:.1f}; target under {TARGET_S:g} s: {'met' if scrape_s < TARGET_S else 'MISSED'}"
    )
    return 0 if scrape_s < TARGET_S else 1
