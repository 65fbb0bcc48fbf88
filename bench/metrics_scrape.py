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
import itertools
import statistics
import time

from bench.runtime import scratch_database

TARGET_S = 1.0
LEVELS = ("partition", "topic")


def _seed(*, flows: int, partitions: int) -> None:
    from django.utils import timezone

    from controlplane.flows.models import Cluster, Flow, FlowState
    from controlplane.status import runtime
    from controlplane.status.models import FlowPartitionStatus, FlowRpoBudget, FlowSignals, FlowTaskStatus

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
    rows = FlowPartitionStatus.objects.bulk_create(
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
    # Each flow's task roll-up, as its worker writes it every slice (what the summaries read).
    FlowTaskStatus.objects.bulk_create(
        runtime.task_status(
            rows[index * partitions : (index + 1) * partitions],
            flow_id=flow.pk,
            task_index=0,
            task_error=None,
            at=now,
        )
        for index, flow in enumerate(stored)
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
        from django.test.utils import override_settings, setup_test_environment

        from controlplane import alerts
        from controlplane.metrics import prometheus
        from controlplane.status.models import FlowPartitionStatus

        setup_test_environment()
        _seed(flows=args.flows, partitions=args.partitions)
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
